"""D4PG on the state-based table of the DeepMind Control suite at 500K
simulator steps, beside CURL's State SAC and Ape-X DPG's table
(results/dpg_dmc500k.md), with D4PG's `dmc500k` preset on 2 CPU cores (a
result, not a test); and what each of D4PG's two changes buys alone (the
categorical critic, the replay ratio) on the two tasks furthest behind.
Writes results/d4pg_dmc500k.{png,json,md}.

  .venv/bin/python -m results.d4pg_dmc500k --seeds=0 --runs=<dir outside repo>
  .venv/bin/python -m results.d4pg_dmc500k --ablation --seeds=0 --runs=<dir>
  .venv/bin/python -m results.d4pg_dmc500k --seeds=0,1,2 --report_only
  .venv/bin/python -m results.pages d4pg_dmc500k    # the page, from its JSON

The same command again carries on where it stopped (results/page_runs.py):
a finished run is not run again, an unfinished one resumes from its
checkpoints, and each run, once finished and evaluated, is banked under
results/banked/, where the page is made from.

The figures are made as Ape-X DPG's page makes them (results/dpg_dmc500k.py):
each run's final policy (noiseless) over 30 episodes drawing from the run's
seed; over the six tasks, each run's return over State SAC's figure, and
the IQM of those ratios with its stratified-bootstrap 95% interval
(`rliable`). Beside Ape-X DPG: each task's difference of the seeds' means,
and the IQM of D4PG's ratios less Ape-X DPG's over the seeds both tables
have, with its bootstrap interval.
"""

from typing import Dict, List, Optional

from absl import app
from absl import flags
import numpy as np

from results import dpg_control
from results import dpg_dmc500k
from results import page_registry
from results import page_runs
from results import run
from results import spread

flags.DEFINE_bool('ablation', False, 'Run (or report) the ablation\'s runs '
                  '(results/run.py d4pg_dmc500k_ablation) instead of the '
                  'table\'s.')
FLAGS = flags.FLAGS

ANALYSIS = 'd4pg_dmc500k'
ABLATION = 'd4pg_dmc500k_ablation'
APEX_DPG = dpg_dmc500k.ANALYSIS
SAC = dpg_dmc500k.SAC
FINAL = dpg_dmc500k.FINAL
# The issue's goal for the table: the IQM of the runs' returns over State
# SAC's at or above this.
GOAL = 0.85
# The ablation's seed and its four arms: (label, analysis, setting suffix).
ABLATION_SEED = 0
ARMS = (('neither (Ape-X DPG, one update per 8)', APEX_DPG, ''),
        ('categorical critic alone (one update per 8)', ABLATION,
         ' critic alone'),
        ('replay ratio alone (Ape-X DPG, one update per 4)', ABLATION,
         ' ratio alone'),
        ('both (D4PG, one update per 4)', ANALYSIS, ''))


def chosen_settings() -> List[str]:
  """`--tasks` of the table, or with `--ablation` the ablation's settings
  of those tasks (all by default)."""
  if not FLAGS.ablation:
    return page_runs.chosen(ANALYSIS, page_runs.FLAGS.tasks, '--tasks',
                            'task')
  settings = list(run.ANALYSES[ABLATION]['settings'])
  tasks = page_runs.FLAGS.tasks
  return [setting for setting in settings
          if tasks is None or setting.split(' ')[0] in tasks]


def ablation_records() -> Dict[str, Dict[str, Optional[Dict[str, object]]]]:
  """Each ablation task's four arms (`ARMS`): the run record of seed
  `ABLATION_SEED`, None where that run is not finished."""
  table = {}
  for task in run.D4PG_ABLATION_TASKS:
    task = task.replace(':', '_')
    table[task] = {}
    for label, analysis, suffix in ARMS:
      workdir = run.finished_directory(analysis, task + suffix,
                                       ABLATION_SEED)
      table[task][label] = (dpg_control.run_record(workdir, ABLATION_SEED)
                            if workdir else None)
  return table


def beside_apex_dpg(records, apex_records) -> Optional[Dict[str, object]]:
  """D4PG's IQM ratio less Ape-X DPG's over the seeds and tasks both tables
  have, with its bootstrap interval (`spread.difference_interval`); None
  with fewer than 2 seeds common to every task."""
  tasks = [task for task in records if task in apex_records]
  seeds = set.intersection(*(
      {row['seed'] for row in records[task]} &
      {row['seed'] for row in apex_records[task]} for task in tasks)) if (
          tasks) else set()
  if len(seeds) < 2:
    return None

  def matrix(table):
    return np.array([[next(row['final_mean'] for row in table[task]
                           if row['seed'] == seed) / SAC[task][0]
                      for task in tasks] for seed in sorted(seeds)])

  value, low, high = spread.difference_interval(matrix(records),
                                                matrix(apex_records))
  return {'tasks': tasks, 'seeds': sorted(seeds), 'difference': value,
          'low': low, 'high': high}


