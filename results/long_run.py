"""The page of one long run (a result, not a test): its evaluation rounds as
a CSV, its curves, and how long it took to reach each threshold.

  .venv/bin/python -m results.long_run <workdir> --name=pong \
      --thresholds=-15,0,15 --command="python programs/apex_dqn.py ..." \
      --final_evaluation=<evaluate.py --output of its final policy> \
      --earlier_evaluations=<evaluate.py --output of an earlier policy>,...
  .venv/bin/python -m results.pages pong    # the page, from its JSON and CSV

Collecting (`collect`) reads the run's record (`run.json`) and CSV logs and
writes:

  results/<name>.csv  one row per evaluation round (`--evaluation_episodes`
                      episodes of the evaluator, after every
                      `--evaluation_period` learner updates): its mean
                      return, the learner updates, actor steps and frames,
                      and minutes since the actors' first log row
  results/<name>.png  the four panels of programs/plot.py (returns of the
                      evaluator's episodes with their running mean over one
                      round, against frames and wall-clock; actor frames/s;
                      learner updates/s)
  results/<name>.json what else the page shows: the command, every value
                      the run used, the thresholds, the speeds, the final
                      policy's evaluation, any earlier policy's evaluation
                      (a run resumed after one fell short), the notes,
                      and `--status`, where the run stands if it stopped
                      short of what its page would be read to show

Rendering (`render`) makes results/<name>.md (the status, if any, then the
run's answer: one seed, its last and best rounds, its final policy and
every earlier one evaluated the same way; then when each threshold was
first passed by a round's mean, and the speeds) from the JSON and CSV
alone. The workdir stays where it is (outside the repository): only these
small files are committed.
"""

import csv
import json
import os
import sys
from typing import Dict, List, Optional

from absl import app
from absl import flags
import numpy as np

from agents.envs import atari
from launch.runs import loggers
from launch.runs import run_manifest

from launch.runs import curves as curves_lib

flags.DEFINE_string('name', None, 'The page: results/<name>.{csv,png,md}.')
flags.DEFINE_string('title', None, 'The page\'s title (default: the run\'s '
                    'program and environment).')
flags.DEFINE_list('thresholds', [], 'Returns whose first passing (by a '
                  "round's mean) the page reports.")
flags.DEFINE_string('command', None, 'The command that made the run, as '
                    'run (the page shows it).')
flags.DEFINE_string('notes', None, 'A paragraph the page adds under its '
                    'table (e.g. what else ran on the machine).')
flags.DEFINE_string('status', None, 'Where the run stands, if it is not '
                    'where its page would be read to stand (e.g. stopped '
                    'short of the budget the other pages\' runs had): the '
                    'page opens with it, in bold.')
flags.DEFINE_string('final_evaluation', None, 'The JSON that '
                    'programs/evaluate.py --output wrote of the run\'s final '
                    'policy, if any: the page gives its returns.')
flags.DEFINE_list('earlier_evaluations', [], 'The JSONs that '
                  'programs/evaluate.py --output wrote of earlier policies '
                  'of the run, each one evaluated like the final one and '
                  'followed by more training (the run fell short): the page '
                  'gives every one, so that the final one is not read as '
                  'the only try.')
FLAGS = flags.FLAGS

RESULTS = os.path.dirname(os.path.abspath(__file__))


