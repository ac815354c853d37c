"""A run that heals itself (launch/keeper.py), with real faults: under
local_mp the learner, the counter, replay, an actor and the evaluator are
each SIGKILLed once and the learner SIGSTOPped once (past
--heartbeat_timeout), one after another, each once the one before has come
back. Each comes back in place, from its own newest checkpoint; the
program goes on learning, and stops in order with exit 0 at Ctrl-C."""

import json
import os
import signal

import pytest

from launch import keeper
from launch.runs import run_manifest
import helpers

FAULTS = (('learner', signal.SIGKILL), ('counter', signal.SIGKILL),
          ('replay', signal.SIGKILL), ('actor_1', signal.SIGKILL),
          ('evaluator', signal.SIGKILL), ('learner', signal.SIGSTOP))
HEARTBEAT_TIMEOUT = 8


def _records(workdir, event: str, node: str):
  return [record for record in
          keeper.this_launch(keeper.read_faults(str(workdir)))
          if record.get('event') == event and record['node'] == node]


def _checkpointed(workdir) -> bool:
  """A learner checkpoint, and one of replay's (Reverb's DONE marker)."""
  checkpoints = workdir / 'checkpoints'
  replay = checkpoints / 'replay'
  return ((checkpoints / 'learner').is_dir() and
          any((checkpoints / 'learner').iterdir()) and replay.is_dir() and
          any((replay / name / 'DONE').exists()
              for name in os.listdir(replay)))


@pytest.mark.slow
def test_every_kind_of_node_killed_or_frozen_comes_back_in_place(
    tmp_path, launch):
  workdir = tmp_path / 'run'
  program = launch('run', helpers.program_command(
      'apex_dqn', f'--workdir={workdir}', '--preset=cartpole_smoke',
      '--max_actor_steps=100000000', f'--heartbeat_timeout={HEARTBEAT_TIMEOUT}',
      '--checkpoint_every=2', '--replay_checkpoint_every=2'))
  program.wait_until(
      lambda: f'{helpers.HEARD_FROM_ALL} (learner' in program.logs(),
      helpers.START_TIMEOUT, 'the coordinator\'s first answer from each node')
  program.wait_until(lambda: _checkpointed(workdir), helpers.START_TIMEOUT,
                     'checkpoints of the learner and of replay')

  for label, number in FAULTS:
    victim = helpers.pid(workdir, label)
    program.note_processes()
    assert victim in program.seen, f'{label}.pid is not a process of the run'
    recovered = len(_records(workdir, 'recovered', label))
    os.kill(victim, number)
    # Back: its new process (another pid) has answered the coordinator.
    program.wait_until(
        lambda: len(_records(workdir, 'recovered', label)) > recovered,
        helpers.START_TIMEOUT, f'the {label} back after {number.name}')
    assert helpers.pid(workdir, label) != victim
    fault = _records(workdir, 'fault', label)[-1]
    assert fault['pid'] == victim and fault['gave_up'] is False, fault
    if number == signal.SIGKILL:
      assert fault['cause'] == 'killed by SIGKILL', fault
    else:  # Ended by the coordinator, its heartbeats silent.
      assert fault['cause'].startswith('frozen: no answer to its heartbeats '
                                       'for '), fault
      assert f'--heartbeat_timeout={HEARTBEAT_TIMEOUT}' in fault['cause']

  # The program goes on learning with every node back.
  steps = helpers.last(workdir, 'learner', 'learner_steps')
  actor_1_rows = len(helpers.rows(workdir, 'actor_1'))
  program.wait_until(
      lambda: (helpers.last(workdir, 'learner', 'learner_steps') > steps + 200
               and len(helpers.rows(workdir, 'actor_1')) > actor_1_rows),
      helpers.START_TIMEOUT, 'updates, and actor 1 logging, after the faults')
  output = program.interrupt()
  assert 'Traceback' not in output, output[-4000:]

  with open(workdir / run_manifest.STOP_RECORD) as f:
    record = json.load(f)
  assert record['failed'] is False, record
  assert record['restarts'] == {'learner': 2, 'counter': 1, 'replay': 1,
                                'actor_1': 1, 'evaluator': 1}, record
  # What each fault lost, from the nodes' last answers before it and first
  # after: a learner goes back to its newest checkpoint, never before it;
  # the counter and replay come back from theirs, not from nothing.
  for fault in _records(workdir, 'recovered', 'learner'):
    before, after = fault['answered_before_fault'], fault['answered_after']
    assert after['updates_at_start'] >= before['updates_checkpointed'] > 0, (
        fault)
    assert fault['lost']['updates'] == (before['updates'] -
                                        after['updates_at_start'])
  (counter,) = _records(workdir, 'recovered', 'counter')
  assert counter['answered_after']['actor_steps_at_start'] > 0, counter
  (replay,) = _records(workdir, 'recovered', 'replay')
  assert replay['answered_after']['items'] > 0, replay
  for fault in keeper.this_launch(keeper.read_faults(str(workdir))):
    if fault.get('event') == 'recovered':
      assert fault['seconds_since_fault'] >= 0, fault
      assert all(value >= 0 for value in fault['lost'].values()), fault
