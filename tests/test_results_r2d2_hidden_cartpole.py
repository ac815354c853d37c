"""results/r2d2_hidden_cartpole.py: R2D2 on CartPole without velocities
beside Ape-X DQN, its page made from runs laid out as the programs leave
them (tests/test_results_bank.py's), with evaluator episodes and final
evaluations whose values are chosen here. Its figures are worked out here
from those values: when a mean of 10 consecutive evaluator episodes first
reached 475, at the actor steps of the parameters played (a window across
two rounds counts, and parameters learned past the budget do not), the
best such mean, each agent's count of seeds that reached it, the goal's
verdict, and R2D2 less Ape-X DQN on the final policies (Welch's t-test
from scipy, the verdict by the rule of results/spread.py)."""

import csv
import json
import os

from absl import flags
from absl.testing import flagsaver
import numpy as np
import pytest
from scipy import stats

from results import page_registry
from results import page_runs
from results import r2d2_hidden_cartpole as page_module
from results import run
from tests.test_results_bank import START
from tests.test_results_bank import _make_run

FLAGS = flags.FLAGS

ANALYSIS = page_module.ANALYSIS
ENV = 'gym:CartPole-v1:hide_velocity'
PROGRAMS = {'R2D2': 'r2d2', 'Ape-X DQN': 'apex_dqn'}
SLUGS = {'R2D2': 'R2D2', 'Ape-X DQN': 'Ape_X_DQN'}
# The actor steps of each evaluation round's parameters: the last is past
# the budget of 300,000.
ROUND_STEPS = [50_000, 100_000, 150_000, 200_000, 250_000, 305_000]
# R2D2's rounds, by seed: each round's 10 returns.
R2D2_ROUNDS = {
    # No round's mean reaches 475 before 250K, but the last 5 episodes of
    # the round at 150K (500 each) and the first 5 of the one at 200K make
    # a window of 500; the first window at or above 475 ends at the 200K
    # round's third episode (480): reached at 200K.
    0: [[20.0] * 10, [100.0] * 10, [400.0] * 5 + [500.0] * 5,
        [500.0] * 5 + [400.0] * 5, [500.0] * 10, [500.0] * 10],
    # A round of 400 then one of 480: the first window at or above 475 is
    # that round's whole (480, at 250K); its 500s come past the budget.
    1: [[20.0] * 10, [100.0] * 10, [300.0] * 10, [400.0] * 10, [480.0] * 10,
        [500.0] * 10],
    # 475 only with parameters learned past the budget: not reached.
    2: [[20.0] * 10, [50.0] * 10, [100.0] * 10, [200.0] * 10, [300.0] * 10,
        [500.0] * 10],
}
# Ape-X DQN's rounds: a last round at 300,000 exactly, within the budget.
APEX_STEPS = [50_000, 100_000, 150_000, 200_000, 250_000, 300_000]
APEX_ROUNDS = {seed: [[value + 10.0 * seed] * 10 for value in
                      (20.0, 60.0, 120.0, 150.0, 180.0, 200.0)]
               for seed in range(3)}
R2D2_FINAL = {0: 500.0, 1: 480.0, 2: 490.0}
APEX_FINAL = {0: 150.0, 1: 170.0, 2: 160.0}


def _write_csv(path, rows):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, 'w', newline='') as f:
    writer = csv.DictWriter(f, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)


def _run_of(runs, setting, seed, rounds, round_steps, final,
            program=None, round_actor_steps=True):
  """A finished run of `setting` (by `program`, its own by default) whose
  evaluator played `rounds` (each round's returns) with the parameters of
  `round_steps` actor steps, and whose final policy's mean is `final`."""
  program = program or PROGRAMS[setting]
  workdir = os.path.join(runs, ANALYSIS, SLUGS[setting], f'seed{seed}')
  _make_run(workdir, ENV, seed, 300_000, evaluated=False)
  with open(os.path.join(workdir, 'run.json')) as f:
    manifest = json.load(f)
  manifest['program'] = program
  manifest['flags'].update(evaluation_period=500, evaluation_episodes=10)
  with open(os.path.join(workdir, 'run.json'), 'w') as f:
    json.dump(manifest, f)
  rows = []
  for index, (returns, steps) in enumerate(zip(rounds, round_steps)):
    for episode, value in enumerate(returns):
      row = {'actor_steps': steps + 1_000 * (episode + 1),
             'learner_steps': steps // 32 + episode,
             'episode_return': value,
             'round_started': START + 200 * index,
             'round_learner_steps': steps // 32,
             'round_actor_steps': steps,
             'walltime': START + 200 * index + episode}
      if not round_actor_steps:
        del row['round_actor_steps']
      rows.append(row)
  _write_csv(os.path.join(workdir, 'logs', 'evaluator', 'logs.csv'), rows)
  with open(os.path.join(workdir, page_module.FINAL.file), 'w') as f:
    json.dump({'program': program, 'env': ENV, 'learner_steps': 9_375,
               'epsilon': 0.0, 'seed': seed, 'episodes': 30,
               'returns': [final] * 30, 'lengths': [int(final)] * 30,
               'mean': final, 'std': 4.5, 'median': final, 'min': final,
               'max': final}, f)
  return workdir