def evaluation_rounds(workdir: str, clock) -> List[Dict[str, float]]:
  """The evaluator's episodes in rounds of `evaluation_episodes`, in order
  (an unfinished last round is left out); minutes are of running time,
  `clock` (`curves_lib.run_curves`) mapping wall times to its seconds."""
  manifest = run_manifest.read_manifest(workdir)
  per_round = int(manifest['flags']['evaluation_episodes'])
  frames_per_step = run_manifest.frames_per_step(workdir)
  episodes = curves_lib.read_log(workdir, 'evaluator')
  count = len(episodes.get('episode_return', ()))
  if not count:
    raise ValueError(f'{workdir} has no evaluator episodes.')
  unnamed = np.full(count, np.nan)
  round_steps = episodes.get(loggers.ROUND_LEARNER_STEPS, unnamed)
  rounds = []
  for indices in loggers.split_rounds(
      episodes.get(loggers.ROUND_STARTED, unnamed), per_round):
    first, last = indices[0], indices[-1]
    chunk = slice(first, last + 1)
    rounds.append({
        'round': len(rounds) + 1,
        'mean_return': float(np.mean(episodes['episode_return'][chunk])),
        'min_return': float(np.min(episodes['episode_return'][chunk])),
        'max_return': float(np.max(episodes['episode_return'][chunk])),
        # The sample standard deviation of its episodes' returns.
        'std_return': float(np.std(episodes['episode_return'][chunk],
                                   ddof=1)) if last > first else 0.0,
        'episodes': int(last - first + 1),
        # The parameters evaluated: pulled as the round began (rows that do
        # not say: the learner's step at the round's first episode's end).
        'learner_steps': int(episodes['learner_steps'][first]
                             if np.isnan(round_steps[first])
                             else round_steps[first]),
        'actor_steps': int(episodes['actor_steps'][first]),
        'actor_frames': int(episodes['actor_steps'][first]) * frames_per_step,
        'minutes': float(clock(episodes['walltime'][last]) / 60.0),
    })
  return rounds


def first_passing(rounds, threshold: float) -> Optional[Dict[str, float]]:
  for row in rounds:
    if row['mean_return'] >= threshold:
      return row
  return None


def speeds(curves) -> Dict[str, float]:
  """Medians over the run (`curves_lib.run_curves`) of the actors' summed
  frames/s and the learner's updates/s."""
  frames = curves['actor_frames_per_second']
  updates = curves['learner_updates_per_second']
  return {'actor_frames_per_second': float(np.median(frames)),
          'learner_updates_per_second': float(np.nanmedian(updates))}


# What the page gives of its final policy's evaluation (programs/evaluate.py
# --output).
FINAL_POLICY_KEYS = ('learner_steps', 'episodes', 'epsilon', 'mean', 'std',
                     'median', 'min', 'max', 'atari_evaluation')
# The CSV's columns that are counts; the rest are returns and minutes.
COUNT_COLUMNS = ('round', 'learner_steps', 'actor_steps', 'actor_frames')


def collect(workdir: str, name: str) -> Dict[str, object]:
  """Writes results/<name>.csv, .png and .json from the run in `workdir`
  (and the flags), and returns that JSON's content."""
  manifest = run_manifest.read_manifest(workdir)
  curves = curves_lib.run_curves(workdir, 10)
  rounds = evaluation_rounds(workdir, curves['clock'])
  with open(os.path.join(RESULTS, f'{name}.csv'), 'w', newline='') as f:
    writer = csv.DictWriter(f, fieldnames=list(rounds[0]))
    writer.writeheader()
    writer.writerows(rounds)
  curves_lib.plot([workdir], [name], os.path.join(RESULTS, f'{name}.png'),
            smoothing=int(manifest['flags']['evaluation_episodes']),
            frames=True)
  final_policy = (_evaluated_policy(FLAGS.final_evaluation)
                  if FLAGS.final_evaluation else None)
  data = {
      'title': FLAGS.title or f'{manifest["program"]} on {manifest["env"]}',
      'command': FLAGS.command, 'preset': manifest.get('preset'),
      'flags': manifest['flags'],
      'flag_changes': manifest.get(run_manifest.FLAG_CHANGES, []),
      'frames_per_step': run_manifest.frames_per_step(workdir),
      'thresholds': [float(t) for t in FLAGS.thresholds],
      'speeds': speeds(curves), 'final_policy': final_policy,
      'earlier_policies': [_evaluated_policy(path)
                           for path in FLAGS.earlier_evaluations],
      'notes': FLAGS.notes, 'status': FLAGS.status}
  with open(os.path.join(RESULTS, f'{name}.json'), 'w') as f:
    json.dump(data, f, indent=2)
    f.write('\n')
  return data


