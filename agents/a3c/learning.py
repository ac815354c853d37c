"""A3C's shared parameters (Algorithm S3's global theta and theta_v): they
take each worker's gradients as they arrive, with shared RMSProp and the
annealed learning rate, and serve the newest parameters.

There is no learner loop: the workers compute the gradients (A3C's
actor-learners), and this object, in the program's parameter node, only
applies them. Several workers' calls run at once, in threads of their own.
"""

import threading
import time
from typing import Dict, List, Optional, Sequence

import acme
import numpy as np
import sonnet as snt
import tensorflow as tf
from acme.utils import counting
from acme.utils import loggers

from agents import variables as variables_lib
from agents.a3c import networks
from agents.a3c import optimizer
from agents.a3c.config import A3CConfig

# The name under which the parameters are served (acme.VariableSource).
POLICY = 'policy'


class A3CParameterServer(acme.VariableSource):
  """Holds the network, the shared RMSProp statistics and the counts of
  updates and of the environment steps they came from (T, by which the
  learning rate anneals); checkpointed through `state`."""

  def __init__(self, network: snt.Module, config: A3CConfig,
               total_steps: Optional[int] = None,
               counter: Optional[counting.Counter] = None,
               logger: Optional[loggers.Logger] = None,
               log_every: float = 0.0):
    """`network` must have its variables (built by a first call);
    `total_steps` is the run's step budget, over which the learning rate
    anneals to 0 (A3C Supp. §8)."""
    self._network = network
    # What gradients train, and what is served: every variable, with
    # --popart also Pop-Art's statistics, which the workers need to read
    # the value in the task's units.
    self._trained = list(network.trainable_variables)
    self._variables = list(network.variables)
    self._popart = networks.popart_head(network)
    self._config = config
    self._total_steps = total_steps
    self._optimizer = optimizer.SharedRMSProp(
        self._trained, config.rmsprop_decay, config.rmsprop_epsilon)
    self._num_updates = tf.Variable(0, dtype=tf.int64, trainable=False)
    self._num_steps = tf.Variable(0, dtype=tf.int64, trainable=False)
    self._counter = counter or counting.Counter()
    self._logger = logger
    self._log_every = log_every
    # Only the bookkeeping of counts and logs takes this lock; the update
    # itself takes none (Hogwild).
    self._log_lock = threading.Lock()
    # Pop-Art's statistics and the value layer they rescale are moved by
    # one rollout's returns at a time (a read, then writes of three
    # variables); the gradient's step is not under it.
    self._popart_lock = threading.Lock()
    self._last_log = time.time()
    self._logged_updates = 0
    self._statistics: Dict[str, List[float]] = {}
    # Set by every update; `try_step` waits on it.
    self._updated = threading.Event()
    # The update count at which each named worker was last sent the
    # parameters (`apply_gradients`' staleness).
    self._sent: Dict[str, int] = {}

  @property
  def state(self) -> Dict[str, tf.Module]:
    """What a checkpoint holds: `num_steps` are the updates (the learner
    steps of the other agents' checkpoints, which `launch.offline.restore` reads),
    `environment_steps` is T."""
    return {'network': self._network, 'optimizer': self._optimizer,
            'num_steps': self._num_updates,
            'environment_steps': self._num_steps}

  @property
  def num_steps(self) -> int:
    """Updates applied so far (the program's learner steps)."""
    return int(self._num_updates.numpy())

  @property
  def environment_steps(self) -> int:
    """T: the environment steps of the updates applied so far."""
    return int(self._num_steps.numpy())

  @property
  def learning_rate(self) -> float:
    return optimizer.annealed_learning_rate(
        self._config.learning_rate, self.environment_steps,
        self._total_steps if self._config.anneal_learning_rate else None)

  @property
  def variable_names(self) -> List[str]:
    return [POLICY]

  def get_variables(self, names: Sequence[str]) -> List[List[np.ndarray]]:
    return [[variable.numpy() for variable in self._variables]
            for _ in names]

  def apply_gradients(self, gradients: Sequence[np.ndarray], steps: int,
                      statistics: Optional[Dict[str, float]] = None,
                      worker: Optional[str] = None,
                      targets: Optional[Sequence[float]] = None
                      ) -> List[np.ndarray]:
    """One worker's update from a rollout of `steps` environment steps;
    returns the newest parameters (Algorithm S3: the worker synchronises
    with them before its next rollout).

    With `worker` (a name of the worker's own), the logs also say how stale
    its gradient was: `staleness`, the updates other workers applied
    between the parameters this worker was last sent and this update.
    With --popart, `targets` are the rollout's returns, by which Pop-Art's
    statistics move (and the value layer is rescaled to keep its values)
    before the gradient is applied."""
    if len(gradients) != len(self._trained):
      raise ValueError(f'{len(gradients)} gradients for '
                       f'{len(self._trained)} variables.')
    statistics = dict(statistics or {})
    sent = self._sent.get(worker) if worker is not None else None
    if sent is not None:
      statistics['staleness'] = self.num_steps - sent
    if self._popart is not None:
      if targets is None:
        raise ValueError('--popart: a worker\'s update needs its rollout\'s '
                         'returns (`targets`).')
      with self._popart_lock:
        self._popart.update(targets, self._config.popart_step_size)
      statistics['popart_mean'] = float(self._popart.mean.numpy())
      statistics['popart_scale'] = float(self._popart.scale.numpy())
    applied = self._optimizer.apply(
        [np.asarray(g) for g in gradients],
        tf.constant(self.learning_rate, tf.float32))
    statistics.update({key: float(value) for key, value in applied.items()})
    self._num_steps.assign_add(steps)
    self._num_updates.assign_add(1)
    self._counter.increment(steps=1)
    self._record(statistics)
    self._updated.set()
    # The version sent is at least this one (others may apply meanwhile).
    version = self.num_steps
    parameters = self.get_variables([POLICY])[0]
    if worker is not None:
      self._sent[worker] = version
    return parameters

  def get_variables_if_newer(self, names: Sequence[str], version):
    """(version, variables), variables None if `version` is current (see
    `agents.variables.NewestVariableClient`); the version is the number of
    updates."""
    return variables_lib.if_newer(self.num_steps, version,
                                  lambda: self.get_variables(names))

  def try_step(self, timeout: float = 1.0) -> bool:
    """The learner loop's step (`launch.nodes.LearningNode`): the
    updates come from the workers' calls, so this only waits up to
    `timeout` seconds for one; True if any arrived since the last call."""
    updated = self._updated.wait(timeout)
    self._updated.clear()
    return updated

  def _record(self, statistics: Dict[str, float]):
    with self._log_lock:
      for key, value in statistics.items():
        self._statistics.setdefault(key, []).append(float(value))
      now = time.time()
      if self._logger is None or now - self._last_log < self._log_every:
        return
      self._write_log(now)

  def _write_log(self, now: float):
    updates = self.num_steps
    row = {key: float(np.mean(values))
           for key, values in self._statistics.items()}
    row.update(self._counter.get_counts())
    row['learner_steps'] = updates
    row['learning_rate'] = self.learning_rate
    row['steps_per_second'] = ((updates - self._logged_updates) /
                               max(now - self._last_log, 1e-9))
    self._logger.write(row)
    self._statistics = {}
    self._last_log = now
    self._logged_updates = updates

  def write_final_log(self):
    """At stop: a row for the updates since the last one written."""
    with self._log_lock:
      if self._logger is not None and self.num_steps > self._logged_updates:
        self._write_log(time.time())
