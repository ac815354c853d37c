"""Loggers for every node: its output, CSV and TensorBoard.

A node's output is its log: `<workdir>/logs/<label>.log` under a local
launch (`launch.console.node_output`), its replica's log on Vertex AI.

Layout under a run's workdir:
  <workdir>/logs/<label>/logs.csv      (every row with its `walltime`)
  <workdir>/tensorboard/<label>/
"""

import collections
import csv
import io
import math
import os
import time
from typing import List, Optional, Sequence

from acme.utils import loggers
from acme.utils.loggers import tf_summary
import tensorflow as tf

# Every row carries these counts, so that every row of each CSV file has
# all of them.
COUNT_KEYS = ('actor_steps', 'actor_episodes', 'learner_steps',
              'evaluator_steps', 'evaluator_episodes',
              'actor_environment_errors', 'actor_nonfinite_steps')

# The evaluator's rows name their round: when it began, and the learner's
# steps and the actors' when its parameters were pulled (the counter's
# counts then: the policy a round plays is the one learned by those steps,
# however long the round takes to play).
ROUND_STARTED = 'round_started'
ROUND_LEARNER_STEPS = 'round_learner_steps'
ROUND_ACTOR_STEPS = 'round_actor_steps'


def split_rounds(round_started: Sequence[Optional[float]],
                 per_round: int) -> List[List[int]]:
  """The evaluator's complete rounds, as lists of indices of its rows (in
  order): consecutive rows of one `ROUND_STARTED`; rows without it (None or
  NaN: logged before rows named their round) in consecutive chunks of
  `per_round`. A round of fewer rows than `per_round` (cut short by a stop,
  or with an episode lost to a failing environment) is left out. By count
  alone, a round cut short would shift every later round's episodes."""
  groups: List[List[int]] = []
  keys: List[Optional[float]] = []
  for index, value in enumerate(round_started):
    key = None if value is None or math.isnan(float(value)) else float(value)
    if (not groups or key != keys[-1] or
        (key is None and len(groups[-1]) == per_round)):
      groups.append([])
      keys.append(key)
    groups[-1].append(index)
  return [group for group in groups if len(group) == per_round]


class CSVLog(loggers.Logger):
  """Appends rows to `<workdir>/logs/<label>/logs.csv`, whose header names
  every column of every row.

  Each row is appended with the file opened and closed around it: on
  Vertex AI the workdir is a Cloud Storage FUSE mount, which uploads a file
  when it is closed (docs/google_cloud.md), so the bucket has every row
  written but one being written when the node ends, even if its machine
  is lost.

  Acme's CSV logger takes its columns from the first row it writes and,
  appending to a file another launch began, writes them under that file's
  header: a resumed run whose rows carry other columns (a newer version of
  this code) would put values under the wrong names. Here a row with a
  column the header lacks rewrites the file first (beside it, then renamed
  over it) with the header widened; earlier rows leave the new columns
  empty, and a column a row lacks is left empty.
  """

  def __init__(self, workdir: str, label: str):
    directory = os.path.join(workdir, 'logs', label)
    os.makedirs(directory, exist_ok=True)
    self.path = os.path.join(directory, 'logs.csv')
    self._columns = _header(self.path)
    self._continued = False  # Whether a killed launch's end was checked.

  def write(self, data: loggers.LoggingData):
    data = loggers.to_numpy(data)
    if not self._continued:
      _drop_unfinished_row(self.path)
      self._continued = True
    new = sorted(key for key in data if key not in self._columns)
    if new:
      self._widen(self._columns + new)
    with open(self.path, 'a', newline='') as f:
      if not f.tell():
        csv.writer(f).writerow(self._columns)
      csv.DictWriter(f, fieldnames=self._columns,
                     restval='').writerow(data)

  def _widen(self, columns: List[str]):
    if os.path.exists(self.path) and os.path.getsize(self.path):
      with open(self.path, newline='') as f:
        text = f.read()  # Whole rows: `write` dropped an unfinished one.
      widened = io.StringIO()
      writer = csv.writer(widened)
      writer.writerow(columns)
      for row in list(csv.reader(io.StringIO(text)))[1:]:
        writer.writerow(row + [''] * (len(columns) - len(row)))
      temporary = self.path + '.widening'
      with open(temporary, 'w', newline='') as f:
        f.write(widened.getvalue())
        f.flush()
        os.fsync(f.fileno())
      os.replace(temporary, self.path)
    self._columns = columns

  def close(self):
    pass  # Closed after each row.


# How long a TensorBoard events file stays open while its node writes to it:
# on Cloud Storage FUSE its rows reach the bucket when it is closed.
TENSORBOARD_FILE_SECONDS = 60.0


class TensorBoardLog(tf_summary.TFSummaryLogger):
  """Acme's TensorBoard logger (`<workdir>/tensorboard/<label>/`), whose
  events file is closed by the first row written `file_seconds` or more
  after it was opened; the next row opens a new one (TensorBoard reads
  every events file of a directory as one run).

  On Vertex AI the workdir is a Cloud Storage FUSE mount, which uploads a
  file when it is closed: the bucket has a node's TensorBoard rows up to
  about `file_seconds` (and the time between two of its rows) behind it,
  and each file holds at most `file_seconds` of rows, or one row of a node
  that writes less often.
  """

  def __init__(self, logdir: str, label: str, steps_key: Optional[str],
               file_seconds: float = TENSORBOARD_FILE_SECONDS):
    super().__init__(logdir, label=label, steps_key=steps_key)
    self._logdir = logdir
    self._file_seconds = file_seconds
    self._opened = time.monotonic()

  def write(self, values: loggers.LoggingData):
    if self.summary is None:
      self.summary = tf.summary.create_file_writer(self._logdir)
      self._opened = time.monotonic()
    super().write(values)
    if time.monotonic() - self._opened >= self._file_seconds:
      self.close()

  def close(self):
    if self.summary is not None:
      self.summary.close()
      self.summary = None


