"""Ape-X DPG on the paper's own control domains (Horgan et al. 2018, §4.2
and App. D: manipulator:bring_ball; humanoid:stand, walk and run), with the
`control_small` preset at a budget that fits 2 CPU cores (a result, not a
test): runs `results.run dpg_control`, evaluates each run's final policy,
plays a random policy on each task as the floor (once: the JSON keeps its
returns for later reports), and writes results/dpg_control.{png,json,md}.

  .venv/bin/python -m results.dpg_control --tasks=humanoid_stand \\
      --seeds=0,1,2 --runs=<dir outside repo>
  .venv/bin/python -m results.dpg_control --tasks=bring_ball --seeds=0 \\
      --runs=<dir>
  .venv/bin/python -m results.dpg_control --tasks=humanoid_stand \\
      --seeds=0,1,2 --runs=<dir> --dry_run    # what it would run, and no more
  .venv/bin/python -m results.dpg_control --seeds=0,1,2 --report_only
  .venv/bin/python -m results.pages dpg_control    # the page, from its JSON

The same command again carries on where it stopped, as results.minatar's
does: a finished run is not run again, an unfinished one resumes from its
checkpoints, an evaluation already made is not made again, and each run,
once finished and evaluated, is banked (results/bank.py) with its small
files under results/banked/, where the page is made from even after the
runs directory is gone. The page has every task with finished runs, each
with every seed it has (not only `--seeds`: `--tasks=bring_ball --seeds=0`
keeps humanoid:stand's three seeds).

Why these figures: each run's final policy (noiseless, App. D) over
`FINAL_EPISODES` episodes that draw from the run's seed; over seeds the
mean ± sample standard deviation and the IQM's 95% interval
(results/spread.py); against a random policy's mean on the same task, the
only reference measured here under the same protocol. No published figure
is set beside them: the paper's Fig. 3 plots these tasks against hours of
8 to 64 actors, and we know of no published Ape-X DPG or DDPG figure at
this budget; one at another budget would mislead.
"""

import json
import math
import os
from typing import Callable, Dict, List, Optional, Tuple

from absl import app
from absl import flags
import numpy as np

from agents.envs import environments
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
# set-up, e.g. what the runs' machines were like; each run's own machine is
# given in its record (`MACHINE_KEYS`).
FLAGS = flags.FLAGS

ANALYSIS = 'dpg_control'
TASKS = list(run.ANALYSES[ANALYSIS]['settings'])
# The environment of each task's runs (results/run.py's settings).
ENVS = page_runs.environments(ANALYSIS)
# Episodes of each run's final policy (programs/evaluate.py) and of the
# random policy on each task.
FINAL_EPISODES = 30
RANDOM_EPISODES = 30
RANDOM_SEED = 0
FINAL_FILE = 'final_evaluation.json'
# What the page calls the two in its verdicts.
OURS = 'Ape-X DPG'
RANDOM = 'the random policy'


def chosen_tasks() -> List[str]:
  """`--tasks`, in the page's order; all by default."""
  return page_runs.chosen(ANALYSIS, page_runs.FLAGS.tasks, '--tasks', 'task')


# Each run's final policy, noiseless (programs/evaluate.py's default).
FINAL = page_runs.Evaluation(FINAL_EPISODES, None, FINAL_FILE)


def evaluate(workdir: str, seed: int) -> Dict[str, object]:
  """The final policy's evaluation (made now unless already made)."""
  return page_runs.evaluate(workdir, seed, FINAL)


