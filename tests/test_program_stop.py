"""A node's loop under the program's stop (launch/program_stop):
it ends by itself and is interrupted only when stuck past the grace.

tests/program_stop_probe.py runs a real test_mt program, stopped with
Launchpad's own stopper; its nodes report what happened to them, with the
seconds since the stop.
"""

import re

import pytest

import helpers
from launch.supervision import program_stop


def _reports(output: str):
  # Not anchored to a line's start: Launchpad's countdown ("Waiting for
  # workers to stop for 7s.") ends with a carriage return, not a newline,
  # and a report written meanwhile follows it on the same line.
  return {name: (what, float(seconds)) for name, what, seconds in
          re.findall(r'PROGRAM_STOP_PROBE (\w+) (\w+) (\d+\.\d{3})', output)}


def test_loops_end_by_themselves_and_only_a_stuck_one_is_interrupted():
  result = helpers.run_module('program_stop_probe', timeout=120)
  output = result.stdout
  tail = '\n'.join(line for line in output.splitlines()
                   if 'ends: row' not in line)[-3000:]
  assert result.returncode == 0, tail
  assert 'did not terminate in time' not in output, tail
  assert 'PROGRAM_STOP_PROBE the program has ended' in output, tail
  reports = _reports(output)
  grace = program_stop.GRACE_SECONDS
  # The loop that saw its stop was never interrupted, even in last work
  # that ran twice the grace after it (an interrupt left pending would have
  # raised there); so it logged to its end.
  assert reports['ends'][0] == 'finished', tail
  assert reports['ends'][1] >= 2 * grace
  assert 'ends: done' in output
  assert 'ends had not ended' not in output
  # The loop that ignored the stop was interrupted, once the grace had
  # passed and not before.
  assert reports['stuck'][0] == 'interrupted', tail
  assert reports['stuck'][1] >= grace
  assert 'stuck had not ended 3 s after the program\'s stop' in output
  # An error after the stop ended its loop as the stop, its cause kept.
  assert reports['failing'][0] == 'ended_by_ConnectionError', tail
  assert ('failing ended by the program\'s stop: ConnectionError: the '
          'replay server has gone') in output


def test_outside_a_program_the_loop_runs_and_its_errors_are_its_own():
  with program_stop.interrupt_if_stuck('loop') as stopping:
    assert not stopping.is_set()
    total = sum(range(10))
  assert total == 45
  # No stop has come: an error is the loop's own, not a stop.
  with pytest.raises(ValueError, match='bad step'):
    with program_stop.interrupt_if_stuck('loop'):
      raise ValueError('bad step')
