"""Each node's output to its log in the workdir, its warnings to the terminal.

Under local_mp and local_mt the launcher takes its standard output and
error (file descriptors 1 and 2, which the nodes' processes inherit) off the
terminal and onto a pseudo-terminal that it reads itself: a pseudo-terminal
rather than a pipe, so that every process on it (Python, and the `sed` that
Launchpad puts behind each node to prefix its lines) still writes line by
line. Each line goes to its node's log, `<workdir>/logs/<label>.log`, by
Launchpad's `[group/index]` prefix; the launcher's own lines go to
`launcher.log`. TensorFlow's, Launchpad's and Courier's start-up lines stay
there.

Under local_mt the nodes are threads of the launcher, and file descriptors
are the process's: no prefix tells their lines apart. There the platform
names each node's thread as the node starts (`platforms.SharedProcess`), a
thread started from a node's thread is the node's too, and `sys.stdout` and
`sys.stderr` send each line a node's thread writes (log records, prints,
tracebacks) to that node's log. What cannot be told apart goes to
`program.log`: what C++ libraries write to the file descriptors themselves
(TensorFlow's, Reverb's and Courier's lines), what Python writes on threads
no node started (Courier's, which serve the calls a node answers), what a
node's thread writes before the node's first step (Launchpad's lines as it
connects the node's clients), and the launcher's own lines.

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
import functools
import os
import re
import sys
import termios
import threading
import time
from typing import Callable, Dict, Optional, TextIO, Tuple
import weakref

from absl import logging

LOGS = 'logs'  # <workdir>/logs/<label>.log
LAUNCHER = 'launcher'  # The launcher's own lines, under local_mp.
PROGRAM = 'program'  # What no node's thread wrote, under local_mt.

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


# Under local_mt: the node whose thread each thread is.
_NODE_OF_THREAD: 'weakref.WeakKeyDictionary[threading.Thread, str]' = (
    weakref.WeakKeyDictionary())


def name_node_thread(label: str):
  """Makes the calling thread node `label`'s (its node's first step under
  local_mt)."""
  _NODE_OF_THREAD[threading.current_thread()] = label


def _thread_node() -> Optional[str]:
  """The label of the node whose thread the calling thread is, or None."""
  return _NODE_OF_THREAD.get(threading.current_thread())


def _started_as_its_starters(start):
  """`threading.Thread.start` that makes a thread started from a node's
  thread that node's (its thread pools', its replay shards' readers and
  writers), whose lines are the node's."""

  @functools.wraps(start)
  def started(thread: threading.Thread):
    label = _thread_node()
    if label is not None:
      _NODE_OF_THREAD[thread] = label
    return start(thread)

  return started


class _NodeThreadsLines:
  """`sys.stdout` or `sys.stderr` under local_mt: what a node's thread
  writes goes, a line at a time, to `log(label, line)`; what any other
  thread writes, to `stream` as before."""

  def __init__(self, stream: TextIO, log: Callable[[str, str], None]):
    self._stream = stream
    self._log = log
    self._unended = threading.local()  # Each thread's line not yet ended.

  def write(self, text: str) -> int:
    label = _thread_node()
    if label is None:
      return self._stream.write(text)
    *lines, self._unended.text = (
        getattr(self._unended, 'text', '') + text).split('\n')
    for line in lines:
      self._log(label, line)
    return len(text)

  def __getattr__(self, name: str):  # flush, fileno, encoding, isatty, ...
    return getattr(self._stream, name)


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
  `threads`: whether the nodes are threads of this process (local_mt)."""

  def __init__(self, workdir: str, labels: Dict[Tuple[str, int], str],
               threads: bool = False):
    self._threads = threads
    self._own_label = PROGRAM if threads else LAUNCHER
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
    if self._threads:
      self._sort_threads_lines()
    self._reader = threading.Thread(target=self._read, daemon=True,
                                    name='node-output')
    self._reader.start()

  def _sort_threads_lines(self):
    """Sends each line a node's thread writes to the node's log."""
    threading.Thread.start = _started_as_its_starters(threading.Thread.start)
    stderr = sys.stderr
    sys.stdout = _NodeThreadsLines(sys.stdout, self._log)
    sys.stderr = _NodeThreadsLines(stderr, self._log)
    # absl's handler writes to the stream it was made with (the one replaced
    # here), not to whatever sys.stderr is now.
    handler = logging.get_absl_handler().python_handler
    if handler.stream is stderr:
      handler.stream = sys.stderr

  def finish(self, timeout: float = 10.0):
    """Returns once every line written so far is in its log (and shown)."""
    sys.stdout.flush()
    # First ends a node's last line, if the node ended without ending it.
    os.write(1, ('\n' + _END + '\n').encode())
    self._ended.wait(timeout)

  def _log(self, label: str, text: str):
    """A line to the log of `label`, from the reader or a node's thread."""
    # A line redrawn with '\r' (Launchpad's countdowns): what a terminal
    # would show of it.
    text = text.rstrip('\r').rsplit('\r', 1)[-1]
    with self._lock:
      if label not in self._streams:
        self._streams[label] = _Stream(log_path(self._workdir, label),
                                       label, self._show)
      self._streams[label].line(text)

  def _line(self, text: str):
    """A line read from the pseudo-terminal."""
    if text == _END:
      self._ended.set()
      return
    prefixed = _PREFIX.match(text.rstrip('\r'))
    if prefixed:
      group, index, text = prefixed.groups()
      label = self._labels.get((group, int(index)), f'{group}_{index}')
    else:
      label = self._own_label
    self._log(label, text)

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
