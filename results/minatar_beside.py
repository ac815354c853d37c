"""The page of another agent's runs of results/minatar.py's protocol (all 6
actions, 1M frames, each final policy at epsilon 0.1 over 100 episodes and
near-greedy over 30), beside Young & Tian's DQN and Ape-X DQN's banked runs
of the same protocol: what results/minatar_c51.py's and
results/r2d2_minatar.py's pages share. Each page says what its agent is,
how it judges the IQM over Young & Tian's, and what else it needs.

Beside Ape-X DQN: the difference of the two IQMs (each run's matched
return over Young & Tian's DQN at 1M frames) over the games and seeds both
have, with its stratified-bootstrap interval; ahead or behind only where
the interval excludes 0 and each game has 3 seeds or more.
"""

import sys
from typing import (Callable, Dict, List, NamedTuple, Optional, Sequence,
                    Tuple)

from results import minatar
from results import page_runs
from results import run
from results import spread

APEX_DQN = minatar.ANALYSIS
APEX_DQN_SEEDS = [0, 1, 2]

# (IQM, low, high, seeds) of `minatar.iqm_over_games`, or None.
Figures = Optional[Tuple[float, float, float, int]]


class Agent(NamedTuple):
  """What a page says of the agent whose runs it shows."""
  analysis: str  # Its runs' analysis (results/run.py), the page's name.
  name: str  # e.g. 'Ape-X C51'.
  about: str  # After its name in the opening: its docs and what it is.
  preset: str  # Its runs' preset, as the runs' section names it.


def add_apex_dqn(data: Dict[str, object]):
  """Adds to a MinAtar page's data (`minatar.collect`'s) Ape-X DQN's banked
  runs, their IQM over Young & Tian's and the difference to them."""
  apex, _ = minatar.records_of(APEX_DQN, APEX_DQN_SEEDS)
  data['apex_dqn'] = {game: [{'seed': row['seed'],
                              'matched_mean': row['matched_mean']}
                             for row in rows] for game, rows in apex.items()}
  iqm = minatar.iqm_over_games(apex, data['reference'], 'matched_mean')
  data['apex_dqn_iqm'] = None if iqm is None else list(iqm[:3])
  data['beside_apex_dqn'] = minatar.beside(data['games'], apex,
                                           data['reference'])


def apex_dqn_text(data: Dict[str, object], ours: str) -> str:
  """The agent `ours` beside Ape-X DQN's runs, over the seeds both have."""
  beside, apex = data['beside_apex_dqn'], data['apex_dqn_iqm']
  apex_part = ('' if apex is None else
               f' (IQM {apex[0]:.2f} [{apex[1]:.2f}, {apex[2]:.2f}])')
  if beside is None:
    return (f'Beside Ape-X DQN\'s runs{apex_part}: the difference needs 2 '
            'seeds of every game: not yet.')
  verdict = spread.difference_side(ours, beside['low'], beside['high'],
                                   len(beside['seeds']))
  return (f'Beside Ape-X DQN\'s runs{apex_part}, {ours}\'s IQM less Ape-X '
          f'DQN\'s over seeds {", ".join(map(str, beside["seeds"]))} of '
          f'{len(beside["games"])} games: {beside["difference"]:+.2f}, 95% '
          f'interval [{beside["low"]:+.2f}, {beside["high"]:+.2f}]: '
          f'{verdict}.')


def iqm(data: Dict[str, object]) -> Figures:
  """The IQM over games and seeds of each run's matched return over Young
  & Tian's DQN, with its interval (`minatar.iqm_over_games`)."""
  return minatar.iqm_over_games(data['games'], data['reference'],
                                'matched_mean')


def render(data: Dict[str, object], agent: Agent,
           judged: Callable[[Figures], str],
           sections: Sequence[str] = ()) -> str:
  """The page from its JSON, `data`, alone: `judged(iqm(data))` follows
  the IQM over Young & Tian's; `sections` (lines) come before the runs'."""
  records, reference = data['games'], data['reference']
  count = max(len(rows) for rows in records.values())
  matched_epsilon = data['matched_epsilon']
  apex = {game: sum(row['matched_mean'] for row in rows) / len(rows)
          for game, rows in data['apex_dqn'].items()}
  figures = iqm(data)
  over = ('**Over the games:** no IQM with an interval yet (fewer than 2 '
          'seeds a game).' if figures is None else
          f'**Over the {len(records)} games and {figures[3]} seeds:** the '
          'IQM of each run\'s matched return over Young & Tian\'s DQN at 1M '
          f'frames is {figures[0]:.2f} '
          f'{spread.interval_text(figures[1], figures[2], "{:.2f}")} (95% '
          'interval, stratified bootstrap).')
  lines = [
      f'# {agent.name} on MinAtar beside Young & Tian\'s DQN and Ape-X DQN',
      '',
      f'{agent.name} {agent.about} on the five MinAtar games with the '
      f'protocol of results/minatar.md: {data["frames"]:,} frames, all 6 '
      f'actions, each run\'s final policy at epsilon {matched_epsilon:g} '
      f'over {data["matched_episodes"]} episodes (Young & Tian\'s measure)'
      f'{spread.how_stated(count)}. Beside it Young & Tian\'s DQN at 1M '
      'frames (read off their curves, results/minatar.md says how) and the '
      'mean of Ape-X DQN\'s seeds.', '',
      *minatar.matched_table(
          records, reference, agent.name, matched_epsilon, beside={
              'Ape-X DQN (mean of its seeds)': [
                  f'{apex[game]:.1f}' if game in apex else '-'
                  for game in records]}), '',
      over + ' ' + judged(figures), '',
      apex_dqn_text(data, agent.name), '',
      f'![MinAtar]({agent.analysis}.png)', '',
      *sections,
      '## The runs', '',
      f'One preset ({agent.preset}) for all five games, one run after '
      'another on 2 CPU cores.'
      + (f' {data["notes"]}' if data['notes'] else ''), '',
      *minatar.runs_table(records, reference, matched=True), '',
      *minatar.run_commands(data, agent.analysis,
                            [minatar.evaluation_text(data), '']),
  ]
  return '\n'.join(lines)


def main(analysis: str,
         collect_data: Callable[[List[int]], Dict[str, object]],
         render_page: Callable[[Dict[str, object]], str]):
  """The page's command (`page_runs.main`): `--games` (all five by
  default) of `--seeds`, run by MinAtar's protocol, evaluated twice
  (`minatar.evaluations`) and banked; then the page
  (results/<analysis>.{png,json,md}), `render_page` of what
  `collect_data` writes from the finished runs. `--report_only` with no finished run, banked or
  in the runs directory, is refused before anything is read: there is no
  page to write."""
  games = page_runs.chosen(analysis, page_runs.FLAGS.games, '--games',
                           'MinAtar game')
  if run.FLAGS.report_only and not run.finished_seeds(analysis):
    sys.exit(f'error: --report_only: no finished run of {analysis}, banked '
             'or in the runs directory, so no page to write. Run the same '
             'command without --report_only (with --runs=<a directory '
             'outside the repository>) to make the runs.')
  page_runs.main(
      analysis, games, [int(seed) for seed in run.FLAGS.seeds],
      minatar.evaluations(),
      lambda seeds: run.write_page(analysis,
                                   render_page(collect_data(seeds))))
