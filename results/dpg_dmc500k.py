"""Ape-X DPG on the state-based table of the DeepMind Control suite at 500K
simulator steps, beside CURL's State SAC (Laskin et al. 2020, arXiv
2004.04136, Table 1), with the `dmc500k` preset on 2 CPU cores (a result,
not a test): runs `results.run dpg_dmc500k` (six tasks, each at CURL's
action repeat), evaluates each run's final policy over 30 episodes, and
writes results/dpg_dmc500k.{png,json,md}.

  .venv/bin/python -m results.dpg_dmc500k --seeds=0 --runs=<dir outside repo>
  .venv/bin/python -m results.dpg_dmc500k --seeds=0,1,2 --tasks=cheetah_run \\
      --runs=<dir> --dry_run    # what it would run, and no more
  .venv/bin/python -m results.dpg_dmc500k --seeds=0,1,2 --report_only
  .venv/bin/python -m results.pages dpg_dmc500k    # the page, from its JSON

The same command again carries on where it stopped (results/page_runs.py):
a finished run is not run again, an unfinished one resumes from its
checkpoints, and each run, once finished and evaluated, is banked under
results/banked/, where the page is made from. What shared the machine with
each run, and the machine's speed that day where measured, no file of the
run records: they are given by hand in the run's record in
results/dpg_dmc500k.json (`results.dpg_control.MACHINE_KEYS`), kept there by
every later report of the same run, and shown as columns of the runs table.

Why these figures: each run's final policy (noiseless, App. D) over
`FINAL_EPISODES` episodes drawing from the run's seed
(`results.dpg_control`'s evaluation); over seeds the mean ± sample standard
deviation; over the six tasks, each run's return divided by State SAC's
figure for its task, and the interquartile mean (IQM) of those ratios over
every run of every task with its stratified-bootstrap 95% interval
(Agarwal et al. 2021, `rliable`: seeds resampled within each task).
"""

import os
from typing import Dict, List, Optional, Tuple

from absl import app
import numpy as np

from results import dpg_control
from results import page_registry
from results import page_runs
from results import run
from results import spread

RESULTS = os.path.dirname(os.path.abspath(__file__))

ANALYSIS = 'dpg_dmc500k'
ENVS = page_runs.environments(ANALYSIS)
FINAL = dpg_control.FINAL  # 30 episodes of the final policy, noiseless.

# CURL's Table 1 (Laskin et al. 2020, arXiv 2004.04136), "500K step scores",
# column "State SAC": mean ± its spread over runs, by task.
SAC = {'walker_walk': (948, 54), 'cheetah_run': (795, 30),
       'finger_spin': (923, 21), 'cartpole_swingup': (848, 15),
       'reacher_easy': (923, 24), 'ball_in_cup_catch': (974, 33)}
SAC_SOURCE = ('CURL, Laskin et al. 2020 (arXiv 2004.04136), Table 1, '
              '"500K step scores", column State SAC')
OURS = 'Ape-X DPG'


def chosen_tasks() -> List[str]:
  """`--tasks` (results.dpg_control's flag), in the page's order; all by
  default."""
  return page_runs.chosen(ANALYSIS, page_runs.FLAGS.tasks, '--tasks',
                          'task')


def action_repeat(env: str) -> int:
  """k of `control:<domain>:<task>:repeat=<k>` (1 without it)."""
  last = env.split(':')[-1]
  return int(last.split('=', 1)[1]) if last.startswith('repeat=') else 1


def ratio_interval(records) -> Optional[Dict[str, object]]:
  """The IQM over every run of every task of its final return over State
  SAC's, with its stratified-bootstrap 95% interval, over the seeds every
  task has (rliable resamples a runs x tasks matrix); None when fewer than
  2 seeds are common to all the tasks."""
  seeds = {task: {row['seed'] for row in rows}
           for task, rows in records.items()}
  common = set.intersection(*seeds.values()) if seeds else set()
  if len(common) < 2:
    return None
  tasks = [task for task in records if common <= seeds[task]]
  matrix = np.array([[next(row['final_mean'] for row in records[task]
                           if row['seed'] == seed) / SAC[task][0]
                      for task in tasks] for seed in sorted(common)])
  value, low, high = spread.iqm_interval(matrix)
  return {'tasks': tasks, 'seeds': sorted(common), 'iqm': value,
          'low': low, 'high': high}


