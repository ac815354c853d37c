"""Ape-X DQN on the five MinAtar games beside Young & Tian's DQN (a result,
not a test): runs `results.run minatar` (one preset, the same frame budget
for each game, all 6 of MinAtar's actions), evaluates each run's final
policy twice, and writes results/minatar.{png,json,md}.

  .venv/bin/python -m results.minatar --seeds=0,1,2 --runs=<dir outside repo>
  .venv/bin/python -m results.minatar --seeds=0,1,2 --runs=<dir> --dry_run
  .venv/bin/python -m results.minatar --seeds=0,1,2 --runs=<dir> --report_only \
      --notes="What else ran on the machine."
  .venv/bin/python -m results.pages minatar    # the page, from its JSON

The same command again carries on where it stopped: a finished run is not
run again, an unfinished one resumes from its checkpoints (`--workdir`
alone: its run.json holds its flags, the action set among them), and an
evaluation already made (its JSON in the run's directory) is not made
again. `--dry_run` lists what that would do. The page reports every seed
with a finished run, banked or in the runs directory, whatever `--seeds`
asks to run: `--seeds=2` adds seed 2's runs and keeps seeds 0 and 1's.

Each run, once finished and evaluated, is banked: its small files (records,
CSV logs, both evaluations; not its checkpoints) go to
`results/banked/minatar/<game>/seed<k>/`, to be committed to git
(`results/bank.py`): the runs directory is lost with the machine, and the
fifteen runs take more than one working session. A banked run is not run
again (`--dry_run`: "banked") and is read as a finished one; it cannot be
evaluated again (the bank keeps no checkpoints), so one banked without an
evaluation is said to be ("missing").

Collecting (`collect`) writes the plot and results/minatar.json (every
run's figures, and what the page says of how they were made); rendering
(`render`) makes the page from that JSON alone.

Young & Tian's curves are the mean return of the last 100 *training*
episodes, played at epsilon 0.1 with all 6 actions. The matched measure
here is each run's final policy played at epsilon 0.1 with all 6 actions,
its mean over 100 episodes (`MATCHED`); the page argues why this is the
fairest figure these runs give, and how it still differs. Beside it, the
evaluator's near-greedy figure (`NEAR_GREEDY`), which is not theirs and is
not compared with it.
"""

import json
import os
from typing import Dict, List, Optional, Tuple

from absl import app
from absl import flags
import numpy as np

from launch.runs import run_manifest
from launch.runs import curves as curves_lib
from results import long_run
from results import page_registry
from results import page_runs
from results import run
from results import spread

RESULTS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(RESULTS)

# --notes (results/long_run.py's flag): a sentence the page adds after its
# set-up, e.g. what else ran on the machine. --dry_run: results/run.py's;
# --runs, --bank_dir, --bank: results/bank.py's.
flags.DEFINE_integer('final_episodes', 30, 'Episodes of each run\'s final '
                     'policy at the evaluator\'s near-greedy epsilon '
                     '(programs/evaluate.py).')
FLAGS = flags.FLAGS

ANALYSIS = 'minatar'


# Young & Tian's measure (their §4): training episodes at epsilon 0.1 after
# its annealing, a moving average over 100 of them; the same epsilon and
# number of episodes here.
MATCHED = page_runs.Evaluation(100, 0.1, 'evaluation_epsilon0.1.json')
# The evaluator's exploration (--evaluation_epsilon's default).
NEAR_GREEDY_EPSILON = 0.001
NEAR_GREEDY_FILE = 'final_evaluation.json'

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


def chosen_games() -> List[str]:
  """`--games`, in the page's order; all five by default."""
  return page_runs.chosen(ANALYSIS, page_runs.FLAGS.games, '--games',
                          'MinAtar game')


def near_greedy() -> page_runs.Evaluation:
  return page_runs.Evaluation(FLAGS.final_episodes, NEAR_GREEDY_EPSILON,
                              NEAR_GREEDY_FILE)


def evaluations() -> List[page_runs.Evaluation]:
  return [MATCHED, near_greedy()]


def plan(seeds: List[int]) -> List[Tuple[str, int, str, List[str]]]:
  """What running `seeds` of `--games` would do now (`page_runs.plan`)."""
  return page_runs.plan(ANALYSIS, chosen_games(), seeds, evaluations())


