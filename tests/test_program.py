"""The whole Ape-X DQN program, launched the way users launch it.

Each run is a real Launchpad program (replay, counter, learner, 2 actors,
evaluator) on gym:CartPole-v1, stopped by --max_actor_steps.
"""

import json
import math
import os
import subprocess
import sys

import pytest

from run_checks import check_stopped_at_step_limit
from run_checks import csv_rows as _rows

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAM = os.path.join(ROOT, 'programs', 'apex_dqn.py')
PROBE = os.path.join(ROOT, 'tests', 'program_probe.py')

MAX_ACTOR_STEPS = 4000
PROBE_ACTOR_STEPS = 30000
SMALL_RUN = [
    '--env=gym:CartPole-v1', '--num_actors=2', '--batch_size=32',
    '--min_replay_size=300', '--replay_capacity=20000',
    '--mlp_hidden_sizes=32', '--dueling_hidden_size=32',
    '--target_update_period=50',
    f'--max_actor_steps={MAX_ACTOR_STEPS}', '--log_every=1',
    '--evaluation_period=50', '--evaluation_episodes=2',
]


def _run(script, workdir, launch_type, extra=(), timeout=300):
  return subprocess.run(
      [sys.executable, script, f'--lp_launch_type={launch_type}',
       f'--workdir={workdir}', *SMALL_RUN, *extra],
      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
      timeout=timeout, cwd=ROOT, check=False)


def _check_logs(workdir):
  learner = _rows(workdir, 'learner')
  assert learner, 'the learner logged nothing'
  for column in ('actor_steps', 'learner_steps', 'loss', 'steps_per_second'):
    assert column in learner[0], column
  assert int(learner[-1]['learner_steps']) > 0
  assert all(math.isfinite(float(row['loss'])) for row in learner)
  for label in ('actor', 'evaluator'):
    rows = _rows(workdir, label)
    assert rows, f'{label} logged nothing'
    for column in ('actor_steps', 'learner_steps', 'episode_return',
                   'steps_per_second'):
      assert column in rows[0], (label, column)
  # The evaluator reports after the learner has updated the parameters.
  assert any(int(row['learner_steps']) > 0
             for row in _rows(workdir, 'evaluator'))
  for label in ('actor', 'learner', 'evaluator'):
    events = os.listdir(os.path.join(workdir, 'tensorboard', label))
    assert any(name.startswith('events.out.tfevents') for name in events)


def test_program_under_test_mt_learns_and_reprioritises(tmp_path):
  # Long enough for the probe to look at the table twice, 30 updates apart.
  result = _run(PROBE, tmp_path, 'test_mt',
                extra=[f'--max_actor_steps={PROBE_ACTOR_STEPS}'])
  assert result.returncode == 0, result.stdout[-5000:]
  line = [l for l in result.stdout.splitlines() if l.startswith('PROBE ')][-1]
  seen = json.loads(line[len('PROBE '):])
  # Actor-side priorities: items enter with different priorities...
  assert seen['distinct_priorities'] > seen['sampled_items'] // 2, seen
  # ... and the learner rewrites the priorities of the items it trained on.
  assert seen['changed_keys'] > 0, seen
  _check_logs(tmp_path)
  check_stopped_at_step_limit(tmp_path, PROBE_ACTOR_STEPS,
                              episode_length=500)  # CartPole's longest.


@pytest.mark.parametrize('launch_type', ['local_mp', 'local_mt'])
def test_program_stops_cleanly_at_max_actor_steps(tmp_path, launch_type):
  # The rate limit makes the learner keep pace with the actors' 4,000 steps.
  result = _run(PROGRAM, tmp_path, launch_type,
                extra=['--samples_per_insert=4'])
  assert result.returncode == 0, result.stdout[-5000:]
  assert 'did not terminate in time' not in result.stdout
  _check_logs(tmp_path)
  # The coordinator's record of why it stopped the program, with the counts
  # then (at least the limit).
  with open(tmp_path / 'stop.json') as f:
    stop = json.load(f)
  assert stop['failed'] is False
  steps = stop['counts']['actor_steps']
  assert stop['reason'] == (f'reached {steps} actor steps (limit '
                            f'{MAX_ACTOR_STEPS})')
  assert steps >= MAX_ACTOR_STEPS


@pytest.mark.parametrize('flag, message', [
    ('--num_actors=0', '--num_actors=0'),
    ('--env=atari:NoSuchGame', 'Accepted forms'),
    ('--env=gym:Pendulum-v1', 'discrete'),
    ('--batch_size=0', '--batch_size=0'),
    ('--discount=1.5', '--discount=1.5'),
    ('--min_replay_size=50000', '--min_replay_size=50000'),
    ('--n_step=0', '--n_step=0'),
    ('--importance_sampling_exponent=1.5', '--importance_sampling_exponent'),
    ('--priority_exponent=-1', '--priority_exponent=-1'),
    ('--batch_size=30000', '--batch_size=30000'),
    ('--checkpoint_every=-1', '--checkpoint_every=-1'),
    ('--actor_max_failures=0', '--actor_max_failures=0'),
    ('--replay_remover=lifo', '--replay_remover'),
    ('--workdir=/proc/apex_run', '--workdir=/proc/apex_run'),
])
def test_bad_flags_are_refused_before_launch(tmp_path, flag, message):
  result = _run(PROGRAM, tmp_path, 'local_mp', extra=[flag], timeout=120)
  assert result.returncode != 0
  assert message in result.stdout
  assert 'Traceback' not in result.stdout
  assert not os.path.exists(os.path.join(tmp_path, 'logs'))
