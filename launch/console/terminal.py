"""The terminal of a local run: a live status, and the lines that matter.

On a terminal, the run's status (`launch.console.status`) is redrawn in
place, a line per group of nodes, with Rich's `Live`; the nodes' warnings
and errors (`launch.console.node_output`) and the launcher's own
messages appear above it as they come. Where standard output is not a
terminal (a pipe, a file, CI, nohup), the same status is printed as one
plain line every `PLAIN_SECONDS` instead.
"""

import threading
from typing import Optional, TextIO

import rich.console
import rich.live
import rich.table
import rich.text

from launch.console import status as status_lib

# Seconds between two redraws on a terminal, and between two plain lines.
LIVE_SECONDS = 1.0
PLAIN_SECONDS = 5.0


def plain(lines) -> str:
  """The status as one line: `status: actors 1,234 steps, ... | learner ...`."""
  return 'status: ' + ' | '.join(
      f'{line.name} ' + ', '.join(line.figures) for line in lines)


def table(lines) -> rich.table.Table:
  """The status as a table: a row per group."""
  grid = rich.table.Table.grid(padding=(0, 2))
  grid.add_column(style='bold')
  width = max(len(line.figures) for line in lines)
  for _ in range(width):
    grid.add_column()
  for line in lines:
    grid.add_row(line.name, *line.figures,
                 *([''] * (width - len(line.figures))))
  return grid


class Terminal:
  """Writes to `stream` (the terminal, or what stands for it); `errors`:
  where error messages go once the status has stopped (the terminal's
  standard error)."""

  def __init__(self, stream: TextIO, errors: Optional[TextIO] = None):
    self._stream = stream
    self._errors = errors or stream
    self.console = rich.console.Console(file=stream, highlight=False,
                                        soft_wrap=True)
    self.live = self.console.is_terminal
    self._lock = threading.Lock()
    self._status: Optional[status_lib.RunStatus] = None
    self._display: Optional[rich.live.Live] = None
    self._stopping = threading.Event()
    self._thread: Optional[threading.Thread] = None

  def say(self, text: str):
    """One line above the status (as it is, no markup)."""
    with self._lock:
      self.console.print(rich.text.Text(text))

  def error(self, text: str):
    """An error message, to standard error once the status has stopped."""
    if self._thread is not None:
      self.say(text)
      return
    self._errors.write(text + '\n')
    self._errors.flush()

  def start(self, status: status_lib.RunStatus):
    """Shows `status` until `stop`."""
    self._status = status
    if self.live:
      # Other writers to sys.stdout (Launchpad's) go to the node output.
      self._display = rich.live.Live(console=self.console, auto_refresh=False,
                                     transient=False, redirect_stdout=False,
                                     redirect_stderr=False)
      self._display.start()
      # A launcher killed at once (a second Ctrl-C) leaves the cursor shown.
      self.console.show_cursor(True)
    self._thread = threading.Thread(target=self._run, daemon=True,
                                    name='status')
    self._thread.start()

  def _show(self):
    try:
      lines = self._status.lines()
    except Exception as error:  # pylint: disable=broad-except
      self.say(f'[launcher] warning: the status cannot be read: {error!r}')
      return
    with self._lock:
      if self._display is not None:
        self._display.update(table(lines), refresh=True)
      else:
        self.console.print(rich.text.Text(plain(lines)))

  def _run(self):
    period = LIVE_SECONDS if self.live else PLAIN_SECONDS
    while not self._stopping.wait(period):
      self._show()

  def stop(self):
    """Shows the status a last time and stops; what is said next goes
    below it."""
    if self._thread is None:
      return
    self._stopping.set()
    self._thread.join()
    self._show()
    self._thread = None
    if self._display is not None:
      with self._lock:
        self._display.stop()
      self._display = None
