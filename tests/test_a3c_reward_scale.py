"""--normalize_rewards: rewards over the running standard deviation of the
discounted return, against numpy's variance of every return so far."""

import numpy as np

from agents.a3c import reward_scale


def test_rewards_are_divided_by_the_returns_standard_deviation_so_far():
  rng = np.random.default_rng(0)
  gamma = 0.9
  scale = reward_scale.ReturnScale(gamma)
  returns, running = [], 0.0
  for step in range(400):
    reward = float(rng.normal(-1.0, 2.0))
    last = step % 37 == 36  # Episodes of 37 steps.
    running = gamma * running + reward
    returns.append(running)
    expected = (reward / np.sqrt(np.var(returns) + 1e-8) if len(returns) > 1
                else reward)
    np.testing.assert_allclose(scale.scale(reward, last), expected,
                               rtol=1e-9)
    if last:
      running = 0.0


def test_returns_of_a_task_paying_every_step_come_out_near_one():
  # Acrobot-like: -1 a step, episodes of 500 steps, gamma 0.99: returns
  # approach -100, their scaled counterparts stay within a few units.
  gamma = 0.99
  scale = reward_scale.ReturnScale(gamma)
  scaled = [scale.scale(-1.0, step % 500 == 499) for step in range(5_000)]
  late = scaled[-500:]  # The last episode, once the statistics settled.
  scaled_return = sum(r * gamma**i for i, r in enumerate(late))
  raw_return = sum(-1.0 * gamma**i for i in range(500))
  assert raw_return < -99
  assert -5 < scaled_return < -1, scaled_return


def test_the_advantage_scale_is_one_over_the_corrected_moving_root_mean_square():
  # Worked by hand, decay 0.5: after 4, the average 0.5 * 4 / (1 - 0.5) = 4;
  # after 16 more, (0.25 * 4 + 0.5 * 16) / (1 - 0.25) = 12.
  scale = reward_scale.AdvantageScale(decay=0.5, epsilon=0.0)
  assert scale.factor == 1.0
  scale.observe(4.0)
  assert scale.factor == 0.5
  scale.observe(16.0)
  np.testing.assert_allclose(scale.factor, 1 / np.sqrt(12.0), rtol=1e-12)
  # A constant mean square is its own average from the first rollout on.
  steady = reward_scale.AdvantageScale()
  for _ in range(3):
    steady.observe(0.0025)
    np.testing.assert_allclose(steady.factor, 20.0, rtol=1e-5)  # epsilon


def test_the_advantage_offset_is_the_running_mean_step_by_step():
  # Worked by hand, decay 0.5: a rollout of 3 steps summing to 3 gives a mean
  # of 1; then one step of -2: (0.5 * 3 - 2) / (0.5 * 3 + 1) = -0.5 / 2.5.
  mean = reward_scale.AdvantageMean(decay=0.5)
  assert mean.offset == 0.0
  mean.observe(3.0, 3)
  assert mean.offset == 1.0
  mean.observe(-2.0, 1)
  np.testing.assert_allclose(mean.offset, -0.2, rtol=1e-12)
  # Weighted by steps: a short rollout that ends an episode counts for its
  # steps, not as much as a whole rollout. Four rollouts of 5 steps at +0.1
  # and one of 1 step at -2 average 0 step by step (decay 1: no aging),
  # where the mean of the rollouts' means would be (0.4 - 2) / 5 = -0.32.
  even = reward_scale.AdvantageMean(decay=1.0)
  for _ in range(4):
    even.observe(0.5, 5)
  even.observe(-2.0, 1)
  np.testing.assert_allclose(even.offset, 0.0, atol=1e-12)