def _report(tmp_path, monkeypatch, r2d2_rounds, r2d2_final=None,
            apex_final=None):
  """(JSON, text) of the page reported from R2D2's runs of `r2d2_rounds`
  (seed -> rounds) and Ape-X DQN's of `APEX_ROUNDS`, into a directory of
  the test's."""
  if not FLAGS.is_parsed():
    FLAGS(['test'])
  r2d2_final = r2d2_final or R2D2_FINAL
  apex_final = apex_final or APEX_FINAL
  runs = str(tmp_path / 'runs')
  for seed, rounds in r2d2_rounds.items():
    _run_of(runs, 'R2D2', seed, rounds, ROUND_STEPS, r2d2_final[seed])
    _run_of(runs, 'Ape-X DQN', seed, APEX_ROUNDS[seed], APEX_STEPS,
            apex_final[seed])
  pages = tmp_path / 'pages'
  pages.mkdir(exist_ok=True)
  monkeypatch.setattr(run, 'RESULTS', str(pages))
  monkeypatch.setattr(page_module, 'RESULTS', str(pages))
  with flagsaver.flagsaver(runs=runs, bank_dir=str(tmp_path / 'bank'),
                           notes='Nothing else ran.'):
    page_module.report(sorted(r2d2_rounds))
  assert (pages / f'{ANALYSIS}.png').stat().st_size > 0
  data = json.loads((pages / f'{ANALYSIS}.json').read_text())
  return data, (pages / f'{ANALYSIS}.md').read_text()


def _rows(text, first):
  table = [block for block in text.split('\n\n')
           if block.startswith(first)][0].splitlines()
  header = [cell.strip() for cell in table[0].strip('|').split('|')]
  return [dict(zip(header, (cell.strip()
                            for cell in line.strip('|').split('|'))))
          for line in table[2:]]


def _first_reaching(rounds, round_steps, window=10, target=475,
                    budget=300_000):
  """tests/test_learning.py's `_first_step_reaching`, on the returns and
  round steps of `rounds`: (first steps or None, best mean within the
  budget, its steps)."""
  returns = np.array([value for chunk in rounds for value in chunk])
  learned_by = np.array([steps for chunk, steps in zip(rounds, round_steps)
                         for _ in chunk])
  reached, best = None, (None, None)
  for end in range(window, len(returns) + 1):
    mean = returns[end - window:end].mean()
    if learned_by[end - 1] > budget:
      continue
    if reached is None and mean >= target:
      reached = int(learned_by[end - 1])
    if best[0] is None or mean > best[0]:
      best = (float(mean), int(learned_by[end - 1]))
  return reached, *best


@pytest.fixture
def page(tmp_path, monkeypatch):
  return _report(tmp_path, monkeypatch, R2D2_ROUNDS)