def records_of(analysis: str, seeds: List[int]
               ) -> Dict[str, List[Dict[str, object]]]:
  """Each task's finished runs of `analysis` among `seeds` (banked or in
  the runs directory), as `dpg_control.run_record` reads them, with their
  action repeat."""
  records = {}
  for task in run.ANALYSES[analysis]['settings']:
    rows = []
    for seed in seeds:
      workdir = run.finished_directory(analysis, task, seed)
      if workdir:
        record = dpg_control.run_record(workdir, seed)
        record['action_repeat'] = action_repeat(record['env'])
        rows.append(record)
    if rows:
      records[task] = rows
  return records


def collect(seeds: List[int], analysis: str = ANALYSIS,
            agent: str = OURS) -> Dict[str, object]:
  """Writes results/<analysis>.png and .json from the finished runs of
  the table `analysis` (of `agent`), banked or in the runs directory (their
  final policies evaluated first, where not yet), and returns that JSON's
  content."""
  records = records_of(analysis, seeds)
  dpg_control.with_machines(records,
                            dpg_control.kept_machines(analysis, RESULTS))
  if not records:
    raise ValueError(f'No finished runs of {agent} on the DeepMind Control '
                     'table yet.')
  envs = page_runs.environments(analysis)
  plot(records, os.path.join(RESULTS, f'{analysis}.png'), envs)
  data = {
      'frames': int(run.ANALYSES[analysis]['budget'][1] * run.FLAGS.scale),
      'seeds': seeds, 'final_episodes': FINAL.episodes,
      'envs': {task: envs[task] for task in records},
      'sac': {task: list(SAC[task]) for task in records},
      'sac_source': SAC_SOURCE,
      'command': ' '.join(run.command(analysis, next(iter(records)),
                                      seeds[0], '<workdir>')),
      'notes': run.FLAGS.notes, 'tasks': records,
      'ratio': ratio_interval(records)}
  run.write_json(analysis, data)
  return data