def run_record(workdir: str, seed: int) -> Dict[str, object]:
  """What the page shows of one finished run."""
  curves = curves_lib.run_curves(workdir, 1)
  rounds = long_run.evaluation_rounds(workdir, curves['clock'])
  final = page_runs.evaluate(workdir, seed, near_greedy())
  matched = page_runs.evaluate(workdir, seed, MATCHED)
  counts = run.final_counts(workdir)
  with open(os.path.join(workdir, 'finished.json')) as f:
    finished = json.load(f)
  best = max(rounds, key=lambda row: row['mean_return']) if rounds else None
  return {
      'seed': seed,
      'env': run_manifest.read_manifest(workdir)['env'],
      'matched_mean': matched['mean'], 'matched_std': matched['std'],
      'matched_episodes': matched['episodes'],
      'matched_mean_length': float(np.mean(matched['lengths'])),
      'final_mean': final['mean'], 'final_std': final['std'],
      'final_episodes': final['episodes'],
      'final_learner_steps': final['learner_steps'],
      'last_round': rounds[-1] if rounds else None,
      'best_round': best,
      'rounds': rounds,
      'actor_frames': counts.get('actor_steps', 0),
      'learner_updates': counts.get('learner_steps', 0),
      'wall_clock_minutes': finished['seconds'] / 60.0,
      'launches': finished.get('launches', 1),
      **long_run.speeds(curves),
  }


def plot_games(records: Dict[str, List[Dict[str, object]]], out: str,
               matched: bool):
  """One panel per game: each seed's evaluation rounds against frames, its
  final policy's means (at epsilon 0.1, when `matched`, and near-greedy),
  and the DQN reference at 1M and 2M frames."""
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
      axis.plot(frames, means, '.-', color=colour, alpha=0.6,
                label=f'seed {row["seed"]}: evaluator rounds (epsilon '
                      f'{NEAR_GREEDY_EPSILON:g})')
      axis.errorbar([row['actor_frames'] / 1e6], [row['final_mean']],
                    yerr=[row['final_std']], fmt='^', color=colour,
                    label=(f'final policy, epsilon {NEAR_GREEDY_EPSILON:g}'
                           if index == 0 else None))
      if matched:
        axis.errorbar([row['actor_frames'] / 1e6], [row['matched_mean']],
                      yerr=[row['matched_std']], fmt='s', color=colour,
                      label=(f'final policy, epsilon {MATCHED.epsilon:g}'
                             if index == 0 else None))
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


def actor_epsilons(workdir: str) -> List[float]:
  """The epsilons of the run's actors' environments (Ape-X §4.1's
  schedule over all of them, as its flags set it)."""
  from agents.apex_dqn import actor  # pylint: disable=g-import-not-at-top
  values = run_manifest.read_manifest(workdir)['flags']
  epsilons = actor.apex_epsilons(
      int(values['num_actors']) * int(values['envs_per_actor']),
      float(values['epsilon_base']), float(values['epsilon_alpha']))
  return [float(epsilon) for epsilon in epsilons]


def records_of(analysis: str, seeds: List[int]
               ) -> Tuple[Dict[str, List[Dict[str, object]]], List[str]]:
  """(each game's finished runs of `analysis` among `seeds`, banked or in
  the runs directory, as `run_record` reads them (their final policies
  evaluated first, where not yet); their workdirs)."""
  envs = page_runs.environments(analysis)
  records, workdirs = {}, []
  for game in run.ANALYSES[analysis]['settings']:
    rows = []
    for seed in seeds:
      workdir = run.finished_directory(analysis, game, seed)
      if workdir:
        page_runs.check_environment(workdir, envs[game])
        rows.append(run_record(workdir, seed))
        workdirs.append(workdir)
    if rows:
      records[game] = rows
  return records, workdirs


def collect(seeds: List[int], analysis: str = ANALYSIS) -> Dict[str, object]:
  """Writes results/<analysis>.png and .json from the finished runs of
  `analysis` (minatar, or another agent's runs of the same games), banked
  or in the runs directory, and returns that JSON's content."""
  records, workdirs = records_of(analysis, seeds)
  if not records:
    raise ValueError(
        f'No finished runs of {analysis} among seeds {seeds}, banked or in '
        'the runs directory, so no page: run the same command without '
        '--report_only, with --runs=<a directory outside the repository>.')
  plot_games(records, os.path.join(RESULTS, f'{analysis}.png'), matched=True)
  data = {
      'protocol': 'matched',
      'frames': int(run.MINATAR_FRAMES * FLAGS.scale), 'seeds': seeds,
      'matched_episodes': MATCHED.episodes,
      'matched_epsilon': MATCHED.epsilon,
      'final_episodes': FLAGS.final_episodes,
      'final_epsilon': NEAR_GREEDY_EPSILON,
      'actor_epsilons': actor_epsilons(workdirs[0]),
      'command': ' '.join(run.command(analysis, next(iter(records)),
                                      seeds[0], '<workdir>')),
      'notes': FLAGS.notes, 'reference': DQN_REFERENCE, 'games': records}
  run.write_json(analysis, data)
  return data


