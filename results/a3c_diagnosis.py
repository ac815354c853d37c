"""Why A3C unlearns: runs that collapse, with the parameter node's logs of
what moved the shared parameters as it happened (a result, not a test).

  .venv/bin/python -m results.a3c_diagnosis --runs=<dir outside the repo>

reads each run `<dir>/<name>/` of `RUNS` that has ended (its stop.json),
banks its run record and CSV logs under results/banked/a3c_diagnosis/<name>/
(a banked file is never changed), gathers the page's data from the banked
copies alone into results/a3c_diagnosis.json, and writes
results/a3c_diagnosis.{md,png}. Each run is `programs/a3c.py` with
`--log_gradient_parts --log_every=2` (agents/a3c/config.py), so the
learner's log has, every 2 s, the means over the updates applied of: the
policy's entropy, the advantage's mean magnitude, the value and the
n-step return, the policy and value losses, the gradient's global norm
before the clip and each of its three terms' (policy, value with its
weight, entropy with its weight), the norm of the step shared RMSProp took
and its mean effective learning rate, and how many other workers' updates
landed between a worker's pull and its gradient (staleness).

The page shows each run's evaluation rounds and, in windows of actor
steps, the medians of those logged quantities: the collapse, and what
changed before it.
"""

import functools
import json
import os
from typing import Any, Dict, List, Optional, Tuple

from absl import app
from absl import flags
import numpy as np

from launch.runs import curves as curves_lib
from launch.runs import loggers
from launch.runs import run_manifest
from results import bank
from results import page_registry

# --runs, the directory of the runs, is results/bank.py's flag.
FLAGS = flags.FLAGS
RUNS_FLAG = bank.FLAGS['runs']

RESULTS = os.path.dirname(os.path.abspath(__file__))
ANALYSIS = 'a3c_diagnosis'
BANK = os.path.join(RESULTS, 'banked', ANALYSIS)
DATA = os.path.join(RESULTS, f'{ANALYSIS}.json')
PAGE = os.path.join(RESULTS, f'{ANALYSIS}.md')

# Pop-Art's runs: the value's targets normalised (agents/a3c/popart.py),
# RMSProp's epsilon small enough that it normalises the steps, no shared
# torso, gamma 0.99; only the learning rate differs between them. On the
# paper's algorithm (`--preset=paper`: t_max 5, ReLU, the policy layer at
# its default scale), the program's defaults when they ran.
POPART_FLAGS = ['--preset=paper', '--env=gym:CartPole-v1', '--seed=0', '--num_actors=4',
                '--evaluation_period=2000', '--evaluation_episodes=10',
                '--discount=0.99', '--popart', '--noshared_torso',
                '--value_cost=0.5', '--rmsprop_epsilon=1e-5']

# The runs, as launched (with --max_actor_steps=200000 --log_gradient_parts
# --log_every=2 each): what each shows.
RUNS = {
    'acrobot_on_cartpole_s0': (
        'the `acrobot` preset on gym:CartPole-v1, seed 0',
        ['--preset=acrobot', '--env=gym:CartPole-v1', '--seed=0']),
    'cartpole_on_acrobot_s1': (
        'the `cartpole` preset on gym:Acrobot-v1, seed 1',
        ['--preset=cartpole', '--env=gym:Acrobot-v1', '--seed=1']),
    'cartpole_on_acrobot_s0': (
        'the `cartpole` preset on gym:Acrobot-v1, seed 0',
        ['--preset=cartpole', '--env=gym:Acrobot-v1', '--seed=0']),
    'cartpole_on_cartpole_s0': (
        'the `cartpole` preset on gym:CartPole-v1, seed 0 (a run that '
        'learns, for reference)',
        ['--preset=cartpole', '--env=gym:CartPole-v1', '--seed=0']),
    'popart_lr3e4_on_cartpole_s0': (
        'Pop-Art, normalised RMSProp (epsilon 1e-5) and a learning rate of '
        '3e-4 on gym:CartPole-v1, seed 0',
        POPART_FLAGS + ['--learning_rate=3e-4']),
    'popart_centred_lr3e4_on_cartpole_s0': (
        'the same with the policy term\'s advantages centred on their '
        'running mean (--center_advantages)',
        POPART_FLAGS + ['--learning_rate=3e-4', '--center_advantages']),
    'popart_lr1e4_on_cartpole_s0': (
        'the same as the Pop-Art run at 3e-4, at a learning rate of 1e-4',
        POPART_FLAGS + ['--learning_rate=1e-4']),
}
COMMON_FLAGS = ['--max_actor_steps=200000', '--log_gradient_parts',
                '--log_every=2']