def plot(records: Dict[str, List[Dict[str, object]]], out: str,
         envs: Dict[str, str]):
  """One panel per task: each seed's evaluation rounds against simulator
  steps, its final policy's mean, and State SAC's figure at 500K."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  columns = min(3, len(records))
  rows_count = -(-len(records) // columns)
  figure, axes = plt.subplots(rows_count, columns,
                              figsize=(4.5 * columns, 3.4 * rows_count),
                              squeeze=False)
  for axis in axes.ravel()[len(records):]:
    axis.set_visible(False)
  for axis, (task, rows) in zip(axes.ravel(), records.items()):
    for index, row in enumerate(rows):
      colour = f'C{index}'
      frames = row['actor_steps'] * row['action_repeat']
      axis.plot([r['actor_frames'] / 1e3 for r in row['rounds']],
                [r['mean_return'] for r in row['rounds']], '.-',
                color=colour, alpha=0.6,
                label=f'seed {row["seed"]}: evaluator rounds')
      axis.errorbar([frames / 1e3], [row['final_mean']],
                    yerr=[row['final_std']], fmt='^', color=colour,
                    label='final policy' if index == 0 else None)
    axis.axhline(SAC[task][0], color='k', linestyle=':',
                 label='State SAC at 500K (CURL)')
    axis.set_title(envs[task])
    axis.set_xlabel('simulator steps (thousands)')
    axis.set_ylim(0, 1000)
    axis.grid(alpha=0.3)
  axes[0][0].set_ylabel('return')
  axes[0][0].legend(fontsize=7, loc='upper left')
  figure.tight_layout()
  figure.savefig(out, dpi=100)
  plt.close(figure)


def ratio_text(ratio: Optional[Dict[str, object]], tasks: int) -> str:
  """The IQM of the runs' returns over State SAC's, as the page says it."""
  if ratio is None:
    return ('The IQM of the returns over State SAC\'s needs at least 2 seeds '
            'on the same tasks: not yet.')
  part = ('' if len(ratio['tasks']) == tasks else
          f' (the {len(ratio["tasks"])} tasks with those seeds: '
          f'{", ".join(ratio["tasks"])})')
  return (f'**Over the tasks, the IQM of each run\'s final return divided by '
          f'State SAC\'s: {ratio["iqm"]:.2f}, 95% interval '
          f'[{ratio["low"]:.2f}, {ratio["high"]:.2f}]**, over seeds '
          f'{", ".join(map(str, ratio["seeds"]))}{part}: a stratified '
          f'bootstrap (`rliable`, {spread.BOOTSTRAP_REPS:,} resamples, seeds '
          'resampled within each task, percentile intervals). 1.00 would be '
          'level with SAC.')


def against_sac(final: Dict[str, Dict[int, float]]
                ) -> Dict[str, Tuple[str, Optional[float]]]:
  """Each task's verdict against State SAC's figure, by the pages' rule
  (`spread`): 'behind' or 'ahead' only where the interval of the seeds'
  IQM lies on one side of the figure and a one-sample t-test of their mean
  against it gives p below 0.05, from `spread.VERDICT_SEEDS` seeds or
  more; else 'no difference shown', or 'too few seeds'. With its p (None
  for too few seeds)."""
  verdicts = {}
  for task, seeds in final.items():
    values = list(seeds.values())
    if len(values) < spread.VERDICT_SEEDS:
      verdicts[task] = ('too few seeds', None)
      continue
    _, low, high = spread.iqm_interval(values)
    side = spread.interval_side(low, high, SAC[task][0])
    p = spread.one_sample_p(values, SAC[task][0])
    word = 'no difference shown'
    if side != 'holds' and p < 0.05:
      word = 'behind' if side == 'below' else 'ahead'
    verdicts[task] = (word, p)
  return verdicts


def behind(records, final: Dict[str, Dict[int, float]]) -> str:
  """Each task's verdict against State SAC (`against_sac`), said in a
  sentence."""
  verdicts = against_sac({task: final[task] for task in records})
  said = []
  for word in ('behind', 'ahead', 'no difference shown'):
    tasks = [f'{task} (p = {p:.2f})' if word == 'no difference shown'
             else task for task, (verdict, p) in verdicts.items()
             if verdict == word]
    if tasks:
      said.append(f'{word} on {", ".join(tasks)}')
  few = [task for task, (verdict, _) in verdicts.items()
         if verdict == 'too few seeds']
  if few:
    said.append(f'no verdict yet from fewer than {spread.VERDICT_SEEDS} '
                f'seeds on {", ".join(few)}')
  return ('Against State SAC\'s figure, task by task (behind or ahead only '
          'where the interval of the seeds\' IQM lies on one side of it and '
          'a one-sample t-test of their mean against it gives p below 0.05, '
          f'from {spread.VERDICT_SEEDS} seeds or more): '
          + '; '.join(said) + '.')


def runs_table(records) -> List[str]:
  """Every run: its final policy, rounds, steps, updates, minutes and, where
  the JSON gives it, its machine (`dpg_control.machine_columns`)."""
  titles = ['task', 'seed', 'final policy (mean ± sd of its episodes)',
            'best evaluator round', 'last round', 'agent steps',
            'simulator steps', 'learner updates', 'updates/s',
            'simulator steps/s', 'minutes', 'launches']
  cells = []
  for task, rows in records.items():
    for row in rows:
      best, last = row['best_round'], row['last_round']
      cells.append([
          task, str(row['seed']),
          f'{row["final_mean"]:.1f} ± {row["final_std"]:.1f}',
          f'{best["mean_return"]:.1f} (at {best["actor_frames"]:,} steps)',
          f'{last["mean_return"]:.1f}', f'{row["actor_steps"]:,}',
          f'{row["actor_steps"] * row["action_repeat"]:,}',
          f'{row["learner_updates"]:,}',
          f'{row["learner_updates_per_second"]:.1f}',
          f'{row["actor_frames_per_second"]:.0f}',
          f'{row["wall_clock_minutes"]:.0f}', str(row['launches'])])
  return dpg_control.with_machine_columns(titles, cells, records)


def figures(records) -> Tuple[Dict[str, Dict[int, float]], List[float],
                              List[int], List[int]]:
  """(each task's final means by seed, every run's minutes, every run's
  updates, the counts of seeds the tasks have) of a table's runs."""
  final = {task: {row['seed']: row['final_mean'] for row in rows}
           for task, rows in records.items()}
  runs = [row for rows in records.values() for row in rows]
  return (final, [row['wall_clock_minutes'] for row in runs],
          [row['learner_updates'] for row in runs],
          sorted({len(rows) for rows in records.values()}))