def random_returns(env_name: str, episodes: int, seed: int) -> List[float]:
  """The returns of `episodes` episodes of `env_name` under actions drawn
  uniformly: within its action bounds, or among its discrete actions. One
  environment seeded `seed` (its episodes start from states of their own)
  and actions drawn from a generator seeded `seed`."""
  spec = environments.resolve_any(env_name)
  bounds = spec.spec.actions
  discrete = hasattr(bounds, 'num_values')
  rng = np.random.default_rng(seed)
  environment = spec.make_environment(seed=seed, evaluation=True)
  returns = []
  try:
    for _ in range(episodes):
      timestep = environment.reset()
      total = 0.0
      while not timestep.last():
        if discrete:
          action = np.asarray(rng.integers(bounds.num_values),
                              dtype=bounds.dtype)
        else:
          action = rng.uniform(bounds.minimum, bounds.maximum).astype(
              bounds.dtype)
        timestep = environment.step(action)
        total += float(timestep.reward)
      returns.append(total)
  finally:
    environment.close()
  return returns


def run_record(workdir: str, seed: int) -> Dict[str, object]:
  """What the page shows of one finished run."""
  curves = curves_lib.run_curves(workdir, 1)
  rounds = long_run.evaluation_rounds(workdir, curves['clock'])
  final = evaluate(workdir, seed)
  counts = run.final_counts(workdir)
  with open(os.path.join(workdir, 'finished.json')) as f:
    finished = json.load(f)
  best = max(rounds, key=lambda row: row['mean_return']) if rounds else None
  return {
      'seed': seed,
      'env': run_manifest.read_manifest(workdir)['env'],
      'final_mean': final['mean'], 'final_std': final['std'],
      'final_episodes': final['episodes'],
      'final_learner_steps': final['learner_steps'],
      'last_round': rounds[-1] if rounds else None,
      'best_round': best,
      'rounds': rounds,
      'actor_steps': counts.get('actor_steps', 0),
      'learner_updates': counts.get('learner_steps', 0),
      'wall_clock_minutes': finished['seconds'] / 60.0,
      'launches': finished.get('launches', 1),
      **long_run.speeds(curves),
  }


