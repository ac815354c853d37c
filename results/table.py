"""The README's table of results, made from the results' own data files
(`results/*.json`, and the CSV of the long single runs), one row a result:
what was run, the figure, the number of seeds, the page.
tests/test_docs.py checks that the README holds what this would write.

  .venv/bin/python -m results.table          # rewrites the README's table
  .venv/bin/python -m results.table --print  # prints it
"""

import csv
import os
import sys
from typing import Dict, List, Sequence, Tuple

from results import a3c_default
from results import d4pg_dmc500k
from results import dpg_control
from results import long_run
from results import minatar
from results import pages
from results import pong_45min
from results import spread

RESULTS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(RESULTS)
README = os.path.join(ROOT, 'README.md')
BEGIN = '<!-- results: made by python -m results.table -->'
END = '<!-- end of results -->'

# The analyses `results/run.py` makes, in the order the table shows them.
# A page not made yet (no results/<name>.json) has no row.
ANALYSES = ('replay', 'priorities', 'actors', 'removers', 'removers_swingup',
            'dpg', 'a3c_workers', 'a3c_vs_apex', 'a3c_vs_apex_minatar',
            'a3c_acrobot', 'a3c_pendulum')
# The long single runs of `results/long_run.py` (one CSV row an evaluator
# round), with what each ran.
LONG_RUNS = {
    'pong': 'Ape-X DQN on Atari Pong, the `atari_small` preset but for sticky '
            'actions in training, evaluation every 12,000 updates and a '
            'learning-rate cut, on 2 cores',
    'breakout': 'Ape-X DQN on Atari Breakout, `atari_small` preset, on 2 '
                'cores',
}
MINATAR_GAMES = {'breakout': 'Breakout', 'space_invaders': 'Space Invaders',
                 'seaquest': 'Seaquest', 'freeway': 'Freeway',
                 'asterix': 'Asterix'}


def _link(page: str) -> str:
  return f'[{page}](results/{page})'


def _spread(values: Sequence[float]) -> str:
  """The mean of the seeds' values, with their sample standard deviation
  and range where there are several (`spread.mean_and_sd`)."""
  if len(values) == 1:
    return spread.mean_and_sd(values)
  return (f'{spread.mean_and_sd(values)} ({min(values):.1f} to '
          f'{max(values):.1f})')


def _against(first: str, first_values: Sequence[float],
             others: Sequence[Tuple[str, Sequence[float]]]) -> str:
  """Each of `others` against `first` (`spread.compared`), then what the
  intervals support (`spread.verdict`): ahead or behind, else no
  difference shown."""
  figures, claims = [], []
  for setting, values in others:
    difference, low, high, p = spread.compared(values, first_values)
    figures.append(f'{setting} {difference:.1f} '
                   f'{spread.interval_text(low, high)}, p = {p:.2f}')
    claim = spread.verdict(setting, first, low, high, p,
                           seeds=min(len(values), len(first_values)))
    if not claim.startswith('no difference'):
      claims.append(claim)
  return (f'against {first}: {"; ".join(figures)}: '
          f'{"; ".join(claims) or "no difference shown"}')


def _analysis_row(name: str) -> str:
  data = pages.load(name)
  finals = {setting: [run['final_return'] for run in runs]
            for setting, runs in data['settings'].items()}
  figures = '; '.join(f'{setting} {_spread(values)}'
                      for setting, values in finals.items())
  (first, first_values), *others = finals.items()
  seeds = len(data['seeds'])
  return (f'| {data["title"]}; {data["budget"]} | final return: {figures} '
          f'| {seeds} | {_against(first, first_values, others)} '
          f'| {_link(name + ".md")} |')


def _pong_45min_row() -> str:
  """The page's first comparison (the preset against its starting point)
  by each evaluation, then its other comparisons of final policies by each
  evaluation where they claim (`spread.verdict`: ahead or behind), then
  its comparisons at equal updates (settings of different days) that can
  give a verdict (`spread.VERDICT_SEEDS` a side), whatever they say."""
  data = pages.load('pong_45min')
  figures, seeds, supported = [], set(), []
  for index, comparison in enumerate(pong_45min.COMPARISONS):
    label, other = (pong_45min.GROUPS[group][0] for group in comparison[:2])
    for key, evaluation, groups in pong_45min.evaluations(data):
      first, second = [list(groups[group].values())
                       for group in comparison[:2]]
      if index == 0 and key == 'greedy_return':
        figures = [f'{label} {_spread(first)}', f'{other} {_spread(second)}']
        seeds = {len(first), len(second)}
      difference, low, high, p, _, said = pong_45min.compare(first, second,
                                                             comparison)
      if index and not (' ahead of ' in said or ' behind ' in said):
        continue
      named = f', {label} minus {other}' if index else ''
      supported.append(
          f'{evaluation}{named}: {difference:.1f} '
          f'{spread.interval_text(low, high)}, p = {p:.2f}: {said}')
  for comparison in pong_45min.BY_UPDATES:
    label, other = (pong_45min.GROUPS[group][0] for group in comparison[:2])
    mark, first, second = pong_45min.at_equal_updates(data, comparison)
    if min(len(first), len(second)) < spread.VERDICT_SEEDS:
      continue
    difference, low, high, p, _, said = pong_45min.compare(
        list(first.values()), list(second.values()), comparison)
    supported.append(
        f'{pong_45min.at_mark(mark)}, {label} minus {other}: '
        f'{difference:.1f} {spread.interval_text(low, high)}, p = {p:.2f}: '
        f'{said}')
  minutes = data['budget_seconds'] / 60
  return (f'| Ape-X DQN on Atari Pong, `atari_small` preset vs its starting '
          f'point, on 2 cores; {minutes:.0f} minutes of wall-clock | greedy '
          f'return over 10 episodes: {"; ".join(figures)} | '
          f'{"/".join(str(count) for count in sorted(seeds))} | '
          f'`atari_small` minus starting point: {"; ".join(supported)} | '
          f'{_link("pong_45min.md")} |')


