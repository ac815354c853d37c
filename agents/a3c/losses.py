"""A3C's loss (Algorithm S3): n-step returns bootstrapped from V(s_{t_max}),
advantages, the policy gradient with entropy regularisation, the value loss;
summed over the rollout, as Algorithm S3 accumulates its gradients."""

from typing import Dict, Tuple

import tensorflow as tf

from agents.a3c.networks import PolicyValue


def n_step_returns(rewards: tf.Tensor, discounts: tf.Tensor,
                   bootstrap_value: tf.Tensor) -> tf.Tensor:
  """R_i = r_i + discounts_i R_{i+1} backwards from R_T = `bootstrap_value`.

  Algorithm S3 with the environment's own discounts: `discounts` [T] is
  gamma times the discount of step i + 1 (0 where the episode terminated
  there, so its return is r_i alone; gamma where a time limit cut it, which
  keeps the bootstrap), and `bootstrap_value` is V(s_T) of the rollout's
  last observation.
  """
  rewards = tf.cast(rewards, tf.float32)
  discounts = tf.cast(discounts, tf.float32)
  return tf.scan(lambda following, step: step[0] + step[1] * following,
                 (rewards, discounts),
                 initializer=tf.cast(bootstrap_value, tf.float32),
                 reverse=True)


def a3c_loss(outputs: PolicyValue, actions: tf.Tensor, returns: tf.Tensor,
             entropy_cost: float, value_cost: float,
             advantage_scale=1.0, advantage_offset=0.0
             ) -> Tuple[tf.Tensor, Dict[str, tf.Tensor]]:
  """The loss whose gradient is Algorithm S3's accumulated update.

  Descending it ascends sum_i log pi(a_i|s_i) (R_i - V(s_i)) + beta H(pi(s_i))
  (the advantage held constant for the policy) and descends
  value_cost * sum_i (R_i - V(s_i))^2. `outputs` are the network's for the
  rollout's T observations, `actions` [T] or [T, d], `returns` [T].
  The policy term's advantages, less `advantage_offset`
  (`--center_advantages`; 0: Algorithm S3's), are multiplied by
  `advantage_scale` (`--normalize_advantages`; 1: Algorithm S3's); the
  value's errors are not.
  Errors and advantages are (R_i - V(s_i)) / `outputs.value_scale` (1, or
  Pop-Art's sigma: agents/a3c/popart.py).
  """
  errors = (returns - outputs.value) / outputs.value_scale
  advantages = tf.stop_gradient(errors)
  log_probs = outputs.policy.log_prob(actions)
  entropies = outputs.policy.entropy()
  policy_loss = -tf.reduce_sum(
      log_probs * (advantages - tf.cast(advantage_offset, tf.float32)) *
      tf.cast(advantage_scale, tf.float32))
  entropy = tf.reduce_sum(entropies)
  value_loss = tf.reduce_sum(tf.square(errors))
  loss = policy_loss - entropy_cost * entropy + value_cost * value_loss
  return loss, {'policy_loss': policy_loss, 'value_loss': value_loss,
                'entropy': tf.reduce_mean(entropies),
                'entropy_sum': entropy,
                'advantage': tf.reduce_mean(advantages),
                'advantage_abs': tf.reduce_mean(tf.abs(advantages)),
                'advantage_square': tf.reduce_mean(tf.square(advantages)),
                'value': tf.reduce_mean(outputs.value),
                'return': tf.reduce_mean(returns)}