def plot_tasks(records: Dict[str, List[Dict[str, object]]],
               floors: Dict[str, Dict[str, float]], envs: Dict[str, str],
               out: str):
  """One panel per task (titled with its environment, `envs`): each seed's
  evaluation rounds against actor steps, its final policy's mean, and the
  random policy's mean."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  figure, axes = plt.subplots(1, len(records), figsize=(4.5 * len(records),
                                                        3.6))
  axes = np.atleast_1d(axes)
  for axis, (task, rows) in zip(axes, records.items()):
    for index, row in enumerate(rows):
      colour = f'C{index}'
      axis.plot([r['actor_steps'] / 1e3 for r in row['rounds']],
                [r['mean_return'] for r in row['rounds']], '.-',
                color=colour, alpha=0.6,
                label=f'seed {row["seed"]}: evaluator rounds')
      axis.errorbar([row['actor_steps'] / 1e3], [row['final_mean']],
                    yerr=[row['final_std']], fmt='^', color=colour,
                    label='final policy' if index == 0 else None)
    axis.axhline(floors[task]['mean'], color='k', linestyle=':',
                 label='random policy')
    axis.set_title(envs[task])
    axis.set_xlabel('actor steps (thousands)')
    axis.grid(alpha=0.3)
  axes[0].set_ylabel('return')
  axes[0].legend(fontsize=7, loc='upper left')
  figure.tight_layout()
  figure.savefig(out, dpi=100)
  plt.close(figure)


def kept_floors(analysis: str = ANALYSIS) -> Dict[str, Dict[str, object]]:
  """The random policy's figures of each task that the page's JSON
  (`analysis`'s) holds from an earlier report (`random_floor`'s), if
  any."""
  path = os.path.join(RESULTS, f'{analysis}.json')
  if not os.path.exists(path):
    return {}
  with open(path) as f:
    return json.load(f).get('random', {})


# A run's machine, which none of the run's own files records: given by hand
# in the run's record in the page's JSON (results/<analysis>.json, "tasks"),
# and kept there by every later report of the same run (`kept_machines`).
# "machine": alone, or what else ran on it and for how many of the run's
# minutes; "bare_learner_updates_per_second": the machine's speed that day
# where it was measured (benchmarks/bare_loops.py learner
# --preset=atari_small, Pong's in-memory update, as results/pong_45min.py's
# runs record it); "bare_learner_note": what to read that figure against, or
# why there is none. The runs table has a column for these only when some
# run has them.
MACHINE_KEYS = ('machine', 'bare_learner_updates_per_second',
                'bare_learner_note')
BARE_LEARNER_COLUMN = 'Pong\'s in-memory updates/s that day'
# What tells a run from another of the same task and seed (one made again
# after its banked copy was removed), whose machine is not the old one's.
SAME_RUN_KEYS = ('env', 'learner_updates', 'wall_clock_minutes')


def kept_machines(analysis: str = ANALYSIS, results: Optional[str] = None
                  ) -> Dict[str, Dict[int, Dict[str, object]]]:
  """Each run's record (task -> seed -> record) in the page's JSON
  (`analysis`'s, in `results`: results/ by default) from an earlier report,
  where it gives the run's machine (`MACHINE_KEYS`)."""
  path = os.path.join(results or RESULTS, f'{analysis}.json')
  if not os.path.exists(path):
    return {}
  with open(path) as f:
    records = json.load(f).get('tasks', {})
  kept = {}
  for task, rows in records.items():
    for row in rows:
      if any(key in row for key in MACHINE_KEYS):
        kept.setdefault(task, {})[row['seed']] = row
  return kept


def with_machines(records: Dict[str, List[Dict[str, object]]],
                  kept: Dict[str, Dict[int, Dict[str, object]]]):
  """Adds to each run's record in `records` its machine, as `kept`
  (`kept_machines`) has it for the same run (`SAME_RUN_KEYS`): a run made
  again has none until it is given."""
  for task, rows in records.items():
    for row in rows:
      old = kept.get(task, {}).get(row['seed'])
      if old and all(old.get(key) == row.get(key) for key in SAME_RUN_KEYS):
        row.update({key: old[key] for key in MACHINE_KEYS if key in old})


def _bare_learner_cell(row: Dict[str, object]) -> str:
  value = row.get('bare_learner_updates_per_second')
  note = row.get('bare_learner_note')
  if value is None:
    return note or '-'
  return f'{value:.1f}' + (f' ({note})' if note else '')


def machine_columns(records: Dict[str, List[Dict[str, object]]]
                    ) -> List[Tuple[str, Callable[[Dict[str, object]], str]]]:
  """The runs table's columns of the runs' machines (`MACHINE_KEYS`):
  (title, the cell of a run's record), each only when some run has it, so
  none for a page whose JSON gives no machine."""
  rows = [row for rows in records.values() for row in rows]
  columns = []
  if any('machine' in row for row in rows):
    columns.append(('the machine', lambda row: row.get('machine', '-')))
  if any(key in row for row in rows for key in MACHINE_KEYS[1:]):
    columns.append((BARE_LEARNER_COLUMN, _bare_learner_cell))
  return columns


def machine_text(records: Dict[str, List[Dict[str, object]]]) -> str:
  """What the runs table's machine columns mean, as the text before it
  says it ('' without them)."""
  titles = [title for title, _ in machine_columns(records)]
  if BARE_LEARNER_COLUMN not in titles:
    return ''
  return ('Pong\'s in-memory updates/s: `benchmarks/bare_loops.py learner '
          '--preset=atari_small`, a gauge of the machine\'s speed, measured '
          'on the day the run ran (-: none recorded).')


def with_machine_columns(titles: List[str], cells: List[List[str]],
                         records: Dict[str, List[Dict[str, object]]]
                         ) -> List[str]:
  """A runs table's lines: its columns' `titles` and each run's `cells`
  (in the order of `records`' runs), then the machine columns
  (`machine_columns`)."""
  columns = machine_columns(records)
  rows = [row for rows in records.values() for row in rows]
  titles = titles + [title for title, _ in columns]
  lines = ['| ' + ' | '.join(titles) + ' |', '|' + '---|' * len(titles)]
  for row, row_cells in zip(rows, cells):
    lines.append('| ' + ' | '.join(
        row_cells + [cell(row) for _, cell in columns]) + ' |')
  return lines


def runs_text(data: Dict[str, object]) -> str:
  """What the page's notes and the runs table's machine columns
  (`machine_text`) add to the text before the runs table, each after a
  space ('' when neither has anything)."""
  return ''.join(f' {text}' for text in
                 (data['notes'], machine_text(data['tasks'])) if text)


def random_floor(task: str, kept: Dict[str, object],
                 envs: Optional[Dict[str, str]] = None) -> Dict[str, object]:
  """The random policy's returns on `task` (its environment in `envs`, this
  page's by default; `RANDOM_EPISODES`, seeded `RANDOM_SEED`) and their
  mean and sample sd: `kept` (an earlier report's, `kept_floors`) when they
  were played so, else played now (about 40 s a dm_control task)."""
  env = (envs or ENVS)[task]
  if (kept.get('env') == env and kept.get('seed') == RANDOM_SEED
      and len(kept.get('returns', ())) == RANDOM_EPISODES):
    returns = kept['returns']
  else:
    returns = random_returns(env, RANDOM_EPISODES, seed=RANDOM_SEED)
  return {'env': env, 'seed': RANDOM_SEED,
          'returns': [float(value) for value in returns],
          'mean': float(np.mean(returns)),
          'std': float(np.std(returns, ddof=1)), 'episodes': len(returns)}


def collect(seeds: List[int]) -> Dict[str, object]:
  """Writes results/dpg_control.png and .json from the finished runs,
  banked or in the runs directory (their final policies evaluated first,
  where not yet), and returns that JSON's content."""
  records, floors = {}, {}
  kept = kept_floors()
  machines = kept_machines()
  for task in TASKS:
    rows = []
    for seed in seeds:
      workdir = run.finished_directory(ANALYSIS, task, seed)
      if workdir:
        rows.append(run_record(workdir, seed))
    if rows:
      records[task] = rows
      floors[task] = random_floor(task, kept.get(task, {}))
  with_machines(records, machines)
  if not records:
    raise ValueError('No finished runs of Ape-X DPG on the control tasks '
                     'yet.')
  plot_tasks(records, floors, ENVS, os.path.join(RESULTS, f'{ANALYSIS}.png'))
  data = {
      'steps': int(run.ANALYSES[ANALYSIS]['budget'][1] * FLAGS.scale),
      'seeds': seeds, 'final_episodes': FINAL_EPISODES,
      'envs': {task: ENVS[task] for task in records},
      'command': ' '.join(run.command(ANALYSIS, next(iter(records)),
                                      seeds[0], '<workdir>')),
      'notes': FLAGS.notes, 'random': floors, 'tasks': records,
      'references': {task: REFERENCES[task] for task in records
                     if task in REFERENCES}}
  run.write_json(ANALYSIS, data)
  return data


def against_random(values: List[float], floor: float) -> str:
  """The seeds' IQM less the random policy's mean, its interval and the
  one-sample t-test, and what they support; with one seed, nothing."""
  if len(values) < 2:
    return 'one seed: no interval, not compared'
  iqm, low, high = spread.iqm_interval(values)
  p = spread.one_sample_p(values, floor)
  verdict = spread.verdict(OURS, RANDOM, low - floor, high - floor, p,
                           test='the one-sample t-test\'s p',
                           seeds=len(values))
  return (f'{iqm - floor:.1f} {spread.interval_text(low - floor, high - floor)}'
          f', p = {p:.2f}: {verdict}')


def _how_intervals(count: int) -> str:
  """How the intervals of tasks of at most `count` seeds are made."""
  if count < 2:
    return 'With one seed a task, there is no interval.'
  return (f'The intervals: a stratified bootstrap (`rliable`, '
          f'{spread.BOOTSTRAP_REPS:,} resamples, percentile 95% intervals); '
          f'{count} seeds have only {math.comb(2 * count - 1, count)} '
          'distinct resamples, so the intervals are rough and tend to be too '
          'narrow, which is why the t-test must agree.')


# Other agents on humanoid:stand, for scale (not Ape-X DPG): each seed's
# evaluation return at the step of the CSVs of the TD-MPC2 repository
# (github.com/nicklashansen/tdmpc2 at add30b5, results/sac/ and
# results/tdmpc2/humanoid-stand.csv; seeds 1, 2, 3), whose steps count
# agent steps at TD-MPC2's action repeat of 2 on DMControl.
REFERENCES = {
    'humanoid_stand': {
        'source': '3 seeds each of results/sac/humanoid-stand.csv and '
                  'results/tdmpc2/humanoid-stand.csv in the TD-MPC2 '
                  'repository, github.com/nicklashansen/tdmpc2 at add30b5',
        'agents': {'SAC': {'500000': [4.6, 6.0, 5.0],
                           '1000000': [6.3, 6.5, 6.4]},
                   'TD-MPC2': {'500000': [480.7, 428.8, 357.2],
                               '1000000': [692.2, 670.7, 628.3]}}}}


def _references_text(references) -> List[str]:
  """Each task's other agents at their steps: the mean over seeds."""
  lines = []
  for task, reference in references.items():
    figures = '; '.join(
        f'{agent} ' + ' and '.join(
            f'{np.mean(values):.1f} at {int(step):,} steps'
            for step, values in by_step.items())
        for agent, by_step in reference['agents'].items())
    lines += [f'On {task}, other agents at these budgets, for scale: '
              f'{figures}. These are the means of {reference["source"]}; '
              'its steps count agent steps at an action repeat of 2. SAC, '
              'one update per step, stays near the floor as Ape-X DPG does '
              'here; TD-MPC2, a model-based agent, leaves it.', '']
  return lines


def _runs_table(records) -> List[str]:
  """Every run: its final policy, rounds, steps, updates, minutes and, where
  the JSON gives it, its machine."""
  titles = ['task', 'seed', 'final policy (mean ± sd of its episodes)',
            'best evaluator round', 'last round', 'actor steps',
            'learner updates', 'updates/s', 'minutes', 'launches']
  cells = []
  for task, rows in records.items():
    for row in rows:
      best, last = row['best_round'], row['last_round']
      cells.append([
          task, str(row['seed']),
          f'{row["final_mean"]:.1f} ± {row["final_std"]:.1f}',
          f'{best["mean_return"]:.1f} (at {best["actor_steps"]:,} steps)',
          f'{last["mean_return"]:.1f}', f'{row["actor_steps"]:,}',
          f'{row["learner_updates"]:,}',
          f'{row["learner_updates_per_second"]:.1f}',
          f'{row["wall_clock_minutes"]:.0f}', str(row['launches'])])
  return with_machine_columns(titles, cells, records)


def render(data: Dict[str, object]) -> str:
  """The page (results/dpg_control.md) from its JSON, `data`, alone."""
  records, floors = data['tasks'], data['random']
  values = {task: {row['seed']: row['final_mean'] for row in rows}
            for task, rows in records.items()}
  counts = sorted({len(rows) for rows in records.values()})
  seeds_text = ', '.join(
      f'{len(rows)} seed{"s" if len(rows) > 1 else ""} on {task}'
      for task, rows in records.items())
  random_column = [f'{floors[task]["mean"]:.1f} ± {floors[task]["std"]:.1f}'
                   for task in records]
  verdicts = [against_random(list(values[task].values()),
                             floors[task]['mean']) for task in records]
  lines = [
      '# Ape-X DPG on the paper\'s control domains', '',
      f'Ape-X DPG (Horgan et al. 2018, §3.2 and App. D) on tasks of the '
      f'paper\'s Fig. 3: {", ".join(f"`{env}`" for env in data["envs"].values())}'
      f'; {data["steps"]:,} actor steps a run with the `control_small` '
      f'preset on 2 CPU cores (no GPU); {seeds_text}.', '',
      f'![Evaluation rounds and final policies]({ANALYSIS}.png)', '',
      '## Final policies', '',
      *spread.seed_table(
          'task', f'final policy, {data["final_episodes"]} episodes', values,
          extra={f'random policy, {RANDOM_EPISODES} episodes (mean ± sd)':
                     random_column,
                 'IQM less the random policy, 95% CI': verdicts}), '',
      f'Each run\'s final policy (its last learner checkpoint, without '
      f'exploration noise, App. D) over {data["final_episodes"]} episodes '
      'of `programs/evaluate.py` drawing from the run\'s seed'
      f'{spread.how_stated(max(counts))}. The random policy: actions drawn '
      'uniformly within the action bounds, the floor of each task under '
      'the same episodes (1,000 steps, the suite\'s rewards). Against it: '
      'the IQM over seeds less the random policy\'s mean, with the IQM\'s '
      '95% interval so moved, and a one-sample t-test of the seeds\' '
      'values; ahead only where the interval excludes 0 and p is below '
      '0.05. ' + _how_intervals(max(counts)), '',
      '## Published figures', '',
      *_references_text(data.get('references', {})),
      'The paper\'s Fig. 3 plots returns against wall-clock hours of 8 to 64 '
      'actors, which make about 14K transitions a second with 64 (§4.2): '
      'this budget is its first minute; its text gives no values. We know '
      'of no published Ape-X DPG or DDPG figure for these tasks at '
      f'{data["steps"]:,} steps.', '',
      '## The runs', '',
      'One run after another, each resumed from its checkpoints if '
      'interrupted (its minutes: the launches\' sum). The evaluator plays '
      'rounds of the preset\'s episodes as the learner trains.'
      + runs_text(data), '',
      *_runs_table(records), '',
      '## How it was made', '',
      '`--preset=control_small` (agents/apex_dpg/presets.py) keeps App. D\'s '
      'networks, Adam rates, batch of 256, target copies and replay, and '
      'sets one update of 256 per 4 actor steps (`--samples_per_insert=64`; '
      'the paper\'s 64 actors gave its learner about 1.6 samples per '
      'insert, which at this budget would be about 3,000 updates) with 2 '
      'actors; the file gives each value\'s reason.', '',
      *commands(ANALYSIS, data), '']
  return '\n'.join(lines)


def commands(analysis: str, data: Dict[str, object]) -> List[str]:
  """The page's commands, as its "How it was made" gives them: the page's
  own, a run's (`data['command']`, an example; or `data['commands']`, each
  task's), its final evaluation's."""
  return [
      '```sh',
      f'.venv/bin/python -m results.{analysis} --seeds=<seeds> '
      '--tasks=<tasks> --runs=<dir outside the repository>', '```', '',
      *(['runs, for each task and seed:', '', '```sh',
         *data['commands'].values()] if 'commands' in data else
        ['runs, for each task and seed, e.g.:', '', '```sh',
         data['command']]),
      '```', '',
      f'then `programs/evaluate.py --workdir=<workdir> '
      f'--episodes={data["final_episodes"]} --seed=<seed>` on its final '
      'checkpoint. The same command again resumes what is unfinished.']


def report(seeds: List[int]):
  """Writes results/dpg_control.{png,json,md} from the finished runs."""
  run.write_page(ANALYSIS, render(collect(seeds)))


def main(argv):
  del argv
  page_runs.main(ANALYSIS, chosen_tasks(), [int(seed) for seed in FLAGS.seeds],
                 [FINAL], report)

page_registry.register(ANALYSIS, render)


if __name__ == '__main__':
  app.run(main)
