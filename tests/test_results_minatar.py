"""results/minatar.py: the matched protocol's page, rendered from a
synthetic JSON of five games x 3 seeds, against figures worked out here (the
sample sd, the IQM by trimming by hand, the one-sample t-test from its
formula, the window arithmetic; the bootstrap intervals as results/spread.py
draws them); and what `--dry_run` plans for a directory of runs in every
state (none, unfinished, finished without its evaluations, finished)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats

from results import minatar
from results import spread

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GAMES = ['asterix', 'breakout', 'freeway', 'seaquest', 'space_invaders']
REFERENCE = {'asterix': (7.3, 14.3), 'breakout': (9.2, 9.7),
             'freeway': (47.9, 50.7), 'seaquest': (1.0, 4.9),
             'space_invaders': (32.6, 41.4)}
# Ape-X §4.1's schedule over 16 environments, worked out here.
EPSILONS = [0.4 ** (1 + 7 * i / 15) for i in range(16)]


def _record(seed, matched, final, length):
  return dict(seed=seed, env='x', matched_mean=matched, matched_std=1.0,
              matched_episodes=100, matched_mean_length=length,
              final_mean=final, final_std=1.0, final_episodes=30,
              final_learner_steps=1, last_round=None, best_round=None,
              rounds=[], actor_frames=1_000_000, learner_updates=125_000,
              wall_clock_minutes=20.0, launches=1,
              actor_frames_per_second=800.0, learner_updates_per_second=100.0)


def _data(matched, final=None, lengths=None):
  final = final or {game: [1.0, 2.0, 3.0] for game in matched}
  lengths = lengths or {game: [100.0, 200.0, 300.0] for game in matched}
  return dict(
      protocol='matched', frames=1_000_000, seeds=[0, 1, 2],
      matched_episodes=100, matched_epsilon=0.1, final_episodes=30,
      final_epsilon=0.001, actor_epsilons=EPSILONS, command='x', notes='',
      reference=REFERENCE,
      games={game: [_record(seed, matched[game][seed], final[game][seed],
                            lengths[game][seed]) for seed in range(3)]
             for game in matched})


def _table(page: str, header_start: str):
  """The rows of the page's table whose header starts `header_start`, as
  {column title: cell}, one a game."""
  block = [part for part in page.split('\n\n')
           if part.startswith(header_start)][0].splitlines()
  header = [cell.strip() for cell in block[0].strip('|').split('|')]
  return {row['game']: row for row in (
      dict(zip(header, (cell.strip() for cell in line.strip('|').split('|'))))
      for line in block[2:])}


def _one_sample_p(values, reference):
  values = np.asarray(values)
  t = (values.mean() - reference) / (values.std(ddof=1) / np.sqrt(len(values)))
  return 2 * stats.t.sf(abs(t), len(values) - 1)


# Breakout well above theirs at every seed, Freeway well below, Asterix
# spread across theirs, Space Invaders above at every seed but with one seed
# far off (the interval excludes their figure, the t-test does not).
MATCHED = {'asterix': [2.0, 7.0, 13.0], 'breakout': [20.0, 21.0, 22.0],
           'freeway': [30.0, 31.0, 32.5], 'seaquest': [2.0, 3.0, 4.0],
           'space_invaders': [33.0, 34.0, 90.0]}


def test_the_page_opens_with_each_seed_and_its_sample_sd():
  page = minatar.render(_data(MATCHED))
  assert page.split('\n')[2].startswith(
      '**After 1,000,000 frames, 3 seeds a game, all 6 actions: the matched '
      'measure.**')
  rows = _table(page, '| game | Ape-X DQN, epsilon 0.1 |')
  assert list(rows) == GAMES
  for game, values in MATCHED.items():
    row = rows[game]
    assert row['Ape-X DQN, epsilon 0.1'] == (
        f'{np.mean(values):.1f} ± {np.std(values, ddof=1):.1f}')
    assert [row[f'seed {seed}'] for seed in range(3)] == [
        f'{value:.1f}' for value in values]
    assert row['Young & Tian\'s DQN at 1M frames'] == (
        f'{REFERENCE[game][0]:.1f}')
  # The near-greedy figure has a table of its own.
  greedy = _table(page, '| game | Ape-X DQN, epsilon 0.001 |')
  assert greedy['breakout']['Ape-X DQN, epsilon 0.001'] == '2.0 ± 1.0'


def test_each_game_against_theirs_needs_its_interval_and_the_t_test():
  rows = _table(minatar.render(_data(MATCHED)),
                '| game | Ape-X DQN, epsilon 0.1 |')
  cells = {game: row['ours less theirs, 95% CI, p']
           for game, row in rows.items()}
  for game, values in MATCHED.items():
    theirs = REFERENCE[game][0]
    # With 3 seeds the IQM trims none: the difference is the mean's.
    _, low, high = spread.iqm_interval(values)
    assert cells[game].startswith(
        f'{np.mean(values) - theirs:+.1f} [{low - theirs:.1f}, '
        f'{high - theirs:.1f}], p = {_one_sample_p(values, theirs):.2f}: ')
  assert cells['breakout'].endswith(
      ': Ape-X DQN ahead of Young & Tian\'s DQN')
  assert cells['freeway'].endswith(': Ape-X DQN behind Young & Tian\'s DQN')
  assert cells['asterix'].endswith(
      ': no difference shown (the interval holds 0)')
  assert cells['space_invaders'].endswith(
      ': no difference shown (the interval excludes 0, the t-test\'s p '
      'does not fall below 0.05)')


def test_two_seeds_give_their_figures_and_no_verdict():
  # Breakout's and Freeway's first two seeds lie far from theirs, at
  # interval and p that 3 seeds would call; with 2 a game, the page and the
  # README's row give the figures and call nothing, per game or over games.
  data = _data(MATCHED)
  data['seeds'] = [0, 1]
  data['games'] = {game: rows[:2] for game, rows in data['games'].items()}
  rows = _table(minatar.render(data), '| game | Ape-X DQN, epsilon 0.1 |')
  for game in GAMES:
    values, theirs = MATCHED[game][:2], REFERENCE[game][0]
    cell = rows[game]['ours less theirs, 95% CI, p']
    assert cell.startswith(f'{np.mean(values) - theirs:+.1f} [')
    assert cell.endswith(
        f'p = {_one_sample_p(values, theirs):.2f}: no verdict from 2 seeds '
        '(one needs 3 at least)')
  assert _one_sample_p(MATCHED['breakout'][:2], 9.2) < 0.05
  page = minatar.render(data)
  assert ('**Over the 5 games and 2 seeds:** the interquartile mean (IQM)'
          in page)
  assert '): no verdict from 2 seeds (one needs 3 at least).' in page
  assert not any(f'{word} Young & Tian' in page
                 for word in ('ahead of', 'behind'))


def _iqm_by_hand(values):
  values = np.sort(np.ravel(values))
  cut = len(values) // 4  # 15 values: 3 from each end.
  return float(np.mean(values[cut:len(values) - cut]))


@pytest.mark.parametrize('scale, said', [
    (1.0, 'Ape-X DQN ahead of Young & Tian\'s DQN: the interval lies '
          'above 1'),
    (0.2, 'Ape-X DQN behind Young & Tian\'s DQN: the interval lies '
          'below 1'),
])
def test_the_iqm_over_games_and_what_its_interval_supports(scale, said):
  matched = {game: [value * scale for value in values]
             for game, values in MATCHED.items()}
  page = minatar.render(_data(matched))
  ratios = [[matched[game][seed] / REFERENCE[game][0] for game in GAMES]
            for seed in range(3)]
  value = _iqm_by_hand(ratios)
  _, low, high = spread.iqm_interval(ratios)
  assert spread.iqm(ratios) == pytest.approx(value)
  assert (f'**Over the 5 games and 3 seeds:** the interquartile mean (IQM) '
          f'of each run\'s matched return over Young & Tian\'s DQN at 1M '
          'frames') in page
  assert f'is {value:.2f} [{low:.2f}, {high:.2f}] (95% interval;' in page
  assert f': {said}.' in page


def test_an_interval_that_holds_one_shows_no_difference():
  # Every game's seeds straddle theirs: ratios 0.5, 1, 1.5.
  matched = {game: [0.5 * REFERENCE[game][0], REFERENCE[game][0],
                    1.5 * REFERENCE[game][0]] for game in GAMES}
  page = minatar.render(_data(matched))
  assert ': no difference shown: the interval holds 1.' in page


def test_the_window_of_100_episodes_in_frames():
  lengths = {game: [100.0, 200.0, 300.0] for game in GAMES}
  lengths['freeway'] = [2500.0, 2500.0, 2500.0]
  page = minatar.render(_data(MATCHED, lengths=lengths))
  # The environment nearest epsilon 0.1 is number 3 (0.4^2.4 = 0.111); it
  # plays 1/16 of 1M frames.
  assert np.argmin([abs(e - 0.1) for e in EPSILONS]) == 3
  header = ('| game | episode at epsilon 0.1 (frames) | 100 such episodes '
            '(frames) | their window: share of 1,000,000 frames | '
            f'environment 3 (epsilon {EPSILONS[3]:.3f}): 100 of its episodes '
            'over its 62,500 frames |')
  assert header in page
  assert '| breakout | 200 | 20,000 | 2.0% | 32% |' in page
  assert '| freeway | 2,500 | 250,000 | 25.0% | 400% |' in page


def _write(path, data):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, 'w') as f:
    json.dump(data, f)


def _plan(runs, *flags):
  # An empty bank of its own: the repository's (results/banked) may hold
  # real runs of these games, which the plan would list as banked.
  return subprocess.run(
      [sys.executable, '-m', 'results.minatar', '--dry_run',
       f'--runs={runs}', f'--bank_dir={os.path.join(runs, "bank")}', *flags],
      cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)


def test_the_dry_run_plans_what_each_run_still_needs(tmp_path):
  runs = str(tmp_path)
  workdir = lambda game, seed: os.path.join(runs, 'minatar', game,
                                            f'seed{seed}')
  manifest = lambda game: {'program': 'apex_dqn', 'env': f'minatar:{game}:full',
                           'config': {}}
  # Breakout seed 0: finished and evaluated; Asterix seed 1: started, not
  # finished; Freeway seed 2: finished, not yet evaluated.
  _write(os.path.join(workdir('breakout', 0), 'run.json'),
         manifest('breakout'))
  for name in ('finished.json', 'evaluation_epsilon0.1.json',
               'final_evaluation.json'):
    _write(os.path.join(workdir('breakout', 0), name), {})
  _write(os.path.join(workdir('asterix', 1), 'run.json'), manifest('asterix'))
  _write(os.path.join(workdir('freeway', 2), 'run.json'), manifest('freeway'))
  _write(os.path.join(workdir('freeway', 2), 'finished.json'), {})
  result = _plan(runs, '--seeds=0,1,2')
  assert result.returncode == 0, result.stderr
  lines = result.stdout.splitlines()
  python = os.path.join('.venv', 'bin', 'python')
  expected = []
  for seed in range(3):
    for game in GAMES:
      directory = workdir(game, seed)
      if (game, seed) == ('asterix', 1):
        expected.append(
            f'{game} seed {seed} resume: {python} programs/apex_dqn.py '
            f'--lp_launch_type=local_mp --workdir={directory}')
      elif (game, seed) not in (('breakout', 0), ('freeway', 2)):
        expected.append(
            f'{game} seed {seed} train: {python} programs/apex_dqn.py '
            f'--lp_launch_type=local_mp --workdir={directory} '
            f'--preset=minatar --env=minatar:{game}:full '
            f'--max_actor_steps=1000000 --seed={seed} --log_every=5 '
            '--replay_checkpoint_every=0')
      if (game, seed) != ('breakout', 0):
        expected += [
            f'{game} seed {seed} evaluate: {python} programs/evaluate.py '
            f'--workdir={directory} --episodes=100 --epsilon=0.1 '
            f'--seed={seed} --output={directory}/evaluation_epsilon0.1.json',
            f'{game} seed {seed} evaluate: {python} programs/evaluate.py '
            f'--workdir={directory} --episodes=30 --epsilon=0.001 '
            f'--seed={seed} --output={directory}/final_evaluation.json']
  assert lines == expected
  assert sum(' train: ' in line for line in lines) == 12


def test_a_run_of_the_minimal_action_set_is_refused(tmp_path):
  runs = str(tmp_path)
  _write(os.path.join(runs, 'minatar', 'seaquest', 'seed0', 'run.json'),
         {'program': 'apex_dqn', 'env': 'minatar:seaquest', 'config': {}})
  result = _plan(runs, '--seeds=0', '--games=seaquest')
  assert result.returncode != 0
  assert ("holds a run of 'minatar:seaquest', not of "
          "'minatar:seaquest:full'") in result.stderr
