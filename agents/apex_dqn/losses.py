"""Ape-X DQN's loss: importance-weighted n-step double Q-learning (§3.1)."""

from typing import Tuple

import tensorflow as tf

from agents.apex.learning import weighted_squared_loss


def n_step_double_q_td_error(q_tm1: tf.Tensor, actions: tf.Tensor,
                             n_step_returns: tf.Tensor, discounts: tf.Tensor,
                             q_t_selector: tf.Tensor,
                             q_t_evaluator: tf.Tensor) -> tf.Tensor:
  """G - q(s_t, a_t), with G = R + Gamma q_eval(s_{t+n}, argmax q_select).

  Ape-X §3.1: the online network selects the bootstrap action and the target
  network evaluates it (van Hasselt et al. 2016). `discounts` is the n-step
  discount Gamma (0 where the episode terminated within n steps).
  """
  best_actions = tf.argmax(q_t_selector, axis=-1, output_type=tf.int32)
  bootstrap = tf.gather(q_t_evaluator, best_actions, batch_dims=1)
  targets = tf.stop_gradient(n_step_returns + discounts * bootstrap)
  q_taken = tf.gather(q_tm1, tf.cast(actions, tf.int32), batch_dims=1)
  return targets - q_taken


def double_q_loss(q_tm1, actions, n_step_returns, discounts, q_t_selector,
                  q_t_evaluator,
                  importance_weights) -> Tuple[tf.Tensor, tf.Tensor]:
  """Returns (loss, td_errors) for a batch."""
  td_errors = n_step_double_q_td_error(q_tm1, actions, n_step_returns,
                                       discounts, q_t_selector, q_t_evaluator)
  return weighted_squared_loss(td_errors, importance_weights), td_errors