def _by_seed(records, key: str) -> Dict[str, Dict[int, float]]:
  return {game: {row['seed']: row[key] for row in rows}
          for game, rows in records.items()}


def iqm_over_games(records: Dict[str, List[Dict[str, object]]],
                   reference: Dict[str, List[float]],
                   key: str = 'final_mean'):
  """(IQM, low, high, seeds) over every game and seed of each run's `key`
  over Young & Tian's DQN at 1M frames (the games' returns are on
  different scales; 1: level with it), with its stratified-bootstrap 95%
  interval (seeds resampled within each game; the seeds every game has).
  None with fewer than 2 such seeds (or no game): nothing to resample."""
  seeds = sorted(set.intersection(
      *({row['seed'] for row in rows} for rows in records.values()))) if (
          records) else []
  if len(seeds) < 2:
    return None
  by_seed = _by_seed(records, key)
  scores = [[by_seed[game][seed] / reference[game][0] for game in records]
            for seed in seeds]
  return (*spread.iqm_interval(scores), len(seeds))


# What the page calls Young & Tian's DQN in its verdicts.
THEIRS = 'Young & Tian\'s DQN'
OURS = 'Ape-X DQN'


def beside(records, other_records, reference
           ) -> Optional[Dict[str, object]]:
  """The IQM of `records` less that of `other_records` (another agent's or
  setting's runs), each run's matched return over Young & Tian's, over the
  games and seeds both have, with the stratified-bootstrap interval of the
  difference; None with fewer than 2 such seeds."""
  games = [game for game in records if game in other_records]
  seeds = sorted(set.intersection(*(
      {row['seed'] for row in records[game]} &
      {row['seed'] for row in other_records[game]} for game in games))) if (
          games) else []
  if len(seeds) < 2:
    return None

  def matrix(table):
    return [[next(row['matched_mean'] for row in table[game]
                  if row['seed'] == seed) / reference[game][0]
             for game in games] for seed in seeds]

  value, low, high = spread.difference_interval(matrix(records),
                                                matrix(other_records))
  return {'games': games, 'seeds': seeds, 'difference': value, 'low': low,
          'high': high}


def against_one(low: float, high: float, seeds: int,
                ours: str = OURS) -> str:
  """What the interval of the IQM of returns over Young & Tian's, of
  `seeds` seeds a game, supports for the agent `ours`: ahead or behind only
  where it excludes 1 (level with theirs) and the seeds are enough
  (`spread.too_few_seeds`)."""
  too_few = spread.too_few_seeds(seeds)
  if too_few:
    return too_few
  if low > 1:
    return f'{ours} ahead of {THEIRS}: the interval lies above 1'
  if high < 1:
    return f'{ours} behind {THEIRS}: the interval lies below 1'
  return 'no difference shown: the interval holds 1'


def over_games(records: Dict[str, List[Dict[str, object]]],
               reference: Dict[str, List[float]], matched: bool) -> str:
  """The page's sentence on `iqm_over_games`: of the matched measure, with
  what its interval supports; of the old protocol's near-greedy figure, a
  ratio and no comparison."""
  figures = iqm_over_games(records, reference,
                           'matched_mean' if matched else 'final_mean')
  if figures is None:
    return ('**Over the games:** no interquartile mean with an interval: a '
            'stratified bootstrap resamples the seeds within each game, and '
            'with one seed in a game it has nothing to resample there.')
  value, low, high, seeds = figures
  interval = spread.interval_text(low, high, '{:.2f}')
  how = ('stratified bootstrap, `rliable`, '
         f'{spread.BOOTSTRAP_REPS:,} resamples of the seeds within each game')
  if not matched:
    return (f'**Over the {len(records)} games and {seeds} seeds:** the '
            'interquartile mean of the final policies\' returns, each over '
            'Young & Tian\'s DQN at 1M frames (the games\' returns are on '
            f'different scales), is {value:.2f} {interval} (95% interval; a '
            f'{how}). A ratio to a figure measured another way (below), not '
            'a comparison.')
  return (f'**Over the {len(records)} games and {seeds} seeds:** the '
          'interquartile mean (IQM) of each run\'s matched return over Young '
          '& Tian\'s DQN at 1M frames (the games\' returns are on different '
          f'scales; 1 is level with theirs) is {value:.2f} {interval} (95% '
          f'interval; a {how}): {against_one(low, high, seeds)}. The interval '
          'holds the spread of these seeds only: theirs is a mean over 30 '
          'seeds read off a curve (about ±0.3), taken here as exact.')


