"""R2D2's arithmetic (agents/r2d2/losses.py, priorities.py) against
independent expectations: the value rescaling h and its inverse against
hand-computed values, the n-step double-Q targets over sequences with
burn-in, terminations, truncations and padding against a slow numpy
reference written from the paper's formula, the burn-in's gradient
stopped, and the priority mix against hand-worked numbers."""

import math

import numpy as np
import pytest
import tensorflow as tf

from agents.r2d2 import losses
from agents.r2d2 import networks
from agents.r2d2 import priorities
from agents.r2d2.config import R2D2Config

EPSILON = 1e-3


def _h(x):
  return math.copysign(math.sqrt(abs(x) + 1) - 1, x) + EPSILON * x


def _h_inverse(y):
  root = (math.sqrt(1 + 4 * EPSILON * (abs(y) + 1 + EPSILON)) - 1) / (
      2 * EPSILON)
  return math.copysign(root ** 2 - 1, y)


@pytest.mark.parametrize('x, h_of_x', [
    (0.0, 0.0),
    (3.0, 1.0 + 0.003),          # sqrt(4) - 1 = 1
    (-8.0, -2.0 - 0.008),        # -(sqrt(9) - 1)
    (24.0, 4.0 + 0.024),         # sqrt(25) - 1 = 4
    (99.0, 9.0 + 0.099),         # sqrt(100) - 1 = 9
    (-0.44, -0.2 - 0.00044),     # -(sqrt(1.44) - 1)
])
def test_value_rescaling_and_its_inverse_on_hand_computed_values(x, h_of_x):
  rescaled = losses.value_rescaling(tf.constant(x, tf.float64), EPSILON)
  assert float(rescaled) == pytest.approx(h_of_x, abs=1e-12)
  inverse = losses.inverse_value_rescaling(tf.constant(h_of_x, tf.float64),
                                           EPSILON)
  assert float(inverse) == pytest.approx(x, abs=1e-9)


def test_value_rescaling_and_its_inverse_undo_each_other():
  x = np.concatenate([-np.logspace(-4, 5, 200), [0.0],
                      np.logspace(-4, 5, 200)])
  for dtype, tolerance in ((tf.float64, 1e-9), (tf.float32, 2e-4)):
    values = tf.constant(x, dtype)
    there_and_back = losses.inverse_value_rescaling(
        losses.value_rescaling(values, EPSILON), EPSILON).numpy()
    np.testing.assert_allclose(there_and_back, x, rtol=tolerance,
                               atol=tolerance)
    back_and_there = losses.value_rescaling(
        losses.inverse_value_rescaling(values, EPSILON), EPSILON).numpy()
    np.testing.assert_allclose(back_and_there, x, rtol=tolerance,
                               atol=tolerance)
  # h squashes: h(x) grows as sqrt(|x|) (plus eps x), and keeps the sign.
  assert float(losses.value_rescaling(tf.constant(1e4, tf.float64),
                                      EPSILON)) == pytest.approx(
                                          math.sqrt(1e4 + 1) - 1 + 10.0)


def _reference_td_errors(q, q_selector, q_evaluator, actions, rewards,
                         discounts, masks, n, gamma):
  """The paper's n-step double-Q target with value rescaling, row by row:
  the window from row t takes steps while a step starts at the row (mask
  1) and the row is not the sequence's last, at most n of them."""
  batch, length, _ = q.shape
  errors = np.full((batch, length - 1), np.nan)
  for b in range(batch):
    for t in range(length - 1):
      if masks[b, t] == 0:
        continue
      target, scale, m = 0.0, 1.0, 0
      while m < n and t + m < length - 1 and masks[b, t + m] == 1:
        target += scale * rewards[b, t + m]
        scale *= gamma * discounts[b, t + m]
        m += 1
      best = int(np.argmax(q_selector[b, t + m]))
      target += scale * _h_inverse(q_evaluator[b, t + m, best])
      errors[b, t] = _h(target) - q[b, t, actions[b, t]]
  return errors


