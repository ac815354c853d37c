"""Ape-X DQN on the five MinAtar games beside Young & Tian's DQN (a result,
not a test): runs `results.run minatar` (one preset, the same frame budget
for each game), evaluates each run's final policy, and writes
results/minatar.{png,json,md}.

  .venv/bin/python -m results.minatar --seeds=0 --runs=<dir outside the repo>
  .venv/bin/python -m results.minatar --seeds=0 --runs=<dir> --report_only \
      --notes="What else ran on the machine."
  .venv/bin/python -m results.pages minatar    # the page, from its JSON

A run already finished is not run again; a final policy already evaluated
(<run>/final_evaluation.json) is not evaluated again. Collecting (`collect`)
writes the plot and results/minatar.json (every run's figures, and what the
page says of how they were made); rendering (`render`) makes the page from
that JSON alone.
"""

import json
import os
import subprocess
from typing import Dict, List

from absl import app
from absl import flags
import numpy as np

from results import long_run
from results import run
from results import spread

RESULTS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(RESULTS)

# --notes (results/long_run.py's flag): a sentence the page adds after its
# set-up, e.g. what else ran on the machine.
flags.DEFINE_integer('final_episodes', 30, 'Episodes of each run\'s final '
                     'policy (programs/evaluate.py).')
FLAGS = flags.FLAGS

ANALYSIS = 'minatar'
# The evaluator's exploration (--evaluation_epsilon's default), also used
# for the final policy.
EVALUATION_EPSILON = 0.001

# Young & Tian's DQN (Young & Tian 2019, "MinAtar: An Atari-Inspired Testbed
# for Thorough and Reproducible Reinforcement Learning Experiments",
# arXiv:1903.03176), read off the learning curves the MinAtar repository
# publishes (github.com/kenjyoung/MinAtar, img/learning_curves.gif: "DQN",
# the moving average of the returns of 100 training episodes, i.e. with
# their epsilon of 0.1, over 30 seeds) at 1M and 2M frames: the height of
# the blue curve's pixels, averaged over the 5 pixel columns at that frame,
# on the scale of the panel's axis ticks. About +-0.3 where the curve is
# flat; Asterix's rises steeply through 1M (about 4 at 0.9M, 9.5 at 1.1M).
DQN_REFERENCE = {  # game: (return at 1M frames, at 2M frames)
    'asterix': (7.3, 14.3),
    'breakout': (9.2, 9.7),
    'freeway': (47.9, 50.7),
    'seaquest': (1.0, 4.9),
    'space_invaders': (32.6, 41.4),
}
GAMES = list(run.ANALYSES[ANALYSIS]['settings'])


def final_evaluation(workdir: str) -> Dict[str, object]:
  """The run's last learner checkpoint, `--final_episodes` episodes of
  programs/evaluate.py (kept in <workdir>/final_evaluation.json)."""
  path = os.path.join(workdir, 'final_evaluation.json')
  if not os.path.isfile(path):
    argv = [os.path.join('.venv', 'bin', 'python'),
            os.path.join('programs', 'evaluate.py'), f'--workdir={workdir}',
            f'--episodes={FLAGS.final_episodes}',
            f'--epsilon={EVALUATION_EPSILON}', f'--output={path}']
    print(' '.join(argv), flush=True)
    subprocess.check_call(argv, cwd=ROOT)
  with open(path) as f:
    return json.load(f)


def run_record(workdir: str, seed: int) -> Dict[str, object]:
  """What the page shows of one finished run."""
  curves = long_run.plot.run_curves(workdir, 1)
  rounds = long_run.evaluation_rounds(workdir, curves['start'])
  final = final_evaluation(workdir)
  counts = run.final_counts(workdir)
  with open(os.path.join(workdir, 'finished.json')) as f:
    seconds = json.load(f)['seconds']
  best = max(rounds, key=lambda row: row['mean_return']) if rounds else None
  return {
      'seed': seed,
      'final_mean': final['mean'], 'final_std': final['std'],
      'final_episodes': final['episodes'],
      'final_learner_steps': final['learner_steps'],
      'last_round': rounds[-1] if rounds else None,
      'best_round': best,
      'rounds': rounds,
      'actor_frames': counts.get('actor_steps', 0),
      'learner_updates': counts.get('learner_steps', 0),
      'wall_clock_minutes': seconds / 60.0,
      **long_run.speeds(curves),
  }


