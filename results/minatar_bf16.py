"""Ape-X DQN with its learner in bfloat16 on MinAtar, beside the same agent
in float32 (a result, not a test): runs `results.run minatar_bf16`
(results/minatar.py's protocol and preset, `--learner_precision=bfloat16`:
the learner's forward and backward passes in bfloat16, its weights,
optimiser state, targets and priorities in float32), evaluates each run's
final policy as results/minatar.py does, and writes
results/minatar_bf16.{png,json,md}.

  .venv/bin/python -m results.minatar_bf16 --games=breakout --seeds=0,1,2 \\
      --runs=<dir outside repo>
  .venv/bin/python -m results.minatar_bf16 --seeds=0,1,2 --report_only
  .venv/bin/python -m results.pages minatar_bf16    # the page, from its JSON

The question is whether bfloat16 changes what the agent learns by steps:
every run has the same frames (1M) and, by the rate limiter, about the same
learner updates, so each game's bfloat16 seeds are set against the float32
seeds of results/minatar.md (Welch's t-test and the bootstrap interval of
the difference: `spread.comparison`), and over the games, the difference of
the IQMs of each run's return over Young & Tian's DQN.

It runs only where the CPU has bfloat16 arithmetic (elsewhere the program
computes in float32, which would not be this page's runs: refused before
anything starts), and each run's own start-up lines must say its learner
computed in bfloat16.
"""

import os
from typing import Dict, List

from absl import app

from results import minatar
from results import page_registry
from results import page_runs
from results import run
from results import spread

ANALYSIS = 'minatar_bf16'
FLOAT32 = minatar.ANALYSIS
OURS = 'bfloat16'
# What the program says at its start (agents.networks.precision.resolve)
# when its learner computes in bfloat16.
COMPUTES_IN_BFLOAT16 = 'The learner computes in bfloat16'


def check_cpu(flags=None):
  """Refuses a CPU without bfloat16 arithmetic (`flags`: its /proc/cpuinfo
  flags; this machine's if None), before any run starts."""
  from agents.networks import precision  # pylint: disable=g-import-not-at-top
  if not precision.bfloat16_flags(flags):
    raise SystemExit(
        'This CPU has no bfloat16 arithmetic (no '
        f'{" or ".join(precision.BFLOAT16_FLAGS)} flag in /proc/cpuinfo): '
        'the program would compute in float32, and its runs are not this '
        'page\'s. Run it on a machine that has one; --report_only writes '
        'the page from the runs already made.')


def learner_precision(workdir: str) -> str:
  """What a run's learner computed in, by its start-up lines (the run's
  output.txt): 'bfloat16', or 'float32' where they do not say bfloat16."""
  path = os.path.join(workdir, 'output.txt')
  with open(path) as f:
    return 'bfloat16' if COMPUTES_IN_BFLOAT16 in f.read() else 'float32'


def collect(seeds: List[int]) -> Dict[str, object]:
  """Writes results/minatar_bf16.png and .json from the finished runs, with
  the float32 runs beside them, and returns that JSON's content."""
  data = minatar.collect(seeds, ANALYSIS)
  for game, rows in data['games'].items():
    for row in rows:
      workdir = run.finished_directory(ANALYSIS, game, row['seed'])
      row['learner_precision'] = learner_precision(workdir)
      if row['learner_precision'] != 'bfloat16':
        raise ValueError(
            f'{workdir}: its start-up lines do not say "'
            f'{COMPUTES_IN_BFLOAT16}": its learner computed in float32 '
            '(a CPU without bfloat16 arithmetic), so it is not this page\'s '
            'run. Remove it and run it again on a CPU that has it.')
  float32, _ = minatar.records_of(FLOAT32, [0, 1, 2])
  data['float32'] = {game: [{'seed': row['seed'],
                             'matched_mean': row['matched_mean'],
                             'learner_updates': row['learner_updates']}
                            for row in rows]
                     for game, rows in float32.items()}
  data['beside_float32'] = minatar.beside(data['games'], float32,
                                          data['reference'])
  run.write_json(ANALYSIS, data)
  return data