def _drop_unfinished_row(path: str):
  """Cuts the end of a file a killed process left without its newline, so
  that the next row starts a line of its own."""
  try:
    f = open(path, 'rb+')
  except FileNotFoundError:
    return
  with f:
    size = f.seek(0, os.SEEK_END)
    end = size
    while end > 0:  # Back to the last newline, a block at a time.
      start = max(end - 65_536, 0)
      f.seek(start)
      block = f.read(end - start)
      if b'\n' in block:
        end = start + block.rindex(b'\n') + 1
        break
      end = start
    if end < size:
      f.truncate(end)


def _header(path: str) -> List[str]:
  """The columns a CSV log's first line names ([] without one)."""
  try:
    with open(path, newline='') as f:
      line = f.readline()
  except FileNotFoundError:
    return []
  if not line.endswith('\n'):
    return []
  return next(csv.reader([line]))


class _WithCounts(loggers.Logger):
  """Fills counts that the counter has not reported yet with 0."""

  def __init__(self, to: loggers.Logger):
    self._to = to

  def write(self, data: loggers.LoggingData):
    self._to.write({**{key: 0 for key in COUNT_KEYS}, **data})

  def close(self):
    self._to.close()


class _WithWalltime(loggers.Logger):
  """Adds `walltime` (seconds since the epoch) to every row: rates and
  curves against wall-clock time are read from the CSV files."""

  def __init__(self, to: loggers.Logger):
    self._to = to

  def write(self, data: loggers.LoggingData):
    self._to.write({'walltime': time.time(), **data})

  def close(self):
    self._to.close()


class WithColumns(loggers.Logger):
  """Adds the columns `columns()` gives at each row (a node's own figures,
  e.g. the parameters it has sent) to the rows written through it."""

  def __init__(self, to: loggers.Logger, columns):
    self._to = to
    self._columns = columns

  def write(self, data: loggers.LoggingData):
    self._to.write({**data, **self._columns()})

  def close(self):
    self._to.close()


def format_duration(seconds: float) -> str:
  """'2h05m', '7m30s', '45s'."""
  seconds = int(round(seconds))
  if seconds >= 3600:
    return f'{seconds // 3600}h{seconds % 3600 // 60:02d}m'
  if seconds >= 60:
    return f'{seconds // 60}m{seconds % 60:02d}s'
  return f'{seconds}s'


class WithProgress(loggers.Logger):
  """Adds the run's progress towards `max_actor_steps` (`progress`, in %)
  and the time left at the recent pace (`eta`) to rows that carry the
  program's `actor_steps` count.

  The pace is the count's growth over the last `window_seconds` of rows seen
  here (all actors together: the count is the program's).
  """

  def __init__(self, to: loggers.Logger, max_actor_steps: int,
               window_seconds: float = 120.0):
    self._to = to
    self._max_actor_steps = max_actor_steps
    self._window_seconds = window_seconds
    self._points = collections.deque()

  def write(self, data: loggers.LoggingData):
    steps = data.get('actor_steps')
    if steps is not None:
      steps = float(steps)
      now = time.time()
      self._points.append((now, steps))
      while (len(self._points) > 2 and
             now - self._points[0][0] > self._window_seconds):
        self._points.popleft()
      data = dict(data, progress=(
          f'{100.0 * min(steps / self._max_actor_steps, 1.0):.1f}%'))
      then, steps_then = self._points[0]
      if now > then and steps > steps_then:
        rate = (steps - steps_then) / (now - then)
        data['eta'] = format_duration(
            max(self._max_actor_steps - steps, 0.0) / rate)
    self._to.write(data)

  def close(self):
    self._to.close()


def make_logger(workdir: str,
                label: str,
                time_delta: float = 0.0,
                steps_key: Optional[str] = None,
                terminal: bool = True,
                max_actor_steps: Optional[int] = None,
                counts: bool = True) -> loggers.Logger:
  """A logger writing to the node's output, to CSV and to TensorBoard.

  Args:
    workdir: the run's directory.
    label: the node's label (`actor`, `learner`, `evaluator`, ...).
    time_delta: minimum seconds between two written rows (0: every row).
    steps_key: the count used as TensorBoard's x-axis.
    terminal: whether to print rows to the node's output.
    max_actor_steps: the run's step budget, if any: printed rows then show
      the progress towards it and an ETA.
    counts: whether every row carries the program's counts (`COUNT_KEYS`,
      0 until reported): the rows of a node that counts nothing (a variable
      cacher) do not.
  """
  outputs = [
      _WithWalltime(CSVLog(workdir, label)),
      TensorBoardLog(os.path.join(workdir, 'tensorboard', label), label,
                     steps_key),
  ]
  if terminal:
    output = loggers.TerminalLogger(label=label)
    if max_actor_steps:
      output = WithProgress(output, max_actor_steps)
    outputs.append(output)
  logger = loggers.Dispatcher(outputs, serialize_fn=loggers.to_numpy)
  logger = loggers.NoneFilter(logger)
  if counts:
    logger = _WithCounts(logger)
  if time_delta > 0:
    logger = loggers.TimeFilter(logger, time_delta)
  return logger
