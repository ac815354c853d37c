"""A3C with one configuration on every task: does each run learn its task
and keep it to the end of its budget? (A result, not a test.) Runs
`results.run a3c_default` (each task's runs with the program's defaults
and a budget of their own), evaluates each run's
final policy, plays a random policy on each task as its floor, and writes
results/a3c_default.{png,json,md}.

  .venv/bin/python -m results.a3c_default --seeds=0,1,2 --tasks=cartpole \\
      --runs=<dir outside repo>
  .venv/bin/python -m results.a3c_default --seeds=0,1,2 --runs=<dir> \\
      --dry_run    # what it would run, and no more
  .venv/bin/python -m results.a3c_default --seeds=0,1,2 --report_only
  .venv/bin/python -m results.pages a3c_default    # the page, from its JSON

The same command again carries on where it stopped (results/page_runs.py),
and each run, once finished and evaluated, is banked under
results/banked/, where the page is made from.

What "keeps" means (`a3c_diagnosis.keeps`): the evaluator plays rounds of
10 episodes as the parameters train; a run keeps what it learned when its
last round is at most 10% of (best round - floor) below its best round,
the floor being the random policy's mean on the task. Measured from the
floor, the rule does not depend on where a task's rewards put 0 (10% of
Acrobot's -80 would allow 8, of Pendulum's -150 15, whatever the task's
spread). A run whose best round stays within 10% of the task's range
(`CEILINGS` - floor) of the floor never learned it.
"""

import functools
import os
from typing import Any, Dict, List, Optional

from absl import app
import numpy as np

from agents.a3c import presets
from agents.a3c.config import A3CConfig
from agents.envs import environments
from launch.runs import run_manifest
from results import a3c_diagnosis
from results import dpg_control
from results import page_registry
from results import page_runs
from results import run
from results import spread

RESULTS = os.path.dirname(os.path.abspath(__file__))

ANALYSIS = 'a3c_default'
TASKS = list(run.ANALYSES[ANALYSIS]['settings'])
ENVS = page_runs.environments(ANALYSIS)
FINAL = dpg_control.FINAL  # 30 episodes of the final policy (evaluate.py).
# The highest return each task pays: CartPole-v1 500 (episodes end at 500
# steps), Acrobot-v1 and Pendulum-v1 0 (no reward above 0), dm_control
# 1,000 (1,000 steps of rewards in [0, 1]). MinAtar's games pay without a
# bound; their scale is Young & Tian's AC(λ) at 5M frames (about 17.7 on
# Breakout, 185 on Space Invaders; results/a3c_minatar.py's
# AC_LAMBDA).
CEILINGS = {'cartpole': 500.0, 'acrobot': 0.0, 'pendulum': 0.0,
            'cartpole_balance': 1000.0, 'breakout': 17.7,
            'space_invaders': 185.1}
OURS = 'A3C'


def chosen_tasks() -> List[str]:
  """`--tasks`, in the page's order; all by default."""
  return page_runs.chosen(ANALYSIS, page_runs.FLAGS.tasks, '--tasks',
                          'task')


def end_of_run(workdir: str) -> Dict[str, Any]:
  """The learner log's last window (`a3c_diagnosis.windows`) of the run,
  and the median over the run of the value term's gradient over the policy
  term's: what moved the parameters at the end."""
  windows = a3c_diagnosis.windows(workdir)
  ratios = [window['value_gradient_norm'] / window['policy_gradient_norm']
            for window in windows
            if window.get('value_gradient_norm') is not None and
            window.get('policy_gradient_norm')]
  last = windows[-1] if windows else {}
  return {'last_window': last,
          'value_over_policy': float(np.median(ratios)) if ratios else None}


# What a run record keeps of `a3c_diagnosis.keeps`' verdict.
VERDICT = ('kept', 'learned', 'final_policy_kept', 'gap_errors', 'flat_gap')


