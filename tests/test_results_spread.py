"""results/spread.py, the statistics of every results page, against
expectations worked out without it: interquartile means by hand, what a
stratified bootstrap can and cannot resample, intervals that hold their
estimate and narrow with more seeds, and the rule that calls a setting
ahead. The bootstrap draws from a fixed seed, so these are deterministic."""

import numpy as np
import pytest

from results import minatar
from results import spread


def test_iqm_is_the_mean_of_the_middle_half():
  # 8 values: a quarter (2) cut from each end leaves 3, 4, 5, 6.
  assert spread.iqm([100.0, 1.0, 7.0, 3.0, 2.0, 6.0, 5.0, 4.0]) == 4.5
  # Over runs x tasks, every value of every task counts: the same 8 values.
  assert spread.iqm([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 100.0]]) == 4.5
  # 3 values: a quarter of 3, rounded down, is none: the mean.
  assert spread.iqm([1.0, 2.0, 9.0]) == pytest.approx(4.0)


def test_the_interval_holds_the_iqm_and_is_made_the_same_each_time():
  values = [3.0, 7.0, 4.0, 9.0, 5.0]
  np.random.seed(123)
  expected_draw = np.random.random()
  np.random.seed(123)
  # Made anew, not from the cache.
  first = spread._iqm_interval.__wrapped__(spread._key(values))
  # The caller's global NumPy generator is left as it was.
  assert np.random.random() == expected_draw
  again = spread._iqm_interval.__wrapped__(spread._key(values))
  assert first == again
  value, low, high = first
  assert value == pytest.approx(spread.iqm(values))
  assert min(values) <= low < value < high <= max(values)


def test_three_seeds_give_the_range_of_their_values():
  # Each resample of all three seeds equal to the lowest (or the highest)
  # has probability 1/27 > 2.5%, so the percentile interval's ends are the
  # lowest and the highest value.
  assert spread.iqm_interval([412.6, 252.9, 306.4])[1:] == (
      pytest.approx(252.9), pytest.approx(412.6))


def test_the_interval_narrows_with_more_seeds():
  draws = np.random.default_rng(7).normal(10.0, 3.0, size=80)
  widths = []
  for n in (5, 20, 80):
    _, low, high = spread.iqm_interval(draws[:n])
    widths.append(high - low)
  assert widths[0] > widths[1] > widths[2] > 0


def test_the_bootstrap_resamples_seeds_within_each_task():
  # One seed per task: a stratified bootstrap keeps each task's one value,
  # so every resample is the data and the interval is a point, although the
  # tasks differ by 1,000 (resampling across tasks would not give one).
  value, low, high = spread.iqm_interval([[1.0, 1000.0, 5.0]])
  assert low == high == value == pytest.approx(spread.iqm([1.0, 1000.0, 5.0]))
  # Two seeds per task, the tasks on different scales: the interval stays
  # between the resamples that take every task's lower or every task's
  # higher seed.
  scores = [[1.0, 100.0], [2.0, 300.0]]
  value, low, high = spread.iqm_interval(scores)
  assert spread.iqm([[1.0, 100.0]]) <= low <= value <= high <= spread.iqm(
      [[2.0, 300.0]])


def test_the_difference_of_separated_settings_excludes_zero():
  ahead, behind = [10.0, 11.0, 12.0], [1.0, 2.0, 3.0]
  difference, low, high = spread.difference_interval(ahead, behind)
  assert difference == pytest.approx(9.0)
  # Every resample of `ahead` is above every resample of `behind`.
  assert 7.0 <= low < difference < high <= 11.0
  difference, low, high = spread.difference_interval(behind, behind)
  assert difference == 0.0 and low < 0.0 < high


def test_ahead_needs_the_interval_and_welchs_test():
  assert spread.verdict('A', 'B', 1.0, 5.0, 0.01) == 'A ahead of B'
  assert spread.verdict('A', 'B', -5.0, -1.0, 0.01) == 'A behind B'
  assert spread.verdict('A', 'B', -1.0, 5.0, 0.01).startswith(
      'no difference shown (the interval holds 0')
  # An interval that excludes 0 at p = 0.06 (3 seeds: a percentile
  # bootstrap alone is too narrow) shows no difference.
  assert spread.verdict('A', 'B', 1.0, 5.0, 0.06).startswith(
      'no difference shown (the interval excludes 0')
  assert spread.verdict('A', 'B', 1.0, 5.0, float('nan')).startswith(
      'no difference shown')


