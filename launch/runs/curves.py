"""A run's learning curves and speeds, read from its CSV logs
(`<workdir>/logs/<node>/logs.csv`), the way the paper plots them (and, as
its App. F asks, with the speed of every part alongside): the library of
`programs/plot.py` and of the results' pages.

Four panels, one line per run:

  return vs actor steps     the evaluator's episode returns (the actors'
                            own, exploring, where a run has no evaluator),
                            with their running mean (frames=True: against
                            environment frames)
  return vs wall-clock      the same against hours of running (a resumed
                            run's pauses between launches left out)
  actor frames/s            all actors together (frames: agent steps times
                            the environment's frame skip)
  learner updates/s         batches per second

Matplotlib is imported only to draw.
"""

import csv
import glob
import os
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

from launch.runs import run_manifest

PANELS = ('Return vs actor steps', 'Return vs wall-clock',
          'Actor frames/s (all actors)', 'Learner updates/s')
# Points of the common time grid on which the actors' rates are summed.
GRID_POINTS = 200
# A stretch of at least this many seconds (or of 3 --log_every periods, if
# longer) in which no node of a run logged is a pause between two launches
# of a resumed run: running time leaves it out. While a launch runs, its
# learner and actors log every --log_every seconds.
PAUSE_SECONDS = 300.0


def read_log(workdir: str, label: str) -> Dict[str, np.ndarray]:
  """A node's CSV log as columns of floats (empty if it has none)."""
  path = os.path.join(workdir, 'logs', label, 'logs.csv')
  if not os.path.isfile(path):
    return {}
  with open(path, newline='') as f:
    rows = list(csv.DictReader(f))
  columns = {}
  for key in (rows[0].keys() if rows else ()):
    try:
      # A column a row lacks (added by a later launch) is empty there.
      columns[key] = np.array([float(row[key]) if row[key] else np.nan
                               for row in rows])
    except (TypeError, ValueError):
      continue  # A column that is not numbers.
  return columns


def actor_labels(workdir: str) -> List[str]:
  """The labels of the actors that have a log in `workdir`."""
  found = [os.path.basename(os.path.dirname(path)) for path in
           glob.glob(os.path.join(workdir, 'logs', 'actor*', 'logs.csv'))]
  return sorted(found)


def running_mean(values: np.ndarray, window: int) -> np.ndarray:
  """Mean of each value and the up to `window - 1` before it."""
  sums = np.cumsum(np.insert(values, 0, 0.0))
  ends = np.arange(1, len(values) + 1)
  starts = np.maximum(0, ends - window)
  return (sums[ends] - sums[starts]) / (ends - starts)


def summed_rate(series: Sequence[Dict[str, np.ndarray]], key: str):
  """(hours, sum over nodes of `key`) on a common time grid, each node's
  'walltime' already in seconds of running time (`running_clock`); a node
  adds 0 outside the time it logged."""
  series = [s for s in series if len(s.get(key, ())) and 'walltime' in s]
  if not series:
    return np.array([]), np.array([])
  begin = min(s['walltime'][0] for s in series)
  end = max(s['walltime'][-1] for s in series)
  grid = np.linspace(begin, end, GRID_POINTS) if end > begin else np.array(
      [begin])
  total = np.zeros_like(grid)
  for s in series:
    inside = (grid >= s['walltime'][0]) & (grid <= s['walltime'][-1])
    total += np.where(inside, np.interp(grid, s['walltime'], s[key]), 0.0)
  return grid / 3600.0, total


def running_clock(walltimes: Sequence[np.ndarray], pause: float
                  ) -> Callable[[np.ndarray], np.ndarray]:
  """Maps wall times to a run's running time, in seconds from the first of
  `walltimes` (every log row's time, of all its nodes): each stretch of
  `pause` seconds or more without a row (the run stopped, then resumed) is
  left out, and so is a launch's start-up before its first rows."""
  times = np.sort(np.concatenate([np.asarray(t, dtype=float)
                                  for t in walltimes]))
  times = times[np.isfinite(times)]
  if not len(times):
    raise ValueError('No log row has a time.')
  gaps = np.diff(times)
  running = np.concatenate([[0.0], np.cumsum(np.where(gaps >= pause, 0.0,
                                                      gaps))])
  return lambda t: np.interp(np.asarray(t, dtype=float), times, running)


