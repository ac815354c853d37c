"""results/pong_45min.py's entry of a run: made from a run directory laid
out as programs/apex_dqn.py leaves one (run.json, the coordinator's stop.json,
the evaluator's CSV, programs/evaluate.py's two outputs), its figures
checked against values worked out by hand; a run made otherwise, or a key
the page has already, is refused and the JSON left as it was."""

import csv
import json
import os
import subprocess
import sys

import pytest

from results import pong_45min

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIELDS = ('episode_return', 'round_learner_steps', 'evaluator_episodes')


def _write_json(path, value):
  with open(path, 'w') as f:
    json.dump(value, f)


def _run(tmp_path, **manifest_changes):
  """A finished run's directory: seed 2, 4 evaluator rounds of which the
  last is incomplete, stopped by its wall-clock budget."""
  workdir = tmp_path / 'run'
  (workdir / 'logs' / 'evaluator').mkdir(parents=True)
  manifest = {'program': 'apex_dqn', 'env': 'atari:Pong',
              'preset': 'atari_small', 'frames_per_step': 4, 'config': {},
              'flags': {'seed': 2, 'checkpoint_every': 300.0,
                        'max_seconds': 2700.0, 'atari_evaluation': 'noops'}}
  for key, value in manifest_changes.items():
    if key in manifest['flags']:
      manifest['flags'][key] = value
    else:
      manifest[key] = value
  _write_json(workdir / 'run.json', manifest)
  _write_json(workdir / 'stop.json', {
      'counts': {'actor_episodes': 3, 'actor_steps': 1234,
                 'learner_steps': 150},
      'failed': False,
      'reason': 'ran for 2700 s since the actors started (limit 2700 s)'})
  rounds = [(0, [-21.0] * 10), (40, [-21.0] * 9 + [-20.0]),
            (90, [-20.0, -18.0] * 5), (140, [-17.0] * 4)]
  with open(workdir / 'logs' / 'evaluator' / 'logs.csv', 'w',
            newline='') as f:
    writer = csv.DictWriter(f, FIELDS)
    writer.writeheader()
    episode = 0
    for steps, returns in rounds:
      for value in returns:
        episode += 1
        writer.writerow({'episode_return': value,
                         'round_learner_steps': steps,
                         'evaluator_episodes': episode})
  _write_json(workdir / 'evaluation_greedy_10.json',
              {'learner_steps': 151, 'epsilon': 0.0, 'seed': 0,
               'returns': [-21.0, -19.0, -19.0, -21.0],
               'lengths': [800, 1000, 1000, 900]})
  _write_json(workdir / 'evaluation_epsilon_0.001_30.json',
              {'learner_steps': 151, 'epsilon': 0.001, 'seed': 1,
               'returns': [-20.0, -20.0, -17.0, -19.0],
               'lengths': [900, 900, 1500, 1200]})
  return str(workdir)


def test_an_entry_holds_the_runs_figures_worked_out_by_hand(tmp_path):
  workdir = _run(tmp_path)
  run = pong_45min.entry(workdir, pong_45min.evaluate(workdir), 'abc1234',
                         'quiet', True, 'sized', 23.4)
  assert run['command'] == (
      'python programs/apex_dqn.py --lp_launch_type=local_mp '
      '--preset=atari_small --seed=2 --workdir=<workdir> '
      '--checkpoint_every=300 --max_seconds=2700 --atari_evaluation=noops')
  assert (run['commit'], run['seed']) == ('abc1234', 2)
  # The policy evaluated (151), not the coordinator's count at the stop.
  assert run['learner_steps'] == 151
  assert run['actor_steps'] == 1234
  # Deviations from -20 of 1, 1, 1, 1: sample variance 4/3.
  assert run['greedy_return'] == {'mean': -20.0, 'median': -20.0,
                                  'std': 1.15, 'min': -21.0, 'max': -19.0,
                                  'mean_length': 925.0}
  assert run['greedy_returns'] == [-21.0, -19.0, -19.0, -21.0]
  # The incomplete round of 4 episodes is left out.
  assert run['evaluator_rounds_mean_return'] == [-21.0, -20.9, -19.0]
  assert run['evaluator_rounds_learner_steps'] == [0, 40, 90]
  assert (run['machine'], run['onednn'], run['placement'],
          run['bare_learner_updates_per_second']) == ('quiet', True, 'sized',
                                                      23.4)
  # Mean -19; deviations 1, 1, 2, 0: sample variance 2, sd 1.414, over
  # sqrt(4) = 0.71. Two episodes alike in return and length: 3 distinct.
  assert run['epsilon_0.001_return'] == {
      'episodes': 4, 'seed': 1, 'mean': -19.0, 'standard_error': 0.71,
      'median': -19.5, 'min': -20.0, 'max': -17.0, 'distinct_episodes': 3}
  assert run['epsilon_0.001_returns'] == [-20.0, -20.0, -17.0, -19.0]


