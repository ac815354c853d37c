"""The results pages say what their committed data says: each page is what
its renderer makes of its JSON (so page and data cannot drift apart), and
the spread a page opens with is the seeds' sample standard deviation
(n - 1), worked out here from the JSON's per-seed values; one seed is
said to be one, with no spread. A comparison calls a setting ahead or
behind only where its interval excludes 0 and Welch's p (worked out here
from its formula) is below 0.05, and the README's table says no more than
the pages. Reads only committed files."""

import itertools
import json
import math
import os
import re
from typing import Dict, List

import numpy as np
import pytest
from scipy import stats

from results import a3c_diagnosis
from results import a3c_minatar
from results import chaos
from results import pages
from results import pong_45min
from results import run

RESULTS = os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), 'results')
NAMES = pages.names()
ANALYSES = [name for name in NAMES
            if name in run.ANALYSES and 'page' not in run.ANALYSES[name]]
# Pages made by their own renderers: runs under faults (results/chaos.py),
# A3C's logged collapses (results/a3c_diagnosis.py) and A3C beside the
# MinAtar paper, from a3c_default's data (results/a3c_minatar.py).
FAULT_PAGES = {chaos.ANALYSIS, a3c_diagnosis.ANALYSIS, a3c_minatar.ANALYSIS}
LONG_RUNS = [name for name in NAMES
             if name not in run.ANALYSES and name != pong_45min.NAME and
             name not in FAULT_PAGES]


def _text(name: str, ext: str = 'md') -> str:
  with open(os.path.join(RESULTS, f'{name}.{ext}')) as f:
    return f.read()


def _data(name: str):
  return json.loads(_text(name, 'json'))


def _opening_table(text: str) -> List[Dict[str, str]]:
  """The rows of the page's first table, as {column title: cell}."""
  rows = [line for line in text.split('\n\n')
          if line.startswith('| ')][0].splitlines()
  header = [cell.strip() for cell in rows[0].strip('|').split('|')]
  return [dict(zip(header, (cell.strip()
                            for cell in row.strip('|').split('|'))))
          for row in rows[2:]]


def _mean_and_sd(values) -> str:
  return (f'{np.mean(values):.1f} ± {np.std(values, ddof=1):.1f}'
          if len(values) > 1 else f'{values[0]:.1f}')


def test_every_page_has_its_data_and_every_data_file_a_page():
  md = {name[:-3] for name in os.listdir(RESULTS) if name.endswith('.md')}
  assert md == set(NAMES)
  own_pages = {name for name in NAMES
               if 'page' in run.ANALYSES.get(name, {})}
  assert (set(ANALYSES) | set(LONG_RUNS) | own_pages | {'pong_45min'} |
          FAULT_PAGES) == set(NAMES)


@pytest.mark.parametrize('name', NAMES)
def test_each_page_is_rendered_from_its_data(name):
  assert pages.render(name) == _text(name), (
      f'results/{name}.md is not what its data makes: run .venv/bin/python '
      f'-m results.pages {name}')


@pytest.mark.parametrize('name', ANALYSES)
def test_an_analysis_opens_with_every_seeds_final_return(name):
  data = _data(name)
  rows = _opening_table(_text(name))
  assert [row['setting'] for row in rows] == list(data['settings'])
  for row, runs in zip(rows, data['settings'].values()):
    values = [run_['final_return'] for run_ in runs]
    assert len(values) > 1
    assert row['final return'] == _mean_and_sd(values)
    for run_ in runs:
      assert row[f'seed {run_["seed"]}'] == f'{run_["final_return"]:.1f}'
    if len(values) <= 3:
      # With 3 seeds or fewer, a resample of one seed's value alone has
      # probability >= 1/27 > 2.5%: the 95% interval is their range.
      assert row['IQM, 95% CI'] == f'[{min(values):.1f}, {max(values):.1f}]'
  assert f'{len(data["seeds"])} seeds a setting' in _text(name).split('\n')[2]


_COMPARISON = re.compile(
    r'^- (?P<setting>.+?): (?P<difference>-?[\d.]+) \[(?P<low>-?[\d.]+), '
    r'(?P<high>-?[\d.]+)\], Welch\'s p = (?P<p>[\d.]+|nan): '
    r'(?P<verdict>.+)$', re.MULTILINE)


