"""results/bank.py: the bank of finished runs, on runs made here as the
programs and results scripts leave them (records, CSV logs, node logs,
evaluations, and the big things: checkpoints, snapshots, TensorBoard
events). Banking copies only the small files, twice is a no-op, a run that
differs from its banked copy is refused by name; a banked run is not
planned again, and the page's JSON collected from the bank alone is the one
collected from the runs directory. Every place (the runs, the bank, the
pages' output) is under the test's own temporary directory."""

import csv
import json
import os
import subprocess
import sys

from absl import flags
from absl.testing import flagsaver
import pytest

from results import bank
from results import minatar
from results import run

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FLAGS = flags.FLAGS
START = 1_800_000_000.0  # The runs' first wall time.
# What a finished run's small files are, as bank.small_files finds them.
SMALL = ['evaluation_epsilon0.1.json', 'final_evaluation.json',
         'finished.json', 'launches.json', 'logs/actor/logs.csv',
         'logs/actor_1/logs.csv', 'logs/coordinator.log',
         'logs/counter.log', 'logs/evaluator/logs.csv',
         'logs/learner/logs.csv', 'output.txt', 'run.json', 'stop.json']
EVALUATIONS = ('evaluation_epsilon0.1.json', 'final_evaluation.json')


def _write(path, text):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, 'w') as f:
    f.write(text)


def _write_json(path, data):
  _write(path, json.dumps(data, indent=2) + '\n')


def _write_csv(path, rows):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, 'w', newline='') as f:
    writer = csv.DictWriter(f, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)


