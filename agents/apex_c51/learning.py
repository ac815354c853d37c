"""The distributional Ape-X DQN's learner: Ape-X DQN's (gradient-norm clip,
centered RMSProp, target copies) with the categorical double-Q loss."""

from typing import Dict, Tuple

import tensorflow as tf

from agents.apex_c51 import losses
from agents.apex_dqn import learning as dqn_learning
from agents.replay import adders


class ApeXC51Learner(dqn_learning.ApeXDQNLearner):
  """Categorical double Q-learning on prioritised n-step transitions; the
  network is a `networks.DuelingCategoricalNetwork`."""

  def _loss(self, transitions: Dict[str, tf.Tensor],
            weights: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
    next_observations = transitions[adders.NEXT_OBSERVATION]
    logits_t_evaluator = self._target_network.logits(next_observations)
    logits_tm1 = self._network.logits(transitions[adders.OBSERVATION])
    q_t_selector = self._network(next_observations)
    return losses.loss(
        logits_tm1, transitions[adders.ACTION],
        transitions[adders.N_STEP_RETURN], transitions[adders.DISCOUNT],
        q_t_selector, logits_t_evaluator, self._network.atoms, weights)
