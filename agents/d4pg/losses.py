"""D4PG's critic loss (D4PG §3, App. A): the distributional N-step Bellman
target of the target networks, R + Gamma Z'(s_{t+n}, pi'(s_{t+n})) (D4PG
eq. 7), projected onto the critic's atoms, and the cross-entropy to it,
weighted by importance sampling (D4PG Algorithm 1, line 7); the
projection, the cross-entropy and the KL divergence are
`agents.apex.distributional`'s.

A transition's priority is the KL divergence from its projected target to
the critic's distribution (`agents.apex.distributional`: Rainbow's choice for
its distributional agent). D4PG samples "with priority p_i" (Algorithm 1,
line 5) without saying what p_i is; Acme's D4PG samples uniformly. Actors
and learner both take it from `priorities`.
"""

from typing import Tuple

import tensorflow as tf

from agents.apex import distributional


def priorities(logits_tm1, n_step_returns, discounts, logits_t,
               atoms) -> tf.Tensor:
  """A transition's priority: the KL divergence of
  `distributional.categorical_td`."""
  return distributional.categorical_td(logits_tm1, n_step_returns,
                                       discounts, logits_t, atoms)[1]


def critic_loss(logits_tm1, n_step_returns, discounts, logits_t, atoms,
                importance_weights) -> Tuple[tf.Tensor, tf.Tensor]:
  """(the batch's importance-weighted mean cross-entropy, its transitions'
  priorities)."""
  cross_entropy, divergence = distributional.categorical_td(
      logits_tm1, n_step_returns, discounts, logits_t, atoms)
  return tf.reduce_mean(importance_weights * cross_entropy), divergence
