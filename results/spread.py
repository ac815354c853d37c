"""A figure over seeds, as every results page and the README's table state
it, following Agarwal et al., "Deep RL at the Edge of the Statistical
Precipice" (NeurIPS 2021), with their library `rliable`:

- each seed's value, their mean and sample standard deviation (n - 1: the
  seeds are a sample of the runs one could make);
- the interquartile mean (IQM: the mean of the middle half of the values,
  over every seed of every game or task) with a 95% confidence interval
  from a stratified bootstrap (seeds resampled within each game or task);
- a comparison: the difference of two settings' IQMs with its 95%
  interval, each setting's seeds resampled on their own, and Welch's
  t-test of their means; one setting is "ahead" of another only where that
  interval excludes 0 and the test's p is below 0.05 (a percentile
  bootstrap of 3 seeds alone tends to be too narrow); against a published
  figure without its seeds, the seeds' IQM interval less that figure and
  a one-sample t-test, by the same rule;
- a median over the seeds that reached a threshold, with how many did.

With one seed there is no spread over seeds, and the text says so instead
of giving one. The bootstrap draws from a fixed seed (`BOOTSTRAP_SEED`), so
a page is the same each time it is made.
"""

import contextlib
import functools
import math
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
from rliable import library as rly
from rliable import metrics
from scipy import stats

# Bootstrap resamples of each interval, and the seed they are drawn with.
# rliable's resampling draws from NumPy's global generator whatever its
# `random_state` (library.py: `np.random.choice`), so that generator is
# seeded for the draw and then put back as it was.
BOOTSTRAP_REPS = 2000
BOOTSTRAP_SEED = 0
CONFIDENCE = 0.95


def sample_sd(values: Sequence[float]) -> Optional[float]:
  """The sample standard deviation of `values` (ddof=1); None for one."""
  if len(values) < 2:
    return None
  return float(np.std(values, ddof=1))


def mean_and_sd(values: Sequence[float], form: str = '{:.1f}') -> str:
  """'mean ± sample sd' of `values`, or the value alone for one seed."""
  mean = form.format(float(np.mean(values)))
  sd = sample_sd(values)
  return mean if sd is None else f'{mean} ± {form.format(sd)}'


def _runs_by_tasks(scores) -> np.ndarray:
  """`scores` as rliable takes them: runs x tasks (one task: a column)."""
  array = np.asarray(scores, dtype=np.float64)
  return array[:, None] if array.ndim == 1 else array


def _key(scores) -> Tuple:
  return tuple(map(tuple, _runs_by_tasks(scores).tolist()))


def iqm(scores) -> float:
  """The interquartile mean over every run of every task: the mean of what
  is left after a quarter of the values (rounded down) is cut from each end
  (`scipy.stats.trim_mean(..., 0.25)`, as rliable's `aggregate_iqm`)."""
  return float(metrics.aggregate_iqm(_runs_by_tasks(scores)))


@contextlib.contextmanager
def _seeded_numpy():
  state = np.random.get_state()
  np.random.seed(BOOTSTRAP_SEED)
  try:
    yield
  finally:
    np.random.set_state(state)


@functools.lru_cache(maxsize=None)
def _iqm_interval(key: Tuple) -> Tuple[float, float, float]:
  scores = np.array(key)
  with _seeded_numpy():
    points, intervals = rly.get_interval_estimates(
        {'x': scores}, lambda x: np.array([metrics.aggregate_iqm(x)]),
        reps=BOOTSTRAP_REPS, confidence_interval_size=CONFIDENCE)
  low, high = intervals['x'][:, 0]
  return float(points['x'][0]), float(low), float(high)


def iqm_interval(scores) -> Tuple[float, float, float]:
  """(IQM, low, high): the IQM of `scores` (runs x tasks, or one task's
  runs) and its 95% stratified-bootstrap confidence interval (percentile
  method): each resample draws as many runs as there are, with
  replacement, within each task."""
  return _iqm_interval(_key(scores))


@functools.lru_cache(maxsize=None)
def _difference_interval(key_a: Tuple,
                         key_b: Tuple) -> Tuple[float, float, float]:
  a, b = np.array(key_a), np.array(key_b)
  difference = lambda x, y: np.array(
      [metrics.aggregate_iqm(x) - metrics.aggregate_iqm(y)])
  with _seeded_numpy():
    points, intervals = rly.get_interval_estimates(
        {'a-b': [a, b]}, difference, reps=BOOTSTRAP_REPS,
        confidence_interval_size=CONFIDENCE)
  low, high = intervals['a-b'][:, 0]
  return float(points['a-b'][0]), float(low), float(high)


