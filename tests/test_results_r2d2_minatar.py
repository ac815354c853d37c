"""results/r2d2_minatar.py: R2D2's MinAtar page, rendered from a synthetic
JSON of five games x 3 seeds (tests/test_results_minatar.py's), against
figures worked out here: the IQM over games by trimming by hand, what its
interval says against Young & Tian's DQN, the difference to Ape-X DQN's
runs, and the departures from the paper (the paper's values as its Table 2
gives them, the replay ratio and target copies by hand); and the page's
command with no runs, and what it would run."""

import os
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats

from results import minatar
from results import r2d2_minatar
from test_results_minatar import GAMES
from test_results_minatar import REFERENCE
from test_results_minatar import _data
from test_results_minatar import _one_sample_p
from test_results_minatar import _table

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Every game at 1.5 to 1.7 times Young & Tian's DQN; Ape-X DQN's at 1.0.
SCALE = {0: 1.5, 1: 1.6, 2: 1.7}
MATCHED = {game: [REFERENCE[game][0] * SCALE[seed] for seed in range(3)]
           for game in REFERENCE}
# R2D2's values (Kapturowski et al. 2019, §2.3, §3 and Table 2), read off
# the paper: its network, sequences, replay, learner and 256 actors.
PAPER = {
    'lstm_size': 512, 'dueling_hidden_size': 512, 'trace_length': 80,
    'burn_in_length': 40, 'sequence_period': 40, 'batch_size': 64,
    'replay_capacity': 100_000, 'target_update_period': 2500,
    'learning_rate': 1e-4, 'adam_epsilon': 1e-3, 'n_step': 5,
    'discount': 0.997, 'value_rescaling_epsilon': 1e-3,
    'priority_exponent': 0.9, 'priority_eta': 0.9,
    'importance_sampling_exponent': 0.6, 'epsilon_base': 0.4,
    'epsilon_alpha': 7.0, 'variable_update_period': 400, 'num_actors': 256}
# Runs that change six of the paper's values, and set those it has none of.
CHANGED = {'lstm_size': 128, 'dueling_hidden_size': 128, 'trace_length': 40,
           'burn_in_length': 20, 'sequence_period': 20, 'num_actors': 2}
FLAGS = dict(PAPER, **CHANGED, envs_per_actor=8, samples_per_insert=4.0,
             min_replay_size=250, evaluation_period=5000,
             evaluation_episodes=10)


def _page_data(matched, flags=None):
  data = _data(matched)
  apex = {game: [{'seed': seed, 'matched_mean': REFERENCE[game][0]}
                 for seed in range(3)] for game in REFERENCE}
  data.update(apex_dqn=apex, apex_dqn_iqm=[1.0, 1.0, 1.0],
              beside_apex_dqn=minatar.beside(data['games'], apex, REFERENCE),
              paper=dict(PAPER), flags=dict(flags or FLAGS))
  return data


def test_the_paper_values_are_its_table_2s():
  assert r2d2_minatar.paper_values() == PAPER


def test_each_game_beside_theirs_and_apex_dqn():
  page = r2d2_minatar.render(_page_data(MATCHED))
  rows = _table(page, '| game |')
  assert list(rows) == GAMES
  for game, values in MATCHED.items():
    row = rows[game]
    assert row['R2D2, epsilon 0.1'] == (
        f'{np.mean(values):.1f} ± {np.std(values, ddof=1):.1f}')
    assert row['Ape-X DQN (mean of its seeds)'] == f'{REFERENCE[game][0]:.1f}'
    # Every seed above theirs (a resample's IQM of 3 values is at least
    # their least, 1.5 x theirs), and the t-test's p below 0.05: R2D2's
    # verdict, by its own name.
    assert _one_sample_p(values, REFERENCE[game][0]) < 0.05
    assert row['ours less theirs, 95% CI, p'].endswith(
        ': R2D2 ahead of Young & Tian\'s DQN')


def test_the_iqm_against_theirs_and_the_difference_to_apex_dqn():
  data = _page_data(MATCHED)
  page = r2d2_minatar.render(data)
  # 15 ratios, five each of 1.5, 1.6 and 1.7: the IQM (scipy's trimmed
  # mean, as rliable's) cuts 3 from each end, leaving two 1.5s, five 1.6s
  # and two 1.7s: 1.60. Every resample's IQM is at least 1.5: above 1.
  ratios = [SCALE[seed] for seed in range(3)] * 5
  assert stats.trim_mean(ratios, 0.25) == pytest.approx(
      np.mean([1.5] * 2 + [1.6] * 5 + [1.7] * 2))
  assert ('the IQM of each run\'s matched return over Young & Tian\'s DQN '
          'at 1M frames is 1.60') in page
  assert (': R2D2 ahead of Young & Tian\'s DQN: the interval lies above '
          '1.') in page
  beside = data['beside_apex_dqn']
  assert beside['difference'] == pytest.approx(0.6)
  assert beside['low'] > 0
  assert 'R2D2 ahead.' in page
  assert 'Ape-X DQN ahead' not in page