def against_theirs(values: List[float], theirs: float,
                   ours: str = OURS) -> str:
  """A game's cell: its seeds' IQM less Young & Tian's figure, the
  interval of that difference and a one-sample t-test's p, and what they
  support for the agent `ours` (`spread.verdict`); a dash for one seed."""
  if len(values) < 2:
    return '-'
  value, low, high = spread.iqm_interval(values)
  p = spread.one_sample_p(values, theirs)
  said = spread.verdict(ours, THEIRS, low - theirs, high - theirs, p,
                        test='the t-test\'s p', seeds=len(values))
  return (f'{value - theirs:+.1f} '
          f'{spread.interval_text(low - theirs, high - theirs)}, p = '
          f'{p:.2f}: {said}')


def matched_table(records, reference, ours: str, epsilon: float,
                  beside: Optional[Dict[str, List[str]]] = None
                  ) -> List[str]:
  """A matched page's opening table: each game's seeds' matched returns
  of the agent `ours` at `epsilon`, Young & Tian's DQN at 1M frames, the
  columns `beside` (a title: a cell a game), and the seeds' IQM less
  theirs (`against_theirs`)."""
  matched = _by_seed(records, 'matched_mean')
  return spread.seed_table(
      'game', f'{ours}, epsilon {epsilon:g}', matched, extra={
          'Young & Tian\'s DQN at 1M frames': [
              f'{reference[game][0]:.1f}' for game in records],
          **(beside or {}),
          'ours less theirs, 95% CI, p': [
              against_theirs(list(matched[game].values()),
                             reference[game][0], ours) for game in records]})


def runs_table(records, reference, matched: bool) -> List[str]:
  """How each game's runs went (every MinAtar page's table of its runs):
  the final policies' spread over their episodes, the evaluator's rounds,
  speeds."""
  sd_cell = lambda rows, key: '; '.join(
      f'{row[key + "_std"]:.1f} ({row[key + "_episodes"]} episodes)'
      for row in rows)
  lines = [
      '| game | ' + ('final policy at epsilon 0.1: sd over its episodes | '
                     if matched else '') +
      'final policy' + (f' at epsilon {NEAR_GREEDY_EPSILON:g}'
                        if matched else '') +
      ': sd over its episodes | last evaluation round (frames) | best round '
      '(frames) | Young & Tian DQN at 2M frames | wall-clock (min) | learner '
      'updates | frames/s | updates/s |',
      '|---|' + ('---|' if matched else '') + '---|' * 8]
  mean = lambda rows, key: np.mean([row[key] for row in rows])
  for game, rows in records.items():
    round_cell = lambda key: '; '.join(  # pylint: disable=cell-var-from-loop
        f'{row[key]["mean_return"]:.1f} ({row[key]["actor_frames"] / 1e3:,.0f}K)'
        if row[key] else '-' for row in rows)
    lines.append(
        f'| {game} | ' + (f'{sd_cell(rows, "matched")} | ' if matched else '') +
        f'{sd_cell(rows, "final")} | '
        f'{round_cell("last_round")} | {round_cell("best_round")} | '
        f'{reference[game][1]:.1f} | '
        f'{mean(rows, "wall_clock_minutes"):.1f} | '
        f'{mean(rows, "learner_updates"):,.0f} | '
        f'{mean(rows, "actor_frames_per_second"):,.0f} | '
        f'{mean(rows, "learner_updates_per_second"):.0f} |')
  return lines


