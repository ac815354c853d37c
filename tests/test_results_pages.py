"""The results pages say what their committed data says: each page is what
its renderer makes of its JSON (so page and data cannot drift apart), and
the spread a page opens with is the seeds' sample standard deviation
(n - 1), worked out here from the JSON's per-seed values; one seed is
said to be one, with no spread. Reads only committed files."""

import itertools
import json
import math
import os
import re
from typing import Dict, List

import numpy as np
import pytest
from scipy import stats

from results import pages
from results import pong_45min
from results import run

RESULTS = os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), 'results')
NAMES = pages.names()
ANALYSES = [name for name in NAMES
            if name in run.ANALYSES and 'page' not in run.ANALYSES[name]]
LONG_RUNS = [name for name in NAMES
             if name not in run.ANALYSES and name != pong_45min.NAME]


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
  assert set(ANALYSES) | set(LONG_RUNS) | {'minatar', 'pong_45min'} == set(
      NAMES)


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
  assert f'{len(data["seeds"])} seeds a setting' in _text(name).split('\n')[2]


def test_minatar_opens_with_one_seed_and_no_spread():
  data = _data('minatar')
  text = _text('minatar')
  assert 'one seed a game, so no spread over seeds' in text.split('\n')[2]
  rows = _opening_table(text)
  for row, (game, runs) in zip(rows, data['games'].items()):
    assert row['game'] == game
    assert len(runs) == 1
    assert row[f'Ape-X DQN, final policy (seed {runs[0]["seed"]})'] == (
        f'{runs[0]["final_mean"]:.1f}')
    assert '±' not in ''.join(row.values())


@pytest.mark.parametrize('name', LONG_RUNS)
def test_a_long_run_says_it_is_one_seed(name):
  data = _data(name)
  opening = _text(name).split('\n')[2]
  assert opening.startswith(f'**One run (seed {data["flags"]["seed"]}), so '
                            'no spread over seeds.**')
  assert '±' not in opening


def _welch_p(a, b) -> float:
  """Welch's t-test, two-sided, from its formula."""
  va, vb = np.var(a, ddof=1) / len(a), np.var(b, ddof=1) / len(b)
  t = (np.mean(a) - np.mean(b)) / math.sqrt(va + vb)
  df = (va + vb)**2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
  return 2 * stats.t.sf(abs(t), df)


def _rank_p(a, b) -> float:
  """The exact one-sided Mann-Whitney p (a greater): the share of all
  splits of the pooled values whose U is at least the observed one."""
  def u(first, second):
    return sum((x > y) + 0.5 * (x == y) for x in first for y in second)
  pooled, observed = list(a) + list(b), u(a, b)
  splits = [u([pooled[i] for i in chosen],
              [pooled[i] for i in range(len(pooled)) if i not in chosen])
            for chosen in itertools.combinations(range(len(pooled)), len(a))]
  return sum(value >= observed for value in splits) / len(splits)


def test_pong_45min_opens_with_each_seed_the_sample_sd_and_its_tests():
  data = _data('pong_45min')
  text = _text('pong_45min')
  rows = {row['setting, evaluation']: row for row in _opening_table(text)}
  for key, evaluation in pong_45min.EVALUATIONS:
    groups = []
    for label, prefix in pong_45min.GROUPS:
      runs = [run_ for name, run_ in data['runs'].items()
              if name.startswith(prefix)]
      values = [run_[key]['mean'] for run_ in runs]
      row = rows[f'{label}, {evaluation}']
      assert row['mean return'] == _mean_and_sd(values)
      for run_ in runs:
        assert row[f'seed {run_["seed"]}'] == f'{run_[key]["mean"]:.1f}'
      groups.append(values)
    line = re.search(rf'^- {re.escape(evaluation)}: (.*)$', text,
                     re.MULTILINE).group(1)
    assert line.startswith(f'{np.mean(groups[0]) - np.mean(groups[1]):.1f} ')
    assert f'two-sided p = {_welch_p(*groups):.2f};' in line
    assert f'one-sided exact p = {_rank_p(*groups):.2f}' in line


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