def run_record(workdir: str, seed: int, floor: float,
               ceiling: float) -> Dict[str, Any]:
  """What the page shows of one finished run: `dpg_control.run_record`'s
  figures, whether it learned and kept it, whether its final policy's
  mean (`FINAL`'s episodes) is within the same margin of the best round,
  how far its last round is below its best against its rounds' noise, and
  its end."""
  record = dpg_control.run_record(workdir, seed)
  verdict = a3c_diagnosis.keeps(record['rounds'], floor, ceiling,
                                final_mean=record['final_mean'])
  record.update(training_episodes=a3c_diagnosis.last_worker_episodes(workdir),
                **{name: verdict[name] for name in VERDICT if name in verdict},
                **end_of_run(workdir))
  return record


@functools.lru_cache(maxsize=None)
def action_kind(env: str) -> str:
  """'discrete' or 'continuous': the actions of `env` (as A3CBuilder's
  `continuous` reads them), resolved once an environment."""
  actions = environments.resolve_any(env).spec.actions
  return ('discrete' if np.issubdtype(actions.dtype, np.integer)
          else 'continuous')


def configuration(workdirs: List[str]) -> Dict[str, Any]:
  """The algorithm's flags (those `--preset=paper` sets) that the runs in
  `workdirs` launched with, from their run.json, each compared only among
  the runs it acts on (a flag of continuous actions only among the
  continuous tasks' runs); ValueError if two such runs differ in one. A
  flag that acts on none of the runs is left out."""
  ignored = {'discrete': A3CConfig.CONTINUOUS_FIELDS,
             'continuous': A3CConfig.DISCRETE_FIELDS}
  values, first = {}, {}
  for workdir in workdirs:
    manifest = run_manifest.read_manifest(workdir)
    flags = manifest.get('flags', {})
    names = [name for name in presets.PAPER
             if name not in ignored[action_kind(manifest['env'])]]
    for name in names:
      value = flags.get(name, '<not recorded>')
      if name in values and values[name] != value:
        raise ValueError(
            f'{workdir} ran --{name}={value}, where {first[name]} ran '
            f'--{name}={values[name]}; the page is of one configuration.')
      values.setdefault(name, value)
      first.setdefault(name, workdir)
  return {name: values[name] for name in presets.PAPER if name in values}


def departures(values: Dict[str, Any]) -> str:
  """`--flag=value (paper: value)` for each flag where `values` leave the
  paper's algorithm (`--preset=paper`)."""
  parts = [f'`--{name}={value}` (paper: {presets.PAPER[name]})'
           for name, value in values.items()
           if value != presets.PAPER[name]]
  return ', '.join(parts) if parts else 'none'


def collect(seeds: List[int]) -> Dict[str, Any]:
  """Writes results/a3c_default.png and .json from the finished runs,
  banked or in the runs directory (their final policies evaluated first,
  where not yet), and returns that JSON's content."""
  records, floors = {}, {}
  kept = dpg_control.kept_floors(ANALYSIS)
  finished = []
  for task in TASKS:
    workdirs = {seed: run.finished_directory(ANALYSIS, task, seed)
                for seed in seeds}
    workdirs = {seed: path for seed, path in workdirs.items() if path}
    if not workdirs:
      continue
    finished += workdirs.values()
    floors[task] = dpg_control.random_floor(task, kept.get(task, {}), ENVS)
    records[task] = [run_record(path, seed, floors[task]['mean'],
                                CEILINGS[task])
                     for seed, path in workdirs.items()]
  if not records:
    raise ValueError('No finished runs of A3C\'s configuration yet.')
  dpg_control.plot_tasks(records, floors, ENVS,
                         os.path.join(RESULTS, f'{ANALYSIS}.png'))
  data = {
      'configuration': configuration(finished),
      'steps': {task: run.step_budget(ANALYSIS, task) for task in records},
      'seeds': seeds, 'final_episodes': FINAL.episodes,
      'envs': {task: ENVS[task] for task in records},
      'ceilings': {task: CEILINGS[task] for task in records},
      'commands': {task: ' '.join(run.command(ANALYSIS, task, seeds[0],
                                              '<workdir>'))
                   for task in records},
      'notes': run.FLAGS.notes, 'random': floors, 'tasks': records}
  run.write_json(ANALYSIS, data)
  return data


