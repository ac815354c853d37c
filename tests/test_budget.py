"""A wall-clock budget (`--max_seconds`) counts from the actors' first step.

A real local_mp Ape-X DQN program on CartPole, stopped by its budget; the
log lines' own timestamps give the times.
"""

import datetime
import os
import re

import pytest

import helpers

pytestmark = pytest.mark.slow

BUDGET = 15
# An absl log line: 'I1123 03:26:09.323005 <thread> <file>:<line>] <message>'.
LOG_TIME = r'[IWE]\d{4} (\d\d:\d\d:\d\d\.\d+) .*?\] '


def _time_of(message: str, output: str) -> datetime.datetime:
  found = re.findall(LOG_TIME + re.escape(message), output)
  assert len(found) == 1, (message, output[-4000:])
  return datetime.datetime.strptime(found[0], '%H:%M:%S.%f')


def test_wall_clock_budget_counts_from_the_first_actor_step(tmp_path):
  result = helpers.run_program(
      'apex_dqn', f'--workdir={tmp_path}', '--preset=cartpole_smoke',
      '--num_actors=1', '--num_evaluators=0', '--min_replay_size=100',
      '--replay_capacity=10000', f'--max_seconds={BUDGET}',
      '--replay_checkpoint_every=0', '--checkpoint_every=0')
  output = result.stdout
  assert result.returncode == 0, output[-4000:]
  helpers.check_stopped_in_order(output)
  started = _time_of('The actors have started', output)
  stopping = _time_of('Stopping: ran for', output)
  # The limiter polls once a second.
  assert BUDGET <= (stopping - started).total_seconds() <= BUDGET + 3, (
      started, stopping)
  assert re.search(rf'since the actors started \(limit {BUDGET} s\)', output)
  # The budget left out the start-up: it began after the actor process had
  # built its networks and environment and started its loop (when it wrote
  # its PID file), not when the coordinator started.
  actor_ready = datetime.datetime.fromtimestamp(
      os.path.getmtime(os.path.join(tmp_path, 'nodes', 'actor.pid')))
  actor_ready = actor_ready.replace(year=1900, month=1, day=1)
  assert actor_ready <= started, (actor_ready, started)
  # Every step the actor took is in the counter's final counts.
  own = helpers.own_actor_steps(output)
  assert list(own) == [0], output[-4000:]
  assert helpers.final_counts(output)['actor_steps'] == own[0] > 0