def plot_games(records: Dict[str, List[Dict[str, object]]], out: str):
  """One panel per game: each seed's evaluation rounds against frames, its
  final policy's mean, and the DQN reference at 1M and 2M frames."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  figure, axes = plt.subplots(1, len(records), figsize=(4 * len(records), 3.6))
  axes = np.atleast_1d(axes)
  for axis, (game, rows) in zip(axes, records.items()):
    for index, row in enumerate(rows):
      colour = f'C{index}'
      frames = [r['actor_frames'] / 1e6 for r in row['rounds']]
      means = [r['mean_return'] for r in row['rounds']]
      axis.plot(frames, means, '.-', color=colour,
                label=f'Ape-X DQN, seed {row["seed"]} (evaluator rounds)')
      axis.errorbar([row['actor_frames'] / 1e6], [row['final_mean']],
                    yerr=[row['final_std']], fmt='s', color=colour,
                    label='final policy' if index == 0 else None)
    reference = DQN_REFERENCE[game]
    axis.plot([1.0, 2.0], reference, 'kx', markersize=9,
              label='Young & Tian DQN (read off their curves)')
    axis.set_title(game)
    axis.set_xlabel('frames (millions)')
    axis.grid(alpha=0.3)
  axes[0].set_ylabel('return')
  axes[0].legend(fontsize=7, loc='upper left')
  figure.tight_layout()
  figure.savefig(out, dpi=100)
  plt.close(figure)


def collect(seeds: List[int]) -> Dict[str, object]:
  """Writes results/minatar.png and .json from the finished runs (their
  final policies evaluated first, where not yet), and returns that JSON's
  content."""
  records = {}
  for game in GAMES:
    rows = []
    for seed in seeds:
      workdir = run.run_directory(ANALYSIS, game, seed)
      if run.finished(workdir):
        rows.append(run_record(workdir, seed))
    if rows:
      records[game] = rows
  if not records:
    raise ValueError('No finished MinAtar runs yet.')
  plot_games(records, os.path.join(RESULTS, f'{ANALYSIS}.png'))
  data = {
      'frames': int(run.MINATAR_FRAMES * FLAGS.scale), 'seeds': seeds,
      'final_episodes': FLAGS.final_episodes,
      'final_epsilon': EVALUATION_EPSILON,
      'command': ' '.join(run.command(ANALYSIS, GAMES[0], seeds[0],
                                      '<workdir>')),
      'notes': FLAGS.notes, 'reference': DQN_REFERENCE, 'games': records}
  run.write_json(ANALYSIS, data)
  return data


def iqm_over_games(records: Dict[str, List[Dict[str, object]]],
                   reference: Dict[str, List[float]]):
  """(IQM, low, high, seeds) of the final policies over every game and seed:
  each one's return over Young & Tian's DQN at 1M frames (the games'
  returns are on different scales), with its stratified-bootstrap 95%
  interval (seeds resampled within each game; the seeds every game has).
  None with fewer than 2 such seeds: nothing to resample."""
  seeds = sorted(set.intersection(
      *({row['seed'] for row in rows} for rows in records.values())))
  if len(seeds) < 2:
    return None
  by_seed = {game: {row['seed']: row['final_mean'] for row in rows}
             for game, rows in records.items()}
  scores = [[by_seed[game][seed] / reference[game][0] for game in records]
            for seed in seeds]
  return (*spread.iqm_interval(scores), len(seeds))


def over_games(records: Dict[str, List[Dict[str, object]]],
               reference: Dict[str, List[float]]) -> str:
  """The page's sentence on `iqm_over_games`."""
  figures = iqm_over_games(records, reference)
  if figures is None:
    return ('**Over the games:** no interquartile mean with an interval: a '
            'stratified bootstrap resamples the seeds within each game, and '
            'with one seed a game it has nothing to resample.')
  value, low, high, seeds = figures
  interval = spread.interval_text(low, high, '{:.2f}')
  return (f'**Over the {len(records)} games and {seeds} seeds:** the '
          'interquartile mean of the final policies\' returns, each over '
          'Young & Tian\'s DQN at 1M frames (the games\' returns are on '
          f'different scales), is {value:.2f} {interval} (95% interval; a '
          'stratified bootstrap, `rliable`, '
          f'{spread.BOOTSTRAP_REPS:,} resamples of the seeds within each '
          'game). A ratio to a figure measured another way (below), not a '
          'comparison.')