def test_a_full_hash_is_kept_short_and_a_name_is_refused(tmp_path):
  workdir = _run(tmp_path)
  full = 'e78ea36081165d15af9b7f33387553ec98a1fa71'
  run = pong_45min.entry(workdir, pong_45min.evaluate(workdir), full,
                         'quiet', True, 'sized', None)
  assert run['commit'] == 'e78ea36'
  with pytest.raises(ValueError, match='--commit=HEAD: give the hash'):
    pong_45min.entry(workdir, pong_45min.evaluate(workdir), 'HEAD',
                     'quiet', True, 'sized', None)


def test_a_placement_other_than_the_default_is_in_the_command(tmp_path):
  workdir = _run(tmp_path)
  run = pong_45min.entry(workdir, pong_45min.evaluate(workdir), 'abc1234',
                         'quiet', True, 'tf_default', None)
  assert run['command'].endswith(
      '--atari_evaluation=noops --placement=tf_default')
  assert run['placement'] == 'tf_default'


@pytest.mark.parametrize('changes, named', [
    ({'preset': None}, 'preset None'),
    ({'max_seconds': None}, '--max_seconds=None'),
    ({'env': 'atari:Breakout'}, "env 'atari:Breakout'"),
    ({'flag_changes': [{'changed': {'max_seconds': [2700.0, None]}}]},
     'flags changed on a resume'),
])
def test_a_run_made_otherwise_is_refused_naming_the_difference(
    tmp_path, changes, named):
  workdir = _run(tmp_path, **changes)
  with pytest.raises(ValueError, match='not run by the page') as raised:
    pong_45min.entry(workdir, pong_45min.evaluate(workdir), 'abc1234',
                     'quiet', True, None, None)
  assert named in str(raised.value)


def test_evaluations_of_two_policies_are_refused(tmp_path):
  workdir = _run(tmp_path)
  evaluations = pong_45min.evaluate(workdir)
  evaluations['greedy_return']['learner_steps'] = 152
  with pytest.raises(ValueError, match=r'different policies.*151, 152'):
    pong_45min.entry(workdir, evaluations, 'abc1234', 'quiet', True, None,
                     None)


def test_a_run_that_did_not_reach_its_budget_is_refused(tmp_path):
  workdir = _run(tmp_path)
  _write_json(os.path.join(workdir, 'stop.json'), {
      'counts': {'actor_steps': 900}, 'failed': True,
      'reason': 'the learner is gone'})
  with pytest.raises(ValueError, match='did not reach its budget'):
    pong_45min.entry(workdir, pong_45min.evaluate(workdir), 'abc1234',
                     'quiet', True, None, None)