def _pause_seconds(workdir: str) -> float:
  try:
    log_every = float(run_manifest.read_manifest(workdir)['flags']['log_every'])
  except (KeyError, TypeError, ValueError):  # No run.json: the default.
    log_every = 0.0
  return max(PAUSE_SECONDS, 3 * log_every)


def run_curves(workdir: str, smoothing: int) -> Dict[str, object]:
  """What the panels show of one run, against its running time (pauses
  between launches left out: `running_clock`); 'clock' maps a wall time to
  seconds of that running time."""
  logs = {label: read_log(workdir, label)
          for label in ['learner', 'evaluator', *actor_labels(workdir)]}
  logs = {label: log for label, log in logs.items() if log}
  if not logs:
    raise ValueError(f'{workdir} has no logs (<workdir>/logs/<node>/'
                     'logs.csv); pass the --workdir of a run.')
  clock = running_clock([log['walltime'] for log in logs.values()
                         if len(log.get('walltime', ()))],
                        _pause_seconds(workdir))
  logs = {label: {**log, 'walltime': clock(log['walltime'])}
          if len(log.get('walltime', ())) else log
          for label, log in logs.items()}
  returns_from = 'evaluator' if 'episode_return' in logs.get(
      'evaluator', {}) else 'actor'
  episodes = logs.get(returns_from, {})
  returns = episodes.get('episode_return', np.array([]))
  actors = [log for label, log in logs.items() if label.startswith('actor')]
  hours, steps_per_second = summed_rate(actors, 'steps_per_second')
  learner = logs.get('learner', {})
  return {
      'clock': clock,
      'returns_from': returns_from,
      'actor_steps': episodes.get('actor_steps', np.array([])),
      'hours': episodes.get('walltime', np.array([])) / 3600.0,
      'returns': returns,
      'mean_returns': running_mean(returns, smoothing) if len(returns)
                      else returns,
      'actor_hours': hours,
      'actor_frames_per_second': steps_per_second * run_manifest.frames_per_step(
          workdir),
      'learner_hours': learner.get('walltime', np.array([])) / 3600.0,
      'learner_updates_per_second': learner.get('steps_per_second',
                                                np.array([])),
  }


