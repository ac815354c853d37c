"""The page of one long run (a result, not a test): its evaluation rounds as
a CSV, its curves, and how long it took to reach each threshold.

  .venv/bin/python results/long_run.py <workdir> --name=pong \
      --thresholds=-15,0,15 --command="python programs/apex_dqn.py ..."

Reads the run's record (`run.json`) and CSV logs and writes:

  results/<name>.csv  one row per evaluation round (`--evaluation_episodes`
                      episodes of the evaluator, after every
                      `--evaluation_period` learner updates): its mean
                      return, the learner updates, actor steps and frames,
                      and minutes since the actors' first log row
  results/<name>.png  the four panels of programs/plot.py (returns of the
                      evaluator's episodes with their running mean over one
                      round, against frames and wall-clock; actor frames/s;
                      learner updates/s)
  results/<name>.md   the command, the run's values, when each threshold was
                      first passed by a round's mean, and the speeds

The workdir stays where it is (outside the repository): only these small
files are committed.
"""

import csv
import json
import os
import sys
from typing import Dict, List, Optional

from absl import app
from absl import flags
import numpy as np

from agents.runs import run_manifest

from programs import plot

flags.DEFINE_string('name', None, 'The page: results/<name>.{csv,png,md}.')
flags.DEFINE_string('title', None, 'The page\'s title (default: the run\'s '
                    'program and environment).')
flags.DEFINE_list('thresholds', [], 'Returns whose first passing (by a '
                  "round's mean) the page reports.")
flags.DEFINE_string('command', None, 'The command that made the run, as '
                    'run (the page shows it).')
flags.DEFINE_string('notes', None, 'A paragraph the page adds under its '
                    'table (e.g. what else ran on the machine).')
FLAGS = flags.FLAGS

RESULTS = os.path.dirname(os.path.abspath(__file__))


def evaluation_rounds(workdir: str, start: float) -> List[Dict[str, float]]:
  """The evaluator's episodes in rounds of `evaluation_episodes`, in order
  (an unfinished last round is left out); minutes count from `start` (the
  run's first log row, `plot.run_curves`)."""
  manifest = run_manifest.read_manifest(workdir)
  per_round = int(manifest['flags']['evaluation_episodes'])
  frames_per_step = run_manifest.frames_per_step(workdir)
  episodes = plot.read_log(workdir, 'evaluator')
  if not len(episodes.get('episode_return', ())):
    raise ValueError(f'{workdir} has no evaluator episodes.')
  rounds = []
  for first in range(0, len(episodes['episode_return']) - per_round + 1,
                     per_round):
    last = first + per_round - 1
    chunk = slice(first, last + 1)
    rounds.append({
        'round': len(rounds) + 1,
        'mean_return': float(np.mean(episodes['episode_return'][chunk])),
        'min_return': float(np.min(episodes['episode_return'][chunk])),
        'max_return': float(np.max(episodes['episode_return'][chunk])),
        # The parameters evaluated: those of the round's first episode.
        'learner_steps': int(episodes['learner_steps'][first]),
        'actor_steps': int(episodes['actor_steps'][first]),
        'actor_frames': int(episodes['actor_steps'][first]) * frames_per_step,
        'minutes': float((episodes['walltime'][last] - start) / 60.0),
    })
  return rounds


def first_passing(rounds, threshold: float) -> Optional[Dict[str, float]]:
  for row in rounds:
    if row['mean_return'] >= threshold:
      return row
  return None


def speeds(curves) -> Dict[str, float]:
  """Medians over the run (`plot.run_curves`) of the actors' summed
  frames/s and the learner's updates/s."""
  frames = curves['actor_frames_per_second']
  updates = curves['learner_updates_per_second']
  return {'actor_frames_per_second': float(np.median(frames)),
          'learner_updates_per_second': float(np.nanmedian(updates))}


def main(argv):
  if len(argv) != 2 or not FLAGS.name:
    sys.stderr.write('usage: results/long_run.py <workdir> --name=<page>\n')
    sys.exit(2)
  workdir = argv[1]
  manifest = run_manifest.read_manifest(workdir)
  curves = plot.run_curves(workdir, 10)
  rounds = evaluation_rounds(workdir, curves['start'])
  with open(os.path.join(RESULTS, f'{FLAGS.name}.csv'), 'w',
            newline='') as f:
    writer = csv.DictWriter(f, fieldnames=list(rounds[0]))
    writer.writeheader()
    writer.writerows(rounds)
  plot.plot([workdir], [FLAGS.name], os.path.join(RESULTS,
                                                  f'{FLAGS.name}.png'),
            smoothing=int(manifest['flags']['evaluation_episodes']),
            frames=True)
  measured = speeds(curves)
  title = FLAGS.title or f'{manifest["program"]} on {manifest["env"]}'
  best = max(rounds, key=lambda row: row['mean_return'])
  last = rounds[-1]
  lines = [f'# {title}', '', f'![{FLAGS.name}]({FLAGS.name}.png)', '']
  if FLAGS.command:
    lines += ['The run:', '', '```sh', FLAGS.command, '```', '']
  lines += [
      f'Preset `{manifest.get("preset")}`; every value the run used:', '',
      '```json', json.dumps(manifest['flags'], indent=1, sort_keys=True),
      '```', '',
      f'Evaluation: {manifest["flags"]["evaluation_episodes"]} episodes of '
      'the evaluator every '
      f'{manifest["flags"]["evaluation_period"]:,} learner updates; a '
      "round's return is their mean. Frames: agent steps x "
      f'{run_manifest.frames_per_step(workdir)}. Minutes: wall-clock from '
      "the run's first log row.", '',
      '| threshold | first round at or above | minutes | frames | learner '
      'updates |', '|---|---|---|---|---|']
  for threshold in (float(t) for t in FLAGS.thresholds):
    row = first_passing(rounds, threshold)
    if row is None:
      lines.append(f'| {threshold:g} | not reached (best round: '
                   f'{best["mean_return"]:.1f}) | | | |')
    else:
      lines.append(
          f'| {threshold:g} | round {row["round"]}: {row["mean_return"]:.1f} '
          f'| {row["minutes"]:.0f} | {row["actor_frames"]:,} | '
          f'{row["learner_steps"]:,} |')
  lines += [
      '',
      f'Last round ({last["round"]}): mean {last["mean_return"]:.1f} '
      f'(min {last["min_return"]:.0f}, max {last["max_return"]:.0f}) after '
      f'{last["minutes"]:.0f} minutes, {last["actor_frames"]:,} frames, '
      f'{last["learner_steps"]:,} updates. Best round: round {best["round"]}'
      f', {best["mean_return"]:.1f}.', '',
      'Speeds (medians over the run): actors '
      f'{measured["actor_frames_per_second"]:,.0f} frames/s in all, learner '
      f'{measured["learner_updates_per_second"]:.1f} updates/s.', '',
      f'Every round: [{FLAGS.name}.csv]({FLAGS.name}.csv).', '']
  if FLAGS.notes:
    lines += [FLAGS.notes, '']
  with open(os.path.join(RESULTS, f'{FLAGS.name}.md'), 'w') as f:
    f.write('\n'.join(lines))
  print(f'Wrote results/{FLAGS.name}.csv, .png and .md')


if __name__ == '__main__':
  app.run(main)
