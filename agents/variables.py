"""Parameter pulls that skip parameters the actor already has.

Ape-X actors copy the learner's parameters every 400 frames (§4.1). On a
machine where an actor makes thousands of frames per second and the learner
makes a few updates per second, most of those pulls would copy the same
parameters again (tens of MB for the Atari network, serialised by the
learner and deserialised by the actor). `NewestVariableClient` asks the
source for parameters newer than the ones it holds, and copies only those.
"""

from typing import Any, List, Mapping, Optional, Sequence

import tensorflow as tf
from acme.tf import variable_utils


class NewestVariableClient(variable_utils.VariableClient):
  """Acme's `VariableClient`, pulling only parameters it does not hold.

  The source must have `get_variables_if_newer(names, version)`, returning
  (version, variables), with variables None when `version` is the source's
  current one (`agents.learning.ApeXLearner` and the program's learner node
  have it). A source without it is asked for its variables at every pull, as
  Acme's client does.
  """

  def __init__(self, client, variables: Mapping[str, Sequence[tf.Variable]],
               update_period: int = 1):
    super().__init__(client, variables, update_period)
    self._version = None
    self._versioned = True
    self._request = self._request_newer

  def _request_newer(self) -> Optional[List[Any]]:
    if self._versioned:
      try:
        version, values = self._client.get_variables_if_newer(
            self._keys, self._version)
      except AttributeError:
        self._versioned = False
      else:
        if values is not None:
          self._version = version
        return values
    return self._client.get_variables(self._keys)

  def _copy(self, new_variables):
    if new_variables is not None:  # None: the source had nothing newer.
      super()._copy(new_variables)



def if_newer(current, version, get_variables):
  """What a source's `get_variables_if_newer` answers: (current, None) when
  the client's `version` is `current`, else (current, get_variables())."""
  if version is not None and version == current:
    return current, None
  return current, get_variables()
