"""The Ape-X DPG learner (Ape-X §3.2, App. D)."""

from typing import Dict, Tuple

import sonnet as snt
import tensorflow as tf

from agents.replay import adders
from agents.apex import learning
from agents.apex import priorities
from agents.apex_dpg import losses


class ApeXDPGLearner(learning.ApeXLearner):
  """Deterministic policy gradients on prioritised n-step transitions.

  On top of the shared Ape-X loop (`agents.apex.learning.ApeXLearner`), each update
  (i) moves the critic toward R + Gamma q'(s_{t+n}, pi'(s_{t+n})) with the
  importance-weighted squared TD error, and (ii) moves the policy along the
  critic's action gradient at a = pi(s_t), clipped element-wise. Both
  gradients are taken before either network changes; Adam applies them.
  The policy loss is not importance weighted (the paper weights the TD loss).

  A critic of another kind (D4PG's distribution) overrides `_critic_loss`
  (its loss and the priorities it gives) and `_policy_value` (the scalar
  value whose action gradient the policy follows).
  """

  def __init__(self,
               policy: snt.Module,
               critic: snt.Module,
               target_policy: snt.Module,
               target_critic: snt.Module,
               policy_optimizer: snt.Optimizer,
               critic_optimizer: snt.Optimizer,
               dqda_clip: float,
               **replay_learning):
    """`replay_learning`: `ApeXLearner`'s arguments (the iterator, the
    replay client, the importance-sampling exponent, the target period,
    the counter and logger...), by keyword."""
    super().__init__(
        variables={'policy': policy.trainable_variables,
                   'critic': critic.trainable_variables},
        target_pairs=[(policy, target_policy), (critic, target_critic)],
        **replay_learning)
    self._policy = policy
    self._critic = critic
    self._target_policy = target_policy
    self._target_critic = target_critic
    self._policy_optimizer = policy_optimizer
    self._critic_optimizer = critic_optimizer
    self._dqda_clip = dqda_clip

  def _critic_loss(self, transitions: Dict[str, tf.Tensor],
                   weights: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
    """(the critic's importance-weighted loss, the batch's new priorities),
    traced inside the critic's gradient tape: the squared n-step TD error
    toward R + Gamma q'(s_{t+n}, pi'(s_{t+n})), and its absolute value."""
    o_t = transitions[adders.NEXT_OBSERVATION]
    q_t = self._target_critic(o_t, self._target_policy(o_t))
    q_tm1 = self._critic(transitions[adders.OBSERVATION],
                         transitions[adders.ACTION])
    td_errors = losses.n_step_td_error(
        q_tm1, transitions[adders.N_STEP_RETURN],
        transitions[adders.DISCOUNT], q_t)
    return (learning.weighted_squared_loss(td_errors, weights),
            priorities.from_td_errors(td_errors))

  def _policy_value(self, observations: tf.Tensor,
                    actions: tf.Tensor) -> tf.Tensor:
    """The critic's value of each (s, a), one scalar a transition, whose
    action gradient the policy follows."""
    return self._critic(observations, actions)

  def _update(self, transitions: Dict[str, tf.Tensor],
              weights: tf.Tensor) -> Tuple[tf.Tensor, Dict[str, tf.Tensor]]:
    o_tm1 = transitions[adders.OBSERVATION]
    with tf.GradientTape() as critic_tape:
      critic_loss, new_priorities = self._critic_loss(transitions, weights)
    critic_variables = self._critic.trainable_variables
    critic_gradients = critic_tape.gradient(critic_loss, critic_variables)

    with tf.GradientTape() as policy_tape:
      actions = self._policy(o_tm1)
      with tf.GradientTape() as action_tape:
        action_tape.watch(actions)
        q_policy = self._policy_value(o_tm1, actions)
      # Each q(s_i, a_i) depends on a_i alone, so the gradient of the batch
      # (which the tape sums) is the per-transition dq/da.
      dqda = action_tape.gradient(q_policy, actions)
      policy_loss = losses.dpg_policy_loss(dqda, actions, self._dqda_clip)
    policy_variables = self._policy.trainable_variables
    policy_gradients = policy_tape.gradient(policy_loss, policy_variables)

    self._critic_optimizer.apply(critic_gradients, critic_variables)
    self._policy_optimizer.apply(policy_gradients, policy_variables)
    return new_priorities, {
        'loss': critic_loss,
        'policy_loss': policy_loss,
        'mean_q': tf.reduce_mean(q_policy),
    }

  def _optimizers(self):
    return [(self._critic_optimizer, self._critic.trainable_variables),
            (self._policy_optimizer, self._policy.trainable_variables)]

  @property
  def state(self):
    """What a checkpoint of this learner holds."""
    return {
        'policy': self._policy,
        'critic': self._critic,
        'target_policy': self._target_policy,
        'target_critic': self._target_critic,
        'policy_optimizer': self._policy_optimizer,
        'critic_optimizer': self._critic_optimizer,
        'num_steps': self._num_steps,
        'max_priority': self._max_priority,
    }
