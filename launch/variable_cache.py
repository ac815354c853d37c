"""Parameters for hundreds of actors: a tier of caches between the learner
and the actors (`--variable_cachers=N`).

Every actor pulls the learner's parameters every `variable_update_period`
frames (Ape-X §4.1: 400). Alone, the learner sends them once per pull that
finds them changed: Atari's network is ~12.8 MB, and 256 actors of ~220
steps/s each would ask for ~7 GB/s, several times a learner machine's
network egress cap (docs/google_cloud.md). With cachers, the learner sends
them to the N cachers once per period each (`CACHER_PERIOD_SECONDS`), and
each cacher serves its share of the actors (actor i: cacher i mod N), as
Acme's `lp.CacherNode` does (Launchpad 0.5.0 has none).

A cacher is an `acme.VariableSource` as the learner is: the actors' client
(`agents.variables.NewestVariableClient`) asks it for parameters newer than
the version it holds, and the version is the learner's own (its step), so a
pull that finds nothing newer costs no copy. The staleness a cacher adds is
the age of its copy: at most one period, plus one copy's transfer.

The learner node and each cacher tally the bytes of parameters they send
(`agents.variables.ServedBytes`), logged as `parameter_bytes_sent` (benchmarks/
variable_cachers.py measures them).
"""

import threading
import time
from typing import Any, Dict, List, Optional, Sequence

import acme
from absl import logging

from agents import variables as variables_lib
from launch.runs import loggers as loggers_lib
from launch import nodes
from launch.supervision import program_stop
from launch.options import RunOptions

# How often a cacher asks the learner for newer parameters. An actor of the
# program's measured ~220 steps/s pulls every 100 steps, every ~0.45 s
# (docs/performance.md); the paper's actors, at ~140 frames/s each, every
# ~2.9 s (§4.1: 400 frames). A cacher's half second is about one pull
# period of an actor: it at most doubles the age of the parameters an actor
# acts with (on average it adds a quarter of a second), and each cacher
# costs the learner 2 copies a second at most, whatever its actors pull.
CACHER_PERIOD_SECONDS = 0.5


class VariableCacherNode(acme.VariableSource):
  """One cacher: a copy of the learner's parameters, pulled every `period`
  seconds (if they have changed), served to its share of the actors.

  It caches the names actors have asked for: the first request for a name
  it does not hold is answered after a pull of it (an actor's first pull
  waits for it, as it would for the learner).
  """

  def __init__(self, learner: acme.VariableSource, label: str,
               options: RunOptions, period: float = CACHER_PERIOD_SECONDS):
    self._learner = learner
    self._label = label
    self._period = period
    self._lock = threading.Lock()  # Guards the copy and its version.
    self._pulling = threading.Lock()  # One pull at a time.
    self._values: Dict[str, Any] = {}
    self._version = None
    self._pulled_at: Optional[float] = None  # When the copy was made.
    self._received = variables_lib.ServedBytes()
    self._served = variables_lib.ServedBytes()
    self._log_every = options.log_every
    self._logger = loggers_lib.make_logger(
        options.node_workdir, label, counts=False)
    self._stop = nodes.Stop()

  def _pull(self, names: Sequence[str]):
    """Asks the learner for `names` (with those held): newer parameters
    than the copy's, or all of them if a name is new."""
    with self._pulling:
      with self._lock:
        held = set(self._values)
        version = self._version if held >= set(names) else None
        names = sorted(held | set(names))
      version, values = self._learner.get_variables_if_newer(names, version)
      self._received.add(values)
      if values is None:
        return
      with self._lock:
        self._values = dict(zip(names, values))
        self._version = version
        self._pulled_at = time.time()

  def _held(self, names: Sequence[str]):
    """(version, the values of `names`) of the copy."""
    with self._lock:
      missing = not set(names) <= set(self._values)
    if missing:
      self._pull(names)
    with self._lock:
      return self._version, [self._values[name] for name in names]

  def get_variables(self, names: Sequence[str]) -> List[Any]:
    _, values = self._held(names)
    self._served.add(values)
    return values

  def get_variables_if_newer(self, names: Sequence[str], version):
    """(the copy's version, its values of `names`), values None if
    `version` is the copy's (see `agents.variables.NewestVariableClient`)."""
    current, held = self._held(names)
    current, values = variables_lib.if_newer(current, version, lambda: held)
    self._served.add(values)
    return current, values

  def ping(self) -> bool:
    """The coordinator's heartbeat (`launch.supervision.heartbeat`)."""
    return True

  def stop(self, timeout: float) -> bool:
    """Ends the pulls; it answers actors from its copy until the program
    stops. True once done within `timeout` seconds."""
    return self._stop.stop(timeout)

  def _log(self):
    with self._lock:
      version, pulled_at = self._version, self._pulled_at
    received = self._received.columns()
    self._logger.write({
        **self._served.columns(),
        'parameter_bytes_received': received['parameter_bytes_sent'],
        'parameter_pulls': received['parameter_answers'],
        'parameters_version': -1 if version is None else version,
        'copy_age_seconds': (float('nan') if pulled_at is None else
                             time.time() - pulled_at),
    })

  def run(self):
    self._stop.register()
    logging.info('Variable cacher %s: pulls the learner\'s parameters every '
                 '%.2f s.', self._label, self._period)
    next_log = time.time() + self._log_every
    # As other nodes that call others: a call to a learner that has
    # stopped fails, or is interrupted, after the program's stop.
    with program_stop.interrupt_if_stuck(f'Variable cacher {self._label}'):
      while not self._stop.requested.wait(self._period):
        with self._lock:
          names = list(self._values)
        if names:  # Nothing to pull before an actor has asked.
          self._pull(names)
        if self._log_every and time.time() >= next_log:
          self._log()
          next_log = time.time() + self._log_every
    self._log()
    self._stop.finish()
