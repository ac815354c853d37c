"""results/d4pg_dmc500k.py: D4PG's page on the DeepMind Control table,
beside State SAC and Ape-X DPG's table, with its ablation.

The page is made from runs laid out as the programs leave them
(tests/test_results_bank.py's), with final evaluations whose values are
chosen here; its figures are worked out here from those values: the IQM
of every run's ratio to SAC (scipy's trimmed mean, as rliable defines it),
the goal's verdict by the interval, D4PG less Ape-X DPG, the ablation's
cells and the minutes SAC's updates would take."""

import json
import os

from absl import flags
import numpy as np
import pytest
from scipy import stats

from results import d4pg_dmc500k
from results import page_runs
from results import run
from tests.test_results_bank import _make_run
from tests.test_results_dpg_dmc500k import _rows
from tests.test_results_dpg_dmc500k import report_page

FLAGS = flags.FLAGS

REPEATS = {'walker_walk': 2, 'cheetah_run': 4, 'finger_spin': 2,
           'cartpole_swingup': 8, 'reacher_easy': 4, 'ball_in_cup_catch': 4}
SAC = {'walker_walk': 948, 'cheetah_run': 795, 'finger_spin': 923,
       'cartpole_swingup': 848, 'reacher_easy': 923,
       'ball_in_cup_catch': 974}  # CURL's Table 1, State SAC.
# D4PG's final means: near SAC but on cheetah; Ape-X DPG's all lower.
D4PG = {'walker_walk': [900.0, 880.0, 910.0],
        'cheetah_run': [500.0, 450.0, 480.0],
        'finger_spin': [850.0, 870.0, 860.0],
        'cartpole_swingup': [840.0, 830.0, 845.0],
        'reacher_easy': [800.0, 850.0, 820.0],
        'ball_in_cup_catch': [960.0, 950.0, 955.0]}
APEX_DPG = {task: [mean * 0.6 for mean in means]
            for task, means in D4PG.items()}
ABLATION = {'cheetah_run critic alone': 300.0,
            'reacher_easy critic alone': 400.0,
            'cheetah_run ratio alone': 350.0}  # reacher's not run.


