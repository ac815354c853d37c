"""results/dpg_control.py: Ape-X DPG's page on the paper's control tasks.

The random policy, the page's floor, is played on a real dm_control task
and checked against a loop written here on dm_control itself, with the same
seeds. The page is made from runs laid out as the programs leave them
(tests/test_results_bank.py's), with final evaluations whose values are
chosen here; its figures are worked out here from those values: the
seeds' mean and sample standard deviation (n - 1), and against the random
policy a one-sample t-test by its formula, "ahead" only where the
interval excludes 0 and p is below 0.05; one seed is compared with
nothing."""

import json
import math
import os
import subprocess
import sys

from absl import flags
from absl.testing import flagsaver
from dm_control import suite
import numpy as np
import pytest
from scipy import stats

from results import dpg_control
from results import page_runs
from results import pages
from results import run
from results import table
from tests.test_results_bank import ROOT
from tests.test_results_bank import _make_run

FLAGS = flags.FLAGS


def test_the_random_policy_is_uniform_actions_on_the_seeded_task():
  returns = dpg_control.random_returns('control:cartpole:balance', 2, seed=3)
  # The same episodes, played on dm_control directly.
  environment = suite.load('cartpole', 'balance', task_kwargs={'random': 3})
  bounds = environment.action_spec()
  rng = np.random.default_rng(3)
  expected = []
  for _ in range(2):
    timestep = environment.reset()
    total = 0.0
    while not timestep.last():
      timestep = environment.step(rng.uniform(bounds.minimum, bounds.maximum))
      total += timestep.reward
    expected.append(total)
  assert returns == pytest.approx(expected, rel=1e-5)
  assert returns[0] != returns[1]  # Episodes of their own.


# The final policies' means the runs are given, and the random policy's.
STAND = {0: 52.0, 1: 61.5, 2: 70.25}
BALL = {0: 0.5}
FLOORS = {'humanoid_stand': [6.0, 7.5, 6.9], 'bring_ball': [0.0, 0.1, 0.02]}


def _dpg_run(runs, task, seed, mean):
  workdir = os.path.join(runs, 'dpg_control', task, f'seed{seed}')
  _make_run(workdir, dpg_control.ENVS[task], seed, 500_000, evaluated=False)
  with open(os.path.join(workdir, 'run.json')) as f:
    manifest = json.load(f)
  manifest['program'] = 'apex_dpg'
  with open(os.path.join(workdir, 'run.json'), 'w') as f:
    json.dump(manifest, f)
  with open(os.path.join(workdir, dpg_control.FINAL_FILE), 'w') as f:
    json.dump({'program': 'apex_dpg', 'env': dpg_control.ENVS[task],
               'learner_steps': 125_000, 'seed': seed, 'episodes': 30,
               'returns': [mean] * 30, 'mean': mean, 'std': 1.5,
               'median': mean, 'min': mean, 'max': mean}, f)


@pytest.fixture
def page(tmp_path, monkeypatch):
  """The page's (JSON, text), made from 3 seeds on humanoid:stand and one
  on manipulator:bring_ball, with the random policy's returns `FLOORS`."""
  if not FLAGS.is_parsed():
    FLAGS(['test'])
  runs = str(tmp_path / 'runs')
  for seed, mean in STAND.items():
    _dpg_run(runs, 'humanoid_stand', seed, mean)
  for seed, mean in BALL.items():
    _dpg_run(runs, 'bring_ball', seed, mean)
  pages = tmp_path / 'pages'
  pages.mkdir()
  monkeypatch.setattr(run, 'RESULTS', str(pages))
  monkeypatch.setattr(dpg_control, 'RESULTS', str(pages))
  # The random policy's 30 episodes of humanoid take a minute: its
  # returns are given (the test above checks how they are made).
  monkeypatch.setattr(
      dpg_control, 'random_returns',
      lambda env, episodes, seed: FLOORS[{v: k for k, v in
                                          dpg_control.ENVS.items()}[env]])
  with flagsaver.flagsaver(runs=runs, bank_dir=str(tmp_path / 'bank'),
                           notes=None):
    dpg_control.report([0, 1, 2])
  data = json.loads((pages / 'dpg_control.json').read_text())
  return data, (pages / 'dpg_control.md').read_text()