def test_each_run_first_reaches_475_by_the_parameters_played(page):
  data, text = page
  assert page_module.render(data) == text
  assert page_registry.renderer(ANALYSIS) is page_module.render
  for setting, rounds_by_seed, steps in (('R2D2', R2D2_ROUNDS, ROUND_STEPS),
                                         ('Ape-X DQN', APEX_ROUNDS,
                                          APEX_STEPS)):
    rows = {row['seed']: row for row in data['agents'][setting]}
    assert sorted(rows) == [0, 1, 2]
    for seed, rounds in rounds_by_seed.items():
      reached, best, best_steps = _first_reaching(rounds, steps)
      assert rows[seed]['reached_steps'] == reached, (setting, seed)
      assert rows[seed]['best_mean'] == pytest.approx(best)
      assert rows[seed]['best_steps'] == best_steps
      assert rows[seed]['evaluator_episodes'] == 60
      assert [r['mean_return'] for r in rows[seed]['rounds']] == [
          pytest.approx(np.mean(chunk)) for chunk in rounds]
      assert [r['actor_steps'] for r in rows[seed]['rounds']] == steps
  r2d2 = {row['seed']: row for row in data['agents']['R2D2']}
  # Worked out by hand (R2D2_ROUNDS' comments).
  assert [r2d2[seed]['reached_steps'] for seed in range(3)] == [
      200_000, 250_000, None]
  assert r2d2[0]['best_mean'] == 500.0 and r2d2[0]['best_steps'] == 200_000
  assert r2d2[1]['best_mean'] == 480.0 and r2d2[1]['best_steps'] == 250_000
  assert r2d2[2]['best_mean'] == 300.0
  apex = {row['seed']: row for row in data['agents']['Ape-X DQN']}
  assert [apex[seed]['best_steps'] for seed in range(3)] == [300_000] * 3
  runs = {(row['agent'], row['seed']): row
          for row in _rows(text, '| agent | seed |')}
  assert runs[('R2D2', '0')]['first reached 475 (actor steps)'] == '200,000'
  assert runs[('R2D2', '2')]['first reached 475 (actor steps)'] == (
      'not reached')
  assert runs[('R2D2', '1')]['best mean of 10 (its actor steps)'] == (
      '480.0 (250,000)')
  assert runs[('Ape-X DQN', '1')][
      'final policy: mean ± sd over its episodes'] == '170.0 ± 4.5 (30)'


def test_the_verdicts_per_agent_and_the_goal(page):
  _, text = page
  assert ('- **R2D2** reached 475 within 300K actor steps on 2 of 3 seeds '
          '(seed 0 at 200,000; seed 1 at 250,000 actor steps).') in text
  assert ('- **Ape-X DQN** reached 475 within 300K actor steps on 0 of 3 '
          'seeds.') in text
  assert ('The goal, 475 within 300K actor steps on every seed of 3: not '
          'met: 1 of its 3 seeds did not reach it.') in text
  rows = {row['agent']: row
          for row in _rows(text, '| agent | final policy')}
  assert rows['R2D2']['seeds that reached 475 within 300K'] == '2 of 3'
  assert rows['R2D2']['actor steps to reach 475'] == '225,000 (2/3)'
  assert rows['Ape-X DQN']['actor steps to reach 475'] == (
      'not reached (0/3)')


def test_the_final_policies_over_seeds_and_their_comparison(page):
  data, text = page
  rows = {row['agent']: row
          for row in _rows(text, '| agent | final policy')}
  for setting, finals in (('R2D2', R2D2_FINAL), ('Ape-X DQN', APEX_FINAL)):
    values = list(finals.values())
    assert rows[setting]['final policy, 30 episodes'] == (
        f'{np.mean(values):.1f} ± {np.std(values, ddof=1):.1f}')
    # Of 3 seeds, the IQM's percentile interval is their range.
    assert rows[setting]['IQM, 95% CI'] == (
        f'[{min(values):.1f}, {max(values):.1f}]')
    for seed, value in finals.items():
      assert rows[setting][f'seed {seed}'] == f'{value:.1f}'
  r2d2, apex = list(R2D2_FINAL.values()), list(APEX_FINAL.values())
  p = stats.ttest_ind(r2d2, apex, equal_var=False).pvalue
  assert p < 0.05
  difference = np.mean(r2d2) - np.mean(apex)  # 3 seeds: the IQM is the mean.
  assert (f'**R2D2 less Ape-X DQN**, final policies: the difference of their '
          f'IQMs, its 95% interval and Welch\'s t-test of the means: '
          f'{difference:.1f} [') in text
  assert f'Welch\'s p = {p:.2f}: R2D2 ahead of Ape-X DQN.' in text
  # Over seeds: the best evaluator mean, updates, minutes.
  summary = {row['agent']: row for row in _rows(text, '| agent | seeds |')}
  best = [row['best_mean'] for row in data['agents']['R2D2']]
  assert summary['R2D2']['best evaluator mean of 10 episodes'] == (
      f'{np.mean(best):.1f} ± {np.std(best, ddof=1):.1f}')
  # _make_run's: 300,000 actor steps, an update per 8, in 612.5 s.
  assert summary['R2D2']['learner updates'] == '37,500 ± 0'
  assert summary['R2D2']['minutes'] == '10.2 ± 0.0'
  assert summary['R2D2']['an evaluation round every'] == '500 updates'
  assert summary['R2D2']['actor steps between rounds (median)'] == '50,000'
  assert 'Nothing else ran.' in text


