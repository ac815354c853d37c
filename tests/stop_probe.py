"""A Launchpad program with a node stuck in a call when the program stops.

The `caller` node's main thread waits in a Courier call that the `blocker`
node never answers; the `stopper` node then stops the program. Used by
test_stop.py as a subprocess under local_mp, with and without the stop
watchdog of `agents.distributed.exit_soon_after_stop`.
"""

import os
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import launchpad as lp  # pylint: disable=wrong-import-position
from absl import app  # pylint: disable=wrong-import-position
from absl import flags  # pylint: disable=wrong-import-position
from acme.utils import signals  # pylint: disable=wrong-import-position

from agents import distributed  # pylint: disable=wrong-import-position

flags.DEFINE_bool('watchdog', True, 'Install the stop watchdog in each node.')
FLAGS = flags.FLAGS


def _maybe_watchdog(watchdog: bool):
  if watchdog:
    distributed.exit_soon_after_stop('local_mp')


class Blocker:
  """Answers `hang` only after an hour."""

  def __init__(self, watchdog: bool):
    self._watchdog = watchdog
    self._entered = threading.Event()

  def hang(self):
    self._entered.set()
    threading.Event().wait(3600)

  def entered(self) -> bool:
    return self._entered.is_set()

  def run(self):
    _maybe_watchdog(self._watchdog)
    lp.wait_for_stop()


class Caller:
  """Calls `hang` from its main thread, as a node calls a stopped node."""

  def __init__(self, blocker, watchdog: bool):
    self._blocker = blocker
    self._watchdog = watchdog

  def run(self):
    _maybe_watchdog(self._watchdog)
    with signals.runtime_terminator():
      self._blocker.hang()


class Stopper:
  """Stops the program once the caller waits in `hang`."""

  def __init__(self, blocker):
    self._blocker = blocker

  def run(self):
    while not self._blocker.entered():
      time.sleep(0.2)
    print('stopper: the caller is waiting; stopping the program', flush=True)
    lp.stop()


def main(_):
  program = lp.Program(name='stop_probe')
  with program.group('blocker'):
    blocker = program.add_node(lp.CourierNode(Blocker, FLAGS.watchdog))
  with program.group('caller'):
    program.add_node(lp.CourierNode(Caller, blocker, FLAGS.watchdog))
  with program.group('stopper'):
    program.add_node(lp.CourierNode(Stopper, blocker))
  lp.launch(program, launch_type='local_mp',
            terminal='current_terminal').wait()


if __name__ == '__main__':
  app.run(main)
