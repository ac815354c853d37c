"""The replay server dies mid-run (kill -9) and comes back.

A real local_mp program on CartPole; the replay node runs its Reverb server
in a child process (its PID in <workdir>/nodes/replay_server.pid) and
restarts it when it dies: from the newest replay checkpoint when replay
checkpoints are on, empty otherwise. Actors and learner must wait and
reconnect rather than crash, and training must go on to --max_actor_steps.
"""

import csv
import os
import re
import signal
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAM = os.path.join(ROOT, 'programs', 'apex_dqn.py')
MAX_ACTOR_STEPS = 12_000
FLAGS = [
    '--env=gym:CartPole-v1', '--num_actors=2', '--batch_size=32',
    '--min_replay_size=300', '--replay_capacity=20000',
    '--mlp_hidden_sizes=32', '--dueling_hidden_size=32',
    f'--max_actor_steps={MAX_ACTOR_STEPS}', '--log_every=1',
    '--evaluation_period=200', '--evaluation_episodes=1',
    '--samples_per_insert=4',
]
SIZES = re.compile(r"Replay starts with \{'priority_table': (\d+)\} items")


def _last(workdir, label: str, column: str) -> int:
  path = os.path.join(workdir, 'logs', label, 'logs.csv')
  if not os.path.exists(path):
    return 0
  with open(path) as f:
    rows = list(csv.DictReader(f))
  return int(rows[-1][column]) if rows else 0


def _learner_steps(workdir) -> int:
  return _last(workdir, 'learner', 'learner_steps')


def _wait_for(condition, timeout: float, what: str):
  deadline = time.time() + timeout
  while time.time() < deadline:
    if condition():
      return
    time.sleep(0.5)
  raise AssertionError(f'timed out waiting for {what}')


@pytest.mark.parametrize('replay_checkpoints', [True, False])
def test_learning_survives_a_replay_server_restart(tmp_path,
                                                   replay_checkpoints):
  period = '2' if replay_checkpoints else '0'
  log_path = tmp_path / 'output.log'
  with open(log_path, 'w') as log:
    process = subprocess.Popen(
        [sys.executable, PROGRAM, '--lp_launch_type=local_mp',
         f'--workdir={tmp_path}', f'--replay_checkpoint_every={period}',
         *FLAGS],
        stdout=log, stderr=subprocess.STDOUT, cwd=ROOT,
        start_new_session=True)
    try:
      _wait_for(lambda: _learner_steps(tmp_path) >= 200, 240,
                'the learner to take 200 steps')
      if replay_checkpoints:
        replay_checkpoints_dir = tmp_path / 'checkpoints' / 'replay'
        # The first checkpoint may come after the learner's 200th step.
        _wait_for(lambda: replay_checkpoints_dir.is_dir() and any(
            (path / 'DONE').exists()
            for path in replay_checkpoints_dir.iterdir()), 60,
                  'a replay checkpoint')
      with open(tmp_path / 'nodes' / 'replay_server.pid') as f:
        server_pid = int(f.read())
      steps_at_kill = _learner_steps(tmp_path)
      actor_steps_at_kill = _last(tmp_path, 'actor', 'actor_steps')
      os.kill(server_pid, signal.SIGKILL)
      returncode = process.wait(timeout=400)
    finally:
      if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
  output = log_path.read_text(errors='replace')
  assert returncode == 0, output[-5000:]
  assert 'did not terminate in time' not in output
  assert f'pid {server_pid}) died' in output, output[-5000:]
  sizes = [int(size) for size in SIZES.findall(output)]
  assert len(sizes) == 2, sizes  # At the start, and after the restart.
  assert sizes[0] == 0
  if replay_checkpoints:
    assert sizes[1] > 0  # Back from its checkpoint.
  else:
    assert sizes[1] == 0  # Back empty.
  # Learning and acting went on after the restart; only the actors' step
  # limit stops the program with exit code 0.
  assert _learner_steps(tmp_path) > steps_at_kill + 100
  assert _last(tmp_path, 'actor', 'actor_steps') > actor_steps_at_kill + 1000