def _sequences(rng, length=12):
  """Four sequences of `length` rows laid out as the sequence adder writes
  them: 0 runs through; 1 ends by termination (discount 0) at row 4, its
  final observation at row 5, padding after; 2 ends by truncation
  (discount 1) at row 7, final observation at row 8, then padding; 3 is
  an episode's first sequence whose episode goes on."""
  batch, actions = 4, 3
  masks = np.ones((batch, length), np.float32)
  discounts = np.ones((batch, length), np.float32)
  rewards = rng.normal(size=(batch, length)).astype(np.float32)
  rewards[:, -1] = 0.0  # The last row's step is the next sequence's.
  masks[1, 5:] = 0.0
  discounts[1, 4:] = 0.0
  rewards[1, 5:] = 0.0
  masks[2, 8:] = 0.0
  discounts[2, 8:] = 0.0
  rewards[2, 8:] = 0.0
  q = rng.normal(size=(batch, length, actions)).astype(np.float32)
  q_selector = rng.normal(size=q.shape).astype(np.float32)
  q_evaluator = rng.normal(size=q.shape).astype(np.float32)
  q_evaluator[1, 6:] = q_evaluator[2, 9:] = 0.0  # Padding: no values.
  taken = rng.integers(actions, size=(batch, length)).astype(np.int32)
  return q, q_selector, q_evaluator, taken, rewards, discounts, masks


@pytest.mark.parametrize('n', [1, 3, 5])
def test_n_step_double_q_targets_match_a_slow_reference(n):
  rng = np.random.default_rng(n)
  batch = _sequences(rng)
  gamma = 0.97
  errors = losses.td_errors(*[tf.constant(x) for x in batch], n_step=n,
                            discount=gamma, epsilon=EPSILON).numpy()
  expected = _reference_td_errors(*batch, n=n, gamma=gamma)
  masks = batch[-1]
  steps = masks[:, :-1] == 1
  np.testing.assert_allclose(errors[steps], expected[steps], rtol=1e-4,
                             atol=1e-4)
  # The terminated sequence: its last step (row 4) has the reward alone as
  # its target; the truncated one's (row 7) bootstraps from row 8, its
  # final observation.
  _, q_selector, q_evaluator, taken, rewards, _, _ = batch
  assert errors[1, 4] == pytest.approx(
      _h(rewards[1, 4]) - batch[0][1, 4, taken[1, 4]], abs=1e-5)
  best = int(np.argmax(q_selector[2, 8]))
  assert errors[2, 7] == pytest.approx(
      _h(rewards[2, 7] + gamma * _h_inverse(q_evaluator[2, 8, best]))
      - batch[0][2, 7, taken[2, 7]], abs=1e-4)


def test_a_target_worked_by_hand():
  # One sequence of 4 rows, n = 2, gamma = 0.5: from row 0 the window takes
  # rewards 1 and 2 and bootstraps at row 2, where the selector picks
  # action 1 and the evaluator values it h(10): G = 1 + 0.5 * 2 + 0.25 * 10.
  q = np.zeros((1, 4, 2), np.float32)
  q[0, 0] = [0.3, 0.7]
  selector = np.zeros_like(q)
  selector[0, 2] = [0.0, 1.0]
  evaluator = np.zeros_like(q)
  evaluator[0, 2] = [_h(100.0), _h(10.0)]
  errors = losses.td_errors(
      tf.constant(q), tf.constant(selector), tf.constant(evaluator),
      tf.constant([[1, 0, 0, 0]]), tf.constant([[1.0, 2.0, 4.0, 0.0]]),
      tf.ones((1, 4)), tf.ones((1, 4)), n_step=2, discount=0.5,
      epsilon=EPSILON).numpy()
  assert errors[0, 0] == pytest.approx(_h(4.5) - 0.7, abs=1e-5)


def test_burn_in_rows_are_left_out_but_for_an_episodes_first_sequence():
  masks = np.ones((3, 7), np.float32)
  masks[2, 5:] = 0.0  # Its episode ended: final observation at row 5.
  rows = losses.learnt_rows(tf.constant(masks), tf.constant([0.0, 1.0, 0.0]),
                            burn_in=2).numpy()
  np.testing.assert_array_equal(rows, [[0, 0, 1, 1, 1, 1],
                                       [1, 1, 1, 1, 1, 1],
                                       [0, 0, 1, 1, 1, 0]])
  errors = tf.constant([[9.0, 9.0, 1.0, 2.0, 0.0, 1.0]] * 3)
  weights = tf.constant([1.0, 0.5, 2.0])
  loss = float(losses.sequence_loss(errors, tf.constant(rows), weights))
  # 0.5 * (1 + 4 + 0 + 1) = 3; with the burn-in 0.5 * 168 = 84; 0.5 * 5.
  assert loss == pytest.approx((1.0 * 3.0 + 0.5 * 84.0 + 2.0 * 2.5) / 3)