def _run_of(runs, analysis, setting, seed, mean, program):
  workdir = os.path.join(runs, analysis, setting.replace(' ', '_'),
                         f'seed{seed}')
  env = page_runs.environments(analysis)[setting]
  repeat = int(env.rsplit('=', 1)[1])
  _make_run(workdir, env, seed, 500_000 // repeat, evaluated=False)
  with open(os.path.join(workdir, 'run.json')) as f:
    manifest = json.load(f)
  manifest.update(program=program, frames_per_step=repeat)
  with open(os.path.join(workdir, 'run.json'), 'w') as f:
    json.dump(manifest, f)
  with open(os.path.join(workdir, d4pg_dmc500k.FINAL.file), 'w') as f:
    json.dump({'program': program, 'env': env, 'learner_steps': 62_500,
               'seed': seed, 'episodes': 30, 'returns': [mean] * 30,
               'mean': mean, 'std': 12.5, 'median': mean, 'min': mean,
               'max': mean}, f)


def _page(tmp_path, monkeypatch, d4pg_finals):
  if not FLAGS.is_parsed():
    FLAGS(['test'])
  runs = str(tmp_path / 'runs')
  for task, means in d4pg_finals.items():
    for seed, mean in enumerate(means):
      _run_of(runs, 'd4pg_dmc500k', task, seed, mean, 'd4pg')
  for task, means in APEX_DPG.items():
    for seed, mean in enumerate(means):
      _run_of(runs, 'dpg_dmc500k', task, seed, mean, 'apex_dpg')
  for setting, mean in ABLATION.items():
    _run_of(runs, 'd4pg_dmc500k_ablation', setting, 0, mean,
            'apex_dpg' if 'ratio' in setting else 'd4pg')
  return report_page(tmp_path, monkeypatch, runs, d4pg_dmc500k)


@pytest.fixture
def page(tmp_path, monkeypatch):
  return _page(tmp_path, monkeypatch, D4PG)


def test_each_task_beside_sac_and_apex_dpg(page):
  data, text = page
  assert d4pg_dmc500k.render(data) == text
  rows = {row['task']: row for row in _rows(text, '| task | final')}
  assert list(rows) == list(D4PG)
  for task, means in D4PG.items():
    row = rows[task]
    assert row['final policy, 30 episodes'] == (
        f'{np.mean(means):.1f} ± {np.std(means, ddof=1):.1f}')
    assert row['mean over SAC\'s'] == f'{np.mean(means) / SAC[task]:.2f}'
    assert row['Ape-X DPG (mean of its seeds)'] == (
        f'{np.mean(APEX_DPG[task]):.1f}')


def test_the_iqm_its_goal_and_the_difference_to_apex_dpg(page):
  data, text = page
  ratios = [mean / SAC[task] for task, means in D4PG.items()
            for mean in means]
  expected = stats.trim_mean(ratios, 0.25)
  assert data['ratio']['iqm'] == pytest.approx(expected)
  # Every ratio is above 0.85 but cheetah's, and the middle half of them
  # sets the IQM: the interval lies above the goal.
  assert data['ratio']['low'] >= 0.85
  assert ('Against the goal of 0.85 of State SAC\'s return: met: the whole '
          'interval is at or above it') in text
  apex_ratios = [0.6 * ratio for ratio in ratios]
  difference = expected - stats.trim_mean(apex_ratios, 0.25)
  beside = data['beside_apex_dpg']
  assert beside['difference'] == pytest.approx(difference)
  assert beside['low'] > 0
  assert f'{difference:+.2f}, 95% interval' in text
  assert 'D4PG ahead.' in text
  # Task by task: every task's seeds lie below SAC's figure (and so does
  # any bootstrap interval of their IQM, within their range); the
  # one-sample t-test's p is below 0.05 on all but cartpole (840, 830, 845
  # against 848: p = 0.16).
  p = {task: stats.ttest_1samp(means, SAC[task]).pvalue
       for task, means in D4PG.items()}
  assert p['cartpole_swingup'] > 0.05 and all(
      value < 0.05 for task, value in p.items() if task != 'cartpole_swingup')
  assert (': behind on walker_walk, cheetah_run, finger_spin, reacher_easy, '
          'ball_in_cup_catch; no difference shown on cartpole_swingup '
          f'(p = {p["cartpole_swingup"]:.2f}).') in text


def test_a_goal_not_met_is_said_by_its_interval(tmp_path, monkeypatch):
  data, text = _page(tmp_path, monkeypatch,
                     {task: [m * 0.7 for m in means]
                      for task, means in D4PG.items()})
  assert data['ratio']['high'] < 0.85
  assert ('Against the goal of 0.85 of State SAC\'s return: not met: the '
          'whole interval is below it') in text


def test_the_ablation_table(page):
  data, text = page
  rows = {row['task']: row for row in _rows(text, '| task | neither')}
  assert list(rows) == ['cheetah_run', 'reacher_easy']
  updates = f'{(125_000 // 8):,}'  # _make_run's: an update per 8 steps.
  cheetah = rows['cheetah_run']
  assert cheetah['both (D4PG, one update per 4)'] == (
      f'{D4PG["cheetah_run"][0]:.1f} ({updates} updates, 10 min)')
  assert cheetah['neither (Ape-X DPG, one update per 8)'].startswith(
      f'{APEX_DPG["cheetah_run"][0]:.1f} (')
  assert cheetah['categorical critic alone (one update per 8)'].startswith(
      '300.0 (')
  assert cheetah['replay ratio alone (Ape-X DPG, one update per 4)'] \
      .startswith('350.0 (')
  reacher = rows['reacher_easy']
  assert reacher['replay ratio alone (Ape-X DPG, one update per 4)'] == (
      'not run yet')
  assert reacher['State SAC'] == '923'


def test_what_sac_s_updates_would_take(page):
  data, text = page
  # _make_run's learner logs 200 + i updates a second (i < 60).
  rate = np.mean([row['learner_updates_per_second']
                  for row in data['tasks']['cheetah_run']])
  assert (f'- **cheetah_run**: {np.mean(D4PG["cheetah_run"]) / 795:.2f} of '
          f'State SAC\'s 795 after') in text
  assert f'about {500_000 / rate / 60:.0f} minutes' in text


def test_each_task_runs_at_one_update_per_4_simulator_steps():
  if not FLAGS.is_parsed():
    FLAGS(['test'])
  for task, repeat in REPEATS.items():
    command = run.command('d4pg_dmc500k', task, 0, '/runs/w')
    assert command[1] == os.path.join('programs', 'd4pg.py')
    assert f'--max_actor_steps={500_000 // repeat}' in command
    assert f'--samples_per_insert={64 * repeat}' in command
  for task in ('cheetah_run', 'reacher_easy'):
    repeat = REPEATS[task]
    critic = run.command('d4pg_dmc500k_ablation', f'{task} critic alone', 0,
                         '/runs/w')
    assert 'd4pg.py' in critic[1]
    assert f'--samples_per_insert={32 * repeat}' in critic
    ratio = run.command('d4pg_dmc500k_ablation', f'{task} ratio alone', 0,
                        '/runs/w')
    assert 'apex_dpg.py' in ratio[1]
    assert f'--samples_per_insert={64 * repeat}' in ratio


def test_the_readme_row(page, tmp_path, monkeypatch):
  from results import pages  # pylint: disable=g-import-not-at-top
  from results import table  # pylint: disable=g-import-not-at-top
  data, _ = page
  monkeypatch.setattr(table, 'RESULTS', str(tmp_path / 'pages'))
  monkeypatch.setattr(pages, 'RESULTS', str(tmp_path / 'pages'))
  row, = table._dmc500k_row('d4pg_dmc500k', 'D4PG')  # pylint: disable=protected-access
  assert row.startswith('| D4PG on the DeepMind Control table')
  means = D4PG['reacher_easy']
  assert (f'reacher_easy {np.mean(means):.1f} ± '
          f'{np.std(means, ddof=1):.1f} ({min(means):.1f} to '
          f'{max(means):.1f}) (State SAC 923)') in row
  ratio = data['ratio']
  assert f'{ratio["iqm"]:.2f} [{ratio["low"]:.2f}, {ratio["high"]:.2f}]' in row
  assert ('against the goal of 0.85 of State SAC\'s return: met: the whole '
          'interval is at or above it') in row
  assert 'D4PG ahead.' in row and 'd4pg_dmc500k.md' in row