def _opening_rows(text):
  table = [block for block in text.split('\n\n')
           if block.startswith('| task')][0].splitlines()
  header = [cell.strip() for cell in table[0].strip('|').split('|')]
  return {row['task']: row for row in (
      dict(zip(header, (cell.strip() for cell in line.strip('|').split('|'))))
      for line in table[2:])}


def test_the_page_gives_each_seed_the_spread_and_the_floor(page):
  data, text = page
  assert dpg_control.render(data) == text
  assert list(data['tasks']) == ['humanoid_stand', 'bring_ball']
  rows = _opening_rows(text)
  stand = list(STAND.values())
  figure = 'final policy, 30 episodes'
  assert rows['humanoid_stand'][figure] == (
      f'{np.mean(stand):.1f} ± {np.std(stand, ddof=1):.1f}')
  for seed, mean in STAND.items():
    assert rows['humanoid_stand'][f'seed {seed}'] == f'{mean:.1f}'
  assert rows['bring_ball'][figure] == '0.5'
  assert rows['bring_ball']['seed 1'] == '-'
  floor = FLOORS['humanoid_stand']
  assert rows['humanoid_stand'][
      'random policy, 30 episodes (mean ± sd)'] == (
          f'{np.mean(floor):.1f} ± {np.std(floor, ddof=1):.1f}')
  assert '3 seeds on humanoid_stand, 1 seed on bring_ball' in text


def test_ahead_of_the_random_policy_only_where_the_test_says(page):
  data, text = page
  rows = _opening_rows(text)
  column = 'IQM less the random policy, 95% CI'
  stand, floor = list(STAND.values()), float(np.mean(FLOORS['humanoid_stand']))
  # The one-sample t-test by its formula.
  t = (np.mean(stand) - floor) / (np.std(stand, ddof=1) / math.sqrt(3))
  p = 2 * stats.t.sf(abs(t), df=2)
  assert p < 0.05
  cell = rows['humanoid_stand'][column]
  # With 3 seeds the IQM is their mean.
  assert cell.startswith(f'{np.mean(stand) - floor:.1f} [')
  assert cell.endswith(f', p = {p:.2f}: Ape-X DPG ahead of the random policy')
  assert rows['bring_ball'][column] == 'one seed: no interval, not compared'
  # Seeds level with the floor: nothing shown.
  level = dpg_control.against_random([6.0, 7.9, 6.5], floor)
  assert level.endswith('no difference shown (the interval holds 0)')


def test_the_runs_table_and_the_command(page):
  data, text = page
  assert data['steps'] == run.DPG_CONTROL_STEPS
  assert '--preset=control_small' in data['command']
  assert '--env=control:humanoid:stand' in data['command']
  table = [block for block in text.split('\n\n')
           if block.startswith('| task | seed |')][0].splitlines()[2:]
  assert [line.split(' | ')[:2] for line in table] == [
      ['| humanoid_stand', '0'], ['| humanoid_stand', '1'],
      ['| humanoid_stand', '2'], ['| bring_ball', '0']]
  assert table[3].startswith('| bring_ball | 0 | 0.5 ± 1.5 |')
  assert '| 500,000 | 62,500 |' in table[0]  # Steps and updates.
  # SAC's and TD-MPC2's means over their CSVs' seeds, beside
  # humanoid:stand alone.
  assert ('SAC 5.2 at 500,000 steps and 6.4 at 1,000,000 steps; TD-MPC2 '
          '422.2 at 500,000 steps and 663.7 at 1,000,000 steps') in text
  assert list(data['references']) == ['humanoid_stand']


