"""The run's status as the launcher shows it: a line per group of nodes.

Read from what the nodes already write, without calls to them: each node's
CSV log under `<workdir>/logs/<label>/logs.csv` (the actors' and the
learner's rows every --log_every seconds, carrying the counter's counts; the
evaluator's row per episode) and, for replay, Reverb's own `server_info`
(size, capacity, and how many inserts and samples it has served).

  actors     12,345 steps  410/s  88 episodes  return 23.5
  learner    1,234 updates  40.2/s  loss 0.0123
  replay     10,000 of 10,000  inserts 410/s  samples 1,640/s
  evaluator  return 500.0 (10 episodes), 1m20s ago
  run        3m10s  ETA 4m05s (100,000 actor steps)  ~/apex_runs/...

A program of workers (A3C) has no replay, and its actors are workers.
"""

import collections
import csv
import dataclasses
import io
import math
import os
import time
from typing import Any, Deque, Dict, List, Optional, Sequence, Tuple

from launch.runs import faults as fault_records
from launch.runs.loggers import ROUND_STARTED
from launch.runs.loggers import format_duration
from launch.runs.loggers import split_rounds

# How much of a CSV log's end is read for its newest rows.
_TAIL_BYTES = 32_768
# The window over which counts' rates are measured.
RATE_SECONDS = 30.0


def newest_rows(path: str, count: int = 1) -> List[Dict[str, str]]:
  """The newest `count` complete rows of a CSV log ([] without one)."""
  try:
    with open(path, 'rb') as f:
      header = f.readline().decode(errors='replace')
      size = os.fstat(f.fileno()).st_size
      start = max(f.tell(), size - _TAIL_BYTES)
      f.seek(start)
      tail = f.read().decode(errors='replace')
  except OSError:
    return []
  if start > len(header.encode()):
    tail = tail[tail.find('\n') + 1:]  # A row cut by the seek.
  tail = tail[:tail.rfind('\n') + 1]  # Not a row being written.
  rows = [row for row in csv.DictReader(io.StringIO(header + tail))
          if None not in row.values() and '' not in row.values()]
  return rows[-count:]


def _number(row: Optional[Dict[str, str]], column: str) -> Optional[float]:
  if not row or column not in row:
    return None
  try:
    value = float(row[column])
  except ValueError:
    return None
  return value if math.isfinite(value) else None


def _numbers(rows, column: str) -> List[float]:
  """The finite values of `column` in `rows` (`_number`), those that have
  one."""
  values = [_number(row, column) for row in rows]
  return [value for value in values if value is not None]


def _count(value: Optional[float]) -> str:
  return '-' if value is None else f'{int(value):,}'


def _rate(value: Optional[float]) -> str:
  if value is None:
    return '-'
  return f'{value:,.0f}/s' if value >= 100 else f'{value:.1f}/s'


def _value(value: Optional[float]) -> str:
  if value is None:
    return '-'
  return f'{value:.4g}'


class _Rate:
  """The growth per second of a count, over the last `RATE_SECONDS`."""

  def __init__(self):
    self._points: Deque[Tuple[float, float]] = collections.deque()

  def add(self, now: float, value: Optional[float]) -> Optional[float]:
    if value is None:
      return None
    if self._points and value < self._points[-1][1]:
      self._points.clear()  # A count restarted (a replay server restarted).
    self._points.append((now, value))
    while len(self._points) > 2 and now - self._points[0][0] > RATE_SECONDS:
      self._points.popleft()
    then, before = self._points[0]
    return (value - before) / (now - then) if now > then else None


@dataclasses.dataclass
class Line:
  """One group's line: its name and its figures, in order."""
  name: str
  figures: List[str]


