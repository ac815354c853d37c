"""A Launchpad program with a node stuck in a call when the program stops.

The `caller` node's main thread waits in a Courier call that the `blocker`
node never answers (`--block=courier`), or in a C call that holds the GIL
(`--block=gil`, as a C++ extension that does not release it); the `stopper`
node then stops the program. Used by
test_stop.py as a subprocess under local_mp, with and without the stop
watchdog of `launch.supervision.local.install_stop_watchdog`:

  python -m tests.stop_probe --watchdog=false --block=gil

(from the repository root).
"""

import ctypes
import threading
import time

import launchpad as lp
from absl import app
from absl import flags

from launch.supervision import local
from launch.supervision import program_stop

flags.DEFINE_bool('watchdog', True, 'Install the stop watchdog in each node.')
flags.DEFINE_enum('block', 'courier', ['courier', 'gil'],
                  'Where the caller is stuck when the program stops.')
FLAGS = flags.FLAGS


def _maybe_watchdog(watchdog: bool):
  if watchdog:
    local.install_stop_watchdog()


def _hold_the_gil_forever():
  """Locks a glibc mutex twice from this thread through PyDLL, which keeps
  the GIL during the call: the second lock never returns (signals do not
  interrupt it), and no Python thread of this process runs again."""
  libc = ctypes.PyDLL(None)
  mutex = ctypes.create_string_buffer(64)  # Zeroed: an unlocked mutex.
  libc.pthread_mutex_lock(mutex)
  libc.pthread_mutex_lock(mutex)


class Blocker:
  """Answers `hang` only after an hour."""

  def __init__(self, watchdog: bool):
    self._watchdog = watchdog
    self._entered = threading.Event()

  def hang(self):
    self._entered.set()
    threading.Event().wait(3600)

  def enter(self):
    self._entered.set()

  def entered(self) -> bool:
    return self._entered.is_set()

  def run(self):
    _maybe_watchdog(self._watchdog)
    lp.wait_for_stop()


class Caller:
  """Calls `hang` from its main thread, as a node calls a stopped node."""

  def __init__(self, blocker, watchdog: bool, block: str):
    self._blocker = blocker
    self._watchdog = watchdog
    self._block = block

  def run(self):
    _maybe_watchdog(self._watchdog)
    with program_stop.interrupt_if_stuck('The caller'):
      if self._block == 'courier':
        self._blocker.hang()
      else:
        self._blocker.enter()
        _hold_the_gil_forever()


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
    program.add_node(lp.CourierNode(Caller, blocker, FLAGS.watchdog,
                                    FLAGS.block))
  with program.group('stopper'):
    program.add_node(lp.CourierNode(Stopper, blocker))
  lp.launch(program, launch_type='local_mp',
            terminal='current_terminal').wait()


if __name__ == '__main__':
  app.run(main)