def test_a_later_report_keeps_the_random_policys_returns(page, tmp_path,
                                                         monkeypatch):
  data, _ = page
  kept = data['random']['humanoid_stand']
  assert (kept['env'], kept['seed']) == ('control:humanoid:stand', 0)
  assert kept['returns'] == FLOORS['humanoid_stand']
  # Played so (3 episodes, seed 0), the returns are kept: the random
  # policy is not played again, and the floor is the same.
  monkeypatch.setattr(dpg_control, 'RANDOM_EPISODES', 3)

  def played(env, episodes, seed):
    raise AssertionError(f'played again: {env}, {episodes}, {seed}')

  monkeypatch.setattr(dpg_control, 'random_returns', played)
  with flagsaver.flagsaver(runs=str(tmp_path / 'runs'),
                           bank_dir=str(tmp_path / 'bank'), notes=None):
    dpg_control.report([0, 1, 2])
  again = json.loads((tmp_path / 'pages' / 'dpg_control.json').read_text())
  assert again['random'] == data['random']
  # Kept returns of another count are played again.
  monkeypatch.setattr(dpg_control, 'RANDOM_EPISODES', 4)
  with flagsaver.flagsaver(runs=str(tmp_path / 'runs'),
                           bank_dir=str(tmp_path / 'bank'), notes=None):
    with pytest.raises(AssertionError, match='played again'):
      dpg_control.report([0, 1, 2])


def test_a_task_not_in_the_analysis_is_refused():
  if not FLAGS.is_parsed():
    FLAGS(['test'])
  with flagsaver.flagsaver(tasks=['humanoid_run']):
    with pytest.raises(ValueError, match=r"no task \['humanoid_run'\]"):
      dpg_control.chosen_tasks()


@pytest.mark.parametrize('page,choice,setting', [
    ('dpg_control', '--tasks', 'bring_ball'),
    ('minatar', '--games', 'breakout')])