# The workers' episode logs (actor, actor_1, ...) too: what the sampled
# policy scored, beside the evaluator's greedy rounds.
WORKER_LOGS = ('actor', 'actor_1', 'actor_2', 'actor_3')
SMALL_FILES = ('run.json', 'stop.json', 'logs/learner/logs.csv',
               'logs/evaluator/logs.csv',
               *(f'logs/{label}/logs.csv' for label in WORKER_LOGS))
# The learner log's columns the page reads, in its order.
COLUMNS = ('entropy', 'advantage', 'advantage_abs', 'value', 'return',
           'popart_scale', 'advantage_offset', 'policy_loss',
           'value_loss', 'gradient_norm', 'policy_gradient_norm',
           'value_gradient_norm', 'entropy_gradient_norm', 'update_norm',
           'step_size', 'staleness', 'learning_rate', 'reward_scale')
WINDOW_STEPS = 10_000  # Actor steps of a window of the learner's log.


def bank_runs(runs: str) -> List[str]:
  """Copies the small records of each ended run of `runs` (among `RUNS`)
  into the bank, files it holds already left as they are; the names."""
  banked = []
  for name in RUNS:
    run = os.path.join(runs, name)
    if not os.path.isfile(os.path.join(run, 'stop.json')):
      continue
    bank.copy_missing(run, os.path.join(BANK, name), list(SMALL_FILES))
    banked.append(name)
  return banked


def evaluation_rounds(workdir: str) -> List[Dict[str, float]]:
  """The evaluator's complete rounds: mean return and the actor steps at
  the round's first episode's end."""
  manifest = run_manifest.read_manifest(workdir)
  per_round = int(manifest['flags']['evaluation_episodes'])
  episodes = curves_lib.read_log(workdir, 'evaluator')
  count = len(episodes.get('episode_return', ()))
  started = episodes.get(loggers.ROUND_STARTED, np.full(count, np.nan))
  return [{'actor_steps': int(episodes['actor_steps'][indices[0]]),
           'mean_return': float(np.mean(episodes['episode_return'][indices]))}
          for indices in loggers.split_rounds(started, per_round)]


def _worker_episodes(workdir: str) -> List[Tuple[float, float, float]]:
  """(wall-clock, actor steps, return) of each episode the workers logged
  with a finite return, worker after worker (the wall-clock NaN where a log
  has none); empty where the run's worker logs are not banked."""
  episodes = []
  for label in WORKER_LOGS:
    log = curves_lib.read_log(workdir, label)
    steps = log.get('actor_steps', ())
    times = log.get('walltime', np.full(len(steps), np.nan))
    episodes += [(float(time), float(step), float(value))
                 for time, step, value in zip(times, steps,
                                              log.get('episode_return', ()))
                 if np.isfinite(value)]
  return episodes


