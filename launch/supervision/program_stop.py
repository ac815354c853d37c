"""A node's loop under the program's stop: it ends by itself, and is
interrupted only if it has not ended `GRACE_SECONDS` later.

Launchpad's stop (test_mt's and local_mt's stopper, Ctrl-C, SIGTERM to a
process under local_mp or on Vertex AI) calls each node's stop handlers.
Every node's loop here checks its own stop between steps (`nodes.Stop`), so
it ends within a step, or within a rate-limited wait
(`tables.RATE_LIMITER_TIMEOUT_MS`). What can keep it from ending is a call
to a node that stopped first; such a call fails once that node's server has
gone, and an error raised in the loop after the program's stop is taken as
that stop, not as a failure of the node.

Acme's `signals.runtime_terminator` instead raises SystemExit in the loop's
thread at once, wherever it is. In `logging`, between a handler's lock
being taken and the `try` that would release it, that leaves the lock held
by a thread that has ended: every later log call of the process waits
forever (a thread logging in a loop, interrupted so again and again, left
absl's handler lock held within two thousand tries), and under test_mt a
whole program missed its stop deadline so. Here only a loop still running
`GRACE_SECONDS` after the stop is interrupted, and never after it has
ended.
"""

import contextlib
import ctypes
import threading
from typing import Callable, Iterator, Optional

import launchpad as lp
from absl import logging

# How long a loop has, from the program's stop, to end by itself. Well
# inside Launchpad's ten seconds (`termination_notice_secs`) for a thread
# to end before it kills the process.
GRACE_SECONDS = 3.0


def _raise_in(thread_id: int, exception: Optional[type]):
  """Makes `exception` pending in the thread (None clears a pending one)."""
  ctypes.pythonapi.PyThreadState_SetAsyncExc(
      ctypes.c_ulong(thread_id),
      None if exception is None else ctypes.py_object(exception))


class _Loop:
  """The state shared by the loop's thread and the stop's timer."""

  def __init__(self, what: str, callback: Optional[Callable[[], None]],
               grace_seconds: float):
    self.thread_id = threading.get_ident()
    self.stopped = threading.Event()
    self._what = what
    self._callback = callback
    self._grace_seconds = grace_seconds
    self._lock = threading.Lock()
    self._running = True
    self._interrupted = False

  def on_program_stop(self):
    self.stopped.set()
    if self._callback is not None:
      self._callback()
    timer = threading.Timer(self._grace_seconds, self._interrupt)
    timer.daemon = True
    timer.start()

  def _interrupt(self):
    with self._lock:
      if not self._running:
        return
      self._interrupted = True
      _raise_in(self.thread_id, SystemExit)
    logging.warning('%s had not ended %.0f s after the program\'s stop: '
                    'interrupted.', self._what, self._grace_seconds)

  def leave(self):
    """The loop has ended: no interrupt from now on, none left pending."""
    with self._lock:
      self._running = False
      if self._interrupted:
        _raise_in(self.thread_id, None)


@contextlib.contextmanager
def interrupt_if_stuck(what: str,
                       callback: Optional[Callable[[], None]] = None,
                       grace_seconds: float = GRACE_SECONDS
                       ) -> Iterator[threading.Event]:
  """Runs a node's loop (`what`, for the log), which the program's stop
  ends: it yields an event set by that stop, calls `callback` then, and
  interrupts the loop with SystemExit if it has not ended `grace_seconds`
  later. An error raised in the loop after the stop ends it as SystemExit
  does (the thread ends, without the node's last work). Outside a program
  (no Launchpad stop ever comes) it only runs the loop."""
  loop = _Loop(what, callback, grace_seconds)
  lp.register_stop_handler(loop.on_program_stop)
  try:
    yield loop.stopped
  except Exception as error:  # pylint: disable=broad-except
    loop.leave()
    if not loop.stopped.is_set():
      raise
    logging.info('%s ended by the program\'s stop: %s: %s', what,
                 type(error).__name__, error)
    raise SystemExit() from error
  finally:
    loop.leave()
    lp.unregister_stop_handler(loop.on_program_stop)