def _evaluated_policy(path: str) -> Dict[str, object]:
  """What a page shows of the JSON `programs/evaluate.py --output` wrote
  (not where its checkpoint was: a path of the machine)."""
  with open(path) as f:
    evaluation = json.load(f)
  return {key: evaluation[key] for key in FINAL_POLICY_KEYS
          if key in evaluation}


def read_rounds(name: str) -> List[Dict[str, float]]:
  """The evaluation rounds of results/<name>.csv, as `collect` wrote them."""
  with open(os.path.join(RESULTS, f'{name}.csv')) as f:
    return [{key: int(value) if key in COUNT_COLUMNS else float(value)
             for key, value in row.items()} for row in csv.DictReader(f)]


def _protocol(name: Optional[str]) -> str:
  """What made an Atari evaluation's episodes differ (`--atari_evaluation`):
  ', with <description>', or nothing for another kind of game."""
  if name is None:
    return ''
  return f', with {atari.ATARI_EVALUATIONS[name].description}'


def _atari_evaluation(run_flags) -> Optional[str]:
  """The run's --atari_evaluation; None unless it played an Atari game."""
  if not str(run_flags.get('env', '')).startswith('atari:'):
    return None
  return run_flags['atari_evaluation']


def returns_text(policy) -> str:
  """An evaluation's returns: the mean, and the episodes' sample standard
  deviation (evaluate.py's `std`, n - 1) where the JSON has it."""
  spread = (f'sample sd {policy["std"]:.1f}, ' if 'std' in policy else '')
  return (f'mean {policy["mean"]:.1f} ({spread}median {policy["median"]:g}, '
          f'min {policy["min"]:g}, max {policy["max"]:g})')


def _final_policy_text(final_policy, earlier_policies) -> str:
  epsilon = final_policy['epsilon']
  text = (
      f' Its final policy (learner step {final_policy["learner_steps"]:,}), '
      f'{final_policy["episodes"]} episodes of `programs/evaluate.py`'
      f'{_protocol(final_policy.get("atari_evaluation"))}, '
      + ('greedy' if not epsilon else f'at epsilon {epsilon:g}') +
      f': {returns_text(final_policy)}.')
  if earlier_policies:
    earlier_policies = sorted(earlier_policies,
                              key=lambda policy: policy['learner_steps'])
    text += (
        f' Before it, {len(earlier_policies)} earlier '
        + ('policy' if len(earlier_policies) == 1 else 'policies') +
        ' of the run, evaluated the same way, fell short and the run went '
        'on: ' + '; '.join(
            f'learner step {policy["learner_steps"]:,}, '
            f'{policy["episodes"]} episodes: {returns_text(policy)}'
            for policy in earlier_policies) + '.')
  return text


def _flag_changes_text(changes: List[Dict[str, object]]) -> str:
  """What the resuming launches that changed flags changed, and from which
  counts (run.json's `flag_changes`)."""
  parts = []
  for change in changes:
    counts = change.get('counts') or {}
    where = (f'at {counts["learner_steps"]:,} learner updates and '
             f'{counts["actor_steps"]:,} actor steps'
             if 'learner_steps' in counts and 'actor_steps' in counts
             else 'at counts the run did not record')
    what = ', '.join(f'`{flag}` from {before!r} to {after!r}'
                     for flag, (before, after) in change['changed'].items())
    parts.append(f'{where} ({change["launched"]}), {what}')
  return ('The run was resumed with changed values: ' + '; '.join(parts) +
          '. Before each change it used the earlier value.')