def _make_run(workdir, env, seed, steps, evaluated=True):
  """A finished run of Ape-X DQN in `workdir`, as its program,
  results/run.py and programs/evaluate.py leave it: 3 evaluation rounds of
  10 episodes, 2 actors, a learner, and `steps` actor steps in 600 s."""
  updates = steps // 8
  _write_json(os.path.join(workdir, 'run.json'), {
      'program': 'apex_dqn', 'env': env, 'frames_per_step': 1,
      'config': {'n_step': 3}, 'preset': env.split(':')[0],
      'flags': {'num_actors': 2, 'envs_per_actor': 8, 'epsilon_base': 0.4,
                'epsilon_alpha': 7.0, 'evaluation_episodes': 10,
                'log_every': 5.0, 'seed': seed, 'env': env}})
  command = ['.venv/bin/python', 'programs/apex_dqn.py',
             f'--workdir={workdir}', f'--seed={seed}']
  _write_json(os.path.join(workdir, 'launches.json'),
              [{'command': command, 'seconds': 612.5, 'status': 0}])
  counts = {'actor_steps': steps, 'learner_steps': updates}
  _write_json(os.path.join(workdir, 'stop.json'), {
      'reason': 'max_actor_steps', 'failed': False, 'counts': counts})
  _write(os.path.join(workdir, 'output.txt'), ''.join(
      f'status: actors {step:,} steps | run {step // 100}s, {workdir}\n'
      for step in range(0, steps, steps // 20)))
  _write(os.path.join(workdir, 'logs', 'counter.log'),
         f'I1128 checkpointing.py:138] Final counts: {json.dumps(counts)}\n')
  _write(os.path.join(workdir, 'logs', 'coordinator.log'),
         'E1128 coordinator.py:296] Stopping: the actors reached '
         f'{steps}. Counts: {json.dumps(counts)}\n')
  for node in ('learner', 'actor', 'actor_1', 'evaluator', 'replay'):
    _write(os.path.join(workdir, 'logs', f'{node}.log'), 'I1128 x\n' * 500)
  _write_csv(os.path.join(workdir, 'logs', 'learner', 'logs.csv'), [
      {'actor_steps': steps * i // 60, 'learner_steps': updates * i // 60,
       'loss': 0.1, 'steps_per_second': 200.0 + i,
       'walltime': START + 10 * i} for i in range(60)])
  for index, label in enumerate(('actor', 'actor_1')):
    _write_csv(os.path.join(workdir, 'logs', label, 'logs.csv'), [
        {'actor_steps': steps * i // 60, 'episode_return': i + index,
         'steps_per_second': 800.0 + 10 * index,
         'walltime': START + 10 * i + index} for i in range(60)])
  _write_csv(os.path.join(workdir, 'logs', 'evaluator', 'logs.csv'), [
      {'actor_steps': steps * (round_ + 1) // 4,
       'learner_steps': updates * (round_ + 1) // 4,
       'episode_return': seed + 10 * round_ + episode % 3,
       'round_started': START + 200 * round_,
       'round_learner_steps': updates * round_ // 4,
       'walltime': START + 200 * round_ + episode}
      for round_ in range(3) for episode in range(10)])
  _write_json(os.path.join(workdir, 'finished.json'), {
      'command': command, 'seconds': 612.5, 'launches': 1})
  if evaluated:
    for name, epsilon, episodes in ((EVALUATIONS[0], 0.1, 100),
                                    (EVALUATIONS[1], 0.001, 30)):
      _write_json(os.path.join(workdir, name), {
          'program': 'apex_dqn', 'env': env, 'learner_steps': updates,
          'epsilon': epsilon, 'seed': seed, 'episodes': episodes,
          'returns': [float(seed + epsilon)] * episodes,
          'lengths': [100 + seed] * episodes, 'mean': seed + epsilon,
          'median': seed + epsilon, 'std': 0.5 + seed, 'min': 0.0,
          'max': 20.0})
  # What is not banked: checkpoints, policy snapshots, TensorBoard events,
  # the nodes' pid files.
  for big in ('checkpoints/learner/ckpt-1.data-00000-of-00001',
              'checkpoints/counter/counts.json',
              'snapshots/policy-0000000001/saved_model.pb',
              'tensorboard/learner/events.out.tfevents.1.vm.2.v2',
              'nodes/learner.pid'):
    _write(os.path.join(workdir, big), 'x' * 10_000)


def _minatar_runs(runs, games=('breakout', 'seaquest'), seeds=(0, 1),
                  evaluated=True):
  for game in games:
    for seed in seeds:
      _make_run(os.path.join(runs, 'minatar', game, f'seed{seed}'),
                f'minatar:{game}:full', seed, 1_000_000, evaluated)


@pytest.fixture
def places(tmp_path, monkeypatch):
  """(runs, bank): empty directories of the test's own, `--runs` and
  `--bank_dir` set to them; the pages' output goes to <tmp_path>/pages."""
  if not FLAGS.is_parsed():
    FLAGS(['test'])
  runs, bank_dir, pages = (str(tmp_path / name)
                           for name in ('runs', 'bank', 'pages'))
  os.makedirs(pages)
  monkeypatch.setattr(run, 'RESULTS', pages)
  monkeypatch.setattr(minatar, 'RESULTS', pages)
  with flagsaver.flagsaver(runs=runs, bank_dir=bank_dir):
    yield runs, bank_dir


def _listing(directory):
  return sorted(os.path.relpath(os.path.join(top, name), directory)
                for top, _, names in os.walk(directory) for name in names)


def _contents(directory):
  found = {}
  for path in _listing(directory):
    with open(os.path.join(directory, path), 'rb') as f:
      found[path] = f.read()
  return found


def test_banking_copies_only_the_small_files(places, capsys):
  runs, bank_dir = places
  _minatar_runs(runs)
  # An unfinished run is left alone.
  _write_json(os.path.join(runs, 'minatar', 'freeway', 'seed0', 'run.json'),
              {'program': 'apex_dqn', 'env': 'minatar:freeway:full',
               'config': {}})
  assert bank.bank_all(runs, []) == []
  banked = os.path.join(bank_dir, 'minatar', 'breakout', 'seed0')
  assert sorted(os.listdir(os.path.join(bank_dir, 'minatar'))) == [
      'breakout', 'seaquest']
  assert _listing(banked) == SMALL
  workdir = os.path.join(runs, 'minatar', 'breakout', 'seed0')
  # Byte for byte, but for the directories of this machine the files name:
  # the run's own (its commands' --workdir, its status lines) is <run>.
  named = 0
  for path in SMALL:
    with open(os.path.join(workdir, path), 'rb') as ours, open(
        os.path.join(banked, path), 'rb') as theirs:
      ours, theirs = ours.read(), theirs.read()
      named += workdir.encode() in ours
      assert ours.replace(workdir.encode(), b'<run>') == theirs, path
      assert os.path.dirname(runs).encode() not in theirs, path
  assert named == 3  # launches.json, finished.json, output.txt.
  size = sum(os.path.getsize(os.path.join(banked, path)) for path in SMALL)
  said = capsys.readouterr().out.splitlines()
  assert said[0] == f'banked {banked} ({size / 1024:,.0f} KiB)'
  assert len(said) == 4


def test_banking_twice_changes_nothing(places):
  runs, bank_dir = places
  _minatar_runs(runs)
  bank.bank_all(runs, ['minatar'])
  before = {path: os.stat(os.path.join(bank_dir, path)).st_mtime_ns
            for path in _listing(bank_dir)}
  workdir = os.path.join(runs, 'minatar', 'breakout', 'seed1')
  banked = os.path.join(bank_dir, 'minatar', 'breakout', 'seed1')
  assert bank.bank(workdir, banked) is None
  assert bank.bank_all(runs, []) == []
  assert {path: os.stat(os.path.join(bank_dir, path)).st_mtime_ns
          for path in _listing(bank_dir)} == before


def test_a_run_banked_before_its_evaluations_gains_them(places):
  runs, bank_dir = places
  _minatar_runs(runs, games=('breakout',), seeds=(0,), evaluated=False)
  workdir = os.path.join(runs, 'minatar', 'breakout', 'seed0')
  banked = os.path.join(bank_dir, 'minatar', 'breakout', 'seed0')
  bank.bank(workdir, banked)
  assert not set(EVALUATIONS) & set(os.listdir(banked))
  _minatar_runs(runs, games=('breakout',), seeds=(0,))
  said = bank.bank(workdir, banked)
  assert said.startswith(f'added {", ".join(EVALUATIONS)} to {banked}')
  assert _listing(banked) == SMALL


def test_a_run_that_differs_from_its_banked_copy_is_refused(places):
  runs, bank_dir = places
  _minatar_runs(runs, games=('breakout',), seeds=(0,))
  bank.bank_all(runs, [])
  banked = os.path.join(bank_dir, 'minatar', 'breakout', 'seed0')
  kept = _contents(banked)
  workdir = os.path.join(runs, 'minatar', 'breakout', 'seed0')
  _write_json(os.path.join(workdir, EVALUATIONS[0]), {'mean': 99.0})
  with pytest.raises(bank.Refused) as refused:
    bank.bank(workdir, banked)
  message = str(refused.value)
  assert message.startswith(
      f'{workdir} differs from its banked copy {banked} in {EVALUATIONS[0]}: '
      'the banked copy is the record, and is kept.')
  assert f'git rm -r {banked}' in message
  assert _contents(banked) == kept
  # From the command line: said, the others banked, and exit status 1.
  _minatar_runs(runs, games=('seaquest',), seeds=(0,))
  result = subprocess.run(
      [sys.executable, '-m', 'results.bank', f'--runs={runs}',
       f'--bank_dir={bank_dir}'], cwd=ROOT, capture_output=True, text=True,
      timeout=120, check=False)
  assert result.returncode == 1
  assert f'refused: {message}' in result.stdout
  assert f'banked {os.path.join(bank_dir, "minatar", "seaquest", "seed0")}' \
      in result.stdout
  assert result.stdout.splitlines()[-1].startswith(
      f'The bank ({bank_dir}): 2 runs, ')
  assert _contents(banked) == kept


def test_a_banked_run_is_not_planned_again(places, monkeypatch):
  runs, bank_dir = places
  _minatar_runs(runs, games=('breakout',), seeds=(0,))
  bank.bank_all(runs, [])
  # The machine replaced: the runs directory is gone.
  other_runs = os.path.join(os.path.dirname(runs), 'new_runs')
  with flagsaver.flagsaver(runs=other_runs, games=['breakout', 'seaquest']):
    steps = minatar.plan([0])
  banked = os.path.join(bank_dir, 'minatar', 'breakout', 'seed0')
  assert [step[:3] for step in steps] == [
      ('breakout', 0, 'banked'), ('seaquest', 0, 'train'),
      ('seaquest', 0, 'evaluate'), ('seaquest', 0, 'evaluate')]
  assert steps[0][3] == [banked]
  # Nor run: a launch would fail the test.
  def launch(argv, **kwargs):
    raise AssertionError(f'launched {argv} {kwargs}')
  monkeypatch.setattr(run.subprocess, 'call', launch)
  with flagsaver.flagsaver(runs=other_runs):
    assert run.run('minatar', 'breakout', 0, resume=True) == banked


def test_the_dry_runs_say_banked(places):
  runs, bank_dir = places
  for seed in (0, 1):
    _make_run(os.path.join(runs, 'replay', 'prioritised__alpha_0_6',
                           f'seed{seed}'), 'gym:CartPole-v1', seed, 100_000,
              evaluated=False)
  bank.bank_all(runs, ['replay'])
  empty = os.path.join(os.path.dirname(runs), 'new_runs')
  result = subprocess.run(
      [sys.executable, '-m', 'results.run', 'replay', '--dry_run',
       '--seeds=0,1', f'--runs={empty}', f'--bank_dir={bank_dir}'],
      cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
  assert result.returncode == 0, result.stderr
  lines = result.stdout.splitlines()
  for seed in (0, 1):
    banked = os.path.join(bank_dir, 'replay', 'prioritised__alpha_0_6',
                          f'seed{seed}')
    assert f'prioritised (alpha 0.6) seed {seed} banked: {banked}' in lines
  assert [line.split(':')[0] for line in lines] == [
      'prioritised (alpha 0.6) seed 0 banked', 'uniform (alpha 0) seed 0 train',
      'prioritised (alpha 0.6) seed 1 banked', 'uniform (alpha 0) seed 1 train']


def _json_of(data):
  return json.loads(json.dumps(data))


def test_collect_from_the_bank_alone_is_collect_from_the_runs(places):
  runs, _ = places
  _minatar_runs(runs)
  from_runs = _json_of(minatar.collect([0, 1]))
  bank.bank_all(runs, [])
  with flagsaver.flagsaver(runs=os.path.join(runs, 'gone')):
    from_bank = _json_of(minatar.collect([0, 1]))
  assert from_bank == from_runs
  # Not vacuous: the figures are the runs'.
  assert list(from_bank['games']) == ['breakout', 'seaquest']
  row = from_bank['games']['seaquest'][1]
  assert (row['seed'], row['matched_mean'], row['final_mean']) == (
      1, 1.1, 1.001)
  assert row['actor_frames'] == 1_000_000
  # Each round's returns: seed + 10 * round + (0, 1, 2, 0, 1, 2, ...).
  assert [r['mean_return'] for r in row['rounds']] == pytest.approx(
      [1.9, 11.9, 21.9])
  assert row['wall_clock_minutes'] == pytest.approx(612.5 / 60)


def test_an_analysis_collects_the_same_from_the_bank(places):
  runs, _ = places
  for setting in ('prioritised__alpha_0_6', 'uniform__alpha_0'):
    for seed in (0, 1):
      _make_run(os.path.join(runs, 'replay', setting, f'seed{seed}'),
                'gym:CartPole-v1', seed, 100_000, evaluated=False)
  from_runs = _json_of(run.collect('replay', [0, 1]))
  bank.bank_all(runs, [])
  with flagsaver.flagsaver(runs=os.path.join(runs, 'gone')):
    from_bank = _json_of(run.collect('replay', [0, 1]))
  assert from_bank == from_runs
  assert [row['seed'] for row in from_bank['settings']['uniform (alpha 0)']
          ] == [0, 1]
  assert from_bank['settings']['uniform (alpha 0)'][0]['learner_updates'] \
      == 12_500


def test_a_changed_run_is_read_from_the_bank_with_a_warning(places, capsys):
  runs, bank_dir = places
  _minatar_runs(runs, games=('breakout',), seeds=(0,))
  bank.bank_all(runs, [])
  workdir = os.path.join(runs, 'minatar', 'breakout', 'seed0')
  banked = os.path.join(bank_dir, 'minatar', 'breakout', 'seed0')
  assert run.finished_directory('minatar', 'breakout', 0) == workdir
  _write_json(os.path.join(workdir, EVALUATIONS[0]), {'mean': 99.0})
  capsys.readouterr()
  assert run.finished_directory('minatar', 'breakout', 0) == banked
  warning = capsys.readouterr().err
  assert warning.startswith(
      f'warning: {workdir} differs from its banked copy (changed: '
      f'{EVALUATIONS[0]}): reading the banked copy {banked}')


def test_a_banked_run_without_its_evaluation_says_so(places):
  runs, bank_dir = places
  _minatar_runs(runs, games=('breakout',), seeds=(0,), evaluated=False)
  bank.bank_all(runs, [])
  banked = os.path.join(bank_dir, 'minatar', 'breakout', 'seed0')
  with flagsaver.flagsaver(runs=os.path.join(runs, 'gone'),
                           games=['breakout']):
    steps = minatar.plan([0])
    assert [step[2] for step in steps] == ['banked', 'missing', 'missing']
    assert steps[1][3][0].startswith(
        f'{os.path.join(banked, EVALUATIONS[0])}: the run was banked without '
        'this evaluation, and the bank keeps no checkpoints, so its final '
        'policy cannot be evaluated again.')
    with pytest.raises(ValueError, match='cannot be evaluated again'):
      minatar.collect([0])


def test_the_seeds_a_page_reports_are_every_finished_runs(places, capsys):
  runs, bank_dir = places
  setting = lambda name, where: os.path.join(where, 'replay', name)
  # Seed 0 finished in the runs directory (one setting), seed 3 finished in
  # the bank alone (the other setting); seed 5 started, not finished; a
  # directory that is not a seed's.
  _make_run(os.path.join(setting('prioritised__alpha_0_6', runs), 'seed0'),
            'gym:CartPole-v1', 0, 1000)
  _make_run(os.path.join(setting('uniform__alpha_0', bank_dir), 'seed3'),
            'gym:CartPole-v1', 3, 1000)
  unfinished = os.path.join(setting('uniform__alpha_0', runs), 'seed5')
  _write_json(os.path.join(unfinished, 'run.json'), {'env': 'x'})
  os.makedirs(os.path.join(setting('uniform__alpha_0', runs), 'seedling'))
  assert run.run_directory('replay', 'uniform (alpha 0)', 5) == unfinished
  assert run.finished_seeds('replay') == [0, 3]
  assert run.reported_seeds('replay', [1]) == [0, 1, 3]
  assert capsys.readouterr().out == (
      '[replay] the page reports seeds 0,1,3: every seed with a finished '
      'run, not only --seeds.\n')
  assert run.reported_seeds('replay', [3, 0]) == [0, 3]
  assert capsys.readouterr().out == ''


def test_a_launch_whose_driver_was_stopped_is_timed_when_resumed(tmp_path):
  # The driver records a launch as begun before its program starts; a
  # driver stopped while the program runs (the program then stopped by
  # programs/stop.py) never times it. The next resume times it from its
  # beginning to the last write of the run's output, before the new launch
  # appends to that output.
  workdir = str(tmp_path)
  run.begin_launch(workdir, ['first'])
  with open(os.path.join(workdir, 'launches.json')) as f:
    (first,) = json.load(f)
  assert 'seconds' not in first and first['command'] == ['first']
  output = os.path.join(workdir, 'output.txt')
  _write(output, 'status: ... | run 1m40s\n')
  os.utime(output, (first['began'] + 100.0, first['began'] + 100.0))
  run.time_unended_launches(workdir)
  run.time_unended_launches(workdir)  # Twice: nothing more to time.
  run.begin_launch(workdir, ['second'])
  launches = run.end_launch(workdir, 0)
  assert [launch['command'] for launch in launches] == [['first'],
                                                        ['second']]
  assert launches[0]['seconds'] == pytest.approx(100.0)
  assert launches[0]['status'] is None  # Its driver was gone.
  assert 0.0 <= launches[1]['seconds'] < 60.0
  assert launches[1]['status'] == 0 and 'began' not in launches[1]
  with open(os.path.join(workdir, 'launches.json')) as f:
    assert json.load(f) == launches