def _columns_text(final_policy: str) -> str:
  """What the runs table's columns are; `final_policy`: how the final
  policy was played."""
  return (
      '**The columns.** *Final policy*: the run\'s last learner checkpoint '
      f'(taken when the budget ran out), {final_policy}. *Evaluation '
      'rounds*: the in-run evaluator\'s mean over its 10 episodes, every '
      '10,000 updates (about 80K frames); frames are the actors\' count '
      'when the round began. *Wall-clock*: the whole program, start-up '
      'included. *frames/s*, *updates/s*: medians over the run of the '
      'actors\' summed rate and of the learner\'s. With several seeds a '
      'game, a cell lists each seed\'s, and the last four columns are means '
      'over seeds.')


# How Young & Tian's figures were read, and what they measure.
READING = (
    '**Young & Tian\'s DQN** (arXiv:1903.03176): read off the learning '
    'curves of the MinAtar repository (github.com/kenjyoung/MinAtar, '
    '`img/learning_curves.gif`, "DQN"): the height of the curve\'s pixels '
    'at 1M and 2M frames on the scale of the panel\'s ticks (about ±0.3 '
    'where the curve is flat; Asterix\'s rises steeply through 1M, from '
    'about 4 at 0.9M to 9.5 at 1.1M). Their curve '
    'is the mean of the last 100 *training* episodes (epsilon 0.1 after '
    'its first 100K frames), over 30 seeds, with one update of 32 per '
    'frame, all 6 actions and sticky actions (0.1).')
# How our runs learn, beside theirs.
OUR_LEARNING = (
    'Ours learns from 8 samples per frame (one update of 64 per 8 frames): '
    'the same frames, an eighth of the updates, and 16 environments '
    'exploring at once with Ape-X\'s fixed epsilons 0.4^(1 + 7 i / 15). '
    'The pinned minatar 1.0.15 has the Seaquest oxygen fix, which its '
    'README says may change Seaquest\'s returns from the published ones.')


def run_commands(data, module: str, evaluation_lines: List[str],
                 games: Optional[List[str]] = None) -> List[str]:
  """The lines of a MinAtar page (results/<module>.py's) that say how its
  runs were made: its command (with `--games`, where given), one run's
  program command, then `evaluation_lines`."""
  games_flag = f' --games={",".join(games)}' if games else ''
  return [
      '```sh',
      f'.venv/bin/python -m results.{module}{games_flag} '
      f'--seeds={",".join(map(str, data["seeds"]))}'
      ' --runs=<a directory outside the repository>', '```', '',
      'which runs, for each game and seed, e.g.:', '', '```sh',
      data['command'], '```', '', *evaluation_lines]


def evaluation_text(data) -> str:
  """How each run's final policy was evaluated, twice (`evaluations`)."""
  return (f'then `programs/evaluate.py --workdir=<workdir> '
          f'--episodes={data["matched_episodes"]} '
          f'--epsilon={data["matched_epsilon"]:g} --seed=<seed>` and '
          f'`--episodes={data["final_episodes"]} '
          f'--epsilon={data["final_epsilon"]:g} --seed=<seed>` on its final '
          'checkpoint.')


def _made_by(data, made_by: str, evaluation_lines: List[str]) -> List[str]:
  return [made_by, '', *run_commands(data, ANALYSIS, evaluation_lines)]