def worker_returns(workdir: str) -> List[Dict[str, float]]:
  """The workers' own episodes (their sampled policies), in windows of
  `WINDOW_STEPS` actor steps: the mean return of the episodes that ended
  in each, and how many; empty where the run's worker logs are not
  banked."""
  by_window: Dict[int, List[float]] = {}
  for _, step, value in _worker_episodes(workdir):
    start = int(step // WINDOW_STEPS) * WINDOW_STEPS
    by_window.setdefault(start, []).append(value)
  return [{'from_steps': start, 'mean_return': float(np.mean(values)),
           'episodes': len(values)}
          for start, values in sorted(by_window.items())]


def last_worker_episodes(workdir: str,
                         count: int = 100) -> Optional[Dict[str, float]]:
  """The workers' last `count` logged episodes (their sampled policies;
  each worker logs its latest episode's return at each of its log rows),
  by wall-clock over every worker: their mean return, how many, and the
  actor steps at the first of them; None where the run's worker logs are
  not banked."""
  last = sorted(episode for episode in _worker_episodes(workdir)
                if np.isfinite(episode[0]))[-count:]
  if not last:
    return None
  return {'mean_return': float(np.mean([value for _, _, value in last])),
          'episodes': len(last),
          'from_steps': min(step for _, step, _ in last)}


def windows(workdir: str) -> List[Dict[str, Optional[float]]]:
  """The learner log's rows in windows of `WINDOW_STEPS` actor steps: each
  column's median over the window's rows (None where it has none)."""
  log = curves_lib.read_log(workdir, 'learner')
  steps = log['actor_steps']
  out = []
  for start in range(0, int(np.nanmax(steps)) + 1, WINDOW_STEPS):
    rows = (steps >= start) & (steps < start + WINDOW_STEPS)
    if not rows.any():
      continue
    row = {'from_steps': start, 'rows': int(rows.sum())}
    for column in COLUMNS:
      values = log.get(column, np.array([]))
      values = values[rows] if len(values) else values
      values = values[np.isfinite(values)] if len(values) else values
      row[column] = float(np.median(values)) if len(values) else None
    out.append(row)
  return out


@functools.lru_cache(maxsize=None)
def flat_run_gap(rounds: int, quantile: float = 0.95,
                 draws: int = 100_000) -> float:
  """The `quantile` of (best round - last round) / the standard error of
  that difference, in a run whose `rounds` rounds all play equally good
  policies with normal round means of one spread: how far below its best
  round a run that neither gains nor loses leaves its last round, since the
  best is the highest of `rounds` draws. Simulated with a fixed seed, once
  for each count of rounds."""
  if rounds < 2:
    return 0.0
  means = np.random.default_rng(0).standard_normal((draws, rounds))
  gaps = (means.max(axis=1) - means[:, -1]) / np.sqrt(2.0)
  return float(np.quantile(gaps, quantile))


def keeps(rounds: List[Dict[str, float]], floor: float, ceiling: float,
          final_mean: Optional[float] = None) -> Dict[str, Any]:
  """Issue 56's rule, measured from the task's floor: the final round is
  kept if it is at most 10% of (best - floor) below the best round, or
  10% of the task's range where the best is within 10% of the range of
  the floor; `tolerance` is that margin. `final_policy_kept`: whether
  `final_mean` (the final policy's, over more episodes) is within it.

  Where the rounds carry their episodes' spread (`std_return`, `episodes`),
  `gap_errors` is (best - last) over the standard error of that difference
  and `flat_gap` the 95% quantile of it in a flat run (`flat_run_gap`): a
  lost run whose gap is below it lost no more than its rounds' noise."""
  best = max(rounds, key=lambda row: row['mean_return'])
  final = rounds[-1]
  above = best['mean_return'] - floor
  span = ceiling - floor
  tolerance = 0.1 * above if above >= 0.1 * span else 0.1 * span
  verdict = {'best': best, 'final': final,
             'kept': final['mean_return'] >= best['mean_return'] - tolerance,
             'learned': above >= 0.1 * span, 'tolerance': tolerance}
  if final_mean is not None:
    verdict['final_policy_kept'] = (
        final_mean >= best['mean_return'] - tolerance)
  if all('std_return' in row for row in (best, final)):
    error = np.sqrt(sum(row['std_return']**2 / row['episodes']
                        for row in (best, final)))
    gap = best['mean_return'] - final['mean_return']
    verdict['gap_errors'] = (float(gap / error) if error > 0 else
                             0.0 if gap == 0 else float('inf'))
    verdict['flat_gap'] = flat_run_gap(len(rounds))
  return verdict


# Each task's return range (floor, ceiling): CartPole-v1 0 to 500,
# Acrobot-v1 -500 to 0 (its episodes end at 500 steps).
RANGES = {'gym:CartPole-v1': (0.0, 500.0), 'gym:Acrobot-v1': (-500.0, 0.0)}


def collect() -> Dict[str, Any]:
  data = {}
  for name in RUNS:
    workdir = os.path.join(BANK, name)
    if not os.path.isfile(os.path.join(workdir, 'stop.json')):
      continue
    env = run_manifest.read_manifest(workdir)['env']
    rounds = evaluation_rounds(workdir)
    data[name] = {'env': env, 'rounds': rounds, 'windows': windows(workdir),
                  'worker_returns': worker_returns(workdir),
                  **keeps(rounds, *RANGES[env])}
  return data


def _cell(value: Optional[float], form: str) -> str:
  return '-' if value is None else format(value, form)


# The windows' columns as the page shows them: title, format.
SHOWN = (('entropy', 'entropy', '.2f'), ('advantage', 'mean A', '.3g'),
         ('advantage_abs', '|A|', '.3g'),
         ('value', 'V', '.3g'), ('return', 'R', '.3g'),
         ('popart_scale', 'Pop-Art sigma', '.3g'),
         ('advantage_offset', 'offset', '.3g'),
         ('gradient_norm', 'gradient norm', '.3g'),
         ('policy_gradient_norm', 'policy term', '.3g'),
         ('value_gradient_norm', 'value term', '.3g'),
         ('entropy_gradient_norm', 'entropy term', '.3g'),
         ('update_norm', 'step norm', '.3g'),
         ('step_size', 'lr / sqrt(g + eps)', '.3g'),
         ('staleness', 'staleness', '.1f'),
         ('reward_scale', 'reward scale', '.3g'))


def _round_near(rounds, steps: int) -> str:
  """The evaluation round nearest to `steps` actor steps."""
  near = min(rounds, key=lambda row: abs(row['actor_steps'] - steps))
  return f'{near["mean_return"]:.1f}'


def render(data: Dict[str, Any]) -> str:
  lines = ['# Why A3C unlearns: the logged quantities', '',
           'Runs of `programs/a3c.py` that learn and then lose it, logged by '
           'the parameter node every 2 s (`--log_gradient_parts`, '
           'results/a3c_diagnosis.py says what each column is). Every run: '
           f'`{" ".join(COMMON_FLAGS)}` and its own flags below, 4 workers '
           'on 2 CPU cores, one run at a time.', '']
  if not data:
    return '\n'.join(lines + ['No run yet.', ''])
  lines += [f'![Evaluation rounds and logged quantities]({ANALYSIS}.png)', '']
  for name, run in data.items():
    what, run_flags = RUNS[name]
    best, final = run['best'], run['final']
    lines += [f'## {what}', '', f'`{" ".join(run_flags)}`', '',
              f'Best evaluation round {best["mean_return"]:.1f} at '
              f'{best["actor_steps"]:,} actor steps; the last '
              f'{final["mean_return"]:.1f} at {final["actor_steps"]:,}: '
              + ('never left the floor (its best within 10% of the return '
                 'range of it)' if not run.get('learned', True) else
                 'kept' if run['kept'] else 'not kept') + ' (kept: within '
              '10% of the best, measured from the floor).', '',
              '| actor steps | evaluation | workers\' episodes | ' + ' | '.join(
                  title for _, title, _ in SHOWN) + ' |',
              '|---|---|---|' + '---|' * len(SHOWN)]
    sampled = {row['from_steps']: row['mean_return']
               for row in run.get('worker_returns', [])}
    for window in run['windows']:
      lines.append(
          f'| {window["from_steps"] // 1000}K | '
          f'{_round_near(run["rounds"], window["from_steps"] + WINDOW_STEPS // 2)} | '
          f'{_cell(sampled.get(window["from_steps"]), ".1f")} | '
          + ' | '.join(_cell(window[column], form)
                       for column, _, form in SHOWN) + ' |')
    lines.append('')
  lines += ['Each row: the medians over the learner log\'s rows (one every '
            '2 s, each the mean over the updates applied in it) of the '
            f'window of {WINDOW_STEPS:,} actor steps from that step; the '
            'evaluation round (the greedy policy) nearest the window\'s '
            'middle; the mean return of the workers\' own episodes (their '
            'sampled policies) that ended in the window, where their logs '
            'are banked. Mean A: the mean over updates of each rollout\'s '
            'mean advantage, so a short rollout that ends an episode counts '
            'as much as a whole one. The three terms: the global norm of the gradient of each term of the '
            'loss alone (policy, value with its weight, entropy with its '
            'weight), before the clip at 40.', '']
  return '\n'.join(lines)


def plot(data: Dict[str, Any], out: str):
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  figure, axes = plt.subplots(len(data), 4, figsize=(18, 3.2 * len(data)),
                              squeeze=False)
  for row, (name, run) in zip(axes, data.items()):
    x = [w['from_steps'] / 1e3 for w in run['windows']]
    row[0].plot([r['actor_steps'] / 1e3 for r in run['rounds']],
                [r['mean_return'] for r in run['rounds']], '.-')
    row[0].set_title(RUNS[name][0], fontsize=8)
    row[0].set_ylabel('evaluation return')
    row[1].plot(x, [w['entropy'] for w in run['windows']], label='entropy')
    row[1].plot(x, [w['advantage_abs'] for w in run['windows']], label='|A|')
    row[1].set_yscale('log')
    row[1].legend(fontsize=7)
    for column in ('policy_gradient_norm', 'value_gradient_norm',
                   'entropy_gradient_norm'):
      row[2].plot(x, [w[column] for w in run['windows']],
                  label=column.replace('_gradient_norm', ''))
    row[2].set_yscale('log')
    row[2].set_title('gradient norm of each term', fontsize=8)
    row[2].legend(fontsize=7)
    row[3].plot(x, [w['update_norm'] for w in run['windows']],
                label='step norm')
    row[3].plot(x, [w['step_size'] for w in run['windows']],
                label='lr / sqrt(g + eps)')
    row[3].set_yscale('log')
    row[3].legend(fontsize=7)
    for axis in row:
      axis.set_xlabel('actor steps (thousands)')
      axis.grid(alpha=0.3)
  figure.tight_layout()
  figure.savefig(out, dpi=90)
  plt.close(figure)


def main(argv):
  del argv
  if FLAGS.runs:
    print('banked:', ', '.join(bank_runs(FLAGS.runs)) or 'nothing new')
  data = collect()
  if data:
    plot(data, os.path.join(RESULTS, f'{ANALYSIS}.png'))
  with open(DATA, 'w') as f:
    json.dump(data, f, indent=1)
    f.write('\n')
  with open(PAGE, 'w') as f:
    f.write(render(data))
  print(f'wrote {DATA} and {PAGE}')

page_registry.register(ANALYSIS, render)


if __name__ == '__main__':
  app.run(main)