def collect(seeds: List[int]) -> Dict[str, object]:
  """Writes results/d4pg_dmc500k.png and .json from the finished runs of
  both tables and the ablation, and returns that JSON's content."""
  data = dpg_dmc500k.collect(seeds, ANALYSIS, 'D4PG')
  apex = dpg_dmc500k.records_of(APEX_DPG, [0, 1, 2])
  data['apex_dpg'] = {task: [
      {key: row[key] for key in ('seed', 'final_mean', 'final_std',
                                 'learner_updates', 'wall_clock_minutes')}
      for row in rows] for task, rows in apex.items()}
  data['apex_dpg_ratio'] = dpg_dmc500k.ratio_interval(apex)
  data['beside_apex_dpg'] = beside_apex_dpg(data['tasks'], apex)
  data['goal'] = GOAL
  data['ablation'] = {
      task: {label: None if record is None else
             {key: record[key] for key in (
                 'final_mean', 'final_std', 'learner_updates',
                 'learner_updates_per_second', 'wall_clock_minutes', 'env')}
             for label, record in arms.items()}
      for task, arms in ablation_records().items()}
  data['ablation_seed'] = ABLATION_SEED
  run.write_json(ANALYSIS, data)
  return data


def span(values, form: str) -> str:
  """'a to b' of `values` in `form`, or the one value where all are
  equal."""
  low, high = form.format(min(values)), form.format(max(values))
  return low if low == high else f'{low} to {high}'


def goal_text(ratio: Optional[Dict[str, object]], goal: float) -> str:
  """Where the IQM stands against `goal`, by its interval."""
  if ratio is None:
    return f'Against the goal of {goal:.2f}: not yet (fewer than 2 seeds).'
  said = spread.against_goal(ratio['low'], ratio['high'], goal,
                             len(ratio['seeds']))
  return f'Against the goal of {goal:.2f} of State SAC\'s return: {said}.'


def apex_text(data: Dict[str, object]) -> str:
  """D4PG beside Ape-X DPG's table, over the seeds both have."""
  beside, apex = data['beside_apex_dpg'], data['apex_dpg_ratio']
  if beside is None:
    return ('Beside Ape-X DPG\'s table (IQM '
            f'{apex["iqm"]:.2f} [{apex["low"]:.2f}, {apex["high"]:.2f}]): '
            'the difference needs 2 seeds of every task: not yet.'
            if apex else '')
  verdict = spread.difference_side('D4PG', beside['low'], beside['high'],
                                   len(beside['seeds']))
  return (f'Beside Ape-X DPG\'s table (IQM {apex["iqm"]:.2f} '
          f'[{apex["low"]:.2f}, {apex["high"]:.2f}]), D4PG\'s IQM less Ape-X '
          f'DPG\'s over seeds {", ".join(map(str, beside["seeds"]))} of '
          f'{len(beside["tasks"])} tasks: {beside["difference"]:+.2f}, 95% '
          f'interval [{beside["low"]:+.2f}, {beside["high"]:+.2f}]: '
          f'{verdict}.')


def _arm_cell(record: Optional[Dict[str, object]]) -> str:
  if record is None:
    return 'not run yet'
  return (f'{record["final_mean"]:.1f} ({record["learner_updates"]:,} '
          f'updates, {record["wall_clock_minutes"]:.0f} min)')


def ablation_table(data: Dict[str, object]) -> List[str]:
  """One row a task, one column an arm (`ARMS`)."""
  labels = [label for label, _, _ in ARMS]
  lines = ['| task | ' + ' | '.join(labels) + ' | State SAC |',
           '|' + '---|' * (len(labels) + 2)]
  for task, arms in data['ablation'].items():
    lines.append(f'| {task} | ' + ' | '.join(
        _arm_cell(arms[label]) for label in labels) +
                 f' | {SAC[task][0]} |')
  return lines


def what_it_would_take(records) -> List[str]:
  """Task by task: the runs' ratio to SAC, their updates, and the minutes
  SAC's one update per simulator step would take at their own update
  rate."""
  lines = []
  for task, rows in records.items():
    mean = np.mean([row['final_mean'] for row in rows])
    updates = np.mean([row['learner_updates'] for row in rows])
    rate = np.mean([row['learner_updates_per_second'] for row in rows])
    minutes = 500_000 / rate / 60
    lines.append(
        f'- **{task}**: {mean / SAC[task][0]:.2f} of State SAC\'s '
        f'{SAC[task][0]} after {updates:,.0f} updates a run; SAC\'s '
        f'500,000 would take about {minutes:.0f} minutes at these runs\' '
        f'{rate:.0f} updates a second.')
  return lines