def _claim(setting: str, first: str, low: float, high: float,
           p: float) -> str:
  """What the rule allows: ahead or behind only where the interval
  excludes 0 and p < 0.05."""
  if p < 0.05 and low > 0:
    return f'{setting} ahead of {first}'
  if p < 0.05 and high < 0:
    return f'{setting} behind {first}'
  return 'no difference shown'


@pytest.mark.parametrize('name', ANALYSES)
def test_an_analysis_calls_a_setting_ahead_only_where_the_interval_does(name):
  data = _data(name)
  (first, first_runs), *others = data['settings'].items()
  base = [run_['final_return'] for run_ in first_runs]
  found = {match['setting']: match
           for match in _COMPARISON.finditer(_text(name))}
  assert list(found) == [setting for setting, _ in others]
  for setting, runs in others:
    values = [run_['final_return'] for run_ in runs]
    match = found[setting]
    low, high = float(match['low']), float(match['high'])
    # 3 seeds: the IQM is the mean; the bootstrap's differences lie between
    # the lowest and the highest a resample can make.
    assert len(values) == len(base) == 3
    difference = np.mean(values) - np.mean(base)
    assert match['difference'] == f'{difference:.1f}'
    assert low <= round(difference, 1) <= high
    assert round(min(values) - max(base), 1) <= low
    assert high <= round(max(values) - min(base), 1)
    p = _welch_p(values, base)
    assert match['p'] == f'{p:.2f}'
    assert match['verdict'].startswith(_claim(setting, first, low, high, p))


def _verdicts(text: str) -> List[str]:
  """The last clause of each comparison (a '- ' line): a claim or not."""
  return [line.rsplit(': ', 1)[-1] for line in text.splitlines()
          if line.startswith('- ') and ': ' in line]


def test_the_readme_table_claims_no_more_than_the_pages():
  with open(os.path.join(os.path.dirname(RESULTS), 'README.md')) as f:
    readme = f.read()
  claim = re.compile(r' (?:ahead of|behind) ')
  for name in ANALYSES + [pong_45min.NAME]:
    row = [line for line in readme.splitlines()
           if f'[{name}.md](results/{name}.md)' in line][0]
    in_table = [verdict for verdict in _verdicts(
        '\n'.join('- ' + part for part in row.split(' | ')[-2].split('; ')))
                if claim.search(verdict)]
    on_page = [verdict for verdict in _verdicts(_text(name))
               if claim.search(verdict)]
    assert in_table == on_page, name


def test_minatar_opens_with_each_seeds_value():
  data = _data('minatar')
  text = _text('minatar')
  rows = _opening_table(text)
  if data.get('protocol') == 'matched':
    key = 'matched_mean'
    figure = f'Ape-X DQN, epsilon {data["matched_epsilon"]:g}'
  else:
    # The runs before the matched protocol say so first.
    assert text.split('\n')[2].startswith(
        '**The earlier protocol, one seed a game, so no spread over seeds: '
        'MinAtar\'s minimal action sets and the near-greedy evaluator alone, '
        'so not Young & Tian\'s measure.**')
    key, figure = 'final_mean', 'Ape-X DQN, final policy'
  assert [row['game'] for row in rows] == list(data['games'])
  # One seed in every game: the seed in the figure's column title; else a
  # column a seed, '-' where a game lacks it.
  alone = max(len(runs) for runs in data['games'].values()) == 1
  for row, runs in zip(rows, data['games'].values()):
    values = [run_[key] for run_ in runs]
    if alone:
      assert row[f'{figure} (seed {runs[0]["seed"]})'] == f'{values[0]:.1f}'
      assert '±' not in ''.join(row.values())
      continue
    assert row[figure] == (f'{values[0]:.1f}' if len(runs) == 1
                           else _mean_and_sd(values))
    for seed in data['seeds']:
      assert row[f'seed {seed}'] == next(
          (f'{run_[key]:.1f}' for run_ in runs if run_['seed'] == seed), '-')
  if min(len(runs) for runs in data['games'].values()) == 1:
    assert ('**Over the games:** no interquartile mean with an interval'
            in text)


@pytest.mark.parametrize('name', LONG_RUNS)
def test_a_long_run_says_it_is_one_seed(name):
  data = _data(name)
  lines = _text(name).split('\n')
  # A run stopped short says so first (`--status`).
  if data.get('status'):
    assert lines[2] == f'**{data["status"]}**'
    lines = lines[2:]
  opening = lines[2]
  assert opening.startswith(f'**One run (seed {data["flags"]["seed"]}), so '
                            'no spread over seeds.**')
  assert '±' not in opening