def test_a_difference_of_iqms_by_its_interval_alone():
  # A difference of IQMs over games (no test beside it): ahead or behind
  # only where the whole interval lies on one side of 0, with 3 seeds.
  assert spread.difference_side('A', 0.1, 0.5, 3) == 'A ahead'
  assert spread.difference_side('A', -0.5, -0.1, 3) == 'A behind'
  assert spread.difference_side('A', -0.1, 0.5, 3) == 'no difference shown'
  assert spread.difference_side('A', 0.1, 0.5, 2) == (
      'no verdict from 2 seeds (one needs 3 at least)')


def test_welchs_p_from_its_formula():
  a, b = [10.0, 11.0, 12.0], [1.0, 2.0, 6.0]
  va, vb = np.var(a, ddof=1) / 3, np.var(b, ddof=1) / 3
  t = (np.mean(a) - np.mean(b)) / np.sqrt(va + vb)
  df = (va + vb)**2 / (va**2 / 2 + vb**2 / 2)
  from scipy import stats  # pylint: disable=g-import-not-at-top
  assert spread.welch_p(a, b) == pytest.approx(2 * stats.t.sf(t, df))


def test_one_sample_p_from_its_formula():
  values, reference = [10.0, 11.0, 15.0], 9.2
  t = (np.mean(values) - reference) / (np.std(values, ddof=1) / np.sqrt(3))
  from scipy import stats  # pylint: disable=g-import-not-at-top
  assert spread.one_sample_p(values, reference) == pytest.approx(
      2 * stats.t.sf(t, 2))
  # The verdict names the test whose p it used.
  assert spread.verdict('A', 'B', 1.0, 5.0, 0.2, test='the t-test\'s p') == (
      'no difference shown (the interval excludes 0, the t-test\'s p does '
      'not fall below 0.05)')


def test_a_median_over_the_seeds_that_reached_says_how_many():
  assert spread.reached([None, 2.0, 4.0]) == (3.0, 2)
  assert spread.reached_text([None, 2.0, 4.0], '{:.1f}') == '3.0 (2/3)'
  assert spread.reached_text([None, None], '{:.1f}') == 'not reached (0/2)'


def _record(seed: int, final_mean: float):
  return dict(seed=seed, final_mean=final_mean, final_std=1.0,
              final_episodes=30, last_round=None, best_round=None,
              rounds=[], wall_clock_minutes=20.0, learner_updates=1,
              actor_frames_per_second=1.0, learner_updates_per_second=1.0)


def test_minatar_gives_the_iqm_over_games_and_seeds_once_it_has_seeds():
  reference = {game: (2.0, 4.0) for game in ('a', 'b', 'c', 'd', 'e')}
  returns = {'a': [1, 2, 3], 'b': [4, 5, 6], 'c': [7, 8, 9],
             'd': [10, 11, 12], 'e': [13, 14, 30]}
  data = dict(frames=1_000_000, seeds=[0, 1, 2], final_episodes=30,
              final_epsilon=0.001, command='x', notes='',
              reference=reference,
              games={game: [_record(seed, float(value))
                            for seed, value in enumerate(values)]
                     for game, values in returns.items()})
  # 15 ratios (return / 2): 3 cut from each end leaves 4..12 over 2.
  expected = np.mean(np.arange(4, 13)) / 2
  value, low, high, seeds = minatar.iqm_over_games(data['games'], reference)
  assert seeds == 3
  assert value == pytest.approx(expected)
  assert low < value < high
  page = minatar.render(data)
  assert '**Over the 5 games and 3 seeds:** the interquartile mean' in page
  assert f'is {expected:.2f} [{low:.2f}, {high:.2f}]' in page
  assert '| game | Ape-X DQN, final policy | IQM, 95% CI |' in page
