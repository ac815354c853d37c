"""The categorical projection, its cross-entropy and KL priorities
(agents/apex/distributional.py), and D4PG's critic loss, against a slow numpy
reference and hand-worked cases.

The reference projects as C51's Algorithm 1 does (Bellemare et al. 2017):
each shifted atom, clipped to [v_min, v_max], at fractional index b between
atoms l = floor(b) and u = ceil(b), gives (u - b) of its mass to l and
(b - l) to u (all of it to l when b is whole) -- a loop, not the module's
triangle kernel.
"""

import math

import numpy as np
import pytest
import tensorflow as tf

from agents.apex import distributional
from agents.d4pg import losses


def reference_projection(values, probabilities, atoms):
  """C51's Algorithm 1, one transition and one source atom at a time."""
  v_min, v_max = atoms[0], atoms[-1]
  spacing = atoms[1] - atoms[0]
  projected = np.zeros((len(values), len(atoms)))
  for row, (row_values, row_probabilities) in enumerate(
      zip(values, probabilities)):
    for value, mass in zip(row_values, row_probabilities):
      index = (min(max(value, v_min), v_max) - v_min) / spacing
      lower, upper = math.floor(index), math.ceil(index)
      if lower == upper:
        projected[row, lower] += mass
      else:
        projected[row, lower] += mass * (upper - index)
        projected[row, upper] += mass * (index - lower)
  return projected


def reference_td(logits_tm1, returns, discounts, logits_t, atoms):
  """(cross-entropy, KL) of each transition, by the definitions."""
  def softmax(logits):
    exp = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return exp / exp.sum(axis=-1, keepdims=True)
  shifted = returns[:, None] + discounts[:, None] * atoms[None, :]
  target = reference_projection(shifted, softmax(logits_t), atoms)
  log_p = np.log(softmax(logits_tm1))
  cross_entropy = -(target * log_p).sum(axis=-1)
  with np.errstate(divide='ignore', invalid='ignore'):
    entropy = -np.where(target > 0, target * np.log(target), 0.0).sum(-1)
  return cross_entropy, cross_entropy - entropy


def project(values, probabilities, atoms):
  return distributional.categorical_projection(
      tf.constant(values, tf.float32), tf.constant(probabilities, tf.float32),
      tf.constant(atoms, tf.float32)).numpy()


ATOMS = np.arange(5, dtype=np.float32)  # 0, 1, 2, 3, 4: spacing 1.


def point_mass_target(n_step_return: float, discount: float = 0.0):
  """The projected target of one transition whose next distribution is
  uniform on ATOMS."""
  shifted = n_step_return + discount * ATOMS
  return project(shifted[None], np.full((1, 5), 0.2), ATOMS)[0]


def test_terminal_return_between_atoms_splits_by_nearness():
  # Gamma = 0 (terminated within n steps): the target is the return alone.
  np.testing.assert_allclose(point_mass_target(1.5), [0, .5, .5, 0, 0],
                             atol=1e-6)
  np.testing.assert_allclose(point_mass_target(2.25), [0, 0, .75, .25, 0],
                             atol=1e-6)
  np.testing.assert_allclose(point_mass_target(3.0), [0, 0, 0, 1, 0],
                             atol=1e-6)


def test_returns_outside_the_support_go_to_its_ends():
  np.testing.assert_allclose(point_mass_target(10.0), [0, 0, 0, 0, 1],
                             atol=1e-6)
  np.testing.assert_allclose(point_mass_target(-3.0), [1, 0, 0, 0, 0],
                             atol=1e-6)
  # Shifted atoms 3, 3.5, 4, 4.5, 5 (0.2 each): the last two clip to 4.
  np.testing.assert_allclose(point_mass_target(3.0, discount=0.5),
                             [0, 0, 0, .3, .7], atol=1e-6)


def test_shrunk_distribution_by_hand():
  # R = 0, Gamma = 0.5: atoms 0, .5, 1, 1.5, 2 with 0.2 each; atom 0 takes
  # 0.2 + 0.1, atom 1 0.1 + 0.2 + 0.1, atom 2 0.1 + 0.2.
  np.testing.assert_allclose(point_mass_target(0.0, discount=0.5),
                             [.3, .4, .3, 0, 0], atol=1e-6)


@pytest.mark.parametrize('num_atoms,v_min,v_max', [(51, -150., 150.),
                                                   (11, 0., 400.),
                                                   (2, -1., 1.)])
