"""A3C with the program's defaults on MinAtar, beside the MinAtar paper's
own actor-critic (A result, not a test.) Its runs are
`results.a3c_default`'s on MinAtar's Breakout and Space Invaders; this page
is made from that page's data (results/a3c_default.json) and the published
curves, and written to results/a3c_minatar.{json,md}:

  .venv/bin/python -m results.a3c_default --seeds=0,1,2 \\
      --tasks=breakout,space_invaders --runs=<dir outside repo>
  .venv/bin/python -m results.a3c_minatar    # this page, from its data
  .venv/bin/python -m results.pages a3c_minatar

Young & Tian 2019 (MinAtar, arXiv:1903.03176) plot their actor-critic with
eligibility traces (AC(λ), the curve "AC(0.8)"; λ = 0.8 is what
examples/AC_lambda.py of their repository sets) as the moving average of
the returns of 100 *training* episodes, over 30 seeds, with MinAtar's
sticky actions (p = 0.1), to 5M frames. The figures below are read off
that figure, img/learning_curves.gif of github.com/kenjyoung/MinAtar at
commit 4241f24, as results/run.py reads their curves on Breakout: the
curve's height, averaged over the 5 pixel columns at the frame, on the
panel's tick scale (about ±0.1 on Breakout's, ±1 on Space Invaders').
"""

import json
import os
from typing import Any, Dict

from absl import app
import numpy as np

from agents.a3c.config import A3CConfig
from results import a3c_default
from results import page_registry
from results import run
from results import spread

RESULTS = os.path.dirname(os.path.abspath(__file__))
ANALYSIS = 'a3c_minatar'
GAMES = {'breakout': 'Breakout', 'space_invaders': 'Space Invaders'}

SOURCE = ('Young & Tian 2019, *MinAtar: An Atari-Inspired Testbed for '
          'Thorough and Reproducible Reinforcement Learning Experiments* '
          '(arXiv:1903.03176), read off the learning curves of the MinAtar '
          'repository (img/learning_curves.gif, commit 4241f24)')
# AC(0.8)'s curve: (frames, return), read as the module docstring says.
AC_LAMBDA = {
    'breakout': [(500_000, 7.0), (1_000_000, 9.9), (1_500_000, 12.4),
                 (2_000_000, 14.2), (3_000_000, 16.8), (4_000_000, 17.5),
                 (4_950_000, 17.7)],
    'space_invaders': [(500_000, 26.9), (1_000_000, 51.8),
                       (1_500_000, 84.4), (2_000_000, 105.9),
                       (3_000_000, 141.4), (4_000_000, 167.7),
                       (4_950_000, 185.1)],
}


def ac_lambda_at(game: str, frames: float) -> float:
  """AC(0.8)'s curve at `frames`, linear between the readings (ValueError
  outside them)."""
  points = AC_LAMBDA[game]
  xs = [x for x, _ in points]
  if not xs[0] <= frames <= xs[-1]:
    raise ValueError(f'{frames:,.0f} frames is outside the readings of '
                     f'AC(0.8) on {game} ({xs[0]:,} to {xs[-1]:,}).')
  return float(np.interp(frames, xs, [y for _, y in points]))


def collect(default: Dict[str, Any]) -> Dict[str, Any]:
  """This page's data from results/a3c_default.json's (`default`): each
  game's runs and AC(0.8) at their frames."""
  games = {}
  for game in GAMES:
    rows = default['tasks'].get(game)
    if not rows:
      continue
    frames = default['steps'][game]  # MinAtar: one frame a step.
    games[game] = {
        'frames': frames, 'env': default['envs'][game],
        'random': default['random'][game],
        'ac_lambda': ac_lambda_at(game, frames),
        'ac_lambda_final': AC_LAMBDA[game][-1],
        'runs': [{
            'seed': row['seed'], 'final_mean': row['final_mean'],
            'final_std': row['final_std'],
            'training_episodes': row.get('training_episodes'),
            'best_round': row['best_round'], 'last_round': row['last_round'],
            **{name: row[name] for name in a3c_default.VERDICT
               if name in row},
            'actor_steps': row['actor_steps'],
            'wall_clock_minutes': row['wall_clock_minutes']}
                 for row in rows]}
  if not games:
    raise ValueError('results/a3c_default.json has no MinAtar runs yet: run '
                     'results.a3c_default --tasks=breakout,space_invaders '
                     'first.')
  return {'source': SOURCE, 'readings': AC_LAMBDA,
          'final_episodes': default['final_episodes'],
          # A Gaussian's flags act on no MinAtar run.
          'configuration': {
              name: value
              for name, value in default['configuration'].items()
              if name not in A3CConfig.CONTINUOUS_FIELDS},
          'games': games}


