"""The Ape-X DQN learner (Ape-X §3.1, App. C)."""

from typing import Dict, List, Tuple

import sonnet as snt
import tensorflow as tf

from agents.replay import adders
from agents.apex import learning
from agents.apex import priorities
from agents.apex_dqn import losses


class ApeXDQNLearner(learning.ApeXLearner):
  """Double Q-learning on prioritised n-step transitions.

  On top of the shared Ape-X loop (`agents.apex.learning.ApeXLearner`), each update
  clips the gradient's global norm and applies centered RMSProp (App. C).
  With `fuse_optimizer_step`, that step (`_clip_and_apply`) is compiled by
  XLA, nested in the update: its element-wise work over every weight (the
  norm, the scaling, RMSProp's moments and step) becomes a few fused loops
  instead of a dozen passes over memory (what it gives:
  benchmarks/learner_options.py). Off by default: under TensorFlow 2.8 a
  nested XLA function fails ("Can't find a function") in a process that
  first imported TensorFlow inside absl's `app.run`, as a Vertex AI job's
  nodes may. XLA cannot create variables either, so the optimiser's state
  must exist before the first update (`ApeXLearner._make_optimizer_state`
  makes it).
  """

  def __init__(self,
               network: snt.Module,
               target_network: snt.Module,
               optimizer: snt.Optimizer,
               max_gradient_norm: float,
               fuse_optimizer_step: bool = False,
               **replay_learning):
    """`replay_learning`: `ApeXLearner`'s arguments (the iterator, the
    replay client, the importance-sampling exponent, the target period,
    the counter and logger...), by keyword."""
    super().__init__(
        variables={'network': network.trainable_variables},
        target_pairs=[(network, target_network)], **replay_learning)
    self._network = network
    self._target_network = target_network
    self._optimizer = optimizer
    self._max_gradient_norm = max_gradient_norm
    self._apply_gradients = (
        tf.function(self._clip_and_apply, jit_compile=True)
        if fuse_optimizer_step else self._clip_and_apply)

  def _q_values(self, transitions: Dict[str, tf.Tensor]
                ) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """(q(s), the online network's q(s') selecting the bootstrap action,
    the target network's q(s') evaluating it)."""
    q_t_evaluator = self._target_network(transitions[adders.NEXT_OBSERVATION])
    q_tm1 = self._network(transitions[adders.OBSERVATION])
    q_t_selector = self._network(transitions[adders.NEXT_OBSERVATION])
    return q_tm1, q_t_selector, q_t_evaluator

  def _loss(self, transitions: Dict[str, tf.Tensor],
            weights: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
    """(the importance-weighted loss, the batch's new priorities), traced
    inside the gradient tape: n-step double Q-learning (§3.1), the online
    network selecting the bootstrap action and the target network
    evaluating it, and the |TD errors|."""
    q_tm1, q_t_selector, q_t_evaluator = self._q_values(transitions)
    loss, td_errors = losses.double_q_loss(
        q_tm1, transitions[adders.ACTION],
        transitions[adders.N_STEP_RETURN], transitions[adders.DISCOUNT],
        q_t_selector, q_t_evaluator, weights)
    return loss, priorities.from_td_errors(td_errors)

  def _update(self, transitions: Dict[str, tf.Tensor],
              weights: tf.Tensor) -> Tuple[tf.Tensor, Dict[str, tf.Tensor]]:
    with tf.GradientTape() as tape:
      loss, new_priorities = self._loss(transitions, weights)
    variables = self._network.trainable_variables
    gradient_norm = self._apply_gradients(tape.gradient(loss, variables))
    return new_priorities, {'loss': loss, 'gradient_norm': gradient_norm}

  def _clip_and_apply(self, gradients: List[tf.Tensor]) -> tf.Tensor:
    """Clips the gradients' global norm to `max_gradient_norm` and applies
    the optimiser's step to the network's weights; the norm before
    clipping."""
    gradients, gradient_norm = tf.clip_by_global_norm(gradients,
                                                      self._max_gradient_norm)
    self._optimizer.apply(gradients, self._network.trainable_variables)
    return gradient_norm

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
