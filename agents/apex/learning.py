"""The Ape-X learner loop shared by every Ape-X agent (Ape-X §3, Algorithm 2).

Each step samples a prioritised batch from the shared replay, weights the
agent's loss by importance sampling, applies the agent's update, writes the
batch's new priorities (its loss's: `agents.apex.priorities`) back to Reverb
and, every `target_update_period` steps, copies the online networks into
their targets. An agent supplies only `_update`: its loss, its optimiser
step and the priorities.
"""

import abc
import time
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import acme
import numpy as np
import reverb
import sonnet as snt
import tensorflow as tf
from acme.tf import utils as tf2_utils
from acme.utils import counting
from acme.utils import loggers

from agents.networks import precision as precision_lib
from agents.replay import tables
from agents.replay import shards
from agents import variables as variables_lib

# The name under which the learner serves the largest priority so far.
MAX_PRIORITY = 'max_priority'


def weighted_squared_loss(td_errors: tf.Tensor,
                          importance_weights: tf.Tensor) -> tf.Tensor:
  """Ape-X §3.1: l = 1/2 (G - q)^2, weighted by importance sampling."""
  return tf.reduce_mean(importance_weights * 0.5 * tf.square(td_errors))


class ApeXLearner(acme.Learner, abc.ABC):
  """Prioritised replay learning; subclasses define `_update`.

  `iterator` must be a `tf.data` iterator (as from `tables.make_dataset`): the
  update is a `tf.function`, in which a plain Python iterator would be read
  once, at tracing time. A Reverb dataset ends when replay lets no sample
  through for a while (too little data, or a rate limiter holding the learner
  back); `step` then continues on a new iterator from `make_iterator`.
  Or, for replay in several shards, a `shards.ShardedBatches`: it is read
  outside the update, goes on after a wait, and takes the new priorities
  back to the shards itself (`replay_client` None).
  """

  def __init__(self,
               variables: Dict[str, Sequence[tf.Variable]],
               target_pairs: Sequence[Tuple[snt.Module, snt.Module]],
               iterator: Iterator[reverb.ReplaySample],
               replay_client: Optional[reverb.TFClient],
               importance_sampling_exponent: float,
               target_update_period: int,
               jit_compile: bool = False,
               precision: str = 'float32',
               table: str = tables.TABLE,
               counter: Optional[counting.Counter] = None,
               logger: Optional[loggers.Logger] = None,
               log_every: float = 0.0,
               make_iterator: Optional[Callable[[], Iterator[
                   reverb.ReplaySample]]] = None):
    """Args:
      variables: what `get_variables` serves to actors, by name (it also
        serves `MAX_PRIORITY`: the largest priority written so far).
      target_pairs: (online, target) modules; each target becomes a copy of
        its online module every `target_update_period` steps.
      jit_compile: whether `_update` (loss, gradients, optimiser step) is
        compiled with XLA; the rest of the step (sampling, priorities) is
        made of Reverb's operations, which XLA cannot compile.
      precision: what `_update`'s networks (those of `target_pairs`)
        compute in, 'float32' or 'bfloat16' (`agents.networks.precision.scope`:
        their weights, the optimiser's state, losses and priorities stay
        float32).
      (the rest as described in the class docstring)
    """
    # The largest priority written so far (1 before the first update), for
    # actors that give new transitions the maximum priority (Schaul et al.)
    # instead of their own |TD| (`ApeXConfig.initial_priority`).
    self._max_priority = tf.Variable(1.0, dtype=tf.float64, trainable=False)
    self._variables = {**variables, MAX_PRIORITY: [self._max_priority]}
    self._target_pairs = list(target_pairs)
    self._iterator = iterator
    self._sharded = isinstance(iterator, shards.ShardedBatches)
    self._make_iterator = make_iterator
    self._replay_client = replay_client
    self._importance_sampling_exponent = importance_sampling_exponent
    self._compiled_update = (tf.function(self._update, jit_compile=True)
                             if jit_compile else self._update)
    self._target_update_period = target_update_period
    if precision not in ('float32', 'bfloat16'):
      raise ValueError(f'precision={precision!r}: float32 or bfloat16 '
                       '(`agents.networks.precision.resolve` decides between them).')
    self._precision = precision
    self._table = table
    self._counter = counter or counting.Counter()
    self._logger = logger or loggers.NoOpLogger()
    self._num_steps = tf.Variable(0, dtype=tf.int64, trainable=False)
    self._log_every = log_every
    self._last_update = None
    self._last_counts = {}
    self._log_timestamp = None
    self._steps_since_log = 0
    self._unlogged = False  # An update not yet in a written row.
    self._optimizer_state_made = False

  @abc.abstractmethod
  def _update(self, transitions: Dict[str, tf.Tensor],
              weights: tf.Tensor) -> Tuple[tf.Tensor, Dict[str, tf.Tensor]]:
    """One optimiser step on a batch (traced inside a `tf.function`).

    Args:
      transitions: the batch, keyed as in `agents.replay.adders`.
      weights: importance-sampling weights, one per transition.

    Returns:
      The batch's new priorities (`agents.apex.priorities`: for an Ape-X agent
      its |TD errors|) and scalar metrics to log, which must include
      'loss'.
    """

  def _optimizers(self) -> Sequence[Tuple[snt.Optimizer,
                                          Sequence[tf.Variable]]]:
    """Each optimiser with the variables it updates."""
    return ()

  def _make_optimizer_state(self):
    """Creates the optimisers' state (RMSProp's and Adam's moments) now,
    outside any `tf.function`. Made by the first update instead, it is
    created inside that first call's graph, and that call failed with
    "... is out of scope and cannot be used here" in the learner of a
    Vertex AI job packaged by Launchpad (not under local_mp, and not in a
    single process)."""
    for optimizer, variables in self._optimizers():
      initialize = getattr(optimizer, '_initialize', None)  # Sonnet's, once.
      if initialize is not None:
        initialize(variables)

  @tf.function
  def _step(self, iterator) -> Dict[str, tf.Tensor]:
    return self._learn(next(iterator))

  @tf.function
  def _step_on(self, sample: reverb.ReplaySample) -> Dict[str, tf.Tensor]:
    """An update on a batch drawn outside the function (replay shards)."""
    return self._learn(sample)

  def _learn(self, sample: reverb.ReplaySample) -> Dict[str, tf.Tensor]:
    """The update's body, traced inside `_step` or `_step_on`."""
    weights = tables.importance_sampling_weights(
        sample.info.probability, sample.info.table_size,
        self._importance_sampling_exponent)
    with precision_lib.scope(self._precision, self.networks):
      priorities, metrics = self._compiled_update(sample.data, weights)
    self._max_priority.assign(tf.maximum(
        self._max_priority, tf.cast(tf.reduce_max(priorities), tf.float64)))
    if self._replay_client is not None:
      self._replay_client.update_priorities(
          self._table, keys=sample.info.key,
          priorities=tf.cast(priorities, tf.float64))

    # Counted only once the update is made: without this dependency the
    # count (a resource of its own, unordered with the iterator's) went up
    # also when `next` ended the step, e.g. at each rate-limiter timeout.
    with tf.control_dependencies([priorities]):
      num_steps = self._num_steps.assign_add(1)
    if tf.math.mod(num_steps, self._target_update_period) == 0:
      for online, target in self._target_pairs:
        for source, destination in zip(online.variables, target.variables):
          destination.assign(source)
    return dict(metrics, mean_priority=tf.reduce_mean(priorities),
                keys=sample.info.key, priorities=priorities)

  def step(self):
    """One update (`acme.Learner`), however long replay takes to give a
    batch."""
    while not self.try_step():
      pass

  def try_step(self) -> bool:
    """One update, then counts and, every `log_every` seconds, a log row;
    False, with no update, when the dataset ended instead (a rate-limiter
    timeout, `tables.RATE_LIMITER_TIMEOUT_MS`: a new one is made for the
    next call), so that a caller can check for a stop in between."""
    if not self._optimizer_state_made:
      self._make_optimizer_state()
      self._optimizer_state_made = True
    try:
      if self._sharded:
        sample, served_by = next(self._iterator)
        result = self._step_on(sample)
        self._iterator.update_priorities(result['keys'].numpy(),
                                         result['priorities'].numpy(),
                                         served_by)
        # Logged: the shards batches are drawn from, and this batch's
        # transitions from each.
        result = dict(result, live_shards=np.int64(sum(self._iterator.live)),
                      **{f'shard_{index}_samples': np.int64(count)
                         for index, count in enumerate(np.bincount(
                             served_by, minlength=len(self._iterator.live)))})
      else:
        result = self._step(self._iterator)
    except tf.errors.OutOfRangeError:
      if self._sharded:
        return False  # It goes on where it was, next call.
      if self._make_iterator is None:
        raise
      self._iterator = self._make_iterator()
      return False
    self._last_update = result
    self._last_counts = self._counter.increment(steps=1)
    self._unlogged = True
    now = time.time()
    if self._log_timestamp is None:
      # The first update (which traced the function) starts the clock.
      self._log_timestamp = now
      return True
    self._steps_since_log += 1
    elapsed = now - self._log_timestamp
    if elapsed >= self._log_every and elapsed > 0:
      self._write_log(self._steps_since_log / elapsed)
      self._log_timestamp, self._steps_since_log = now, 0
    return True

  def write_final_log(self):
    """At stop: a row for the updates since the last one written, so that a
    short run's log is not empty and a long run's log ends at its last
    update. Makes no remote call (the counter may have stopped): the counts
    are those of the last update. Its rate is NaN when the only such update
    is the first, which traced the update and has no rate of its own."""
    if not self._unlogged:
      return
    elapsed = time.time() - self._log_timestamp
    self._write_log(self._steps_since_log / elapsed
                    if self._steps_since_log and elapsed > 0 else float('nan'))
    self._steps_since_log = 0

  def _write_log(self, steps_per_second: float):
    row = {key: np.asarray(value)
           for key, value in self._last_update.items()
           if key not in ('keys', 'priorities')}
    row['steps_per_second'] = steps_per_second
    row.update(self._last_counts)
    self._logger.write(row)
    self._unlogged = False

  @property
  def last_update(self) -> Dict[str, np.ndarray]:
    """Keys, new priorities and metrics of the most recent update."""
    return {key: np.asarray(value)
            for key, value in self._last_update.items()}

  @property
  def networks(self) -> List[snt.Module]:
    """Every network the update computes with: each (online, target)
    pair of `target_pairs`, flattened."""
    return [module for pair in self._target_pairs for module in pair]

  @property
  def precision(self) -> str:
    """What the update's networks compute in: 'float32' or 'bfloat16'."""
    return self._precision

  @property
  def num_steps(self) -> int:
    return int(self._num_steps.numpy())

  @property
  def variable_names(self) -> List[str]:
    """The names `get_variables` serves."""
    return sorted(self._variables)

  def get_variables(self, names: Sequence[str]) -> List[List[np.ndarray]]:
    return [tf2_utils.to_numpy(self._variables[name]) for name in names]

  def get_variables_if_newer(self, names: Sequence[str], version):
    """(version, variables), variables None if `version` is current (see
    `agents.variables.NewestVariableClient`); the version is the step."""
    return variables_lib.if_newer(self.num_steps, version,
                                  lambda: self.get_variables(names))
