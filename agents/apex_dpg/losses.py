"""Ape-X DPG's losses (§3.2, App. D): n-step TD for the critic, deterministic
policy gradient with an element-wise clipped action gradient for the policy."""

import tensorflow as tf


def n_step_td_error(q_tm1: tf.Tensor, n_step_returns: tf.Tensor,
                    discounts: tf.Tensor, q_t: tf.Tensor) -> tf.Tensor:
  """G - q(s_t, a_t), with G = R + Gamma q'(s_{t+n}, pi'(s_{t+n})).

  `q_t` is the target critic at the target policy's action; `discounts` is
  the n-step discount Gamma (0 where the episode terminated within n steps).
  """
  targets = tf.stop_gradient(n_step_returns + discounts * q_t)
  return targets - q_tm1


def dpg_policy_loss(dqda: tf.Tensor, actions: tf.Tensor,
                    dqda_clip: float) -> tf.Tensor:
  """A loss whose gradient in the policy's parameters is the DPG ascent
  direction -E[clip(dq/da) dpi/dtheta] (Silver et al. 2014).

  `actions` = pi(s) (differentiable in the policy's parameters) and `dqda` =
  dq(s, a)/da at those actions, clipped element-wise to [-dqda_clip,
  dqda_clip] (App. D). 1/2 ||stop_gradient(a + dqda) - a||^2 has gradient
  -dqda in a.
  """
  dqda = tf.clip_by_value(dqda, -dqda_clip, dqda_clip)
  targets = tf.stop_gradient(actions + dqda)
  return tf.reduce_mean(
      0.5 * tf.reduce_sum(tf.square(targets - actions), axis=-1))