def within_noise(row: Dict[str, Any]) -> Optional[bool]:
  """Whether a lost run's last round is within its rounds' noise of its
  best (`a3c_diagnosis.keeps`' gap below a flat run's); None where its
  rounds did not say their spread."""
  if row.get('gap_errors') is None:
    return None
  return row['gap_errors'] < row['flat_gap']


def _loss(row: Dict[str, Any]) -> str:
  """How a run that learned and lost its task lost it, against its rounds'
  noise (`a3c_diagnosis.keeps`)."""
  said, clauses = f'seed {row["seed"]}', []
  if within_noise(row) is not None:
    said += (' within' if within_noise(row) else ' beyond') + (
        ' its rounds\' noise')
    clauses.append(f'last round {row["gap_errors"]:.1f} standard errors '
                   f'below the best, where a flat run reaches '
                   f'{row["flat_gap"]:.1f} one time in 20')
  if row.get('final_policy_kept'):
    clauses.append('its final policy is within the margin of its best round')
  return said + (f' ({"; ".join(clauses)})' if clauses else '')


def verdict_text(records: Dict[str, List[Dict[str, Any]]]) -> str:
  """Which runs learned their task and kept it, said task by task, and how
  each that lost it lost it."""
  parts, whole = [], True
  for task, rows in records.items():
    learned = [row for row in rows if row['learned']]
    kept = [row for row in learned if row['kept']]
    whole = whole and len(kept) == len(rows)
    lost = ', '.join(_loss(row) for row in learned if not row['kept'])
    never = ', '.join(f'seed {row["seed"]}' for row in rows
                      if not row['learned'])
    parts.append(
        f'{task}: kept on {len(kept)} of {len(rows)} seeds'
        + (f'; learned and lost on {lost}' if lost else '')
        + (f'; never learned on {never}' if never else ''))
  head = ('Every run learned its task and kept it.' if whole else
          'Not every run learned its task and kept it.')
  return f'**{head}** ' + '; '.join(parts) + '.'


def summary_text(records: Dict[str, List[Dict[str, Any]]]) -> str:
  """`verdict_text` in one sentence: how many runs kept what they learned,
  and which lost it within their rounds' noise, beyond it, or never
  learned."""
  rows = [(task, row) for task, task_rows in records.items()
          for row in task_rows]
  labels = {True: 'lost within its rounds\' noise', False: 'lost beyond it',
            None: 'lost'}
  groups = {label: [] for label in (*labels.values(), 'never learned')}
  for task, row in rows:
    name = f'{task} seed {row["seed"]}'
    if not row['learned']:
      groups['never learned'].append(name)
    elif not row['kept']:
      groups[labels[within_noise(row)]].append(name)
  kept = sum(1 for _, row in rows if row['learned'] and row['kept'])
  return (f'Learned and kept on {kept} of {len(rows)} runs'
          + ''.join(f'; {label}: {", ".join(names)}'
                    for label, names in groups.items() if names) + '.')


def verdict_cell(row: Dict[str, Any]) -> str:
  """A run's verdict in a table's cell: kept, lost (with its last round's
  gap in standard errors beside a flat run's, where known) or never
  learned."""
  if not row['learned']:
    return 'never learned'
  if row['kept']:
    return 'kept'
  if row.get('gap_errors') is None:
    return 'lost'
  return f'lost ({row["gap_errors"]:.1f} SE; flat {row["flat_gap"]:.1f})'


def _cell(value, form: str) -> str:
  return '-' if value is None else format(value, form)


def _runs_table(records) -> List[str]:
  lines = ['| task | seed | best round (at actor steps) | last round | '
           'verdict | final policy (mean ± sd of its episodes) | entropy at '
           'the end | value term / policy term (median) | actor steps | '
           'minutes |', '|' + '---|' * 10]
  for task, rows in records.items():
    for row in rows:
      best, last = row['best_round'], row['last_round']
      lines.append(
          f'| {task} | {row["seed"]} | {best["mean_return"]:.1f} (at '
          f'{best["actor_steps"]:,}) | {last["mean_return"]:.1f} | '
          f'{verdict_cell(row)} | {row["final_mean"]:.1f} ± '
          f'{row["final_std"]:.1f} | '
          f'{_cell(row["last_window"].get("entropy"), ".2f")} | '
          f'{_cell(row["value_over_policy"], ".1f")} | '
          f'{row["actor_steps"]:,} | {row["wall_clock_minutes"]:.0f} |')
  return lines