def _long_run_row(name: str, what: str) -> str:
  with open(os.path.join(RESULTS, f'{name}.csv')) as f:
    rounds = list(csv.DictReader(f))
  last = rounds[-1]
  best = max(float(row['mean_return']) for row in rounds)
  frames = int(last['actor_frames']) / 1e6
  data = pages.load(name)
  final = data.get('final_policy')
  # A run stopped short (`--status`): its page opens with where and why.
  stopped = ' (stopped short: see its page)' if data.get('status') else ''
  final_text = ''
  if final:
    final_text = (f'; final policy (learner step {final["learner_steps"]:,}),'
                  f' {final["episodes"]} episodes of evaluate.py: '
                  f'{long_run.returns_text(final)}')
  return (f'| {what}; {frames:.2f}M frames, '
          f'{float(last["minutes"]):.0f} minutes{stopped} | evaluator\'s '
          f'10-episode mean: last {float(last["mean_return"]):.1f}, best '
          f'{best:.1f}'
          f'{final_text} | 1 | one seed: no interval, no comparison | '
          f'{_link(name + ".md")} |')


def _minatar_row() -> str:
  data = pages.load('minatar')
  if data.get('protocol') != 'matched':
    return _minatar_earlier_row(data)
  key = 'matched_mean'
  figures = '; '.join(
      f'{title} {_spread([run[key] for run in data["games"][game]])}'
      f' (Young & Tian\'s DQN {data["reference"][game][0]})'
      for game, title in MINATAR_GAMES.items() if game in data['games'])
  return (f'| Ape-X DQN on the five MinAtar games, `minatar` preset, all 6 '
          f'actions; {data["frames"] / 1e6:.0f}M frames each | final '
          f'policy at epsilon {data["matched_epsilon"]:g}, '
          f'{data["matched_episodes"]} episodes (Young & Tian\'s measure): '
          f'{figures} | {_seed_counts(data["games"])} | '
          f'{_minatar_over_games(data, key)} | {_link("minatar.md")} |')


def _seed_counts(games: Dict[str, List[Dict[str, object]]]) -> str:
  """How many seeds the games have: '3', or '1 to 2' where they differ."""
  counts = sorted({len(runs) for runs in games.values()})
  return (str(counts[0]) if len(counts) == 1
          else f'{counts[0]} to {counts[-1]}')


def _minatar_over_games(data, key: str) -> str:
  """The IQM over games and seeds and what its interval supports, as the
  page says it (`minatar.over_games`)."""
  figures = minatar.iqm_over_games(data['games'], data['reference'], key)
  if figures is None:
    return 'a game with one seed: no interval'
  value, low, high, seeds = figures
  return (f'IQM over games and seeds of the return over Young & Tian\'s: '
          f'{value:.2f} {spread.interval_text(low, high, "{:.2f}")}: '
          f'{minatar.against_one(low, high, seeds)}')


def _minatar_earlier_row(data) -> str:
  figures = '; '.join(
      f'{title} {_spread([run["final_mean"] for run in data["games"][game]])}'
      f' (Young & Tian\'s DQN {data["reference"][game][0]})'
      for game, title in MINATAR_GAMES.items())
  over_games = minatar.iqm_over_games(data['games'], data['reference'])
  if over_games is None:
    supported = 'one seed a game: no interval'
  else:
    value, low, high, _ = over_games
    supported = (f'IQM over games and seeds of the return over Young & '
                 f'Tian\'s: {value:.2f} '
                 f'{spread.interval_text(low, high, "{:.2f}")}')
  return (f'| Ape-X DQN on the five MinAtar games, `minatar` preset; '
          f'{data["frames"] / 1e6:.0f}M frames each | final policy, 30 '
          f'episodes: {figures} | {len(data["seeds"])} | {supported}; Young '
          '& Tian\'s DQN (training episodes at epsilon 0.1) is measured '
          f'another way: not compared | {_link("minatar.md")} |')


