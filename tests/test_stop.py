"""A node stuck in a call to another node must not stop the program ending.

Launchpad (local_mp) gives nodes 10 s after a stop request and then kills the
whole program, which exits -9. Each case launches tests/stop_probe.py, a real
local_mp program whose `caller` node waits in a Courier call that is never
answered when the program is stopped.
"""

import re

import pytest

import helpers

pytestmark = pytest.mark.slow


def _run_probe(watchdog: bool, block: str = 'courier'):
  return helpers.run_module(
      'stop_probe', f'--watchdog={str(watchdog).lower()}', f'--block={block}',
      timeout=120)


@pytest.mark.parametrize('block', ['courier', 'gil'])
def test_blocked_node_is_killed_without_the_watchdog(block):
  # The probe really blocks: without the watchdog Launchpad has to kill it.
  result = _run_probe(watchdog=False, block=block)
  assert 'the caller is waiting' in result.stdout
  assert 'did not terminate in time' in result.stdout, result.stdout[-3000:]
  assert result.returncode != 0


@pytest.mark.parametrize('block', ['courier', 'courier', 'gil'])
def test_blocked_node_ends_within_the_stop_notice(block):
  # Two runs blocked in Courier: the stop races with the nodes' start-up.
  result = _run_probe(watchdog=True, block=block)
  assert 'the caller is waiting' in result.stdout
  assert 'did not terminate in time' not in result.stdout, (
      result.stdout[-3000:])
  assert result.returncode == 0, result.stdout[-3000:]
  # The watchdog ended the caller, after printing where it was stuck.
  assert 'still runs 5 s after the stop request' in result.stdout, (
      result.stdout[-3000:])
  assert re.search(r'stop_probe\.py", line \d+ in run', result.stdout), (
      result.stdout[-3000:])