def plot(workdirs: Sequence[str], labels: Optional[Sequence[str]] = None,
         out: str = 'curves.png', smoothing: int = 10, frames: bool = False):
  """Draws the four panels for `workdirs` into `out`, returns against
  actor steps or (`frames`) environment frames; returns the figure."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  labels = list(labels) if labels else [
      os.path.basename(os.path.normpath(w)) for w in workdirs]
  if len(labels) != len(workdirs):
    raise ValueError(f'{len(labels)} labels for {len(workdirs)} runs.')
  figure, axes = plt.subplots(2, 2, figsize=(12, 8))
  axes = axes.ravel()
  for index, (workdir, label) in enumerate(zip(workdirs, labels)):
    curves = run_curves(workdir, smoothing)
    colour = f'C{index % 10}'
    name = label if curves['returns_from'] == 'evaluator' else (
        f'{label} (actor episodes)')
    steps = curves['actor_steps'] * (
        run_manifest.frames_per_step(workdir) if frames else 1)
    for axis, x in [(axes[0], steps), (axes[1], curves['hours'])]:
      axis.plot(x, curves['returns'], '.', color=colour, alpha=0.25,
                markersize=3)
      axis.plot(x, curves['mean_returns'], '-', color=colour, label=name)
    axes[2].plot(curves['actor_hours'], curves['actor_frames_per_second'],
                 color=colour, label=label)
    axes[3].plot(curves['learner_hours'],
                 curves['learner_updates_per_second'], color=colour,
                 label=label)
  # Wall-clock in minutes for runs shorter than two hours.
  longest = max([0.0] + [float(np.max(line.get_xdata(), initial=0.0))
                         for axis in axes[1:] for line in axis.get_lines()])
  unit = 'hours'
  if longest < 2.0:
    unit = 'minutes'
    for axis in axes[1:]:
      for line in axis.get_lines():
        line.set_xdata(np.asarray(line.get_xdata()) * 60.0)
      axis.relim()
      axis.autoscale_view()
  return _finish(figure, axes, unit, out,
                 steps_label='frames' if frames else 'actor steps')


def _finish(figure, axes, time_unit: str, out: str,
            title: Optional[str] = None, steps_label: str = 'actor steps'):
  """Titles, axis labels and legends of the four panels; saves `out`."""
  x_labels = [steps_label, time_unit, time_unit, time_unit]
  y_labels = ['episode return', 'episode return', 'frames/s', 'updates/s']
  for axis, panel, x_label, y_label in zip(axes, PANELS, x_labels, y_labels):
    axis.set_title(panel.replace('actor steps', steps_label))
    axis.set_xlabel(x_label)
    axis.set_ylabel(y_label)
    axis.grid(alpha=0.3)
    if axis.get_legend_handles_labels()[0]:
      axis.legend(fontsize='small')
  if title:
    figure.suptitle(title)
  figure.tight_layout()
  figure.savefig(out, dpi=100)
  return figure


def _interpolated(xs, ys, grid):
  """Each run's (x, y) curve on `grid` (NaN outside the run's x range)."""
  rows = []
  for x, y in zip(xs, ys):
    if len(x) == 0:
      continue
    order = np.argsort(x, kind='stable')
    x, y = np.asarray(x)[order], np.asarray(y)[order]
    rows.append(np.where((grid >= x[0]) & (grid <= x[-1]),
                         np.interp(grid, x, y), np.nan))
  return np.array(rows)


def plot_groups(groups: Dict[str, Sequence[str]], out: str,
                smoothing: int = 10, title: Optional[str] = None):
  """The four panels with one line per group of runs (e.g. seeds of one
  setting): the mean over the group's runs, and a band from their minimum to
  their maximum, where every run has reached that point. Returns the
  figure."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  figure, axes = plt.subplots(2, 2, figsize=(12, 8))
  axes = axes.ravel()
  for index, (label, workdirs) in enumerate(groups.items()):
    runs = [run_curves(workdir, smoothing) for workdir in workdirs]
    colour = f'C{index % 10}'
    name = f'{label} ({len(runs)} run{"s" if len(runs) > 1 else ""})'
    panels = [
        (axes[0], [r['actor_steps'] for r in runs],
         [r['mean_returns'] for r in runs], 1.0),
        (axes[1], [r['hours'] for r in runs],
         [r['mean_returns'] for r in runs], 60.0),
        (axes[2], [r['actor_hours'] for r in runs],
         [r['actor_frames_per_second'] for r in runs], 60.0),
        (axes[3], [r['learner_hours'] for r in runs],
         [r['learner_updates_per_second'] for r in runs], 60.0),
    ]
    for axis, xs, ys, scale in panels:
      xs = [np.asarray(x) * scale for x in xs]
      ends = [x.max() for x in xs if len(x)]
      if not ends:
        continue
      grid = np.linspace(0.0, min(ends), GRID_POINTS)
      values = _interpolated(xs, ys, grid)
      with np.errstate(all='ignore'):
        import warnings  # pylint: disable=g-import-not-at-top
        with warnings.catch_warnings():
          warnings.simplefilter('ignore', RuntimeWarning)
          mean = np.nanmean(values, axis=0)
          low, high = np.nanmin(values, axis=0), np.nanmax(values, axis=0)
      axis.plot(grid, mean, color=colour, label=name)
      if len(values) > 1:
        axis.fill_between(grid, low, high, color=colour, alpha=0.2)
  return _finish(figure, axes, 'minutes', out, title)