def test_a_new_key_is_added_and_a_key_on_the_page_refused(tmp_path):
  path = tmp_path / 'pong_45min.json'
  _write_json(path, {'budget_seconds': 2700, 'runs': {'a': {'seed': 1}}})
  pong_45min.add_run(str(path), 'b', {'seed': 2})
  with open(path) as f:
    written = f.read()
  assert json.loads(written)['runs'] == {'a': {'seed': 1}, 'b': {'seed': 2}}
  with pytest.raises(ValueError, match="named 'a' already"):
    pong_45min.add_run(str(path), 'a', {'seed': 3})
  with open(path) as f:
    assert f.read() == written
  assert os.listdir(tmp_path) == ['pong_45min.json']


def test_the_program_adds_an_evaluated_run_and_refuses_it_twice(tmp_path):
  workdir = _run(tmp_path)
  path = tmp_path / 'page.json'
  _write_json(path, {'budget_seconds': 2700, 'runs': {}})
  argv = [sys.executable, '-m', 'results.pong_45min', f'--workdir={workdir}',
          '--name=atari_small_placed_seed2', '--commit=abc1234',
          '--placement=sized', '--bare_learner_updates_per_second=23.4',
          f'--json={path}']
  done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True,
                        check=False)
  assert done.returncode == 0, done.stderr
  assert 'greedy -20.0, epsilon 0.001 -19.0, 151 updates' in done.stdout
  with open(path) as f:
    written = f.read()
  run = json.loads(written)['runs']['atari_small_placed_seed2']
  assert run == pong_45min.entry(workdir, pong_45min.evaluate(workdir),
                                 'abc1234', 'quiet', True, 'sized', 23.4)
  again = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True,
                         check=False)
  assert again.returncode == 1
  assert "named 'atari_small_placed_seed2' already" in again.stderr
  with open(path) as f:
    assert f.read() == written


def _group_run(seed: int, value: float):
  """A run of a page's group whose two evaluations and every evaluator
  round (at 0, 8,000, 16,000 and 24,000 updates) gave `value`."""
  return {'seed': seed, 'commit': 'abc1234', 'machine': 'quiet',
          'greedy_return': {'mean': value},
          'epsilon_0.001_return': {'mean': value},
          'evaluator_rounds_learner_steps': [0, 8000, 16000, 24000],
          'evaluator_rounds_mean_return': [value] * 4}


def test_only_the_comparison_across_days_says_so_beside_its_verdict():
  # Three seeds of the preset, three of its starting point, three placed
  # and three before placement: the placed runs well below the preset's,
  # so that comparison claims (behind) and must say what its design leaves
  # open; it is made at equal updates (24K, the last mark of every run's
  # rounds), not on the final policies, as is placed against before
  # placement; the preset and its starting point ran alike and say nothing
  # more.
  values = {'atari_small_seed': (-8.0, -9.0, -10.0),
            'issue_start_onednn_seed': (-17.0, -18.0, -19.0),
            'atari_small_placed_seed': (-17.5, -18.5, -19.5),
            'atari_small_tf_default_seed': (-17.0, -18.5, -20.0)}
  data = {'budget_seconds': 2700, 'runs': {
      f'{prefix}{seed}': _group_run(seed, value)
      for prefix, returns in values.items()
      for seed, value in enumerate(returns, start=1)}}
  lines = [line for line in pong_45min.opening(data) if line.startswith('- ')]
  assert len(lines) == (2 * len(pong_45min.COMPARISONS) +
                        len(pong_45min.BY_UPDATES))
  across = [line for line in lines
            if '`atari_small` with placement minus `atari_small`:' in line]
  assert len(across) == 1
  assert across[0].startswith("- the evaluator's rounds at 24K updates, ")
  assert across[0].endswith(': `atari_small` with placement behind the '
                            f'`atari_small` ({pong_45min.ACROSS_DAYS})')
  before = [line for line in lines if 'minus `atari_small` before' in line]
  assert len(before) == 1
  assert before[0].startswith("- the evaluator's rounds at 24K updates, ")
  assert before[0].endswith(f'no difference shown (the interval holds 0) '
                            f'({pong_45min.PARTLY_ACROSS_DAYS})')
  for line in set(lines) - set(across) - set(before):
    assert 'minus starting point' in line and not line.endswith(')'), line