def _welch_p(a, b) -> float:
  """Welch's t-test, two-sided, from its formula."""
  va, vb = np.var(a, ddof=1) / len(a), np.var(b, ddof=1) / len(b)
  t = (np.mean(a) - np.mean(b)) / math.sqrt(va + vb)
  df = (va + vb)**2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
  return 2 * stats.t.sf(abs(t), df)


def _rank_p(a, b, alternative: str = 'greater') -> float:
  """The exact Mann-Whitney p: the share of all splits of the pooled values
  whose U is at least the observed one (a greater); two-sided, twice the
  smaller tail."""
  def u(first, second):
    return sum((x > y) + 0.5 * (x == y) for x in first for y in second)
  pooled, observed = list(a) + list(b), u(a, b)
  splits = [u([pooled[i] for i in chosen],
              [pooled[i] for i in range(len(pooled)) if i not in chosen])
            for chosen in itertools.combinations(range(len(pooled)), len(a))]
  upper = sum(value >= observed for value in splits) / len(splits)
  if alternative == 'greater':
    return upper
  lower = sum(value <= observed for value in splits) / len(splits)
  return min(1.0, 2 * min(upper, lower))


def test_pong_45min_opens_with_each_seed_the_sample_sd_and_its_tests():
  data = _data('pong_45min')
  text = _text('pong_45min')
  rows = {row['setting, evaluation']: row for row in _opening_table(text)}
  for key, evaluation in pong_45min.EVALUATIONS:
    groups = []
    for label, pattern in pong_45min.GROUPS:
      runs = [run_ for name, run_ in data['runs'].items()
              if re.fullmatch(pattern, name)]
      assert runs, pattern
      values = [run_[key]['mean'] for run_ in runs]
      row = rows[f'{label}, {evaluation}']
      assert row['mean return'] == _mean_and_sd(values)
      for run_ in runs:
        assert row[f'seed {run_["seed"]}'] == f'{run_[key]["mean"]:.1f}'
      groups.append((label, values))
    for one, other, alternative, open_ in pong_45min.COMPARISONS:
      (label, first), (other_label, second) = groups[one], groups[other]
      line = re.search(
          rf'^- {re.escape(evaluation)}, {re.escape(label)} minus '
          rf'{re.escape(other_label)}: (.*)$', text, re.MULTILINE).group(1)
      if open_:  # What the design leaves open follows the verdict.
        assert line.endswith(f' ({open_})'), line
        line = line[:-len(f' ({open_})')]
      difference = np.mean(first) - np.mean(second)
      assert line.startswith(f'{difference:.1f} [')
      low, high = map(float, re.match(
          r'-?[\d.]+ \[(-?[\d.]+), (-?[\d.]+)\]', line).groups())
      assert low <= round(difference, 1) <= high
      welch = _welch_p(first, second)
      assert f'two-sided p = {welch:.2f};' in line
      sided = 'one-sided' if alternative == 'greater' else 'two-sided'
      assert (f'{sided} exact p = {_rank_p(first, second, alternative):.2f}'
              ', at least ') in line
      said = line.split('): ')[-1]
      if min(len(first), len(second)) < 3:
        assert said.startswith('no verdict from'), line
        continue
      claim = _claim(label, f'the {other_label}', low, high, welch)
      assert line.endswith(claim) or (
          said.startswith('no difference shown') and
          claim == 'no difference shown')


def _at_mark(run_, mark: int):
  """The mean of the run's evaluator rounds within 4,000 updates of `mark`,
  as the page's hand-written table of rounds defines it (None: none)."""
  found = [value for steps, value in zip(
      run_['evaluator_rounds_learner_steps'],
      run_['evaluator_rounds_mean_return']) if abs(steps - mark) <= 4000]
  return sum(found) / len(found) if found else None