def test_level_final_policies_show_no_difference_and_every_seed_meets_goal(
    tmp_path, monkeypatch):
  rounds = dict(R2D2_ROUNDS)
  rounds[2] = R2D2_ROUNDS[1]  # Reaches 475 at 250K too.
  level = {0: 160.0, 1: 150.0, 2: 170.0}
  _, text = _report(tmp_path, monkeypatch, rounds, r2d2_final=level)
  assert 'on 3 of 3 seeds' in text
  assert ('The goal, 475 within 300K actor steps on every seed of 3: met: '
          'all 3 seeds reached it.') in text
  assert 'no difference shown (the interval holds 0).' in text


def test_two_seeds_settle_neither_the_goal_nor_the_comparison(
    tmp_path, monkeypatch):
  rounds = {seed: R2D2_ROUNDS[seed] for seed in (0, 1)}
  _, text = _report(tmp_path, monkeypatch, rounds)
  assert ('on every seed of 3: not settled: 2 of the 3 seeds have run.'
          ) in text
  assert 'no verdict from 2 seeds (one needs 3 at least).' in text


def test_a_run_of_another_program_is_refused(tmp_path, monkeypatch):
  if not FLAGS.is_parsed():
    FLAGS(['test'])
  runs = str(tmp_path / 'runs')
  _run_of(runs, 'R2D2', 0, R2D2_ROUNDS[0], ROUND_STEPS, 500.0,
          program='apex_dqn')
  monkeypatch.setattr(run, 'RESULTS', str(tmp_path))
  monkeypatch.setattr(page_module, 'RESULTS', str(tmp_path))
  with flagsaver.flagsaver(runs=runs, bank_dir=str(tmp_path / 'bank')):
    with pytest.raises(ValueError, match='holds a run of apex_dqn, not of '
                       'r2d2'):
      page_module.collect([0])


def test_episodes_without_their_parameters_steps_are_refused(tmp_path):
  workdir = _run_of(str(tmp_path / 'runs'), 'R2D2', 0, R2D2_ROUNDS[0],
                    ROUND_STEPS, 500.0, round_actor_steps=False)
  with pytest.raises(ValueError, match='without round_actor_steps'):
    page_module.evaluator_windows(workdir)


def test_the_runs_and_their_evaluations_to_be_made(tmp_path):
  if not FLAGS.is_parsed():
    FLAGS(['test'])
  with flagsaver.flagsaver(runs=str(tmp_path / 'runs'),
                           bank_dir=str(tmp_path / 'bank')):
    steps = page_runs.plan(ANALYSIS, list(run.ANALYSES[ANALYSIS]['settings']),
                           [0, 1, 2], [page_module.FINAL])
  assert [(setting, seed, step) for setting, seed, step, _ in steps] == [
      (setting, seed, step) for seed in (0, 1, 2)
      for setting in ('R2D2', 'Ape-X DQN') for step in ('train', 'evaluate')]
  for setting, seed, step, argv in steps:
    if step == 'train':
      assert argv[1] == os.path.join('programs',
                                     f'{PROGRAMS[setting]}.py')
      preset = ('--preset=cartpole_hidden' if setting == 'R2D2'
                else '--preset=cartpole')
      for flag in (preset, f'--env={ENV}', '--max_actor_steps=300000',
                   f'--seed={seed}', '--lp_launch_type=local_mp'):
        assert flag in argv, (setting, flag)
    else:
      assert argv[1] == os.path.join('programs', 'evaluate.py')
      assert '--episodes=30' in argv and f'--seed={seed}' in argv
  assert page_runs.environments(ANALYSIS) == {'R2D2': ENV, 'Ape-X DQN': ENV}


def test_the_page_is_one_of_the_pages():
  from results import pages  # pylint: disable=g-import-not-at-top
  assert ANALYSIS in pages.PAGE_MODULES
  assert run.ANALYSES[ANALYSIS]['page'] == f'results.{ANALYSIS}'