class RunStatus:
  """Reads a run's status (`lines`) from its workdir and replay servers.

  `actor_labels`: the labels of the nodes that act (their CSV logs);
  `members`: what they are called ('actors', 'workers'); `replays`:
  {label: Launchpad handle} of the replay nodes (none for a program without
  replay), whose clients `connect` makes once the program is launched;
  `evaluation_episodes`: episodes per round of evaluation (0: no
  evaluator); `max_actor_steps`, `max_seconds`: the run's budgets, if any
  (the ETA).
  """

  def __init__(self, workdir: str, actor_labels: Sequence[str],
               members: str = 'actors',
               replays: Optional[Dict[str, Any]] = None,
               evaluation_episodes: int = 0,
               max_actor_steps: Optional[int] = None,
               max_seconds: Optional[float] = None):
    self._workdir = workdir
    self._actor_labels = list(actor_labels)
    self._members = members
    self._replay_handles = dict(replays or {})
    self._replays = {}
    self._answered = set()  # The replay servers that have answered.
    self._evaluation_episodes = evaluation_episodes
    self._max_actor_steps = max_actor_steps
    self._max_seconds = max_seconds
    self._started = time.time()
    # When the actors' count first grew, as the coordinator's wall-clock
    # budget counts; a resumed run's logs hold its earlier launches' rows.
    self._acting_since: Optional[float] = None
    self._initial_steps = self._actor_steps(*self._newest()) or 0.0
    self._actor_rate = _Rate()
    self._replay_rates = {label: (_Rate(), _Rate())
                          for label in self._replay_handles}

  def connect(self):
    """The replay servers' clients (Reverb's), once the program runs."""
    self._replays = {label: handle.dereference()
                     for label, handle in self._replay_handles.items()}

  def _log(self, label: str, count: int = 1) -> List[Dict[str, str]]:
    return newest_rows(
        os.path.join(self._workdir, 'logs', label, 'logs.csv'), count)

  def _newest(self):
    """(the newest row of each actor that has logged, the learner's or
    None)."""
    actors = [rows[-1] for rows in map(self._log, self._actor_labels)
              if rows]
    return actors, (self._log('learner') or [None])[-1]

  def lines(self) -> List[Line]:
    now = time.time()
    actors, learner = self._newest()
    steps = self._actor_steps(actors, learner)
    lines = [self._actors_line(now, actors, steps),
             self._learner_line(learner)]
    lines.extend(self._replay_lines(now))
    if self._evaluation_episodes:
      lines.append(self._evaluator_line(now))
    lines.append(self._run_line(now, steps))
    return lines

  @staticmethod
  def _actor_steps(actors, learner) -> Optional[float]:
    steps = _numbers(actors + [learner], 'actor_steps')
    return max(steps) if steps else None

  def _actors_line(self, now, actors, steps: Optional[float]) -> Line:
    if (self._acting_since is None and steps is not None and
        steps > self._initial_steps):
      self._acting_since = now
    rates = _numbers(actors, 'steps_per_second')
    rate = sum(rates) if rates else None
    episodes = _numbers(actors, 'actor_episodes')
    returns = _numbers(actors, 'episode_return')
    return Line(self._members, [
        f'{_count(steps)} steps', _rate(rate),
        f'{_count(max(episodes) if episodes else None)} episodes',
        'return ' + (_value(sum(returns) / len(returns)) if returns else '-')
        + f' ({len(actors)} of {len(self._actor_labels)} logged)'])

  @staticmethod
  def _learner_line(learner) -> Line:
    # Its loss, or the first of its losses named for what they are.
    losses = sorted(column for column in (learner or ())
                    if isinstance(column, str) and column.endswith('loss'))
    loss = 'loss' if 'loss' in losses else (losses or ['loss'])[0]
    return Line('learner', [
        f'{_count(_number(learner, "learner_steps"))} updates',
        _rate(_number(learner, 'steps_per_second')),
        f'{loss.replace("_", " ")} {_value(_number(learner, loss))}'])

  def _replay_lines(self, now) -> List[Line]:
    lines = []
    for label, client in self._replays.items():
      inserts, samples = self._replay_rates[label]
      try:
        info = next(iter(client.server_info(timeout=2).values()))
      except Exception:  # pylint: disable=broad-except
        # Not up yet, restarting, or stopped.
        lines.append(Line(label, ['not answering' if label in self._answered
                                  else 'starting']))
        continue
      self._answered.add(label)
      stats = info.rate_limiter_info
      lines.append(Line(label, [
          f'{info.current_size:,} of {info.max_size:,}',
          'inserts ' + _rate(inserts.add(now, stats.insert_stats.completed)),
          'samples ' + _rate(samples.add(now, stats.sample_stats.completed))]))
    return lines

  def _evaluator_line(self, now) -> Line:
    episodes = self._evaluation_episodes
    rows = self._log('evaluator', 4 * episodes)
    named = [_number(row, ROUND_STARTED) for row in rows]
    if named and named[-1] is not None:
      # The newest complete round of rows that name theirs.
      rounds = [indices for indices in split_rounds(named, episodes)
                if named[indices[0]] is not None]
      round_rows = [rows[index] for index in rounds[-1]] if rounds else []
    else:
      played = _number(rows[-1] if rows else None, 'evaluator_episodes')
      if played is None or played < episodes:
        return Line('evaluator', ['no round played yet'])
      # Rows logged before they named their round: the newest complete
      # round, the episodes counted in ((k - 1) * episodes, k * episodes].
      last = int(played) // episodes * episodes
      round_rows = [row for row in rows if last - episodes < (
          _number(row, 'evaluator_episodes') or 0) <= last]
    returns = _numbers(round_rows, 'episode_return')
    if not returns:
      return Line('evaluator', ['no round played yet'])
    ended = max(_number(row, 'walltime') or now for row in round_rows)
    return Line('evaluator', [
        f'return {_value(sum(returns) / len(returns))} '
        f'({len(returns)} episodes)',
        f'{format_duration(max(now - ended, 0))} ago'])

  def _run_line(self, now, steps: Optional[float]) -> Line:
    figures = [format_duration(now - self._started)]
    left = []
    rate = self._actor_rate.add(now, steps)
    if self._max_actor_steps and steps is not None and rate:
      left.append((max(self._max_actor_steps - steps, 0) / rate,
                   f'{self._max_actor_steps:,} actor steps'))
    if self._max_seconds and self._acting_since is not None:
      left.append((max(self._max_seconds - (now - self._acting_since), 0),
                   f'{format_duration(self._max_seconds)} of acting'))
    if left:
      seconds, limit = min(left)
      figures.append(f'ETA {format_duration(seconds)} ({limit})')
    elif self._max_actor_steps or self._max_seconds:
      figures.append('ETA -')
    restarts = fault_records.restarts_by_node(self._workdir)
    if restarts:
      figures.append(f'{sum(restarts.values())} restarts (' + ', '.join(
          f'{node} {count}' for node, count in sorted(restarts.items())) +
                     ')')
    figures.append(self._workdir)
    return Line('run', figures)
