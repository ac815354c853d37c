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

import os
from typing import Dict, List, Optional

from absl import app
from absl import flags
import numpy as np

from results import dpg_control
from results import dpg_dmc500k
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
    return page_runs.chosen(ANALYSIS, dpg_control.FLAGS.tasks, '--tasks',
                            'task')
  settings = list(run.ANALYSES[ABLATION]['settings'])
  tasks = dpg_control.FLAGS.tasks
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


def render(data: Dict[str, object]) -> str:
  """The page (results/d4pg_dmc500k.md) from its JSON, `data`, alone."""
  return '# D4PG on the DeepMind Control table at 500K steps\n'


def report(seeds: List[int]):
  """Writes results/d4pg_dmc500k.{png,json,md} from the finished runs."""
  run.write_page(ANALYSIS, render(collect(seeds)))


def main(argv):
  del argv
  analysis = ABLATION if FLAGS.ablation else ANALYSIS
  page_runs.main(analysis, chosen_settings(),
                 [int(seed) for seed in run.FLAGS.seeds], [FINAL],
                 lambda seeds: report(run.reported_seeds(ANALYSIS, seeds)))


if __name__ == '__main__':
  app.run(main)