def test_an_iqm_below_theirs():
  # Ratios of 0.3 to 0.34: every resample's IQM lies below 1.
  low = {game: [value * 0.2 for value in values]
         for game, values in MATCHED.items()}
  page = r2d2_minatar.render(_page_data(low))
  assert (': R2D2 behind Young & Tian\'s DQN: the interval lies below '
          '1.') in page
  assert 'R2D2 behind.' in page


def test_where_the_runs_depart_from_the_paper():
  page = r2d2_minatar.render(_page_data(MATCHED))
  section = page.split('## Where these runs depart from the paper')[1].split(
      '## The runs')[0]
  rows = [line for line in section.splitlines() if line.startswith('| `')]
  assert rows == [
      '| `lstm_size` | 512 | 128 |', '| `dueling_hidden_size` | 512 | 128 |',
      '| `trace_length` | 80 | 40 |', '| `burn_in_length` | 40 | 20 |',
      '| `sequence_period` | 40 | 20 |', '| `num_actors` | 256 | 2 |']
  kept = section.split('Kept from the paper: ')[1].split('.\n')[0]
  assert [part.split('`')[1] for part in kept.split(', ')] == [
      name for name in PAPER if name not in CHANGED]
  assert '`batch_size` 64' in kept and '`learning_rate` 0.0001' in kept
  # 40 learnt steps a sequence, a new one every 20: each step in 2
  # sequences, each sampled 4 times. The paper: 5 updates/s x 64 x 80
  # learnt steps against 256 actors x 260 steps/s = 25,600 / 66,560.
  assert 'in 40 / 20 = 2 sequences' in section
  assert 'about 8 replays a step' in section
  assert f'make about {25_600 / 66_560:.1f}.' in section
  assert 25_600 / 66_560 == pytest.approx(0.385, abs=1e-3)
  # 125,000 updates a run (the synthetic records'), a copy every 2,500.
  assert ('a target copy every 2,500 updates is 50.0 copies a run') in section
  assert '16 environments (2 actors x 8)' in section
  assert '0.4^(1 + 7 i / 15)' in section


def test_runs_that_keep_every_value_change_none():
  page = r2d2_minatar.render(_page_data(MATCHED, dict(
      PAPER, envs_per_actor=1, samples_per_insert=1.0, min_replay_size=1,
      evaluation_period=1, evaluation_episodes=1)))
  section = page.split('## Where these runs depart from the paper')[1]
  assert not any(line.startswith('| `') for line in
                 section.split('## The runs')[0].splitlines())


def _page_command(runs, *flags):
  # An empty bank of its own: the repository's may hold real runs.
  return subprocess.run(
      [sys.executable, '-m', 'results.r2d2_minatar', f'--runs={runs}',
       f'--bank_dir={os.path.join(runs, "bank")}', *flags],
      cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)


def test_with_no_runs_report_only_is_refused_and_writes_nothing(tmp_path):
  page = os.path.join(ROOT, 'results', 'r2d2_minatar.json')
  existed = os.path.exists(page)
  result = _page_command(str(tmp_path), '--seeds=0,1,2', '--report_only')
  assert result.returncode != 0
  assert ('--report_only: no finished run of r2d2_minatar, banked or in '
          'the runs directory') in result.stderr
  assert 'Traceback' not in result.stderr
  assert os.path.exists(page) == existed


def test_the_dry_run_trains_r2d2_on_every_game_with_all_6_actions(tmp_path):
  runs = str(tmp_path)
  result = _page_command(runs, '--seeds=0', '--dry_run')
  assert result.returncode == 0, result.stderr
  python = os.path.join('.venv', 'bin', 'python')
  expected = []
  for game in GAMES:
    directory = os.path.join(runs, 'r2d2_minatar', game, 'seed0')
    expected += [
        f'{game} seed 0 train: {python} programs/r2d2.py '
        f'--lp_launch_type=local_mp --workdir={directory} --preset=minatar '
        f'--env=minatar:{game}:full --max_actor_steps=1000000 --seed=0 '
        '--log_every=5 --replay_checkpoint_every=0',
        f'{game} seed 0 evaluate: {python} programs/evaluate.py '
        f'--workdir={directory} --episodes=100 --epsilon=0.1 --seed=0 '
        f'--output={directory}/evaluation_epsilon0.1.json',
        f'{game} seed 0 evaluate: {python} programs/evaluate.py '
        f'--workdir={directory} --episodes=30 --epsilon=0.001 --seed=0 '
        f'--output={directory}/final_evaluation.json']
  assert result.stdout.splitlines() == expected
