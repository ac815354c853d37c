"""Ape-X C51 (the distributional Ape-X DQN) on the five MinAtar games beside
Young & Tian's DQN and Ape-X DQN's runs of the same protocol (a result, not
a test): runs `results.run minatar_c51` (results/minatar.py's protocol: all
6 actions, 1M frames, each final policy at epsilon 0.1 over 100 episodes
and near-greedy over 30), and writes results/minatar_c51.{png,json,md}.

  .venv/bin/python -m results.minatar_c51 --seeds=0,1,2 --runs=<dir outside repo>
  .venv/bin/python -m results.minatar_c51 --seeds=0,1,2 --report_only
  .venv/bin/python -m results.pages minatar_c51    # the page, from its JSON

The same command again carries on where it stopped, and banks each run
(results/page_runs.py), as results/minatar.py does.

The goal: the IQM over games and seeds of each run's matched return over
Young & Tian's DQN at 1M frames at or above `GOAL`, said by its interval;
beside Ape-X DQN, the difference of the two IQMs over the seeds both have,
with its stratified-bootstrap interval.
"""

from typing import Dict, List

from absl import app

from results import minatar
from results import page_registry
from results import page_runs
from results import run
from results import spread

ANALYSIS = 'minatar_c51'
APEX_DQN = minatar.ANALYSIS
OURS = 'Ape-X C51'
GOAL = 1.3


def collect(seeds: List[int]) -> Dict[str, object]:
  """Writes results/minatar_c51.png and .json from the finished runs, with
  Ape-X DQN's banked runs beside them, and returns that JSON's content."""
  data = minatar.collect(seeds, ANALYSIS)
  apex, _ = minatar.records_of(APEX_DQN, [0, 1, 2])
  data['apex_dqn'] = {game: [{'seed': row['seed'],
                              'matched_mean': row['matched_mean']}
                             for row in rows] for game, rows in apex.items()}
  iqm = minatar.iqm_over_games(apex, data['reference'], 'matched_mean')
  data['apex_dqn_iqm'] = None if iqm is None else list(iqm[:3])
  data['beside_apex_dqn'] = minatar.beside(data['games'], apex,
                                           data['reference'])
  data['goal'] = GOAL
  run.write_json(ANALYSIS, data)
  return data


def goal_text(figures, goal: float) -> str:
  """Where the IQM over Young & Tian's stands against `goal`, by its
  interval."""
  if figures is None:
    return f'Against the goal of {goal:g}x: not yet (fewer than 2 seeds).'
  _, low, high, seeds = figures
  said = spread.against_goal(low, high, goal, seeds)
  return f'Against the goal of {goal:g}x Young & Tian\'s DQN: {said}.'


def apex_text(data: Dict[str, object]) -> str:
  """Ape-X C51 beside Ape-X DQN's runs, over the seeds both have."""
  beside, apex = data['beside_apex_dqn'], data['apex_dqn_iqm']
  apex_part = ('' if apex is None else
               f' (IQM {apex[0]:.2f} [{apex[1]:.2f}, {apex[2]:.2f}])')
  if beside is None:
    return (f'Beside Ape-X DQN\'s runs{apex_part}: the difference needs 2 '
            'seeds of every game: not yet.')
  verdict = spread.too_few_seeds(len(beside['seeds'])) or {
      'above': f'{OURS} ahead', 'below': f'{OURS} behind',
      'holds': 'no difference shown'}[
          spread.interval_side(beside['low'], beside['high'], 0.0)]
  return (f'Beside Ape-X DQN\'s runs{apex_part}, {OURS}\'s IQM less Ape-X '
          f'DQN\'s over seeds {", ".join(map(str, beside["seeds"]))} of '
          f'{len(beside["games"])} games: {beside["difference"]:+.2f}, 95% '
          f'interval [{beside["low"]:+.2f}, {beside["high"]:+.2f}]: '
          f'{verdict}.')


def render(data: Dict[str, object]) -> str:
  """The page (results/minatar_c51.md) from its JSON, `data`, alone."""
  records, reference = data['games'], data['reference']
  count = max(len(rows) for rows in records.values())
  matched_epsilon = data['matched_epsilon']
  matched = {game: {row['seed']: row['matched_mean'] for row in rows}
             for game, rows in records.items()}
  apex = {game: sum(row['matched_mean'] for row in rows) / len(rows)
          for game, rows in data['apex_dqn'].items()}
  figures = minatar.iqm_over_games(records, reference, 'matched_mean')
  over = ('**Over the games:** no IQM with an interval yet (fewer than 2 '
          'seeds a game).' if figures is None else
          f'**Over the {len(records)} games and {figures[3]} seeds:** the '
          'IQM of each run\'s matched return over Young & Tian\'s DQN at 1M '
          f'frames is {figures[0]:.2f} '
          f'{spread.interval_text(figures[1], figures[2], "{:.2f}")} (95% '
          'interval, stratified bootstrap).')
  lines = [
      f'# {OURS} on MinAtar beside Young & Tian\'s DQN and Ape-X DQN', '',
      f'{OURS} (docs/apex_c51.md: Ape-X DQN with C51\'s return '
      'distributions) on the five MinAtar games with the protocol of '
      f'results/minatar.md: {data["frames"]:,} frames, all 6 actions, '
      f'each run\'s final policy at epsilon {matched_epsilon:g} over '
      f'{data["matched_episodes"]} episodes (Young & Tian\'s measure)'
      f'{spread.how_stated(count)}. Beside it Young & Tian\'s DQN at 1M '
      'frames (read off their curves, results/minatar.md says how) and the '
      'mean of Ape-X DQN\'s seeds.', '',
      *spread.seed_table(
          'game', f'{OURS}, epsilon {matched_epsilon:g}', matched,
          extra={
              'Young & Tian\'s DQN at 1M frames': [
                  f'{reference[game][0]:.1f}' for game in records],
              'Ape-X DQN (mean of its seeds)': [
                  f'{apex[game]:.1f}' if game in apex else '-'
                  for game in records],
              'ours less theirs, 95% CI, p': [
                  minatar.against_theirs(list(matched[game].values()),
                                         reference[game][0])
                  for game in records]}), '',
      over + ' ' + goal_text(figures, data['goal']), '',
      apex_text(data), '',
      f'![MinAtar]({ANALYSIS}.png)', '',
      '## The runs', '',
      'One preset (`--preset=minatar` of programs/apex_c51.py: Ape-X DQN\'s '
      'with 51 atoms on [0, 25]) for all five games, one run after another '
      'on 2 CPU cores.' + (f' {data["notes"]}' if data['notes'] else ''),
      '',
      *minatar._runs_table(records, reference, matched=True), '',  # pylint: disable=protected-access
      *minatar.run_commands(data, ANALYSIS,
                            [minatar.evaluation_text(data), '']),
  ]
  return '\n'.join(lines)


def report(seeds: List[int]):
  """Writes results/minatar_c51.{png,json,md} from the finished runs."""
  run.write_page(ANALYSIS, render(collect(seeds)))


def main(argv):
  del argv
  games = page_runs.chosen(ANALYSIS, page_runs.FLAGS.games, '--games',
                           'MinAtar game')
  page_runs.main(ANALYSIS, games, [int(seed) for seed in run.FLAGS.seeds],
                 minatar.evaluations(), report)

page_registry.register(ANALYSIS, render)


if __name__ == '__main__':
  app.run(main)
