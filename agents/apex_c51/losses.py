"""The distributional Ape-X DQN's loss: n-step categorical double
Q-learning (Rainbow, Hessel et al. 2018, §2: "the double Q-learning
distributional loss"; C51, Bellemare et al. 2017, Algorithm 1).

The online network's mean, E[Z(s_{t+n}, a)], selects the bootstrap action
a* (double Q-learning on the mean, van Hasselt et al. 2016); the target
network's distribution of that action, shifted by R + Gamma, is projected
onto the atoms (`agents.apex.distributional`); the online distribution of the
action taken, Z(s_t, a_t), learns by the cross-entropy to it, weighted by
importance sampling. A transition's priority is the KL divergence to its
projected target (Rainbow: "prioritize transitions by the KL loss"), the
quantity the actors also compute (`priorities.py`).
"""

from typing import Tuple

import tensorflow as tf

from agents.apex import distributional


def categorical_double_q(logits_tm1: tf.Tensor, actions: tf.Tensor,
                         n_step_returns: tf.Tensor, discounts: tf.Tensor,
                         q_t_selector: tf.Tensor, logits_t_evaluator: tf.Tensor,
                         atoms: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
  """(cross-entropy, KL divergence) of each transition: `logits_tm1`
  [batch, actions, atoms] at s_t, of which the action taken's; the
  bootstrap action argmax of `q_t_selector` [batch, actions] (the online
  network's means at s_{t+n}), its distribution from `logits_t_evaluator`
  [batch, actions, atoms] (the target network's); `discounts` is Gamma (0
  where the episode terminated within n steps)."""
  best_actions = tf.argmax(q_t_selector, axis=-1, output_type=tf.int32)
  logits_t = tf.gather(logits_t_evaluator, best_actions, batch_dims=1)
  logits_taken = tf.gather(logits_tm1, tf.cast(actions, tf.int32),
                           batch_dims=1)
  return distributional.categorical_td(logits_taken, n_step_returns,
                                       discounts, logits_t, atoms)


def priorities(*batch) -> tf.Tensor:
  """A transition's priority: the KL divergence of `categorical_double_q`
  (same arguments)."""
  return categorical_double_q(*batch)[1]


def loss(logits_tm1, actions, n_step_returns, discounts, q_t_selector,
         logits_t_evaluator, atoms,
         importance_weights) -> Tuple[tf.Tensor, tf.Tensor]:
  """(the batch's importance-weighted mean cross-entropy, its transitions'
  priorities)."""
  cross_entropy, divergence = categorical_double_q(
      logits_tm1, actions, n_step_returns, discounts, q_t_selector,
      logits_t_evaluator, atoms)
  return tf.reduce_mean(importance_weights * cross_entropy), divergence
