"""The D4PG learner (D4PG §3-4, Algorithm 1): Ape-X DPG's learner with a
categorical critic."""

from typing import Dict, Tuple

import tensorflow as tf

from agents.apex_dpg import learning as dpg_learning
from agents.d4pg import losses
from agents.replay import adders


class D4PGLearner(dpg_learning.ApeXDPGLearner):
  """Distributional deterministic policy gradients on prioritised N-step
  transitions.

  Ape-X DPG's update (`ApeXDPGLearner`), but (i) the critic moves toward
  the projected distribution of R + Gamma Z'(s_{t+n}, pi'(s_{t+n})) by the
  importance-weighted cross-entropy, and each transition's new priority is
  the KL divergence to that target (`losses`); (ii) the policy follows the
  action gradient of the critic's mean, E[Z(s, a)] at a = pi(s) (D4PG
  eq. 8), clipped element-wise as Ape-X DPG's. The critic is a
  `networks.CategoricalCritic`.
  """

  def _critic_loss(self, transitions: Dict[str, tf.Tensor],
                   weights: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
    o_t = transitions[adders.NEXT_OBSERVATION]
    logits_t = self._target_critic(o_t, self._target_policy(o_t))
    logits_tm1 = self._critic(transitions[adders.OBSERVATION],
                              transitions[adders.ACTION])
    return losses.critic_loss(
        logits_tm1, transitions[adders.N_STEP_RETURN],
        transitions[adders.DISCOUNT], logits_t, self._critic.atoms, weights)

  def _policy_value(self, observations: tf.Tensor,
                    actions: tf.Tensor) -> tf.Tensor:
    return self._critic.mean(self._critic(observations, actions))