def test_a_dry_run_lists_the_commands_and_runs_nothing(tmp_path, page, choice,
                                                       setting):
  # One run finished but not evaluated, one not started: the dry run lists
  # the evaluation of the first, then the training and evaluations of the
  # second, and makes no directory, run or evaluation of its own.
  runs, bank_dir = tmp_path / 'runs', tmp_path / 'bank'
  env = page_runs.environments(page)[setting]
  done = runs / page / setting / 'seed0'
  _make_run(str(done), env, 0, 1000, evaluated=False)
  before = sorted(str(path) for path in tmp_path.rglob('*'))
  result = subprocess.run(
      [sys.executable, '-m', f'results.{page}', '--dry_run', '--seeds=0,1',
       f'{choice}={setting}', f'--runs={runs}', f'--bank_dir={bank_dir}'],
      cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
  assert result.returncode == 0, result.stderr
  assert sorted(str(path) for path in tmp_path.rglob('*')) == before
  steps = [line.split(': ', 1) for line in result.stdout.splitlines()]
  files = {'dpg_control': ['final_evaluation.json'],
           'minatar': ['evaluation_epsilon0.1.json', 'final_evaluation.json']}
  expected = [f'{setting} seed 0 evaluate'] * len(files[page]) + [
      f'{setting} seed 1 train'] + [
          f'{setting} seed 1 evaluate'] * len(files[page])
  assert [step for step, _ in steps] == expected
  train = steps[len(files[page])][1].split()
  program = {'dpg_control': 'apex_dpg.py', 'minatar': 'apex_dqn.py'}[page]
  assert train[1] == os.path.join('programs', program)
  assert f'--env={env}' in train and '--seed=1' in train
  assert f'--workdir={runs / page / setting / "seed1"}' in train
  outputs = [command.split()[-1] for step, command in steps
             if step.endswith('evaluate')]
  assert outputs == [f'--output={runs / page / setting / f"seed{seed}" / name}'
                     for seed in (0, 1) for name in files[page]]


def test_a_run_made_with_another_environment_is_refused(tmp_path):
  runs = tmp_path / 'runs'
  _make_run(str(runs / 'dpg_control' / 'bring_ball' / 'seed0'),
            'control:cartpole:balance', 0, 1000, evaluated=False)
  result = subprocess.run(
      [sys.executable, '-m', 'results.dpg_control', '--seeds=0',
       '--tasks=bring_ball', f'--runs={runs}',
       f'--bank_dir={tmp_path / "bank"}'],
      cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
  assert result.returncode != 0
  assert ("holds a run of 'control:cartpole:balance', not of "
          "'control:manipulator:bring_ball': choose another --runs") in (
              result.stderr)
  assert not (runs / 'dpg_control' / 'bring_ball' / 'seed0' /
              'final_evaluation.json').exists()


def test_a_report_of_some_seeds_keeps_every_finished_run(page, tmp_path,
                                                         capsys):
  # The page was made from seeds 0-2 of humanoid:stand and seed 0 of
  # bring_ball. Running bring_ball's seed 0 alone (as its documented
  # command does), with a started but unfinished seed 5 beside it, reports
  # seeds 0-2 again: no finished run leaves the page, and none unfinished
  # joins it.
  data, _ = page
  unfinished = tmp_path / 'runs' / 'dpg_control' / 'humanoid_stand' / 'seed5'
  unfinished.mkdir()
  (unfinished / 'run.json').write_text(json.dumps(
      {'program': 'apex_dpg', 'env': dpg_control.ENVS['humanoid_stand']}))
  with flagsaver.flagsaver(runs=str(tmp_path / 'runs'),
                           bank_dir=str(tmp_path / 'bank'), notes=None,
                           report_only=True, bank=False, dry_run=False):
    page_runs.main('dpg_control', ['bring_ball'], [0], [dpg_control.FINAL],
                   dpg_control.report)
  again = json.loads((tmp_path / 'pages' / 'dpg_control.json').read_text())
  assert again['seeds'] == [0, 1, 2]
  assert [row['seed'] for row in again['tasks']['humanoid_stand']] == [0, 1, 2]
  assert again['tasks'] == data['tasks']
  assert ('[dpg_control] the page reports seeds 0,1,2: every seed with a '
          'finished run, not only --seeds.') in capsys.readouterr().out


def test_the_readme_row_gives_each_task_its_seeds_and_floor(page, tmp_path,
                                                             monkeypatch):
  data, _ = page
  monkeypatch.setattr(table, 'RESULTS', str(tmp_path / 'pages'))
  monkeypatch.setattr(pages, 'RESULTS', str(tmp_path / 'pages'))
  [row] = table._dpg_control_row()
  cells = [cell.strip() for cell in row.strip('|').split('|')]
  stand = list(STAND.values())
  floor = data['random']['humanoid_stand']['mean']
  assert cells[1] == (
      'final policy, 30 episodes: control:humanoid:stand '
      f'{np.mean(stand):.1f} ± {np.std(stand, ddof=1):.1f} '
      f'({min(stand):.1f} to {max(stand):.1f}) (random policy {floor:.1f}); '
      'control:manipulator:bring_ball 0.5 (random policy '
      f'{np.mean(FLOORS["bring_ball"]):.1f})')
  assert cells[2] == '1 to 3'
  assert cells[3].startswith(
      f'against the random policy, the IQM\'s difference: humanoid_stand: '
      f'{np.mean(stand) - floor:.1f} [')
  assert cells[3].endswith(': Ape-X DPG ahead of the random policy; '
                           'bring_ball: one seed: no interval, not compared')
  # No page yet, no row.
  monkeypatch.setattr(table, 'RESULTS', str(tmp_path / 'none'))
  assert table._dpg_control_row() == []