def render_earlier(data: Dict[str, object]) -> str:
  """The page of the runs made before the matched protocol (minimal action
  sets, the near-greedy evaluator alone), from their JSON."""
  records, reference = data['games'], data['reference']
  episodes, epsilon = data['final_episodes'], data['final_epsilon']
  count = max(len(rows) for rows in records.values())
  lines = [
      '# Ape-X DQN on MinAtar beside Young & Tian\'s DQN', '',
      f'**The earlier protocol, {spread.seeds_phrase(count, "a game")}: '
      'MinAtar\'s minimal action sets and the near-greedy evaluator alone, '
      'so not Young & Tian\'s measure.** The matched protocol (all 6 '
      'actions, the final policy at epsilon 0.1 over 100 episodes, 3 seeds '
      'a game: `.venv/bin/python -m results.minatar --seeds=0,1,2`) '
      'replaces this page once its runs are made. Below, each run\'s final '
      f'policy after {data["frames"]:,} frames, its mean return over '
      f'{episodes} episodes at epsilon {epsilon:g}{spread.how_stated(count)}. '
      'Beside it, Young & Tian\'s DQN at 1M frames, read off their published '
      'curves (below): a different measure, and no test compares the two.',
      '',
      *spread.seed_table(
          'game', 'Ape-X DQN, final policy', _by_seed(records, 'final_mean'),
          extra={'Young & Tian\'s DQN at 1M frames': [
              f'{reference[game][0]:.1f}' for game in records]}), '',
      over_games(records, reference, matched=False), '',
      f'![MinAtar]({ANALYSIS}.png)', '',
      'One preset (`--preset=minatar`) for all five games, '
      f'{data["frames"]:,} frames each (a MinAtar step is one frame; the '
      'budget counts the actors\' steps), on 2 CPU cores (no GPU), one game '
      'after another.' + (f' {data["notes"]}' if data['notes'] else ''), '',
      *runs_table(records, reference, matched=False), '',
      _columns_text(f'{episodes} episodes of `programs/evaluate.py '
                    f'--epsilon={epsilon:g}` (the evaluator\'s exploration)'),
      '',
      READING + ' Ours is a near-greedy evaluator (epsilon 0.001) with the '
      'minimal action set of each game (MinAtar\'s `-v1` environments). '
      + OUR_LEARNING, '',
      *_made_by(data, 'Made by (before the matched protocol, which this '
                'command now runs):', [
          'then `programs/evaluate.py --workdir=<workdir> '
          f'--episodes={episodes} --epsilon={epsilon:g}` '
          'on its final checkpoint.', ''])]
  return '\n'.join(lines)


def nearest_actor(epsilons: List[float], epsilon: float) -> Tuple[int, float]:
  """(index, epsilon) of the actors' environment whose epsilon is nearest
  `epsilon`."""
  index = int(np.argmin([abs(value - epsilon) for value in epsilons]))
  return index, epsilons[index]


def _window_table(data) -> List[str]:
  """Per game, the frames that 100 episodes at epsilon 0.1 span (the
  matched evaluation's mean length over seeds): the length of Young &
  Tian's trailing window, and what the actors' environment nearest epsilon
  0.1 would need for as many of its own episodes."""
  records, frames = data['games'], data['frames']
  epsilons = data['actor_epsilons']
  index, nearest = nearest_actor(epsilons, data['matched_epsilon'])
  own_frames = frames / len(epsilons)
  lines = [
      f'| game | episode at epsilon {data["matched_epsilon"]:g} (frames) | '
      f'{data["matched_episodes"]} such episodes (frames) | their window: '
      f'share of {frames:,} frames | environment {index} (epsilon '
      f'{nearest:.3f}): {data["matched_episodes"]} of its episodes over its '
      f'{own_frames:,.0f} frames |', '|---|---|---|---|---|']
  for game, rows in records.items():
    length = float(np.mean([row['matched_mean_length'] for row in rows]))
    window = length * data['matched_episodes']
    lines.append(f'| {game} | {length:,.0f} | {window:,.0f} | '
                 f'{window / frames:.1%} | {window / own_frames:.0%} |')
  return lines


