"""Loggers for every node: terminal, CSV and TensorBoard.

Layout under a run's workdir:
  <workdir>/logs/<label>/logs.csv      (every row with its `walltime`)
  <workdir>/tensorboard/<label>/
"""

import os
import time
from typing import Optional

from acme.utils import loggers
from acme.utils.loggers import tf_summary

# Every row carries these counts, so that each CSV file has all of them as
# columns (a CSV file's columns are fixed by its first row).
COUNT_KEYS = ('actor_steps', 'actor_episodes', 'learner_steps',
              'evaluator_steps', 'evaluator_episodes',
              'actor_environment_errors', 'actor_nonfinite_steps')


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


def make_logger(workdir: str,
                label: str,
                time_delta: float = 0.0,
                steps_key: Optional[str] = None,
                terminal: bool = True) -> loggers.Logger:
  """A logger writing to the terminal, to CSV and to TensorBoard.

  Args:
    workdir: the run's directory.
    label: the node's label (`actor`, `learner`, `evaluator`, ...).
    time_delta: minimum seconds between two written rows (0: every row).
    steps_key: the count used as TensorBoard's x-axis.
    terminal: whether to print rows to the terminal.
  """
  outputs = [
      _WithWalltime(loggers.CSVLogger(workdir, label=label, add_uid=False,
                                      flush_every=1)),
      tf_summary.TFSummaryLogger(
          os.path.join(workdir, 'tensorboard', label), label=label,
          steps_key=steps_key),
  ]
  if terminal:
    outputs.append(loggers.TerminalLogger(label=label))
  logger = loggers.Dispatcher(outputs, serialize_fn=loggers.to_numpy)
  logger = _WithCounts(loggers.NoneFilter(logger))
  if time_delta > 0:
    logger = loggers.TimeFilter(logger, time_delta)
  return logger
