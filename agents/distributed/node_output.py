"""Each node's output to its log in the workdir, its warnings to the terminal.

Under local_mp and local_mt the launcher takes its standard output and
error (file descriptors 1 and 2, which the nodes' processes inherit) off the
terminal and onto a pseudo-terminal that it reads itself: a pseudo-terminal
rather than a pipe, so that every process on it (Python, and the `sed` that
Launchpad puts behind each node to prefix its lines) still writes line by
line. Each line goes to its node's log, `<workdir>/logs/<label>.log`, by
Launchpad's `[group/index]` prefix (the launcher's own lines:
`launcher.log`; under local_mt, where the nodes are threads of the launcher,
every line: `program.log`).
TensorFlow's, Launchpad's and Courier's start-up lines stay there.

To the terminal go, one line each with the node's label:
  * warnings, errors and fatal records of absl logging;
  * every record of the coordinator and its heartbeat watch, which tell why
    and when the program stops;
  * the last line of a Python traceback (the exception), and the lines of
    the stop watchdog and of a process that aborts.
The launcher's own messages are written to the terminal directly
(`NodeOutput.terminal`).
"""

import codecs
import os
import re
import sys
import termios
import threading
import time
from typing import Callable, Dict, Optional, TextIO, Tuple

LOGS = 'logs'  # <workdir>/logs/<label>.log
LAUNCHER = 'launcher'  # The launcher's own lines, under local_mp.
PROGRAM = 'program'  # Every node's, as threads of the launcher (local_mt).

# Launchpad's current_terminal prefix: a colour, `[group/index] `, the line,
# the colour's end.
_PREFIX = re.compile(
    r'^\x1b\[[\d;]*m\[([^\]/]+)/(\d+)\] ?(.*?)(?:\x1b\[0;0m)?$')
# An absl record: level, date, time, thread, `file:line] `, message.
_ABSL = re.compile(r'^([IWEF])\d{4} [\d:.]+ +\d+ ([^:\]]+):\d+\] (.*)$')
# The sources whose every record tells how the program goes.
_NARRATORS = ('coordinator.py', 'heartbeat.py')
_LEVELS = {'W': 'warning: ', 'E': 'error: ', 'F': 'fatal: ', 'I': ''}
# Lines outside absl logging that say a process is in trouble.
_TROUBLE = ('stop_watchdog:', 'Fatal Python error', 'terminate called')
_TRACEBACK = 'Traceback (most recent call last):'
# The first line of each launch in a node's log: a relaunch in the same
# workdir appends to its logs.
LAUNCH_HEADER = '=== launch of '
# What `finish` writes after every node has ended: once read, so is all
# that the nodes wrote before it.
_END = '\x00end of the nodes\' output'


def log_path(workdir: str, label: str) -> str:
  return os.path.join(workdir, LOGS, f'{label}.log')


def shown(line: str) -> Optional[str]:
  """What a node's `line` shows in the terminal (without the node's label),
  or None if it stays in the node's log."""
  record = _ABSL.match(line)
  if record:
    level, source, message = record.groups()
    if level != 'I' or source in _NARRATORS:
      return _LEVELS[level] + message
    return None
  if line.startswith(_TROUBLE):
    return line
  return None


class _Stream:
  """One node's lines: its log file, and what of them the terminal shows."""

  def __init__(self, path: str, label: str, show: Callable[[str], None]):
    self._file = open(path, 'a', buffering=1, errors='replace')  # pylint: disable=consider-using-with
    self._file.write(f'{LAUNCH_HEADER}{time.strftime("%Y-%m-%d %H:%M:%S")} '
                     f'(launcher pid {os.getpid()}) ===\n')
    self._label = label
    self._show = show
    self._in_traceback = False
    # Whether the last line was a record shown; a traceback right after it
    # is that record's (logged with exc_info), and is not shown again.
    self._record_shown = False
    self._show_traceback = False

  def line(self, text: str):
    self._file.write(text + '\n')
    record_shown, self._record_shown = self._record_shown, False
    if text == _TRACEBACK:
      self._in_traceback = True
      self._show_traceback = not record_shown
      return
    if self._in_traceback:
      if text.startswith(' ') or not text:
        return
      self._in_traceback = False  # The exception's own line.
      if self._show_traceback:
        self._show(f'[{self._label}] {text} (Traceback in '
                   f'{LOGS}/{self._label}.log)')
      return
    message = shown(text)
    if message is not None:
      self._record_shown = True
      self._show(f'[{self._label}] {message}')

  def close(self):
    self._file.close()