def beside_text(data: Dict[str, object]) -> str:
  """The two precisions' IQMs over the games both have."""
  beside = data['beside_float32']
  if beside is None:
    return ('Over the games: the difference of the IQMs needs 2 seeds of '
            'each game in both precisions: not yet.')
  verdict = spread.difference_side(OURS, beside['low'], beside['high'],
                                   len(beside['seeds']))
  return (f'**Over {len(beside["games"])} game(s)** and seeds '
          f'{", ".join(map(str, beside["seeds"]))}: the IQM of each run\'s '
          'matched return over Young & Tian\'s DQN, bfloat16 less float32: '
          f'{beside["difference"]:+.2f}, 95% interval '
          f'[{beside["low"]:+.2f}, {beside["high"]:+.2f}] (stratified '
          f'bootstrap): {verdict}.')


def render(data: Dict[str, object]) -> str:
  """The page (results/minatar_bf16.md) from its JSON, `data`, alone."""
  records = data['games']
  count = max(len(rows) for rows in records.values())
  epsilon = data['matched_epsilon']
  matched = {game: {row['seed']: row['matched_mean'] for row in rows}
             for game, rows in records.items()}
  float32 = {game: {row['seed']: row['matched_mean'] for row in rows}
             for game, rows in data['float32'].items()}
  updates = {game: [row['learner_updates'] for row in rows]
             for game, rows in records.items()}
  float32_updates = {game: [row['learner_updates'] for row in rows]
                     for game, rows in data['float32'].items()}
  games = list(records)
  lines = [
      '# Ape-X DQN with its learner in bfloat16 on MinAtar, beside float32',
      '',
      'Does computing the learner\'s forward and backward passes in '
      'bfloat16 (`--learner_precision=bfloat16`; its weights, optimiser '
      'state, targets and priorities stay float32: docs/performance.md) '
      'change what Ape-X DQN learns by steps? The protocol and preset of '
      f'results/minatar.md: {data["frames"]:,} frames, all 6 actions, each '
      f'run\'s final policy at epsilon {epsilon:g} over '
      f'{data["matched_episodes"]} episodes{spread.how_stated(count)}. '
      'Beside them, the float32 runs of results/minatar.md (their seeds '
      '0-2, made before this page\'s with the same preset and protocol), '
      'and bfloat16 less float32 by game.', '',
      *spread.seed_table(
          'game', f'bfloat16, epsilon {epsilon:g}', matched,
          extra={
              'float32 (results/minatar.md)': [
                  spread.mean_and_sd(list(float32[game].values()))
                  if game in float32 else '-' for game in games],
              'bfloat16 less float32, 95% CI, Welch\'s p': [
                  spread.comparison('bfloat16', 'float32',
                                    list(matched[game].values()),
                                    list(float32[game].values()))
                  if game in float32 else '-' for game in games]}), '',
      beside_text(data), '',
      spread.how_compared(count), '',
      'Learner updates in each run (the rate limiter holds 8 samples per '
      'frame, so the precisions learn from about as many): ' + '; '.join(
          f'{game}: bfloat16 {", ".join(f"{value:,}" for value in updates[game])}'
          + (f', float32 {", ".join(f"{value:,}" for value in float32_updates[game])}'
             if game in float32_updates else '')
          for game in games) + '.', '',
      f'![MinAtar]({ANALYSIS}.png)', '',
      '## The runs', '',
      'Every run\'s start-up lines say its learner computed in bfloat16 (the '
      'page refuses a run whose do not).' +
      (f' {data["notes"]}' if data['notes'] else ''), '',
      *minatar.runs_table(records, data['reference'], matched=True), '',
      *minatar.run_commands(data, ANALYSIS,
                            [minatar.evaluation_text(data), ''], games),
  ]
  return '\n'.join(lines)


def report(seeds: List[int]):
  """Writes results/minatar_bf16.{png,json,md} from the finished runs."""
  run.write_page(ANALYSIS, render(collect(seeds)))


def main(argv):
  del argv
  games = page_runs.chosen(ANALYSIS, page_runs.FLAGS.games, '--games',
                           'MinAtar game')
  if not (run.FLAGS.report_only or run.FLAGS.dry_run):
    check_cpu()
  page_runs.main(ANALYSIS, games, [int(seed) for seed in run.FLAGS.seeds],
                 minatar.evaluations(), report)

page_registry.register(ANALYSIS, render)


if __name__ == '__main__':
  app.run(main)