def test_no_gradient_reaches_the_burn_in_but_of_an_episodes_start():
  tf.random.set_seed(0)
  network = networks.R2D2Network(tf.keras.layers.Dense(8), num_actions=2,
                                 lstm_size=6, dueling_hidden_size=5)
  observations = tf.random.normal((2, 7, 3))
  state = tf.nest.map_structure(lambda x: tf.random.normal(x.shape),
                                network.initial_state(2))
  episode_start = tf.constant([0.0, 1.0])
  with tf.GradientTape() as tape:
    tape.watch(observations)
    q = network.unroll(observations, state, burn_in=3,
                       episode_start=episode_start)
    rows = losses.learnt_rows(tf.ones((2, 7)), episode_start, 3)
    loss = tf.reduce_sum(tf.reduce_sum(q[:, :-1], -1) * rows)
  gradient = np.abs(tape.gradient(loss, observations).numpy()).sum(-1)
  assert np.all(gradient[0, :3] == 0.0) and np.all(gradient[0, 3:6] > 0)
  assert np.all(gradient[1, :6] > 0)
  # The unroll is the step-by-step network's.
  stepped, step_state = [], state
  for t in range(7):
    out, step_state = network(observations[:, t], step_state)
    stepped.append(out)
  np.testing.assert_allclose(q.numpy(), tf.stack(stepped, 1).numpy(),
                             rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize('errors, rows, eta, priority', [
    # max 3, mean (1 + 3 + 2) / 3 = 2: 0.9 * 3 + 0.1 * 2.
    ([1.0, -3.0, 2.0, 7.0], [1, 1, 1, 0], 0.9, 2.9),
    # The burn-in's -5 left out: max 1, mean 1.
    ([-5.0, 1.0, -1.0], [0, 1, 1], 0.9, 1.0),
    # eta 0.5: 0.5 * 4 + 0.5 * (4 + 0 + 2) / 3 = 3.
    ([-4.0, 0.0, 2.0], [1, 1, 1], 0.5, 3.0),
    # eta 0: the mean alone, Ape-X's mean |delta|.
    ([2.0, -6.0], [1, 1], 0.0, 4.0),
    # No learnt row: never sampled.
    ([3.0, 3.0], [0, 0], 0.9, 0.0),
])
def test_the_priority_mix_on_hand_worked_numbers(errors, rows, eta, priority):
  result = priorities.sequence_priorities(
      tf.constant([errors]), tf.constant([rows], tf.float32), eta).numpy()
  assert result[0] == pytest.approx(priority, abs=1e-6)


def test_the_actors_priorities_are_the_learners_formula_on_their_values():
  # The adder's function on the actor's values: the TD errors of
  # `td_errors` with those values in all three roles, over `learnt_rows`,
  # mixed by `sequence_priorities`, here checked with the numpy reference.
  config = R2D2Config(n_step=3, discount=0.9, burn_in_length=3,
                      trace_length=8, sequence_period=4, priority_eta=0.9)
  rng = np.random.default_rng(5)
  q, _, _, taken, rewards, discounts, masks = _sequences(rng, length=12)
  episode_start = np.zeros((4, 12), np.float32)
  episode_start[3, 0] = 1.0
  initial = priorities.initial_priorities_fn(config, num_actions=3)(
      values={priorities.Q_VALUES: q, priorities.EPISODE_START: episode_start},
      actions=taken, rewards=rewards, discounts=discounts, masks=masks)
  errors = _reference_td_errors(q, q, q, taken, rewards, discounts, masks,
                                n=3, gamma=0.9)
  for b in range(4):
    learnt = [t for t in range(11) if masks[b, t] == 1 and
              (t >= 3 or episode_start[b, 0] == 1)]
    magnitudes = np.abs(errors[b, learnt])
    assert initial[b] == pytest.approx(
        0.9 * magnitudes.max() + 0.1 * magnitudes.mean(), rel=1e-4)