def render(data: Dict[str, object]) -> str:
  """The page (results/minatar.md) from its JSON, `data`, alone: first each
  game's final policy over seeds beside the reference, then the runs'
  evaluation rounds and speeds, then where the reference comes from and
  how the page was made."""
  records, reference = data['games'], data['reference']
  episodes, epsilon = data['final_episodes'], data['final_epsilon']
  count = max(len(rows) for rows in records.values())
  lines = [
      '# Ape-X DQN on MinAtar beside Young & Tian\'s DQN', '',
      f'**Final policy after {data["frames"]:,} frames, '
      f'{spread.seeds_phrase(count, "a game")}.** Its mean return over '
      f'{episodes} episodes at epsilon {epsilon:g}'
      f'{spread.how_stated(count)}. Beside it, '
      'Young & Tian\'s DQN at 1M frames, read off their published curves '
      '(below): a different measure, and no test compares the two.', '',
      *spread.seed_table(
          'game', 'Ape-X DQN, final policy',
          {game: {row['seed']: row['final_mean'] for row in rows}
           for game, rows in records.items()},
          extra={'Young & Tian\'s DQN at 1M frames': [
              f'{reference[game][0]:.1f}' for game in records]}), '',
      over_games(records, reference), '',
      f'![MinAtar]({ANALYSIS}.png)', '',
      'One preset (`--preset=minatar`) for all five games, '
      f'{data["frames"]:,} frames each (a MinAtar step is one frame; the '
      'budget counts the actors\' steps), on 2 CPU cores (no GPU), one game '
      'after another.' + (f' {data["notes"]}' if data['notes'] else ''), '',
      '| game | final policy: sd over its episodes | last evaluation round '
      '(frames) | best round (frames) | Young & Tian DQN at 2M frames | '
      'wall-clock (min) | learner updates | frames/s | updates/s |',
      '|---|---|---|---|---|---|---|---|---|',
  ]
  mean = lambda rows, key: np.mean([row[key] for row in rows])
  for game, rows in records.items():
    round_cell = lambda key: '; '.join(  # pylint: disable=cell-var-from-loop
        f'{row[key]["mean_return"]:.1f} ({row[key]["actor_frames"] / 1e3:,.0f}K)'
        if row[key] else '-' for row in rows)
    episodes_sd = '; '.join(
        f'{row["final_std"]:.1f} ({row["final_episodes"]} episodes)'
        for row in rows)
    lines.append(
        f'| {game} | {episodes_sd} | '
        f'{round_cell("last_round")} | {round_cell("best_round")} | '
        f'{reference[game][1]:.1f} | '
        f'{mean(rows, "wall_clock_minutes"):.1f} | '
        f'{mean(rows, "learner_updates"):,.0f} | '
        f'{mean(rows, "actor_frames_per_second"):,.0f} | '
        f'{mean(rows, "learner_updates_per_second"):.0f} |')
  lines += [
      '',
      '**The columns.** *Final policy*: the run\'s last learner checkpoint '
      f'(taken when the budget ran out), {episodes} episodes of '
      f'`programs/evaluate.py --epsilon={epsilon:g}` (the '
      'evaluator\'s exploration). *Evaluation rounds*: the in-run '
      'evaluator\'s mean over its 10 episodes, every 10,000 updates '
      '(about 80K frames); frames are the actors\' count when the round '
      'began. *Wall-clock*: the whole program, start-up included. '
      '*frames/s*, *updates/s*: medians over the run of the actors\' summed '
      'rate and of the learner\'s. With several seeds a game, a cell lists '
      'each seed\'s, and the last four columns are means over seeds.', '',
      '**Young & Tian\'s DQN** (arXiv:1903.03176): read off the learning '
      'curves of the MinAtar repository (github.com/kenjyoung/MinAtar, '
      '`img/learning_curves.gif`, "DQN"): the height of the curve\'s pixels '
      'at 1M and 2M frames on the scale of the panel\'s ticks (about ±0.3 '
      'where the curve is flat; Asterix\'s rises steeply through 1M, from '
      'about 4 at 0.9M to 9.5 at 1.1M). Their curve '
      'is the mean of the last 100 *training* episodes (epsilon 0.1 after '
      'its first 100K frames), over 30 seeds, with one update of 32 per '
      'frame. Ours is a near-greedy evaluator (epsilon 0.001) after 8 '
      'samples per frame (one update of 64 per 8 frames): the same frames, '
      'an eighth of the updates, and 16 environments exploring at once with '
      'Ape-X\'s fixed epsilons 0.4^(1 + 7 i / 15). The minimal action set '
      'of each game (MinAtar\'s `-v1` environments; theirs: all 6 actions) '
      'and sticky actions (0.1) as theirs; the pinned minatar 1.0.15 has '
      'the Seaquest oxygen fix, which its README says may change Seaquest\'s '
      'returns from the published ones.', '',
      'Made by:', '', '```sh',
      '.venv/bin/python -m results.minatar '
      f'--seeds={",".join(map(str, data["seeds"]))}'
      ' --runs=<a directory outside the repository>', '```', '',
      'which runs, for each game and seed, e.g.:', '', '```sh',
      data['command'], '```', '',
      'then `programs/evaluate.py --workdir=<workdir> '
      f'--episodes={episodes} --epsilon={epsilon:g}` '
      'on its final checkpoint.', '']
  return '\n'.join(lines)


def report(seeds: List[int]):
  """Writes results/minatar.{png,json,md} from the finished runs."""
  data = collect(seeds)
  with open(os.path.join(RESULTS, f'{ANALYSIS}.md'), 'w') as f:
    f.write(render(data))
  print(f'Wrote results/{ANALYSIS}.png, .json and .md')


def main(argv):
  del argv
  seeds = [int(seed) for seed in FLAGS.seeds]
  if not FLAGS.report_only:
    for seed in seeds:
      for game in GAMES:
        run.run(ANALYSIS, game, seed)
  report(seeds)


if __name__ == '__main__':
  app.run(main)