def final_table(data: Dict[str, object],
                final: Dict[str, Dict[int, float]],
                extra: Optional[Dict[str, List[str]]] = None) -> List[str]:
  """The final policies' table: each task's seeds (`final`: task -> {seed:
  final mean}), its action repeat, State SAC's figure and the mean's ratio
  to it, then the columns of `extra` (title -> one cell a task)."""
  records = data['tasks']
  sac = data['sac']
  return spread.seed_table(
      'task', f'final policy, {data["final_episodes"]} episodes', final,
      extra={'action repeat': [str(records[task][0]['action_repeat'])
                               for task in records],
             'State SAC at 500K (CURL, Table 1)': [
                 f'{sac[task][0]} ± {sac[task][1]}' for task in records],
             'mean over SAC\'s': [
                 f'{np.mean(list(final[task].values())) / sac[task][0]:.2f}'
                 for task in records],
             **(extra or {})})


def render(data: Dict[str, object]) -> str:
  """The page (results/dpg_dmc500k.md) from its JSON, `data`, alone."""
  records = data['tasks']
  final, minutes, updates, seeds_count = figures(records)
  lines = [
      '# Ape-X DPG on the DeepMind Control table at 500K steps', '',
      f'Ape-X DPG (Horgan et al. 2018, §3.2 and App. D) on the six tasks of '
      f'the state-based DeepMind Control table, {data["frames"]:,} simulator '
      'steps a run, counted as CURL counts them (an action repeat of k '
      'counts k), with the `dmc500k` preset on 2 CPU cores (no GPU), beside '
      f'State SAC\'s figures ({data["sac_source"]}).', '',
      f'![Evaluation rounds and final policies]({ANALYSIS}.png)', '',
      '## Final policies', '',
      *final_table(data, final), '',
      ratio_text(data['ratio'], len(records)) + ' ' + behind(records, final),
      '',
      f'Each run\'s final policy (its last learner checkpoint, without '
      f'exploration noise, App. D) over {data["final_episodes"]} episodes '
      'of `programs/evaluate.py` drawing from the run\'s seed'
      f'{spread.how_stated(max(seeds_count))}.', '',
      '## Beside State SAC: what differs', '',
      f'- **The figures**: State SAC\'s are CURL\'s Table 1 as printed '
      '(mean ± the spread it gives over its runs); this page\'s are each '
      f'run\'s final policy over {data["final_episodes"]} episodes, and over '
      'seeds the mean ± sample sd.',
      '- **Steps**: both count simulator steps, 500,000 a run. The runs here '
      'repeat each action as CURL\'s pixel agents do (§5.1: 8 on cartpole, '
      '2 on finger and walker, 4 elsewhere), which cuts the agent steps to '
      '62,500-250,000 and the machine time with them.',
      '- **Updates**: SAC makes one update of 256 per simulator step '
      '(500,000 a run); the runs here make one per 8 simulator steps once '
      '5,000 transitions are in replay (`--samples_per_insert` 32 x the '
      f'repeat: {min(updates):,} to {max(updates):,} a run), a ratio at '
      f'which a run took {min(minutes):.0f}-{max(minutes):.0f} minutes on 2 '
      'cores (the runs\' minutes, and the machines they ran on, below). The '
      'learner sets the pace, so SAC\'s '
      'ratio would take about 8 times as long a run here.',
      '- **The agent**: Ape-X DPG as the paper gives it (App. D: a '
      'deterministic policy with Gaussian noise of 0.3, 3-step returns, '
      'prioritised replay, the 400-300 critic and 300-200 policy, Adam at '
      '1e-4), with 2 actors.', '',
      '## The runs', '',
      'One run after another, each resumed from its checkpoints if '
      'interrupted (its minutes: the launches\' sum). The evaluator plays '
      'rounds of 5 episodes as the learner trains; the best round is the '
      'best of those, the final policy the figure above.'
      + dpg_control.runs_text(data), '',
      *runs_table(records), '',
      '## How it was made', '',
      '`--preset=dmc500k` (agents/apex_dpg/presets.py) keeps App. D\'s '
      'networks, Adam rates, batch of 256, target copies, noise and replay; '
      'it was set from the machine\'s budget before any run of these tasks '
      'and not changed after them; the file gives each value\'s reason.', '',
      *dpg_control.commands(ANALYSIS, data), '']
  return '\n'.join(lines)


def report(seeds: List[int]):
  """Writes results/dpg_dmc500k.{png,json,md} from the finished runs."""
  run.write_page(ANALYSIS, render(collect(seeds)))


def main(argv):
  del argv
  page_runs.main(ANALYSIS, chosen_tasks(),
                 [int(seed) for seed in run.FLAGS.seeds], [FINAL], report)

page_registry.register(ANALYSIS, render)


if __name__ == '__main__':
  app.run(main)
