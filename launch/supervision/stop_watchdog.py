"""Ends a node's process that is still running a grace period after a stop.

Run by `launch.supervision.local.install_stop_watchdog` as a small child process of
each local_mp node (plain Python, no imports beyond the standard library):

    python -S stop_watchdog.py <read fd> <node pid> <grace seconds> <ready fd>

The node makes the write end of a pipe its signal wake-up fd, to which
Python's C-level signal handler writes the number of every signal the node
receives, whatever its own threads are doing: a main thread blocked in a C++
call that holds the GIL, or an interpreter in its finalisation (when no
Python thread runs any more) cannot stop that write. Once a stop signal
(SIGTERM, SIGINT) arrives, this process waits `grace` seconds for the node to
end (the pipe then reaches end-of-file), then asks the node for the
tracebacks of all its threads (SIGUSR2, which the node's faulthandler
answers without the GIL) and kills it.

Run as a separate process because no thread inside a node whose GIL is held
can run at all.
"""

import os
import select
import signal
import sys
import time

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
DUMP_SIGNAL = signal.SIGUSR2
DUMP_SECONDS = 1.0
# Written to the ready fd once this process watches; the node waits for it.
READY = b'r'


def read(fd: int, timeout=None):
  """Bytes from the pipe; b'' at end-of-file (its writer ended: the node,
  or for the node this watchdog); None when `timeout` passes first."""
  ready, _, _ = select.select([fd], [], [], timeout)
  return os.read(fd, 64) if ready else None


def _wait_for_end(fd: int, seconds: float) -> bool:
  """True if the node ends (the pipe closes) within `seconds`."""
  deadline = time.monotonic() + seconds
  while True:
    left = deadline - time.monotonic()
    if left <= 0:
      return False
    if read(fd, left) == b'':
      return True


def main(argv) -> int:
  # The terminal's Ctrl-C reaches the whole process group: this process
  # goes on watching and ends with the node.
  signal.signal(signal.SIGINT, signal.SIG_IGN)
  signal.signal(signal.SIGTERM, signal.SIG_IGN)
  fd, pid, grace, ready_fd = (int(argv[1]), int(argv[2]), float(argv[3]),
                              int(argv[4]))
  os.write(ready_fd, READY)
  os.close(ready_fd)
  while True:
    received = read(fd)
    if not received:
      return 0  # The node ended.
    if any(number in STOP_SIGNALS for number in received):
      break
  if _wait_for_end(fd, grace):
    return 0
  sys.stderr.write(
      f'stop_watchdog: process {pid} still runs {grace:.0f} s after the '
      'stop request; its threads:\n')
  sys.stderr.flush()
  try:
    os.kill(pid, DUMP_SIGNAL)
    if _wait_for_end(fd, DUMP_SECONDS):
      return 0
    os.kill(pid, signal.SIGKILL)
  except ProcessLookupError:
    pass
  sys.stderr.write(f'stop_watchdog: process {pid} killed.\n')
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv))
