"""Parameter pulls that skip parameters the actor already has.

Ape-X actors copy the learner's parameters every 400 frames (§4.1). On a
machine where an actor makes thousands of frames per second and the learner
makes a few updates per second, most of those pulls would copy the same
parameters again (tens of MB for the Atari network, serialised by the
learner and deserialised by the actor). `NewestVariableClient` asks the
source for parameters newer than the ones it holds, and copies only those.
A source tallies what it sends in a `ServedBytes` (logged by the learner
node and the variable cachers, `launch.variable_cache`).
"""

import threading
from typing import Dict, Mapping, Sequence

import numpy as np

import tensorflow as tf
from acme.tf import variable_utils


class NewestVariableClient(variable_utils.VariableClient):
  """Acme's `VariableClient`, pulling only parameters it does not hold.

  The source must have `get_variables_if_newer(names, version)`, returning
  (version, variables), with variables None when `version` is the source's
  current one (`agents.apex.learning.ApeXLearner` and the program's learner node
  have it). A source without it is asked for its variables at every pull, as
  Acme's client does.
  """

  def __init__(self, client, variables: Mapping[str, Sequence[tf.Variable]],
               update_period: int = 1):
    super().__init__(client, variables, update_period)
    self._version = None
    self._versioned = True
    self._request = self._request_newer

  @property
  def version(self):
    """The source's version of the parameters this client holds (the
    learner's step); None before the first copy, or from a source without
    versions."""
    return self._version

  def _request_newer(self):
    """(version, variables), variables None when the source has nothing
    newer than the version held."""
    if self._versioned:
      try:
        return self._client.get_variables_if_newer(self._keys, self._version)
      except AttributeError:
        self._versioned = False
    return None, self._client.get_variables(self._keys)

  def _copy(self, answer):
    version, new_variables = answer
    if new_variables is not None:  # None: the source had nothing newer.
      super()._copy(new_variables)
      # Set as they are copied: the version of what the actor acts with.
      self._version = version


def if_newer(current, version, get_variables):
  """What a source's `get_variables_if_newer` answers: (current, None) when
  the client's `version` is `current`, else (current, get_variables())."""
  if version is not None and version == current:
    return current, None
  return current, get_variables()


def parameter_bytes(values) -> int:
  """The bytes of a pull's parameters (nested lists of arrays): what is
  sent, less the RPC's framing."""
  if values is None:
    return 0
  if isinstance(values, (list, tuple)):
    return sum(parameter_bytes(value) for value in values)
  return int(np.asarray(values).nbytes)


class ServedBytes:
  """A tally of the parameters a source has sent: bytes, answers, and the
  answers that carried parameters (copies)."""

  def __init__(self):
    self._lock = threading.Lock()
    self.bytes = 0
    self.answers = 0
    self.copies = 0

  def add(self, values):
    size = parameter_bytes(values)
    with self._lock:
      self.bytes += size
      self.answers += 1
      self.copies += values is not None

  def columns(self) -> Dict[str, int]:
    """What a log row says of it."""
    with self._lock:
      return {'parameter_bytes_sent': self.bytes,
              'parameter_answers': self.answers,
              'parameter_copies': self.copies}