def render_matched(data: Dict[str, object]) -> str:
  """The page of the matched protocol, from its JSON."""
  records, reference = data['games'], data['reference']
  count = max(len(rows) for rows in records.values())
  matched_episodes, matched_epsilon = (data['matched_episodes'],
                                       data['matched_epsilon'])
  episodes, epsilon = data['final_episodes'], data['final_epsilon']
  epsilons = data['actor_epsilons']
  index, nearest = nearest_actor(epsilons, matched_epsilon)
  lines = [
      '# Ape-X DQN on MinAtar beside Young & Tian\'s DQN', '',
      f'**After {data["frames"]:,} frames, '
      f'{spread.seeds_phrase(count, "a game")}, all 6 actions: the matched '
      'measure.** Each run\'s final policy played at epsilon '
      f'{matched_epsilon:g}, its mean return over {matched_episodes} '
      'episodes, as Young & Tian\'s curves average their last 100 training '
      f'episodes at epsilon 0.1 (why this is the fairest figure these runs '
      f'give, and how it still differs: below){spread.how_stated(count)}. '
      'Beside it, Young & Tian\'s DQN at 1M frames, read off their '
      'published curves, and our seeds\' IQM less their figure, with the '
      '95% interval of that difference and a one-sample t-test of our '
      'seeds against it: ahead or behind only where the interval excludes '
      f'0, p is below 0.05 and a game has {spread.VERDICT_SEEDS} seeds or '
      'more.', '',
      *matched_table(records, reference, OURS, matched_epsilon), '',
      over_games(records, reference, matched=True), '',
      f'**Our evaluator\'s figure**, the same final policies near-greedy: '
      f'mean return over {episodes} episodes at epsilon {epsilon:g} (the '
      'in-run evaluator\'s exploration). Not Young & Tian\'s measure, so '
      'not compared with it.', '',
      *spread.seed_table('game', f'Ape-X DQN, epsilon {epsilon:g}',
                         _by_seed(records, 'final_mean')), '',
      f'![MinAtar]({ANALYSIS}.png)', '',
      '## The matched measure, and why', '',
      'Young & Tian\'s DQN is measured on its own training episodes: the '
      'mean return of the last 100, played at epsilon 0.1 (annealed from 1 '
      'over the first 100K frames) with all 6 of MinAtar\'s actions and '
      'sticky actions (0.1), after 1M frames. Ape-X has no such episodes: '
      f'its {len(epsilons)} environments explore at fixed epsilons from '
      f'{max(epsilons):.2f} to {min(epsilons):.4f}. The matched measure '
      'takes what theirs holds fixed: the runs train and are evaluated with '
      'all 6 actions (`--env=minatar:<game>:full`, MinAtar\'s full action '
      'set), so the network chooses, and epsilon\'s random actions are drawn, '
      'among the same 6 as theirs; the final policy plays at epsilon '
      f'{matched_epsilon:g}, sticky actions 0.1 (MinAtar\'s own), and its '
      f'return is averaged over {matched_episodes} episodes, after the same '
      f'{data["frames"]:,} frames.', '',
      'What still differs, and which way: their window of 100 episodes '
      'reaches back over the frames below (from our episodes\' lengths at '
      'epsilon 0.1), so it averages the policies of those frames, while '
      'ours is the policy at the end; where their curve still rises at 1M '
      '(Asterix, Seaquest, Space Invaders) that favours ours by a little. '
      'Their policy also learns during its episodes, and their figure is a '
      'mean over 30 seeds, ours a few.', '',
      f'Why not the actors\' own episodes: the environment whose epsilon is '
      f'nearest {matched_epsilon:g} is number {index} of {len(epsilons)} '
      f'(epsilon {nearest:.3f}, not {matched_epsilon:g}), and it plays '
      f'1/{len(epsilons)} of the frames, so its last {matched_episodes} '
      'episodes reach back over the share of its frames in the last column: '
      'a window of most of the run (or more than it holds), not of its end. '
      'The actors\' logs also keep one episode per actor every few seconds, '
      'not every episode.', '',
      *_window_table(data), '',
      '## The runs', '',
      'One preset (`--preset=minatar`) for all five games, '
      f'{data["frames"]:,} frames each (a MinAtar step is one frame; the '
      'budget counts the actors\' steps), on 2 CPU cores (no GPU), one run '
      'after another. A run interrupted is resumed from its checkpoints '
      '(its wall-clock: the launches\' sum).'
      + (f' {data["notes"]}' if data['notes'] else ''), '',
      *runs_table(records, reference, matched=True), '',
      _columns_text(
          f'{matched_episodes} episodes of `programs/evaluate.py '
          f'--epsilon={matched_epsilon:g}` and {episodes} of '
          f'`--epsilon={epsilon:g}` (the evaluator\'s exploration), each '
          'drawing from the run\'s seed'), '',
      READING + ' ' + OUR_LEARNING, '',
      *_made_by(data, 'Made by:', [
          evaluation_text(data) + ' The same command again resumes what is '
          'unfinished; `--dry_run` lists what it would do.', ''])]
  return '\n'.join(lines)


def render(data: Dict[str, object]) -> str:
  """The page (results/minatar.md) from its JSON, `data`, alone: the
  matched protocol's, or the earlier runs' (their JSON has no
  `protocol`)."""
  if data.get('protocol') == 'matched':
    return render_matched(data)
  return render_earlier(data)


def report(seeds: List[int]):
  """Writes results/minatar.{png,json,md} from the finished runs."""
  run.write_page(ANALYSIS, render(collect(seeds)))


def main(argv):
  del argv
  page_runs.main(ANALYSIS, chosen_games(), [int(seed) for seed in FLAGS.seeds],
                 evaluations(), report)

page_registry.register(ANALYSIS, render)


if __name__ == '__main__':
  app.run(main)