def render(name: str, data: Dict[str, object],
           rounds: List[Dict[str, float]]) -> str:
  """The page results/<name>.md from its JSON, `data`, and its evaluation
  `rounds` (`read_rounds`) alone."""
  run_flags = data['flags']
  best = max(rounds, key=lambda row: row['mean_return'])
  last = rounds[-1]
  per_round = run_flags['evaluation_episodes']
  lines = [f'# {data["title"]}', '']
  if data.get('status'):
    lines += [f'**{data["status"]}**', '']
  lines += [
      f'**One run (seed {run_flags["seed"]}), so no spread over seeds.** '
      f'The evaluator\'s last round (round {last["round"]}, {per_round} '
      f'episodes): mean {last["mean_return"]:.1f} (min '
      f'{last["min_return"]:.0f}, max {last["max_return"]:.0f}) after '
      f'{last["minutes"]:.0f} minutes, {last["actor_frames"]:,} frames and '
      f'{last["learner_steps"]:,} updates; its best round: '
      f'{best["mean_return"]:.1f} (round {best["round"]}).'
      + (_final_policy_text(data['final_policy'],
                            data.get('earlier_policies', []))
         if data['final_policy'] else ''), '',
      f'![{name}]({name}.png)', '']
  if data['command']:
    lines += ['The run:', '', '```sh', data['command'], '```', '']
  changes = data.get('flag_changes', [])
  lines += [
      (f'Preset `{data["preset"]}`' if data['preset'] else
       'No preset recorded') + '; every value the run '
      + ('last launched with:' if changes else 'used:'), '',
      '```json', json.dumps(run_flags, indent=1, sort_keys=True),
      '```', '']
  if changes:
    lines += [_flag_changes_text(changes), '']
  lines += [
      f'Evaluation: {per_round} episodes of the evaluator every '
      f'{run_flags["evaluation_period"]:,} learner updates'
      f'{_protocol(_atari_evaluation(run_flags))}; a '
      "round's return is their mean. Frames: agent steps x "
      f'{data["frames_per_step"]}. Minutes: wall-clock from '
      "the run's first log row.", '',
      '| threshold | first round at or above | minutes | frames | learner '
      'updates |', '|---|---|---|---|---|']
  for threshold in data['thresholds']:
    row = first_passing(rounds, threshold)
    if row is None:
      lines.append(f'| {threshold:g} | not reached (best round: '
                   f'{best["mean_return"]:.1f}) | | | |')
    else:
      lines.append(
          f'| {threshold:g} | round {row["round"]}: {row["mean_return"]:.1f} '
          f'| {row["minutes"]:.0f} | {row["actor_frames"]:,} | '
          f'{row["learner_steps"]:,} |')
  measured = data['speeds']
  lines += [
      '',
      'Speeds (medians over the run): actors '
      f'{measured["actor_frames_per_second"]:,.0f} frames/s in all, learner '
      f'{measured["learner_updates_per_second"]:.1f} updates/s.', '',
      f'Every round: [{name}.csv]({name}.csv).', '']
  if data['notes']:
    lines += [data['notes'], '']
  return '\n'.join(lines)


def main(argv):
  if len(argv) != 2 or not FLAGS.name:
    sys.stderr.write('usage: python -m results.long_run <workdir> '
                     '--name=<page>\n')
    sys.exit(2)
  if FLAGS.earlier_evaluations and not FLAGS.final_evaluation:
    sys.stderr.write('error: --earlier_evaluations are shown beside the final '
                     'policy\'s; pass its JSON too (--final_evaluation).\n')
    sys.exit(2)
  data = collect(argv[1], FLAGS.name)
  with open(os.path.join(RESULTS, f'{FLAGS.name}.md'), 'w') as f:
    f.write(render(FLAGS.name, data, read_rounds(FLAGS.name)))
  print(f'Wrote results/{FLAGS.name}.csv, .png, .json and .md')


if __name__ == '__main__':
  app.run(main)
