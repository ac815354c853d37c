"""The Ape-X DQN learner (Ape-X §3.1, App. C)."""

import time
from typing import Callable, Dict, Iterator, List, Optional, Sequence

import acme
import numpy as np
import reverb
import sonnet as snt
import tensorflow as tf
from acme.tf import utils as tf2_utils
from acme.utils import counting
from acme.utils import loggers

from agents import adders
from agents import replay
from agents.apex_dqn import losses


class ApeXDQNLearner(acme.Learner):
  """Double Q-learning on prioritised n-step transitions.

  Each `step` samples a batch from the shared replay, weights the loss by
  importance sampling, clips the gradient's global norm, applies centered
  RMSProp, writes the batch's new |TD| priorities back to Reverb and, every
  `target_update_period` steps, copies the online network into the target.

  `iterator` must be a `tf.data` iterator (as from `replay.make_dataset`): the
  update is a `tf.function`, in which a plain Python iterator would be read
  once, at tracing time. A Reverb dataset ends when replay lets no sample
  through for a while (too little data, or a rate limiter holding the learner
  back); `step` then continues on a new iterator from `make_iterator`.
  """

  def __init__(self,
               network: snt.Module,
               target_network: snt.Module,
               iterator: Iterator[reverb.ReplaySample],
               replay_client: Optional[reverb.TFClient],
               optimizer: snt.Optimizer,
               importance_sampling_exponent: float,
               target_update_period: int,
               max_gradient_norm: float,
               table: str = replay.TABLE,
               counter: Optional[counting.Counter] = None,
               logger: Optional[loggers.Logger] = None,
               log_every: float = 0.0,
               make_iterator: Optional[Callable[[], Iterator[
                   reverb.ReplaySample]]] = None):
    self._network = network
    self._target_network = target_network
    self._iterator = iterator
    self._make_iterator = make_iterator
    self._replay_client = replay_client
    self._optimizer = optimizer
    self._importance_sampling_exponent = importance_sampling_exponent
    self._target_update_period = target_update_period
    self._max_gradient_norm = max_gradient_norm
    self._table = table
    self._counter = counter or counting.Counter()
    self._logger = logger or loggers.NoOpLogger()
    self._num_steps = tf.Variable(0, dtype=tf.int64, trainable=False)
    self._variables = {'network': network.trainable_variables}
    self._log_every = log_every
    self._last_update = None
    self._log_timestamp = None
    self._steps_since_log = 0

  @tf.function
  def _step(self, iterator) -> Dict[str, tf.Tensor]:
    sample = next(iterator)
    transitions = sample.data
    weights = replay.importance_sampling_weights(
        sample.info.probability, sample.info.table_size,
        self._importance_sampling_exponent)
    q_t_evaluator = self._target_network(transitions[adders.NEXT_OBSERVATION])
    with tf.GradientTape() as tape:
      q_tm1 = self._network(transitions[adders.OBSERVATION])
      q_t_selector = self._network(transitions[adders.NEXT_OBSERVATION])
      loss, td_errors = losses.double_q_loss(
          q_tm1, transitions[adders.ACTION],
          transitions[adders.N_STEP_RETURN], transitions[adders.DISCOUNT],
          q_t_selector, q_t_evaluator, weights)
    variables = self._network.trainable_variables
    gradients = tape.gradient(loss, variables)
    gradients, gradient_norm = tf.clip_by_global_norm(gradients,
                                                      self._max_gradient_norm)
    self._optimizer.apply(gradients, variables)

    priorities = tf.abs(td_errors)
    if self._replay_client is not None:
      self._replay_client.update_priorities(
          self._table, keys=sample.info.key,
          priorities=tf.cast(priorities, tf.float64))

    self._num_steps.assign_add(1)
    if tf.math.mod(self._num_steps, self._target_update_period) == 0:
      for source, target in zip(self._network.variables,
                                self._target_network.variables):
        target.assign(source)
    return {
        'loss': loss,
        'gradient_norm': gradient_norm,
        'mean_priority': tf.reduce_mean(priorities),
        'keys': sample.info.key,
        'priorities': priorities,
    }

  def step(self):
    """One update, then counts and, every `log_every` seconds, a log row."""
    while True:
      try:
        result = self._step(self._iterator)
        break
      except tf.errors.OutOfRangeError:
        if self._make_iterator is None:
          raise
        self._iterator = self._make_iterator()
    self._last_update = result
    counts = self._counter.increment(steps=1)
    now = time.time()
    if self._log_timestamp is None:
      self._log_timestamp = now
      return
    self._steps_since_log += 1
    elapsed = now - self._log_timestamp
    if elapsed >= self._log_every and elapsed > 0:
      row = {
          'loss': result['loss'].numpy(),
          'gradient_norm': result['gradient_norm'].numpy(),
          'mean_priority': result['mean_priority'].numpy(),
          'steps_per_second': self._steps_since_log / elapsed,
      }
      row.update(counts)
      self._logger.write(row)
      self._log_timestamp, self._steps_since_log = now, 0

  @property
  def last_update(self) -> Dict[str, np.ndarray]:
    """Keys, new priorities and loss of the most recent update (for tests)."""
    return {key: value.numpy() for key, value in self._last_update.items()}

  @property
  def num_steps(self) -> int:
    return int(self._num_steps.numpy())

  def get_variables(self, names: Sequence[str]) -> List[List[np.ndarray]]:
    return [tf2_utils.to_numpy(self._variables[name]) for name in names]

  @property
  def state(self):
    """What a checkpoint of this learner holds."""
    return {
        'network': self._network,
        'target_network': self._target_network,
        'optimizer': self._optimizer,
        'num_steps': self._num_steps,
    }