def test_pong_45min_compares_other_days_at_equal_updates():
  data = _data('pong_45min')
  text = _text('pong_45min')
  # The across-days comparison of final policies is gone.
  assert not any(2 in comparison[:2] for comparison in pong_45min.COMPARISONS)
  for one, other, alternative, open_ in pong_45min.BY_UPDATES:
    runs = [[run_ for name, run_ in sorted(data['runs'].items())
             if re.fullmatch(pong_45min.GROUPS[group][1], name)]
            for group in (one, other)]
    # The mark: the largest multiple of 8,000 with a round of every run.
    mark = max(mark for mark in range(8000, 200000, 8000)
               if all(_at_mark(run_, mark) is not None
                      for run_ in runs[0] + runs[1]))
    first, second = ([_at_mark(run_, mark) for run_ in group]
                     for group in runs)
    label, other_label = (pong_45min.GROUPS[group][0]
                          for group in (one, other))
    line = re.search(
        rf"^- the evaluator's rounds at {mark // 1000}K updates, "
        rf'{re.escape(label)} minus {re.escape(other_label)}: (.*)$', text,
        re.MULTILINE).group(1)
    assert line.endswith(f' ({open_})'), line
    line = line[:-len(f' ({open_})')]
    assert line.startswith(f'{np.mean(first) - np.mean(second):.1f} [')
    welch = stats.ttest_ind(first, second, equal_var=False).pvalue
    assert f'two-sided p = {welch:.2f};' in line
    assert (f'two-sided exact p = {_rank_p(first, second, alternative):.2f}'
            ', at least ') in line
    low, high = map(float, re.match(
        r'-?[\d.]+ \[(-?[\d.]+), (-?[\d.]+)\]', line).groups())
    said = line.split('): ')[-1]
    if min(len(first), len(second)) < 3:
      assert said.startswith('no verdict from'), line
      continue
    claim = _claim(label, f'the {other_label}', low, high, welch)
    assert said == claim or (said.startswith('no difference shown') and
                             claim == 'no difference shown'), line
  assert f'here {mark:,} updates' in text


def _rounds(steps, returns):
  return {'evaluator_rounds_learner_steps': steps,
          'evaluator_rounds_mean_return': returns}


def test_pong_45min_takes_each_runs_rounds_at_the_largest_common_mark():
  # Hand-made rounds: placed seed 1's end at 18,000 updates, 6,000 short of
  # the 24K mark, so the mark every run reached is 16K.
  runs = {
      'atari_small_placed_seed1': _rounds([0, 4500, 9000, 13500, 18000],
                                          [-21, -21, -20, -19, -17]),
      # Rounds 4,000 from the mark count (within 4,000).
      'atari_small_placed_seed2': _rounds([0, 4000, 8000, 12000, 20000,
                                           30000],
                                          [-21, -21, -20, -18, -16, -10]),
      'atari_small_placed_seed3': _rounds([0, 5000, 10000, 15000, 21000,
                                           26000],
                                          [-21, -20, -20, -16, -15, -12]),
      'atari_small_seed1': _rounds(list(range(0, 44000, 4000)),
                                   [-21 + 0.5 * i for i in range(11)]),
      'atari_small_seed2': _rounds(list(range(0, 44000, 4000)), [-20] * 11),
      'atari_small_seed3': _rounds([0, 8000, 16000, 24000, 32000],
                                   [-21, -20, -19.5, -18, -17]),
      # Neither pattern's: a resumed run, and another commit's.
      'atari_small_placed_seed1_to_440k': _rounds([0, 24000, 48000],
                                                  [-21, 0, 10]),
      'atari_small_267871d_seed5': _rounds([0, 24000], [-21, 0]),
  }
  for name, run_ in runs.items():
    run_['seed'] = int(re.search(r'seed(\d+)', name).group(1))
  comparison = (2, 0, 'two-sided', 'a note')
  mark, placed, preset = pong_45min.at_equal_updates({'runs': runs},
                                                     comparison)
  assert mark == 16000
  # Placed: seed 1 (13,500 and 18,000) -19 and -17; seed 2 (12,000 and
  # 20,000) -18 and -16; seed 3 (15,000 alone) -16. The preset: seed 1
  # (12,000, 16,000, 20,000) -19.5, -19, -18.5; seed 2 -20; seed 3 -19.5.
  assert placed == {1: -18.0, 2: -17.0, 3: -16.0}
  assert preset == {1: -19.0, 2: -20.0, 3: -19.5}
  line = pong_45min._comparison(  # pylint: disable=protected-access
      pong_45min.at_mark(mark), {2: placed, 0: preset}, comparison)
  assert line.startswith("- the evaluator's rounds at 16K updates, "
                         '`atari_small` with placement minus `atari_small`: '
                         '2.5 [')
  # Welch by hand: variances 1 and 0.25 over 3 seeds each.
  se = math.sqrt(1 / 3 + 0.25 / 3)
  df = se**4 / ((1 / 3)**2 / 2 + (0.25 / 3)**2 / 2)
  welch = 2 * stats.t.sf(2.5 / se, df)
  assert welch == pytest.approx(stats.ttest_ind(
      [-18, -17, -16], [-19, -20, -19.5], equal_var=False).pvalue)
  assert welch < 0.05
  assert f'two-sided p = {welch:.2f};' in line
  # Every placed run above every other: 2 of the 20 splits, two-sided.
  assert 'two-sided exact p = 0.10, at least 0.10 with 3 runs' in line
  # 3 seeds: the IQM is the mean, and the interval lies within the
  # differences a resample can make, [-18 + 19, -16 + 20]: above 0.
  low, high = map(float, re.search(r'2\.5 \[(-?[\d.]+), (-?[\d.]+)\]',
                                   line).groups())
  assert 1.0 <= low <= 2.5 <= high <= 4.0
  assert line.endswith(': `atari_small` with placement ahead of the '
                       '`atari_small` (a note)')
  # No mark with a round of every run.
  runs['atari_small_seed2'] = dict(_rounds([100000], [-20]), seed=2)
  with pytest.raises(ValueError):
    pong_45min.at_equal_updates({'runs': runs}, comparison)