def render(data: Dict[str, Any]) -> str:
  """The page (results/a3c_minatar.md) from its JSON, `data`, alone."""
  games = data['games']
  finals = {GAMES[game]: {run_['seed']: run_['final_mean']
                          for run_ in entry['runs']}
            for game, entry in games.items()}
  sampled = {GAMES[game]: {run_['seed']: run_['training_episodes']
                           ['mean_return']
                           for run_ in entry['runs']
                           if run_['training_episodes']}
             for game, entry in games.items()}
  lines = [
      '# A3C on MinAtar beside the MinAtar paper\'s actor-critic', '',
      'A3C (Mnih et al. 2016) with the program\'s defaults '
      '([a3c_default.md](a3c_default.md) gives them and where they depart '
      'from the paper: '
      f'{a3c_default.departures(data["configuration"])}), 4 workers on 2 '
      'CPU cores, on MinAtar (sticky actions, p = 0.1), '
      + ', '.join(f'{GAMES[game]} {entry["frames"]:,} frames a run'
                  for game, entry in games.items())
      + ' (MinAtar repeats no action: a frame is a step). Beside it, AC(λ) '
      f'of {data["source"]}.', '',
      '## The same protocol as the published curves: training episodes', '',
      'The published curves are the moving average of the returns of 100 '
      'training episodes, the agent sampling its softmax policy, over 30 '
      'seeds. The nearest figure of these runs: the mean of the last 100 '
      'episodes the workers logged (each worker logs its latest episode '
      'every 5 s, so these are a sample of the last episodes, not every '
      'one), sampling their policy as they learn.', '',
      *spread.seed_table(
          'game', 'workers\' last 100 episodes', sampled,
          extra={'AC(0.8) at the same frames': [
              f'{games[game]["ac_lambda"]:.1f}' for game in games],
                 'AC(0.8) at 4.95M frames': [
                     f'{games[game]["ac_lambda_final"][1]:.1f}'
                     for game in games]}), '',
      'AC(0.8) at the runs\' frames is linear between the two nearest '
      'readings of its curve, read at '
      + '; '.join(f'{GAMES[game]}: ' + ', '.join(
          f'{frames / 1e6:g}M {value:g}' for frames, value in readings)
                  for game, readings in data['readings'].items()
                  if game in games)
      + ' (the curve\'s height averaged over the 5 pixel columns at the '
      'frame, on the panel\'s tick scale, about ±0.1 on Breakout\'s and ±1 '
      'on Space Invaders\'). Their step sizes are not stated; they ran '
      '5M frames, and these runs a fifth of that or less, so the curves are '
      'set side by side at equal frames, and AC(0.8) at 5M frames only for '
      'scale.', '',
      '## The final policies', '',
      *spread.seed_table(
          'game', f'final policy, {data["final_episodes"]} episodes', finals,
          extra={'random policy (mean ± sd)': [
              f'{games[game]["random"]["mean"]:.1f} ± '
              f'{games[game]["random"]["std"]:.1f}' for game in games]}), '',
      'Each run\'s last checkpoint, acting with its most likely action, '
      f'over {data["final_episodes"]} episodes of `programs/evaluate.py`: '
      'not the published curves\' protocol.', '',
      '## The runs', '',
      '| game | seed | best evaluation round (at actor steps) | last round '
      '| verdict | workers\' last 100 episodes (from actor steps) | '
      'minutes |', '|' + '---|' * 7]
  for game, entry in games.items():
    for run_ in entry['runs']:
      best, last = run_['best_round'], run_['last_round']
      episodes = run_['training_episodes']
      sampled_cell = ('-' if not episodes else
                      f'{episodes["mean_return"]:.1f} '
                      f'({episodes["from_steps"]:,.0f})')
      lines.append(
          f'| {GAMES[game]} | {run_["seed"]} | {best["mean_return"]:.1f} '
          f'(at {best["actor_steps"]:,}) | {last["mean_return"]:.1f} | '
          f'{a3c_default.verdict_cell(run_)} | {sampled_cell} | '
          f'{run_["wall_clock_minutes"]:.0f} |')
  lines += ['', 'Evaluation rounds: 10 episodes of the most likely action '
            'as the parameters train; the verdict is '
            '[a3c_default.md](a3c_default.md)\'s rule.', '',
            '## How it was made', '', '```sh',
            '.venv/bin/python -m results.a3c_default --seeds=0,1,2 '
            '--tasks=breakout,space_invaders --runs=<dir outside the repo>',
            '.venv/bin/python -m results.a3c_minatar', '```', '']
  return '\n'.join(lines)


def main(argv):
  del argv
  with open(os.path.join(RESULTS, f'{a3c_default.ANALYSIS}.json')) as f:
    data = collect(json.load(f))
  run.write_json(ANALYSIS, data)
  with open(os.path.join(RESULTS, f'{ANALYSIS}.md'), 'w') as f:
    f.write(render(data))
  print(f'Wrote results/{ANALYSIS}.json and .md')

page_registry.register(ANALYSIS, render)


if __name__ == '__main__':
  app.run(main)
