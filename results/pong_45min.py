"""The opening of results/pong_45min.md, made from results/pong_45min.json:
the `atari_small` preset beside its starting point on Pong, 45 minutes, 3
seeds each, with the tests of their difference. The rest of the page (the
single runs of variants, what the runs show) is written by hand; the JSON
holds every run's figures. `results/pages.py` writes the opening anew.
"""

import math
from typing import Dict, List, Sequence, Tuple

import numpy as np
from scipy import stats

from results import spread

NAME = 'pong_45min'
BEGIN = '<!-- opening: made by python -m results.pages pong_45min -->'
END = '<!-- end of the opening -->'

# The runs of the three-seed comparison (one commit, one after another on a
# quiet machine): each group's label and the prefix of its runs' keys.
GROUPS = (('`atari_small`', 'atari_small_seed'),
          ('starting point', 'issue_start_onednn'))
# Each final policy's two evaluations: the key of its figures in a run, and
# what it was.
EVALUATIONS = (('greedy_return', 'greedy, 10 episodes'),
               ('epsilon_0.001_return', 'epsilon 0.001, 30 episodes'))


def group_values(data, prefix: str, key: str) -> Dict[int, float]:
  """{seed: mean return} of the runs whose key starts with `prefix`, from
  their evaluation `key`."""
  return {run['seed']: run[key]['mean']
          for name, run in sorted(data['runs'].items())
          if name.startswith(prefix)}


def evaluations(data) -> List[Tuple[str, str, List[Dict[int, float]]]]:
  """For each of EVALUATIONS: (its key, what it was, each group's {seed:
  mean return} in the order of GROUPS)."""
  return [(key, evaluation,
           [group_values(data, prefix, key) for _, prefix in GROUPS])
          for key, evaluation in EVALUATIONS]


def tests(preset: Sequence[float],
          start: Sequence[float]) -> Tuple[float, float, float]:
  """The difference of the means (preset minus starting point), Welch's
  t-test's two-sided p and the one-sided exact Mann-Whitney U test's p
  (preset greater)."""
  welch = stats.ttest_ind(preset, start, equal_var=False)
  ranks = stats.mannwhitneyu(preset, start, alternative='greater',
                             method='exact')
  return (float(np.mean(preset) - np.mean(start)), float(welch.pvalue),
          float(ranks.pvalue))


def compare(preset: Sequence[float], start: Sequence[float]
            ) -> Tuple[float, float, float, float, float, str]:
  """(difference of the means, low, high, Welch's p, Mann-Whitney p, the
  verdict) of the preset's seeds against the starting point's: the interval
  is `spread.difference_interval`'s, the verdict `spread.verdict`'s."""
  difference, welch, ranks = tests(preset, start)
  _, low, high = spread.difference_interval(preset, start)
  said = spread.verdict(GROUPS[0][0], f'the {GROUPS[1][0]}', low, high, welch,
                        seeds=min(len(preset), len(start)))
  return difference, low, high, welch, ranks, said


def _comparison(evaluation: str, preset: Sequence[float],
                start: Sequence[float]) -> str:
  difference, low, high, welch, ranks, said = compare(preset, start)
  apart = (': every run of the preset above every run of the starting point'
           if min(preset) > max(start) else '')
  return (f'- {evaluation}: {difference:.1f} '
          f'{spread.interval_text(low, high)} (Welch\'s t-test, two-sided p '
          f'= {welch:.2f}; Mann-Whitney U test, one-sided exact p = '
          f'{ranks:.2f}{apart}): {said}')


def _where(data) -> str:
  """Where the compared runs ran: their commits and machines."""
  runs = [run for name, run in data['runs'].items()
          if any(name.startswith(prefix) for _, prefix in GROUPS)]
  commits = sorted({run['commit'] for run in runs})
  machines = sorted({run['machine'] for run in runs})
  return (f'on commit{"s" if len(commits) > 1 else ""} {", ".join(commits)}, '
          f'one run after another on a {" or ".join(machines)} machine')


def opening(data) -> List[str]:
  """The answer: each group's final returns over seeds, and the tests."""
  minutes = data['budget_seconds'] / 60
  values, comparisons = {}, []
  for _, evaluation, groups in evaluations(data):
    for (label, _), by_seed in zip(GROUPS, groups):
      values[f'{label}, {evaluation}'] = by_seed
    comparisons.append(_comparison(
        evaluation, *[list(by_seed.values()) for by_seed in groups]))
  sizes = [len(by_seed) for by_seed in groups]
  return [
      f'**After {minutes:.0f} minutes ({data["budget_seconds"]:,} s) on 2 '
      f'cores, {spread.seeds_phrase(max(sizes), "a setting")}**, '
      f'{_where(data)}. Each final policy '
      'was evaluated twice, each episode from up to 30 random no-op starts '
      '(`--atari_evaluation=noops`): greedy over 10 episodes '
      '(`programs/evaluate.py --episodes=10 --atari_evaluation=noops`) and '
      'over 30 episodes at the evaluator\'s epsilon (`--episodes=30 '
      '--epsilon=0.001 --seed=1 --atari_evaluation=noops`). '
      f'Its mean return{spread.how_stated(max(sizes))}:', '',
      *spread.seed_table('setting, evaluation', 'mean return', values), '',
      'The preset\'s IQM minus the starting point\'s, its 95% interval '
      '(each setting\'s seeds resampled on their own) and two tests of the '
      f'difference (with {sizes[0]} runs against {sizes[1]}, the smallest p '
      f'the rank test can give is {1 / math.comb(sum(sizes), sizes[0]):.2f}). '
      f'{spread.how_compared(min(sizes))}', '', *comparisons, '',
      f'Every run\'s figures: [{NAME}.json]({NAME}.json).']


def with_current_opening(text: str, data) -> str:
  """`text` (the page) with the opening between BEGIN and END made anew
  from `data` (the page's JSON)."""
  head, rest = text.split(BEGIN, 1)
  _, tail = rest.split(END, 1)
  return '\n'.join([f'{head}{BEGIN}', *opening(data), f'{END}{tail}'])