def _dpg_control_row() -> List[str]:
  """Ape-X DPG on the paper's control tasks (results/dpg_control.py): a
  row once its page has runs, none before."""
  if not os.path.exists(os.path.join(RESULTS, 'dpg_control.json')):
    return []
  data = pages.load('dpg_control')
  values = {task: [row['final_mean'] for row in rows]
            for task, rows in data['tasks'].items()}
  figures = '; '.join(
      f'{data["envs"][task]} {_spread(finals)} (random policy '
      f'{data["random"][task]["mean"]:.1f})' for task, finals in values.items())
  supported = '; '.join(
      f'{task}: {dpg_control.against_random(finals, data["random"][task]["mean"])}'
      for task, finals in values.items())
  return [f'| Ape-X DPG on the paper\'s control tasks, `control_small` '
          f'preset, on 2 cores; {data["steps"]:,} actor steps | final '
          f'policy, {data["final_episodes"]} episodes: {figures} | '
          f'{_seed_counts(data["tasks"])} | against the random policy, the '
          f'IQM\'s difference: {supported} | {_link("dpg_control.md")} |']


def _dmc500k_row(name: str, agent: str) -> List[str]:
  """`agent` on the DeepMind Control table beside State SAC (the page
  results/<name>.md: dpg_dmc500k, d4pg_dmc500k): a row once its page has
  runs; D4PG's also says where it stands against its goal and against
  Ape-X DPG."""
  if not os.path.exists(os.path.join(RESULTS, f'{name}.json')):
    return []
  data = pages.load(name)
  figures = '; '.join(
      f'{task} {_spread([row["final_mean"] for row in rows])} (State SAC '
      f'{data["sac"][task][0]})' for task, rows in data['tasks'].items())
  ratio = data['ratio']
  supported = ('the IQM of each run\'s return over State SAC\'s: '
               f'{ratio["iqm"]:.2f} '
               f'{spread.interval_text(ratio["low"], ratio["high"], "{:.2f}")}'
               if ratio else 'not yet 2 seeds on every task: no interval')
  if 'goal' in data:
    goal = d4pg_dmc500k.goal_text(ratio, data['goal'])
    supported += f'; {goal[0].lower()}{goal[1:]} {d4pg_dmc500k.apex_text(data)}'
  return [f'| {agent} on the DeepMind Control table, `dmc500k` preset, on '
          f'2 cores; {data["frames"]:,} simulator steps (CURL\'s action '
          f'repeats) | final policy, {data["final_episodes"]} episodes: '
          f'{figures} | {_seed_counts(data["tasks"])} | {supported} | '
          f'{_link(f"{name}.md")} |']


def _a3c_default_row() -> List[str]:
  """A3C's one configuration on every task (results/a3c_default.py): a row
  once its page has runs."""
  if not os.path.exists(os.path.join(RESULTS, 'a3c_default.json')):
    return []
  data = pages.load('a3c_default')
  figures = '; '.join(
      f'{data["envs"][task]} {_spread([row["final_mean"] for row in rows])} '
      f'(random policy {data["random"][task]["mean"]:.1f})'
      for task, rows in data['tasks'].items())
  return [f'| A3C, one configuration on every task, 4 workers on 2 cores; '
          f'{", ".join(f"{steps:,}" for steps in sorted(set(data["steps"].values())))} '
          f'actor steps | final policy, {data["final_episodes"]} episodes: '
          f'{figures} | {_seed_counts(data["tasks"])} | '
          f'{a3c_default.summary_text(data["tasks"])} | '
          f'{_link("a3c_default.md")} |']


def table() -> str:
  """The table, as the README shows it."""
  rows: List[str] = [
      '| result | figure | seeds | what the 95% intervals support | page |',
      '|---|---|---|---|---|']
  rows.append(_pong_45min_row())
  rows += [_long_run_row(name, what) for name, what in LONG_RUNS.items()]
  rows.append(_minatar_row())
  rows += _dpg_control_row()
  rows += _dmc500k_row('dpg_dmc500k', 'Ape-X DPG')
  rows += _dmc500k_row('d4pg_dmc500k', 'D4PG')
  rows += _a3c_default_row()
  rows += [_analysis_row(name) for name in ANALYSES
           if os.path.exists(os.path.join(RESULTS, f'{name}.json'))]
  return '\n'.join(rows)


def with_current_table(text: str) -> str:
  """`text` (the README) with the table between BEGIN and END made anew."""
  head, rest = text.split(BEGIN, 1)
  _, tail = rest.split(END, 1)
  return f'{head}{BEGIN}\n{table()}\n{END}{tail}'


def main(argv: List[str]) -> Dict[str, str]:
  if '--print' in argv[1:]:
    print(table())
    return {}
  with open(README) as f:
    text = f.read()
  with open(README, 'w') as f:
    f.write(with_current_table(text))
  return {}


if __name__ == '__main__':
  main(sys.argv)