def difference_interval(a, b) -> Tuple[float, float, float]:
  """(IQM(a) - IQM(b), low, high): its 95% stratified-bootstrap interval,
  the runs of `a` and of `b` (runs x tasks, the same tasks) resampled
  independently within each task."""
  return _difference_interval(_key(a), _key(b))


def interval_text(low: float, high: float, form: str = '{:.1f}') -> str:
  return f'[{form.format(low)}, {form.format(high)}]'


def welch_p(a: Sequence[float], b: Sequence[float]) -> float:
  """Welch's t-test of the means of `a` and `b`, two-sided p (NaN where
  neither varies)."""
  with np.errstate(all='ignore'):
    return float(stats.ttest_ind(a, b, equal_var=False).pvalue)


def one_sample_p(values: Sequence[float], reference: float) -> float:
  """The one-sample t-test of the mean of `values` against a fixed
  `reference` (a published figure without its seeds), two-sided p (NaN
  where the values do not vary)."""
  with np.errstate(all='ignore'):
    return float(stats.ttest_1samp(values, reference).pvalue)


# The fewest seeds a verdict is drawn from: of 2 seeds, a percentile
# bootstrap's interval is their range, and a t-test has 1 degree of freedom.
VERDICT_SEEDS = 3


def too_few_seeds(seeds: Optional[int]) -> Optional[str]:
  """Why no verdict is drawn from `seeds` seeds (None: not counted, or
  enough)."""
  if seeds is not None and seeds < VERDICT_SEEDS:
    return (f'no verdict from {seeds} seeds (one needs {VERDICT_SEEDS} at '
            'least)')
  return None


def interval_side(low: float, high: float, point: float) -> str:
  """Where an interval [low, high] lies against `point`: 'above' (all of
  it, `point` included at its low end), 'below', or 'holds'."""
  if low >= point:
    return 'above'
  if high < point:
    return 'below'
  return 'holds'


def difference_side(label: str, low: float, high: float,
                    seeds: int) -> str:
  """What the interval [low, high] of `label`'s IQM less another's, over
  `seeds` seeds, supports: `label` ahead or behind only where the whole
  interval lies on one side of 0 (`interval_side`) and the seeds are
  enough."""
  return too_few_seeds(seeds) or {
      'above': f'{label} ahead', 'below': f'{label} behind',
      'holds': 'no difference shown'}[interval_side(low, high, 0.0)]


def against_goal(low: float, high: float, goal: float, seeds: int) -> str:
  """What an IQM's interval [low, high] over `seeds` seeds says of a goal:
  met or not only where the whole interval lies on one side of it."""
  side = too_few_seeds(seeds) or {
      'above': 'met: the whole interval is at or above it',
      'below': 'not met: the whole interval is below it',
      'holds': 'not settled: the interval holds it'}[
          interval_side(low, high, goal)]
  return f'{side} ({low:.2f} to {high:.2f})'


def verdict(label: str, other: str, low: float, high: float, p: float,
            test: str = 'Welch\'s p', seeds: Optional[int] = None) -> str:
  """What the interval of `label`'s IQM minus `other`'s, with the p of
  `test` (Welch's t-test; a one-sample t-test against a published figure),
  supports: ahead or behind only where the interval excludes 0 and p is
  below 0.05, and `seeds` (the fewer side's, where given) is at least
  `VERDICT_SEEDS`."""
  too_few = too_few_seeds(seeds)
  if too_few:
    return too_few
  if low <= 0 <= high:
    return 'no difference shown (the interval holds 0)'
  if not p < 0.05:
    return (f'no difference shown (the interval excludes 0, {test} does '
            'not fall below 0.05)')
  return f'{label} {"ahead of" if low > 0 else "behind"} {other}'


def compared(a: Sequence[float],
             b: Sequence[float]) -> Tuple[float, float, float, float]:
  """(IQM(a) - IQM(b), low, high, Welch's p) of one task's seeds `a`
  against `b` (`difference_interval`, `welch_p`)."""
  return (*difference_interval(a, b), welch_p(a, b))


