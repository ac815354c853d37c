"""Categorical value distributions, for the agents whose values are
distributions over returns (D4PG's critic; Bellemare et al. 2017's C51).

A distribution Z has probabilities softmax(logits) on atoms z_1 < ... <
z_N, evenly spaced on [v_min, v_max]. The target of a transition (s_t,
a_t, R, Gamma, s_{t+n}), with R = sum_k gamma^k r_{t+k} and Gamma = gamma^n
(0 where the episode terminated within n steps), is the distribution of
R + Gamma Z'(s_{t+n}, a'), whose atoms R + Gamma z_j fall between the
distribution's own: the projection Phi (Bellemare et al. 2017, eq. 7;
D4PG App. A) gives each shifted atom's mass to its two nearest atoms in
proportion to nearness, clipping it to [v_min, v_max] first:

  (Phi Y)_i = sum_j p_j clip(1 - |clip(R + Gamma z_j) - z_i| / dz, 0, 1).

This is Acme's `l2_project` (the L2 projection over CDFs) for evenly
spaced atoms. The distribution learns by the cross-entropy
-sum_i (Phi Y)_i log p_i(s_t, a_t).

A transition's priority is the KL divergence from its projected target to
the predicted distribution: the cross-entropy less the target's own
entropy, so that a return that is merely uncertain is not replayed more
for it, and one predicted exactly has priority 0 (Rainbow, Hessel et al.
2018: its distributional agent prioritises transitions "by the KL loss").
"""

from typing import Tuple

import tensorflow as tf


def expected_values(logits: tf.Tensor, atoms: tf.Tensor) -> tf.Tensor:
  """E[Z] of each distribution of `logits` (..., atoms): sum_i p_i z_i."""
  return tf.reduce_sum(tf.nn.softmax(logits) * atoms, axis=-1)


def categorical_projection(values: tf.Tensor, probabilities: tf.Tensor,
                           atoms: tf.Tensor) -> tf.Tensor:
  """The distribution of mass `probabilities` (batch, K) on `values`
  (batch, K), projected onto `atoms` (N,), evenly spaced (module
  docstring): (batch, N), each row summing to its row's mass."""
  v_min, v_max = atoms[0], atoms[-1]
  spacing = atoms[1] - atoms[0]
  clipped = tf.clip_by_value(values, v_min, v_max)
  # (batch, N, K): the share of source atom k's mass that atom i takes.
  nearness = tf.clip_by_value(
      1.0 - tf.abs(clipped[:, None, :] - atoms[None, :, None]) / spacing,
      0.0, 1.0)
  return tf.reduce_sum(nearness * probabilities[:, None, :], axis=-1)


def categorical_td(logits_tm1: tf.Tensor, n_step_returns: tf.Tensor,
                   discounts: tf.Tensor, logits_t: tf.Tensor,
                   atoms: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
  """(cross-entropy, KL divergence) of each transition's distribution
  (`logits_tm1`, at s_t and a_t) to its projected n-step target (from
  `logits_t`, the distribution bootstrapped from at s_{t+n}); `discounts`
  is Gamma (module docstring)."""
  shifted = n_step_returns[:, None] + discounts[:, None] * atoms[None, :]
  target = tf.stop_gradient(
      categorical_projection(shifted, tf.nn.softmax(logits_t), atoms))
  cross_entropy = tf.nn.softmax_cross_entropy_with_logits(
      labels=target, logits=logits_tm1)
  target_entropy = -tf.reduce_sum(tf.math.xlogy(target, target), axis=-1)
  # Rounding can take the difference of two equal quantities below 0.
  divergence = tf.maximum(cross_entropy - target_entropy, 0.0)
  return cross_entropy, divergence