def render(data: Dict[str, Any]) -> str:
  """The page (results/a3c_default.md) from its JSON, `data`, alone."""
  records, floors = data['tasks'], data['random']
  values = {task: {row['seed']: row['final_mean'] for row in rows}
            for task, rows in records.items()}
  counts = sorted({len(rows) for rows in records.values()})
  budgets = ', '.join(f'{task} {steps:,}'
                      for task, steps in data['steps'].items())
  lines = [
      '# A3C: one configuration on every task', '',
      'A3C (Mnih et al. 2016) with the program\'s defaults on every task '
      '(agents/a3c/config.py, docs/a3c.md says why each is what it is); '
      'where they depart from the paper\'s algorithm (`--preset=paper`): '
      f'{departures(data["configuration"])}. 4 workers on 2 CPU cores; '
      f'actor steps a run: {budgets}.', '',
      f'![Evaluation rounds and final policies]({ANALYSIS}.png)', '',
      '## Learned, and kept', '', verdict_text(records), '',
      'A run keeps what it learned when its last evaluation round (10 '
      'episodes) is at most 10% of (its best round - the floor) below its '
      'best round; the floor is the random policy\'s mean on the task. A '
      'run whose best round stays within 10% of the task\'s range (its '
      'highest return - the floor) of the floor never learned it. A round '
      'is 10 episodes: where one episode\'s return varies widely (MinAtar\'s '
      'games), so does a round\'s mean, by about the episodes\' deviation / '
      '√10, and the best round is the highest of a run\'s many. For each '
      'run that lost, the verdict gives its last round\'s distance below '
      'its best in standard errors of that difference (SE, from the two '
      'rounds\' episodes) beside the distance a flat run reaches one time '
      'in 20 with as many rounds (the best of n equally good rounds against '
      'the last; `a3c_diagnosis.flat_run_gap`): below it, the run lost no '
      'more than its rounds\' noise. It also says where the final '
      f'policy\'s {data["final_episodes"]} episodes, the steadier reading, '
      'are within the margin of the best round.', '',
      '## Final policies', '',
      *spread.seed_table(
          'task', f'final policy, {data["final_episodes"]} episodes', values,
          extra={f'random policy, {dpg_control.RANDOM_EPISODES} episodes '
                 '(mean ± sd)': [f'{floors[task]["mean"]:.1f} ± '
                                 f'{floors[task]["std"]:.1f}'
                                 for task in records],
                 'highest return': [f'{data["ceilings"][task]:g}'
                                    for task in records]}), '',
      f'Each run\'s final policy (its last checkpoint; the most likely '
      f'action, or the Gaussian\'s mean) over {data["final_episodes"]} '
      'episodes of `programs/evaluate.py` drawing from the run\'s seed'
      f'{spread.how_stated(max(counts))}.', '',
      '## The runs', '',
      'One run after another. Entropy at the end: the policy\'s, the median '
      'of the learner log\'s last window of 10,000 actor steps (a uniform '
      'policy\'s is ln of the number of actions). Value term / policy term: '
      'the gradient of the value loss (at its weight) over the policy '
      'loss\'s, the median over the run\'s windows (results/a3c_diagnosis.md '
      'shows why it matters).'
      + (f' {data["notes"]}' if data['notes'] else ''), '',
      *_runs_table(records), '',
      '## How it was made', '',
      *dpg_control.commands(ANALYSIS, data), '']
  return '\n'.join(lines)


def report(seeds: List[int]):
  """Writes results/a3c_default.{png,json,md} from the finished runs."""
  run.write_page(ANALYSIS, render(collect(seeds)))


def main(argv):
  del argv
  page_runs.main(ANALYSIS, chosen_tasks(),
                 [int(seed) for seed in run.FLAGS.seeds], [FINAL], report)

page_registry.register(ANALYSIS, render)


if __name__ == '__main__':
  app.run(main)
