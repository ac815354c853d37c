"""The replay server dies mid-run (kill -9) and comes back.

A real local_mp program on CartPole; the replay node runs its Reverb server
in a child process (its PID in <workdir>/nodes/replay_server.pid) and
restarts it when it dies: from the newest replay checkpoint when replay
checkpoints are on, empty otherwise. Actors and learner must wait and
reconnect rather than crash, and training must go on until the program is
stopped (Ctrl-C, once the logs show the progress after the restart).
"""

import os
import re
import signal

import pytest

import helpers

pytestmark = pytest.mark.slow

# No evaluator: nothing here reads it (a process less to start).
FLAGS = ['--preset=cartpole_smoke', '--num_evaluators=0',
         '--samples_per_insert=4']
# In the replay node's log (`helpers.node_logs`).
SIZES = re.compile(r"Replay starts with \{'priority_table': (\d+)\} items")


def _learner_steps(workdir) -> int:
  return helpers.last(workdir, 'learner', 'learner_steps')


@pytest.mark.parametrize('replay_checkpoints', [True, False])
def test_learning_survives_a_replay_server_restart(tmp_path, launch,
                                                   replay_checkpoints):
  period = '2' if replay_checkpoints else '0'
  program = launch('output', helpers.program_command(
      'apex_dqn', f'--workdir={tmp_path}',
      f'--replay_checkpoint_every={period}', *FLAGS))
  program.wait_until(lambda: _learner_steps(tmp_path) >= 200,
                     helpers.START_TIMEOUT, 'the learner to take 200 steps')
  if replay_checkpoints:
    # The learner has sampled items: a checkpoint begun now holds them.
    # (The newest one may have been made before the first insert.)
    helpers.wait_for_a_new_replay_checkpoint(program, tmp_path)
  server_pid = helpers.pid(tmp_path, 'replay_server')
  program.note_processes()
  assert server_pid in program.seen, 'replay_server.pid is not of the run'
  steps_at_kill = _learner_steps(tmp_path)
  actor_steps_at_kill = helpers.last(tmp_path, 'actor', 'actor_steps')
  os.kill(server_pid, signal.SIGKILL)
  # Learning and acting go on after the restart, until the program is
  # stopped as a user stops it.
  program.wait_until(
      lambda: (len(SIZES.findall(program.logs())) >= 2 and
               _learner_steps(tmp_path) > steps_at_kill + 100 and
               helpers.last(tmp_path, 'actor', 'actor_steps') >
               actor_steps_at_kill + 1000),
      helpers.START_TIMEOUT, 'learner and actor progress after the restart')
  output = program.interrupt()
  assert f'pid {server_pid}) died' in output, output[-5000:]
  sizes = [int(size) for size in SIZES.findall(program.logs())]
  assert len(sizes) == 2, sizes  # At the start, and after the restart.
  assert sizes[0] == 0
  if replay_checkpoints:
    assert sizes[1] > 0  # Back from its checkpoint.
  else:
    assert sizes[1] == 0  # Back empty.
  assert _learner_steps(tmp_path) > steps_at_kill + 100
  assert helpers.last(tmp_path, 'actor', 'actor_steps') > (
      actor_steps_at_kill + 1000)