def test_the_readme_table_gives_the_sample_sd_of_each_analysis():
  with open(os.path.join(os.path.dirname(RESULTS), 'README.md')) as f:
    readme = f.read()
  for name in ANALYSES:
    row = [line for line in readme.splitlines()
           if f'[{name}.md](results/{name}.md)' in line][0]
    for setting, runs in _data(name)['settings'].items():
      values = [run_['final_return'] for run_ in runs]
      assert (f'{setting} {_mean_and_sd(values)} ({min(values):.1f} to '
              f'{max(values):.1f})') in row


def test_the_soak_and_its_twin_final_policies_are_compared_over_episodes():
  # Hand-made episodes: the twin's are 10 higher, with a spread of 1.
  with_faults = [10.0, 12.0] * 15
  without = [20.0, 22.0] * 15
  soak = {'final_policy': {'episodes': 30, 'seed': 0, 'learner_steps': 1000,
                           'returns': with_faults, 'mean': 11.0, 'std': 1.0},
          'faults': [{'kind': 'learner', 'lost': {'updates': 300}},
                     {'kind': 'actor', 'lost': {}},
                     {'kind': 'learner', 'lost': {'updates': 1200}},
                     {'kind': 'learner'}]}  # Not recovered: nothing lost.
  twin = {'final_policy': {'episodes': 30, 'seed': 0, 'learner_steps': 900,
                           'returns': without, 'mean': 21.0, 'std': 1.0}}
  text = ' '.join(chaos._final_policies(soak, twin))  # pylint: disable=protected-access
  # Welch by hand: both variances 30/29, so se = sqrt(2 * 30/29 / 30).
  se = (2 * (30 / 29) / 30) ** 0.5
  assert 'with faults 11.0 ± 1.0 (learner step 1,000)' in text
  assert 'without 21.0 ± 1.0 (learner step 900)' in text
  assert 'With faults less without: -10.0, 95% interval' in text
  low = -10.0 - 2.0017 * se  # t(0.975, 58 degrees of freedom) = 2.0017.
  assert f'[{low:.1f}, ' in text
  assert 'the run without faults ahead on these episodes' in text
  assert 'The soak\'s learner lost 1,500 updates over its 2 faults' in text
  # Level episodes: no difference.
  twin['final_policy']['returns'] = [11.0, 11.0] + with_faults[2:]
  assert 'no difference shown' in ' '.join(chaos._final_policies(soak, twin))  # pylint: disable=protected-access
  assert chaos._final_policies(soak, {}) == []  # pylint: disable=protected-access


def test_every_script_that_registers_a_page_is_imported_by_pages():
  # A script's page is rendered only if pages.py imports it: every
  # results/*.py that registers one is in PAGE_MODULES, and each listed
  # script registers the page named after its analysis.
  registering = sorted(
      name[:-len('.py')] for name in os.listdir(RESULTS)
      if name.endswith('.py') and name != 'page_registry.py' and
      'page_registry.register(' in open(os.path.join(RESULTS, name)).read())
  assert registering == sorted(pages.PAGE_MODULES)
  from results import page_registry  # pylint: disable=g-import-not-at-top
  for name in ('minatar', 'd4pg_dmc500k', 'pong_45min', 'chaos'):
    assert page_registry.renderer(name) is not None
  with pytest.raises(ValueError, match='registered twice'):
    page_registry.register('minatar', lambda data: '')
