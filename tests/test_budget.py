"""A wall-clock budget (`--max_seconds`) counts from the actors' first step.

A real local_mp Ape-X DQN program on CartPole, stopped by its budget; the
log lines' own timestamps give the times. How soon after its end the budget
stops a run is checked on the coordinator itself, against a clock that moves
only as it polls (how long a poll takes on a loaded machine is not the
coordinator's to say).
"""

from concurrent import futures
import datetime
import json
import os
import re

import pytest

from launch.supervision import coordinator
import helpers

BUDGET = 15
# An absl log line: 'I1123 03:26:09.323005 <thread> <file>:<line>] <message>'
# (month and day, then the local time, to the microsecond, truncated).
LOG_TIME = r'[IWE](\d{4} \d\d:\d\d:\d\d\.\d+) .*?\] '


def _time_of(message: str, output: str, year: int) -> datetime.datetime:
  found = re.findall(LOG_TIME + re.escape(message), output)
  assert len(found) == 1, (message, output[-4000:])
  return datetime.datetime.strptime(f'{year} {found[0]}',
                                    '%Y %m%d %H:%M:%S.%f')


@pytest.mark.slow
def test_wall_clock_budget_counts_from_the_first_actor_step(tmp_path):
  result = helpers.run_program(
      'apex_dqn', f'--workdir={tmp_path}', '--preset=cartpole_smoke',
      '--num_actors=1', '--num_evaluators=0', '--min_replay_size=100',
      '--replay_capacity=10000', f'--max_seconds={BUDGET}',
      '--replay_checkpoint_every=0', '--checkpoint_every=0')
  output = result.stdout
  assert result.returncode == 0, output[-4000:]
  helpers.check_stopped_in_order(output, tmp_path)
  # The coordinator's records, with their times, in its log.
  logs = helpers.node_logs(tmp_path)
  # The budget left out the start-up: it began after the actor process had
  # built its networks and environment and started its loop (when it wrote
  # its PID file), not when the coordinator started.
  actor_ready = datetime.datetime.fromtimestamp(
      os.path.getmtime(os.path.join(tmp_path, 'nodes', 'actor.pid')))
  started = _time_of('The actors have started', logs, actor_ready.year)
  stopping = _time_of('Stopping: ran for', logs, actor_ready.year)
  assert actor_ready <= started, (actor_ready, started)
  # The stop was the budget's, and came no sooner than the budget after the
  # start: the start's line is logged just before the budget's clock starts,
  # the stop's just after the check that found it run out (less a
  # microsecond: both times are truncated). How much later it may come is
  # test_the_budget_stops_the_run_at_the_first_poll_past_it's.
  assert re.search(rf'since the actors started \(limit {BUDGET} s\)', output)
  assert stopping - started >= (datetime.timedelta(seconds=BUDGET) -
                                datetime.timedelta(microseconds=1)), (
                                    started, stopping)
  # Every step the actor took is in the counter's final counts.
  own = helpers.own_actor_steps(tmp_path)
  assert list(own) == [0], logs[-4000:]
  assert helpers.final_counts(tmp_path)['actor_steps'] == own[0] > 0


# Seconds each of the coordinator's polls takes in the test below (its wait
# and the counter's answer), on a clock that moves only as it polls.
POLL_SECONDS = 1.3


class _PolledCounter:
  """The counter as the coordinator polls it, and the coordinator's clock
  (`coordinator.time`): each poll moves the clock on by POLL_SECONDS. The
  actors' steps stay 0 for the first `idle` polls (start-up), then grow by
  10 a poll."""

  def __init__(self, idle: int):
    self.polls = 0
    self._idle = idle

  def get_counts(self):
    self.polls += 1
    return {'actor_steps': 10 * max(0, self.polls - self._idle)}

  def time(self) -> float:
    return self.polls * POLL_SECONDS


class _StoppedNode:
  """A node that confirms its stop at once."""

  def __init__(self):
    self.futures = self

  def stop(self, timeout):
    del timeout
    answer = futures.Future()
    answer.set_result(True)
    return answer


def test_the_budget_stops_the_run_at_the_first_poll_past_it(tmp_path,
                                                            monkeypatch):
  counter = _PolledCounter(idle=4)
  monkeypatch.setattr(coordinator, 'time', counter)
  ended = []
  node = _StoppedNode()
  coordinator.Coordinator(
      {'counter': [counter], 'learner': [node], 'actor': [node]},
      max_seconds=BUDGET, workdir=str(tmp_path),
      end_program=lambda failed, replays, counter: ended.append(failed),
      poll_seconds=0.0).run()
  assert ended == [False]
  # Polls 1 to 4 see no step (the start-up is not counted); poll 5 (at
  # 6.5 s) the actors' first steps: the budget counts from there. Poll 16
  # is 14.3 s after it, poll 17 15.6 s: the first past the budget, the one
  # that stops the run. Counted from the coordinator's start instead, the
  # stop would have come at poll 12; a limiter that missed its first poll
  # past the budget, at 18 or later.
  assert counter.polls == 17
  with open(tmp_path / 'stop.json') as f:
    record = json.load(f)
  assert record == {
      'reason': f'ran for 16 s since the actors started (limit {BUDGET} s)',
      'failed': False, 'counts': {'actor_steps': 130}}, record