class NodeOutput:
  """Takes this process's output, and its children's, off the terminal (see
  the module docstring). `labels`: {(group, index): label} of the nodes;
  `own_label`: the log of the lines without a node's prefix."""

  def __init__(self, workdir: str, labels: Dict[Tuple[str, int], str],
               own_label: str = LAUNCHER):
    self._own_label = own_label
    self._directory = os.path.join(workdir, LOGS)
    self._workdir = workdir
    self._labels = labels
    self._show = None
    self._streams: Dict[str, _Stream] = {}
    self._lock = threading.Lock()
    self._master = None
    self._reader = None
    self._ended = threading.Event()

  @staticmethod
  def terminal() -> Tuple[TextIO, TextIO]:
    """Text streams on what fds 1 and 2 are now (the terminal), which stay
    there once `start` has taken fds 1 and 2."""
    sys.stdout.flush()
    sys.stderr.flush()
    return (os.fdopen(os.dup(1), 'w', buffering=1, errors='replace'),
            os.fdopen(os.dup(2), 'w', buffering=1, errors='replace'))

  def start(self, show: Callable[[str], None]):
    """From now on fds 1 and 2 are the pseudo-terminal; `show` writes one
    line to the terminal."""
    self._show = show
    os.makedirs(self._directory, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    self._master, replica = os.openpty()
    # Lines end in '\n' alone, as in a file.
    attributes = termios.tcgetattr(replica)
    attributes[1] &= ~termios.ONLCR
    termios.tcsetattr(replica, termios.TCSANOW, attributes)
    os.dup2(replica, 1)
    os.dup2(replica, 2)
    os.close(replica)
    sys.stdout.reconfigure(line_buffering=True)
    self._reader = threading.Thread(target=self._read, daemon=True,
                                    name='node-output')
    self._reader.start()

  def finish(self, timeout: float = 10.0):
    """Returns once every line written so far is in its log (and shown)."""
    sys.stdout.flush()
    # First ends a node's last line, if the node ended without ending it.
    os.write(1, ('\n' + _END + '\n').encode())
    self._ended.wait(timeout)

  def _stream(self, label: str) -> _Stream:
    with self._lock:
      if label not in self._streams:
        self._streams[label] = _Stream(log_path(self._workdir, label),
                                       label, self._show)
      return self._streams[label]

  def _line(self, text: str):
    prefixed = _PREFIX.match(text.rstrip('\r'))
    if prefixed:
      group, index, text = prefixed.groups()
      label = self._labels.get((group, int(index)), f'{group}_{index}')
    else:
      label = self._own_label
    # A line redrawn with '\r' (Launchpad's countdowns): what a terminal
    # would show of it.
    text = text.rstrip('\r').rsplit('\r', 1)[-1]
    if text == _END:
      self._ended.set()
      return
    self._stream(label).line(text)

  def _read(self):
    decoder = codecs.getincrementaldecoder('utf-8')(errors='replace')
    pending = ''
    while True:
      try:
        chunk = os.read(self._master, 65536)
      except OSError:  # Every writer has gone.
        return
      if not chunk:
        return
      pending += decoder.decode(chunk)
      *lines, pending = pending.split('\n')
      for line in lines:
        self._line(line)