def render(data: Dict[str, object]) -> str:
  """The page (results/d4pg_dmc500k.md) from its JSON, `data`, alone."""
  records = data['tasks']
  final, minutes, updates, seeds_count = dpg_dmc500k.figures(records)
  apex = {task: np.mean([row['final_mean'] for row in rows])
          for task, rows in data['apex_dpg'].items()}
  lines = [
      '# D4PG on the DeepMind Control table at 500K steps', '',
      'D4PG (Barth-Maron et al. 2018: Ape-X DPG with a categorical critic, '
      'docs/d4pg.md) on the six tasks of the state-based DeepMind Control '
      f'table, {data["frames"]:,} simulator steps a run counted as CURL '
      'counts them, with its `dmc500k` preset on 2 CPU cores (no GPU), '
      f'beside State SAC\'s figures ({data["sac_source"]}) and Ape-X DPG\'s '
      'table (results/dpg_dmc500k.md).', '',
      f'![Evaluation rounds and final policies]({ANALYSIS}.png)', '',
      '## Final policies', '',
      *dpg_dmc500k.final_table(data, final, extra={
          'Ape-X DPG (mean of its seeds)': [
              f'{apex[task]:.1f}' if task in apex else '-'
              for task in records]}), '',
      dpg_dmc500k.ratio_text(data['ratio'], len(records)) + ' ' +
      goal_text(data['ratio'], data['goal']) + ' ' +
      dpg_dmc500k.behind(records, final), '',
      apex_text(data), '',
      f'Each run\'s final policy (its last learner checkpoint, without '
      f'exploration noise) over {data["final_episodes"]} episodes of '
      '`programs/evaluate.py` drawing from the run\'s seed'
      f'{spread.how_stated(max(seeds_count))}.', '',
      '## What each change buys', '',
      'D4PG differs from Ape-X DPG\'s table in two things: its categorical '
      'critic and its replay ratio (one update of 256 per 4 simulator steps '
      'against 8). Each alone, on the two tasks furthest behind State SAC '
      f'in Ape-X DPG\'s table, seed {data["ablation_seed"]}: the final '
      'policy over 30 episodes (the run\'s updates, its minutes). Neither '
      'and both are the two tables\' own runs of that seed.', '',
      *ablation_table(data), '',
      '## Beside State SAC: what differs, and what it would take', '',
      '- **Updates**: SAC makes one update of 256 per simulator step '
      '(500,000 a run); these runs one per 4 simulator steps once 5,000 '
      'transitions are in replay (`--samples_per_insert` 64 x the repeat: '
      f'{span(updates, "{:,}")} a run), at which a run took '
      f'{span(minutes, "{:.0f}")} minutes on 2 cores. The learner sets the '
      'pace: SAC\'s ratio would be 4 times as many updates.',
      '- **The agent**: D4PG with Ape-X DPG\'s networks (400-300 critic, '
      '300-200 policy), Adam at 1e-4, Gaussian noise of 0.3, 3-step returns, '
      '51 atoms on [0, 100 x the repeat], prioritised replay by the KL '
      'divergence, 2 actors; SAC (Haarnoja et al. 2018) learns a stochastic '
      'policy with an entropy bonus and two critics.', '',
      *what_it_would_take(records), '',
      '## The runs', '',
      'One run after another, each resumed from its checkpoints if '
      'interrupted (its minutes: the launches\' sum). The evaluator plays '
      'rounds of 5 episodes every 10,000 updates; the best round is the '
      'best of those, the final policy the figure above.'
      + dpg_control.runs_text(data), '',
      *dpg_dmc500k.runs_table(records), '',
      '## How it was made', '',
      '`--preset=dmc500k` (agents/d4pg/presets.py) is Ape-X DPG\'s `dmc500k` '
      'but for the replay ratio and the critic; it was set from the '
      'machine\'s budget before any run of these tasks and not changed '
      'after them; the file gives each value\'s reason.', '',
      *dpg_control.commands(ANALYSIS, data),
      '', 'The ablation\'s runs:', '', '```sh',
      f'.venv/bin/python -m results.{ANALYSIS} --ablation --seeds='
      f'{data["ablation_seed"]} --runs=<dir outside the repository>', '```',
      '']
  return '\n'.join(lines)


def report(seeds: List[int]):
  """Writes results/d4pg_dmc500k.{png,json,md} from the finished runs."""
  run.write_page(ANALYSIS, render(collect(seeds)))


def main(argv):
  del argv
  analysis = ABLATION if FLAGS.ablation else ANALYSIS
  page_runs.main(analysis, chosen_settings(),
                 [int(seed) for seed in run.FLAGS.seeds], [FINAL],
                 lambda seeds: report(run.reported_seeds(ANALYSIS, seeds)))

page_registry.register(ANALYSIS, render)


if __name__ == '__main__':
  app.run(main)
