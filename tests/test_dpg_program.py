"""The whole Ape-X DPG program, launched the way users launch it.

Each run is a real Launchpad program (replay, counter, learner, 2 actors,
evaluator) on control:cartpole:balance (1,000-step episodes), stopped by
--max_actor_steps.
"""

import json
import math
import os
import re
import subprocess
import sys

import pytest

from run_checks import check_stopped_at_step_limit
from run_checks import csv_rows as _rows

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAM = os.path.join(ROOT, 'programs', 'apex_dpg.py')
PROBE = os.path.join(ROOT, 'tests', 'program_probe.py')

EPISODE_LENGTH = 1000
MAX_ACTOR_STEPS = 4000
PROBE_ACTOR_STEPS = 6000
SMALL_RUN = [
    '--env=control:cartpole:balance', '--num_actors=2', '--batch_size=32',
    '--min_replay_size=300', '--replay_capacity=20000',
    '--critic_hidden_sizes=32,32', '--policy_hidden_sizes=32,32',
    '--target_update_period=50',
    f'--max_actor_steps={MAX_ACTOR_STEPS}', '--log_every=1',
    '--evaluation_period=50', '--evaluation_episodes=1',
]
# The columns of the DQN program's logs (tests/test_program.py).
LEARNER_COLUMNS = ('actor_steps', 'learner_steps', 'loss', 'steps_per_second')
EPISODE_COLUMNS = ('actor_steps', 'learner_steps', 'episode_return',
                   'steps_per_second')


def _run(script, workdir, launch_type, extra=(), timeout=300):
  return subprocess.run(
      [sys.executable, script, f'--lp_launch_type={launch_type}',
       f'--workdir={workdir}', *SMALL_RUN, *extra],
      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
      timeout=timeout, cwd=ROOT, check=False)


def _check_logs(workdir, max_actor_steps):
  learner = _rows(workdir, 'learner')
  assert learner, 'the learner logged nothing'
  for column in LEARNER_COLUMNS + ('policy_loss', 'mean_q'):
    assert column in learner[0], column
  assert int(learner[-1]['learner_steps']) > 0
  assert all(math.isfinite(float(row['loss'])) for row in learner)
  assert all(math.isfinite(float(row['policy_loss'])) for row in learner)
  for label in ('actor', 'actor_1', 'evaluator'):
    rows = _rows(workdir, label)
    assert rows, f'{label} logged nothing'
    for column in EPISODE_COLUMNS:
      assert column in rows[0], (label, column)
    for row in rows:
      # Episodes end only by dm_control's time limit; cartpole:balance pays
      # a reward in [0, 1] per step.
      assert int(row['episode_length']) == EPISODE_LENGTH, (label, row)
      assert 0.0 <= float(row['episode_return']) <= EPISODE_LENGTH, (label,
                                                                     row)
  check_stopped_at_step_limit(workdir, max_actor_steps, EPISODE_LENGTH)
  for label in ('actor', 'learner', 'evaluator'):
    events = os.listdir(os.path.join(workdir, 'tensorboard', label))
    assert any(name.startswith('events.out.tfevents') for name in events)


def test_program_under_test_mt_learns_and_reprioritises(tmp_path):
  # Long enough for the probe to look at the table twice, 30 updates apart,
  # and for the evaluator to finish an episode after the learner's updates.
  result = _run(PROBE, tmp_path, 'test_mt',
                extra=['--program=apex_dpg',
                       f'--max_actor_steps={PROBE_ACTOR_STEPS}'])
  assert result.returncode == 0, result.stdout[-5000:]
  line = [l for l in result.stdout.splitlines() if l.startswith('PROBE ')][-1]
  seen = json.loads(line[len('PROBE '):])
  assert seen['program'] == 'apex_dpg'
  assert seen['learner_steps_between'] >= 30, seen
  # Actor-side priorities: items enter with different priorities...
  assert seen['distinct_priorities'] > seen['sampled_items'] // 2, seen
  # ... and the learner rewrites the priorities of the items it trained on.
  assert seen['common_keys'] > 0, seen
  assert seen['changed_keys'] > 0, seen
  _check_logs(tmp_path, PROBE_ACTOR_STEPS)
  # The evaluator reports returns of the parameters the learner updated.
  evaluated = [row for row in _rows(tmp_path, 'evaluator')
               if int(row['learner_steps']) > 0]
  assert evaluated, _rows(tmp_path, 'evaluator')


def test_program_stops_cleanly_at_max_actor_steps(tmp_path):
  # The rate limit makes the learner keep pace with the actors' 4,000 steps.
  result = _run(PROGRAM, tmp_path, 'local_mp',
                extra=['--samples_per_insert=4'])
  assert result.returncode == 0, result.stdout[-5000:]
  assert 'did not terminate in time' not in result.stdout
  assert 'Traceback' not in result.stdout, result.stdout[-5000:]
  # The program was stopped by its step limit, not by a failing node.
  reached = re.findall(
      rf'Stopping: reached (\d+) actor steps \(limit {MAX_ACTOR_STEPS}\)',
      result.stdout)
  assert len(reached) == 1, result.stdout[-5000:]
  assert int(reached[0]) >= MAX_ACTOR_STEPS
  # The counter's final counts hold every step the actors took, also those
  # after the stop request and since their last sync.
  own = [int(steps) for steps in re.findall(
      r'Actor \d stops after (\d+) environment steps', result.stdout)]
  assert len(own) == 2, result.stdout[-5000:]
  final = re.findall(r'Final counts: (\{.*?\})', result.stdout)
  assert len(final) == 1, result.stdout[-5000:]
  assert json.loads(final[0])['actor_steps'] == sum(own), (final, own)
  assert sum(own) >= int(reached[0])
  _check_logs(tmp_path, MAX_ACTOR_STEPS)


@pytest.mark.parametrize('flag, message', [
    ('--env=gym:CartPole-v1', 'continuous'),
    ('--env=control:nope:x', 'Accepted forms'),
    ('--sigma=-1', '--sigma=-1'),
    ('--batch_size=0', '--batch_size=0'),
    ('--replay_remover=lifo', "--replay_remover='lifo'"),
    ('--critic_hidden_sizes=abc', "--critic_hidden_sizes='abc'"),
])
def test_bad_flags_are_refused_before_launch(tmp_path, flag, message):
  result = _run(PROGRAM, tmp_path, 'local_mp', extra=[flag], timeout=120)
  assert result.returncode == 2, result.stdout[-5000:]
  assert message in result.stdout
  assert result.stdout.count('error: ') == 1, result.stdout[-5000:]
  assert 'Traceback' not in result.stdout
  # Nothing was launched: no node wrote logs or checkpoints, and no run
  # manifest binds the workdir to the refused flags.
  for name in ('logs', 'tensorboard', 'checkpoints', 'run.json'):
    assert not os.path.exists(os.path.join(tmp_path, name)), name