def test_projection_matches_reference_and_keeps_mass(num_atoms, v_min,
                                                     v_max):
  rng = np.random.default_rng(num_atoms)
  atoms = np.linspace(v_min, v_max, num_atoms).astype(np.float32)
  batch = 64
  returns = rng.uniform(1.5 * v_min - 10, 1.5 * v_max + 10, batch)
  discounts = rng.choice([0.0, 0.99 ** 3, 0.97, 1.0], batch)
  shifted = (returns[:, None] + discounts[:, None] * atoms[None]).astype(
      np.float32)
  probabilities = rng.dirichlet(np.ones(num_atoms), batch).astype(np.float32)
  projected = project(shifted, probabilities, atoms)
  np.testing.assert_allclose(
      projected, reference_projection(shifted, probabilities, atoms),
      atol=2e-5)
  np.testing.assert_allclose(projected.sum(axis=-1), 1.0, atol=1e-5)
  assert (projected >= 0).all()


def test_projection_onto_its_own_atoms_is_the_identity():
  probabilities = np.random.default_rng(0).dirichlet(np.ones(5), 3)
  np.testing.assert_allclose(
      project(np.tile(ATOMS, (3, 1)), probabilities, ATOMS), probabilities,
      atol=1e-6)


def test_cross_entropy_and_kl_match_reference():
  rng = np.random.default_rng(1)
  atoms = np.linspace(0., 400., 51).astype(np.float32)
  batch = 32
  logits_tm1 = rng.normal(size=(batch, 51)).astype(np.float32) * 2
  logits_t = rng.normal(size=(batch, 51)).astype(np.float32) * 2
  returns = rng.uniform(-50, 450, batch).astype(np.float32)
  discounts = rng.choice([0.0, 0.99 ** 5], batch).astype(np.float32)
  cross_entropy, divergence = (t.numpy() for t in distributional.categorical_td(
      *(tf.constant(x) for x in (logits_tm1, returns, discounts, logits_t,
                                 atoms))))
  expected_cross_entropy, expected_divergence = reference_td(
      logits_tm1, returns, discounts, logits_t, atoms)
  np.testing.assert_allclose(cross_entropy, expected_cross_entropy,
                             rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(divergence, expected_divergence, rtol=1e-3,
                             atol=1e-4)
  priorities = losses.priorities(logits_tm1, returns, discounts, logits_t,
                                 atoms).numpy()
  np.testing.assert_allclose(priorities, divergence)


def test_kl_priority_is_zero_when_the_critic_matches_its_target():
  # A critic whose distribution is the projected target has nothing left
  # to learn from the transition, however spread its target is.
  target = point_mass_target(0.0, discount=0.5)  # [.3, .4, .3, 0, 0]
  logits_t = np.zeros((1, 5), np.float32)  # Uniform on ATOMS.
  logits_tm1 = np.log(np.maximum(target, 1e-30))[None].astype(np.float32)
  cross_entropy, divergence = distributional.categorical_td(
      tf.constant(logits_tm1), tf.constant([0.0]), tf.constant([0.5]),
      tf.constant(logits_t), tf.constant(ATOMS))
  assert divergence.numpy()[0] == pytest.approx(0.0, abs=1e-5)
  # The cross-entropy is the target's entropy, not 0.
  entropy = -sum(p * math.log(p) for p in target if p > 0)
  assert cross_entropy.numpy()[0] == pytest.approx(entropy, rel=1e-4)


def test_critic_loss_weights_each_transition():
  rng = np.random.default_rng(2)
  logits_tm1 = rng.normal(size=(4, 5)).astype(np.float32)
  logits_t = rng.normal(size=(4, 5)).astype(np.float32)
  returns = np.array([0.5, 1.0, 2.5, 9.0], np.float32)
  discounts = np.array([0.9, 0.0, 0.5, 0.9], np.float32)
  weights = np.array([1.0, 0.5, 0.0, 0.25], np.float32)
  loss, priorities = losses.critic_loss(logits_tm1, returns, discounts,
                                        logits_t, ATOMS, weights)
  cross_entropy, divergence = reference_td(logits_tm1, returns, discounts,
                                           logits_t, ATOMS)
  assert loss.numpy() == pytest.approx(np.mean(weights * cross_entropy),
                                       rel=1e-5)
  np.testing.assert_allclose(priorities.numpy(), divergence, rtol=1e-4,
                             atol=1e-5)


def test_expected_values():
  logits = np.log(np.array([[.3, .4, .3, 0, 0], [0, 0, 0, 0, 1]]) + 1e-30)
  np.testing.assert_allclose(
      distributional.expected_values(tf.constant(logits, tf.float32),
                             tf.constant(ATOMS)).numpy(), [1.0, 4.0],
      atol=1e-5)
