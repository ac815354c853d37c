"""A run that heals itself (launch/supervision/keeper.py), with real faults, injected by
the chaos tool as a user runs it (`python -m benchmarks.chaos`): under
local_mp the learner, the counter, a replay node, its Reverb server, an
actor and the evaluator are SIGKILLed, and the learner and the replay
node's own process SIGSTOPped past --heartbeat_timeout, one after another,
each once the node before has come back and its own checkpoint holds some
of the run's work. Each comes back in place, from its own newest
checkpoint; the program goes on, stops in order with exit 0 on a stop
request, and every checkpoint it left loads in a relaunch."""

import json
import os
import sys

import pytest

from launch.supervision import keeper

from launch.runs import faults as fault_records
from launch.runs import checkpointing
import helpers

SCHEDULE = ('learner:SIGKILL', 'counter:SIGKILL', 'replay:SIGKILL',
            'actor_1:SIGKILL', 'evaluator:SIGKILL', 'learner:SIGSTOP',
            'replay_server:SIGKILL', 'replay:SIGSTOP')
HEARTBEAT_TIMEOUT = 8


@pytest.mark.slow
def test_every_kind_of_node_killed_or_frozen_comes_back_in_place(tmp_path):
  workdir = tmp_path / 'run'
  output = helpers.run([
      sys.executable, '-m', 'benchmarks.chaos', f'--workdir={workdir}',
      '--fault_every=2', '--after_checkpoints',
      f'--schedule={",".join(SCHEDULE)}',
      f'--stop_after_faults={len(SCHEDULE)}', '--', 'programs/apex_dqn.py',
      '--preset=cartpole_smoke', '--max_actor_steps=100000000',
      f'--heartbeat_timeout={HEARTBEAT_TIMEOUT}', '--checkpoint_every=2',
      '--replay_checkpoint_every=2'], timeout=900).stdout
  with open(workdir / 'chaos.json') as f:
    summary = json.load(f)
  assert summary['ok'], (output[-3000:], summary)
  assert summary['injected'] == summary['recovered'] == len(SCHEDULE)
  assert summary['exit_status'] == 0 and summary['within_bound'], summary
  assert summary['stop']['failed'] is False, summary['stop']
  assert summary['stop']['reason'] == 'stopped on request (programs/stop.py)'
  assert summary['stop']['restarts'] == {
      'learner': 2, 'counter': 1, 'replay': 3, 'actor_1': 1,
      'evaluator': 1}, summary['stop']
  for fault, planned in zip(summary['faults'], SCHEDULE):
    label, number = planned.split(':')
    assert (fault['process'], fault['signal']) == (label, number), fault
    assert fault['seen_by_keeper'], fault
    if number == 'SIGSTOP':  # Ended by the coordinator.
      assert fault['cause'].startswith('frozen: '), fault
      assert f'--heartbeat_timeout={HEARTBEAT_TIMEOUT}' in fault['cause']
    elif label == 'replay_server':  # Started again by its replay node.
      assert fault['cause'] == 'its server was killed by SIGKILL', fault
    else:
      assert fault['cause'] == 'killed by SIGKILL', fault

  # What each fault lost, from the nodes' last answers before it and first
  # after: a learner goes back to its newest checkpoint, never before it;
  # the counter and a replay node come back from theirs, not from nothing.
  # Of the first launch (the relaunch below is the second).
  every = fault_records.read_faults(str(workdir))
  launches = [index for index, record in enumerate(every)
              if record.get('event') == 'launch']
  assert len(launches) == 2, every
  # A fault's recovery (a node answering again after a silence with no
  # fault of its own before it, as a slow start on a busy machine makes,
  # is not one: its record has no fault to time).
  records = [record for record in every[launches[0]:launches[1]]
             if record.get('event') == 'recovered' and
             'seconds_since_fault' in record]
  assert len(records) == len(SCHEDULE), records
  for record in records:
    before, after = record['answered_before_fault'], record['answered_after']
    assert record['seconds_since_fault'] >= 0, record
    if record['node'] == 'learner':
      assert after['updates_at_start'] >= before['updates_checkpointed'] > 0
      # The answer before the fault can be older than the newest checkpoint
      # (a second at most): nothing lost then, not less than nothing.
      assert record['lost']['updates'] == max(
          0, before['updates'] - after['updates_at_start'])
    if record['node'] == 'counter':
      assert after['actor_steps_at_start'] > 0, record
  first_replay = next(record for record in records
                      if record['node'] == 'replay')
  assert first_replay['answered_after']['items'] > 0, first_replay

  # Relaunched: every checkpoint the run left loads.
  resume = summary['resume']
  assert resume['exit_status'] == 0, resume
  assert resume['learner_starts_at'] > 0, resume
  assert json.loads(resume['counter_starts_from'].replace("'", '"'))[
      'actor_steps'] > 0, resume
  (replay,) = resume['replay_starts_with']
  assert int(replay.split(': ')[1].rstrip('}')) > 0, resume
  assert os.path.exists(workdir / 'resume_output.txt')


def test_a_counter_checkpoint_of_no_actor_steps_is_not_one_to_fault_after(
    tmp_path):
  """The counter saves when the learner does, and the learner's first
  checkpoint can come before any actor's counts reach it: the chaos tool's
  --after_checkpoints waits for a save that holds actor steps."""
  workdir = str(tmp_path)
  assert not checkpointing.holds_work(workdir, 'counter')
  counter = checkpointing.CheckpointedCounter(workdir, period_seconds=600.0)
  counter.increment(learner_steps=3)
  assert counter.save_checkpoint()
  assert not checkpointing.holds_work(workdir, 'counter')
  counter.increment(actor_steps=25)
  assert counter.save_checkpoint()
  assert checkpointing.holds_work(workdir, 'counter')
  # A learner or a replay shard with no checkpoint yet; an actor keeps none.
  assert not checkpointing.holds_work(workdir, 'learner')
  assert not checkpointing.holds_work(workdir, 'replay_1')
  assert checkpointing.holds_work(workdir, 'actor_1')
