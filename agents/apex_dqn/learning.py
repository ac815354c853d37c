"""The Ape-X DQN learner (Ape-X §3.1, App. C)."""

from typing import Callable, Dict, Iterator, Optional, Tuple

import reverb
import sonnet as snt
import tensorflow as tf
from acme.utils import counting
from acme.utils import loggers

from agents import adders
from agents import learning
from agents import replay
from agents.apex_dqn import losses


class ApeXDQNLearner(learning.ApeXLearner):
  """Double Q-learning on prioritised n-step transitions.

  On top of the shared Ape-X loop (`agents.learning.ApeXLearner`), each update
  clips the gradient's global norm and applies centered RMSProp (App. C).
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
    super().__init__(
        variables={'network': network.trainable_variables},
        target_pairs=[(network, target_network)],
        iterator=iterator, replay_client=replay_client,
        importance_sampling_exponent=importance_sampling_exponent,
        target_update_period=target_update_period, table=table,
        counter=counter, logger=logger, log_every=log_every,
        make_iterator=make_iterator)
    self._network = network
    self._target_network = target_network
    self._optimizer = optimizer
    self._max_gradient_norm = max_gradient_norm

  def _update(self, transitions: Dict[str, tf.Tensor],
              weights: tf.Tensor) -> Tuple[tf.Tensor, Dict[str, tf.Tensor]]:
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
    return td_errors, {'loss': loss, 'gradient_norm': gradient_norm}

  def _optimizers(self):
    return [(self._optimizer, self._network.trainable_variables)]

  @property
  def state(self):
    """What a checkpoint of this learner holds."""
    return {
        'network': self._network,
        'target_network': self._target_network,
        'optimizer': self._optimizer,
        'num_steps': self._num_steps,
        'max_priority': self._max_priority,
    }