def comparison(label: str, other: str, a: Sequence[float],
               b: Sequence[float], form: str = '{:.1f}') -> str:
  """'<difference> [low, high], Welch's p = <p>: <verdict>' of one task's
  seeds, `label`'s `a` against `other`'s `b` (`compared`, `verdict`)."""
  difference, low, high, p = compared(a, b)
  said = verdict(label, other, low, high, p, seeds=min(len(a), len(b)))
  return (f'{form.format(difference)} {interval_text(low, high, form)}, '
          f'Welch\'s p = {p:.2f}: {said}')


def how_compared(count: int) -> str:
  """How `comparison`s are made, for runs of `count` seeds each."""
  cut = int(0.25 * count)
  trimmed = (f'with {count} seeds the IQM cuts none: it is their mean'
             if cut == 0 else f'the IQM leaves out the {cut} highest and '
             f'{cut} lowest of {count} seeds')
  return (
      'The intervals: a stratified bootstrap (`rliable`, '
      f'{BOOTSTRAP_REPS:,} resamples, percentile 95% intervals); {trimmed}. '
      f'A setting of {count} seeds has only '
      f'{math.comb(2 * count - 1, count)} distinct resamples, so the '
      'intervals are rough, and a percentile interval from so few seeds '
      'tends to be too narrow: a setting is called ahead or behind only '
      'where the interval of its difference excludes 0 and Welch\'s t-test '
      'of the means gives a two-sided p below 0.05.')


def seeds_phrase(count: int, each: str) -> str:
  """How many seeds `each` setting has ('3 seeds a setting'), said so that
  one seed is not taken for a spread."""
  if count == 1:
    return f'one seed {each}, so no spread over seeds'
  return f'{count} seeds {each}'


def how_stated(count: int) -> str:
  """What `seed_table` gives for settings of `count` seeds, as a clause
  to end a sentence with ('; over seeds, ...'); nothing for one seed."""
  if count == 1:
    return ''
  return ('; over seeds, the mean ± the sample standard deviation, the 95% '
          'confidence interval of their interquartile mean (IQM), then each '
          'seed\'s value')


def reached(values: Sequence[Optional[float]]) -> Tuple[Optional[float], int]:
  """(median over the seeds that reached a threshold, how many did):
  `values` holds each seed's figure, None where it never reached it."""
  done = [value for value in values if value is not None]
  return (float(np.median(done)) if done else None), len(done)


def reached_text(values: Sequence[Optional[float]], form: str) -> str:
  """'<median> (k/n)': the median over the k of n seeds that reached the
  threshold, or 'not reached' (0/n)."""
  median, count = reached(values)
  if median is None:
    return f'not reached (0/{len(values)})'
  return f'{form.format(median)} ({count}/{len(values)})'


def _interval_cell(values: Sequence[float], form: str) -> str:
  if len(values) < 2:
    return '-'
  return interval_text(*iqm_interval(values)[1:], form)


def seed_table(label: str, figure: str, values: Dict[str, Dict[int, float]],
               extra: Optional[Dict[str, List[str]]] = None,
               form: str = '{:.1f}') -> List[str]:
  """A markdown table, one row a setting: the figure over its seeds (mean ±
  sample sd, `mean_and_sd`), its IQM's 95% interval (`iqm_interval`), then
  each seed's value in a column of its own ('-' where a setting lacks that
  seed); when every setting has the same one seed, its value alone.
  `values`: setting -> {seed: value}; `extra`: column title -> one cell a
  setting, after the seeds."""
  seeds = sorted({seed for by_seed in values.values() for seed in by_seed})
  extra = extra or {}
  if len(seeds) == 1:
    columns = [f'{figure} (seed {seeds[0]})']
    cells = lambda by_seed: [form.format(by_seed[seeds[0]])]
  else:
    columns = [figure, 'IQM, 95% CI', *[f'seed {seed}' for seed in seeds]]
    cells = lambda by_seed: [
        mean_and_sd(list(by_seed.values()), form),
        _interval_cell(list(by_seed.values()), form),
        *[form.format(by_seed[seed]) if seed in by_seed else '-'
          for seed in seeds]]
  lines = ['| ' + ' | '.join([label, *columns, *extra]) + ' |',
           '|' + '---|' * (1 + len(columns) + len(extra))]
  for index, (setting, by_seed) in enumerate(values.items()):
    row = [setting, *cells(by_seed), *[column[index]
                                       for column in extra.values()]]
    lines.append('| ' + ' | '.join(row) + ' |')
  return lines
