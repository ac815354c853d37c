"""R2D2 on CartPole without velocities, beside Ape-X DQN on the same
observations (a result, not a test): runs `results.run
r2d2_hidden_cartpole` (programs/r2d2.py with its `cartpole_hidden` preset
and programs/apex_dqn.py with its `cartpole` preset, both on
gym:CartPole-v1:hide_velocity, 300K actor steps a run), evaluates each
run's final policy, and writes results/r2d2_hidden_cartpole.{png,json,md}.

  .venv/bin/python -m results.r2d2_hidden_cartpole --seeds=0,1,2 \\
      --runs=<dir outside repo>
  .venv/bin/python -m results.r2d2_hidden_cartpole --seeds=0,1,2 \\
      --runs=<dir> --dry_run    # what it would run, and no more
  .venv/bin/python -m results.r2d2_hidden_cartpole --seeds=0,1,2 --report_only
  .venv/bin/python -m results.pages r2d2_hidden_cartpole  # from its JSON

The same command again carries on where it stopped (results/page_runs.py):
a finished run is not run again, an unfinished one resumes from its
checkpoints, an evaluation already made is not made again, and each run,
once finished and evaluated, is banked under results/banked/, where the
page is made from even after the runs directory is gone.

The question (issue 82): does R2D2 learn the task a stateless agent cannot
see? The observation holds the cart's position and the pole's angle only,
so a policy must infer their velocities from the steps before. Its measure:
the first actor steps at which the in-run evaluator's mean over
`WINDOW` consecutive episodes reached `TARGET`, counted at the actor steps
of the parameters each evaluation round played (`loggers.ROUND_ACTOR_STEPS`,
as tests/test_learning.py counts them: not when the episodes ended, which
depends on how busy the machine was), within the run's budget; the goal:
every seed of at least `SEEDS_GOAL` reaches it. Beside that, each run's
final policy over `FINAL.episodes` episodes of programs/evaluate.py (greedy,
drawing from the run's seed), compared between the agents by the
difference of their IQMs with its stratified-bootstrap interval and
Welch's t-test (`spread.comparison`).
"""

import json
import os
from typing import Dict, List, Optional, Tuple

from absl import app
from absl import flags
import numpy as np

from launch.runs import curves as curves_lib
from launch.runs import loggers
from launch.runs import run_manifest
# --notes (results/long_run.py's flag): what the page adds to its runs'
# description, e.g. what else ran on the machine.
from results import long_run  # pylint: disable=unused-import
from results import page_registry
from results import page_runs
from results import run
from results import spread

FLAGS = flags.FLAGS

ANALYSIS = 'r2d2_hidden_cartpole'
RESULTS = os.path.dirname(os.path.abspath(__file__))
SPEC = run.ANALYSES[ANALYSIS]
OURS, BASELINE = list(SPEC['settings'])  # 'R2D2', 'Ape-X DQN'
TARGET = SPEC['threshold']  # CartPole-v1's reward threshold, 475.
WINDOW = 10  # Consecutive evaluator episodes a mean is taken over.
SEEDS_GOAL = 3  # The goal: every seed reaches TARGET, of at least this many.
# Each run's final policy (its last learner checkpoint), greedy
# (programs/evaluate.py's default), over 30 episodes drawing from its seed.
FINAL = page_runs.Evaluation(30, None, 'final_evaluation.json')


def evaluator_windows(workdir: str,
                      window: int = WINDOW) -> Tuple[np.ndarray, np.ndarray]:
  """(actor steps, mean) of every `window` consecutive episodes of the
  run's evaluator, in order: the mean of their returns, and the actor
  steps by which the parameters of the last of them had been learned (its
  round's `loggers.ROUND_ACTOR_STEPS`: the counter's when the evaluator
  pulled them). A run whose evaluator does not log them is refused: the
  steps at its episodes' ends would depend on how busy the machine was."""
  log = curves_lib.read_log(workdir, 'evaluator')
  returns = log.get('episode_return', np.array([]))
  learned_by = log.get(loggers.ROUND_ACTOR_STEPS)
  if len(returns) and (learned_by is None or np.isnan(learned_by).any()):
    raise ValueError(
        f'{workdir}: evaluator episodes without {loggers.ROUND_ACTOR_STEPS} '
        '(the actor steps of the parameters they played): a run made before '
        'the evaluator logged them; run it again.')
  ends = range(window, len(returns) + 1)
  means = np.array([returns[end - window:end].mean() for end in ends])
  steps = np.array([int(learned_by[end - 1]) for end in ends], dtype=int)
  return steps, means


def reaching(steps: np.ndarray, means: np.ndarray, target: float,
             budget: int) -> Dict[str, Optional[float]]:
  """Of a run's `evaluator_windows`, those of parameters learned within
  `budget` actor steps: the first actor steps at which a mean reached
  `target` (None if none did), and the best mean with its actor steps
  (None without a window)."""
  within = np.flatnonzero(steps <= budget)
  reached = [index for index in within if means[index] >= target]
  best = (max(within, key=lambda index: means[index])
          if len(within) else None)
  return {
      'reached_steps': int(steps[reached[0]]) if reached else None,
      'best_mean': None if best is None else float(means[best]),
      'best_steps': None if best is None else int(steps[best]),
  }


def evaluation_rounds(workdir: str) -> List[Dict[str, float]]:
  """The evaluator's complete rounds: each one's mean return and the counts
  of the parameters it played (`loggers.split_rounds`)."""
  per_round = int(run_manifest.read_manifest(workdir)['flags'][
      'evaluation_episodes'])
  log = curves_lib.read_log(workdir, 'evaluator')
  returns = log.get('episode_return', np.array([]))
  unnamed = np.full(len(returns), np.nan)
  rounds = []
  for indices in loggers.split_rounds(log.get(loggers.ROUND_STARTED, unnamed),
                                      per_round):
    first = indices[0]
    rounds.append({
        'actor_steps': int(log.get(loggers.ROUND_ACTOR_STEPS,
                                   unnamed)[first]),
        'learner_steps': int(log.get(loggers.ROUND_LEARNER_STEPS,
                                     log['learner_steps'])[first]),
        'mean_return': float(np.mean(returns[indices])),
    })
  return rounds


def check_program(workdir: str, program: str):
  """Refuses a run in `workdir` made by another program than `program`."""
  made_by = run_manifest.read_manifest(workdir)['program']
  if made_by != program:
    raise ValueError(f'{workdir} holds a run of {made_by}, not of {program}: '
                     'choose another --runs for this page\'s runs.')


def run_record(workdir: str, setting: str, seed: int) -> Dict[str, object]:
  """What the page shows of one finished run of `setting`."""
  manifest = run_manifest.read_manifest(workdir)
  budget = run.step_budget(ANALYSIS, setting)
  final = page_runs.evaluate(workdir, seed, FINAL)
  counts = run.final_counts(workdir)
  with open(os.path.join(workdir, 'finished.json')) as f:
    finished = json.load(f)
  steps, means = evaluator_windows(workdir)
  returns = curves_lib.read_log(workdir, 'evaluator').get('episode_return',
                                                          ())
  return {
      'seed': seed,
      'program': manifest['program'], 'env': manifest['env'],
      'budget_steps': budget,
      **reaching(steps, means, TARGET, budget),
      'evaluator_episodes': len(returns),
      'evaluation_period': int(manifest['flags']['evaluation_period']),
      'rounds': evaluation_rounds(workdir),
      'final_mean': final['mean'], 'final_std': final['std'],
      'final_episodes': final['episodes'],
      'final_learner_steps': final['learner_steps'],
      'actor_steps': counts.get('actor_steps', 0),
      'learner_updates': counts.get('learner_steps', 0),
      'wall_clock_minutes': finished['seconds'] / 60.0,
      'launches': finished.get('launches', 1),
  }


def plot(workdirs: Dict[str, List[Tuple[int, str]]], out: str):
  """One panel an agent: each seed's evaluator mean over `WINDOW`
  consecutive episodes against the actor steps of the parameters played
  (a dot where it first reached `TARGET` within the budget), with `TARGET`
  and the budget."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  figure, axes = plt.subplots(1, len(workdirs), sharey=True,
                              figsize=(5.5 * len(workdirs), 3.8))
  axes = np.atleast_1d(axes)
  for axis, (setting, seeded) in zip(axes, workdirs.items()):
    budget = run.step_budget(ANALYSIS, setting)
    for seed, workdir in seeded:
      steps, means = evaluator_windows(workdir)
      colour = f'C{seed % 10}'
      axis.plot(steps / 1e3, means, '-', color=colour, lw=1.0, alpha=0.8,
                label=f'seed {seed}')
      reached = reaching(steps, means, TARGET, budget)['reached_steps']
      if reached is not None:  # Where it first reached the target.
        axis.plot([reached / 1e3], [TARGET], 'o', color=colour)
    axis.axhline(TARGET, color='k', ls='--', lw=0.8, label=str(TARGET))
    axis.axvline(budget / 1e3, color='grey', ls=':', lw=0.8,
                 label='budget')
    axis.set_title(f'{setting} on {run.HIDDEN_CARTPOLE}', fontsize=9)
    axis.set_xlabel('actor steps (thousands) of the parameters played')
    axis.grid(alpha=0.3)
    axis.legend(fontsize=7, loc='upper left')
  axes[0].set_ylabel(f'evaluator: mean of {WINDOW} consecutive episodes')
  figure.tight_layout()
  figure.savefig(out, dpi=100)
  plt.close(figure)


def collect(seeds: List[int]) -> Dict[str, object]:
  """Writes results/r2d2_hidden_cartpole.png and .json from the finished
  runs (banked or in the runs directory), their final policies evaluated
  first where not yet, and returns that JSON's content."""
  envs = page_runs.environments(ANALYSIS)
  records, workdirs = {}, {}
  for setting in SPEC['settings']:
    program, _ = run.program_and_flags(SPEC, setting)
    for seed in seeds:
      workdir = run.finished_directory(ANALYSIS, setting, seed)
      if not workdir:
        continue
      page_runs.check_environment(workdir, envs[setting])
      check_program(workdir, program)
      records.setdefault(setting, []).append(
          run_record(workdir, setting, seed))
      workdirs.setdefault(setting, []).append((seed, workdir))
  if not records:
    raise ValueError(f'No finished runs of {ANALYSIS} yet.')
  plot(workdirs, os.path.join(RESULTS, f'{ANALYSIS}.png'))
  data = {
      'title': SPEC['title'], 'env': run.HIDDEN_CARTPOLE, 'seeds': seeds,
      'target': TARGET, 'window': WINDOW, 'seeds_goal': SEEDS_GOAL,
      'final_episodes': FINAL.episodes,
      'commands': {setting: ' '.join(run.command(ANALYSIS, setting, 0,
                                                 '<workdir>'))
                   for setting in SPEC['settings']},
      'notes': FLAGS.notes, 'agents': records}
  run.write_json(ANALYSIS, data)
  return data


def _thousands(steps: int) -> str:
  return f'{steps / 1e3:,.0f}K'


def reached_text(setting: str, rows: List[Dict[str, object]],
                 target: float) -> str:
  """'<agent>: reached <target> within <budget> on k of n seeds', with the
  steps at which each seed that did."""
  budget = _thousands(rows[0]['budget_steps'])
  done = [row for row in rows if row['reached_steps'] is not None]
  where = '; '.join(f'seed {row["seed"]} at {row["reached_steps"]:,}'
                    for row in done)
  return (f'**{setting}** reached {target} within {budget} actor steps on '
          f'{len(done)} of {len(rows)} seed{"s" if len(rows) > 1 else ""}'
          + (f' ({where} actor steps)' if done else '') + '.')


def goal_text(rows: List[Dict[str, object]], goal: int,
              target: float) -> str:
  """The issue's goal for R2D2, every seed of at least `goal` reaching
  `target`: met, not met, or not settled by fewer seeds."""
  reached = sum(row['reached_steps'] is not None for row in rows)
  if reached < len(rows):
    said = (f'not met: {len(rows) - reached} of its {len(rows)} seeds did '
            'not reach it')
  elif len(rows) < goal:
    said = f'not settled: {len(rows)} of the {goal} seeds have run'
  else:
    said = f'met: all {len(rows)} seeds reached it'
  budget = _thousands(rows[0]['budget_steps'])
  return (f'The goal, {target} within {budget} actor steps on every seed '
          f'of {goal}: {said}.')


def _cell(value, form: str, none: str = '-') -> str:
  return none if value is None else form.format(value)


def _round_spacing(rows: List[Dict[str, object]]) -> Optional[float]:
  """The median actor steps between an agent's evaluation rounds, over its
  runs (None with fewer than 2 rounds)."""
  gaps = [gap for row in rows
          for gap in np.diff([r['actor_steps'] for r in row['rounds']])]
  return float(np.median(gaps)) if gaps else None


def summary_table(records: Dict[str, List[Dict[str, object]]],
                  window: int) -> List[str]:
  """One row an agent: over its seeds, the mean ± sample sd of the best
  evaluator mean, the learner updates and the minutes; how far apart its
  evaluation rounds were."""
  mean_sd = lambda rows, key, form: spread.mean_and_sd(
      [row[key] for row in rows if row[key] is not None], form) if any(
          row[key] is not None for row in rows) else '-'
  lines = [f'| agent | seeds | best evaluator mean of {window} episodes | '
           'learner updates | minutes | an evaluation round every | actor '
           'steps between rounds (median) |', '|---|---|---|---|---|---|---|']
  for setting, rows in records.items():
    spacing = _round_spacing(rows)
    periods = sorted({row['evaluation_period'] for row in rows})
    lines.append(
        f'| {setting} | {len(rows)} | {mean_sd(rows, "best_mean", "{:.1f}")} '
        f'| {mean_sd(rows, "learner_updates", "{:,.0f}")} | '
        f'{mean_sd(rows, "wall_clock_minutes", "{:.1f}")} | '
        f'{" or ".join(f"{period:,}" for period in periods)} updates | '
        f'{_cell(spacing, "{:,.0f}")} |')
  return lines


def runs_table(records: Dict[str, List[Dict[str, object]]],
               target: float, window: int) -> List[str]:
  """One row a run."""
  lines = [f'| agent | seed | first reached {target} (actor steps) | best '
           f'mean of {window} (its actor steps) | final policy: mean ± sd '
           'over its episodes | evaluator episodes | actor steps | learner '
           'updates | minutes | launches |', '|' + '---|' * 10]
  for setting, rows in records.items():
    for row in rows:
      best = ('-' if row['best_mean'] is None else
              f'{row["best_mean"]:.1f} ({row["best_steps"]:,})')
      lines.append(
          f'| {setting} | {row["seed"]} | '
          f'{_cell(row["reached_steps"], "{:,}", "not reached")} | '
          f'{best} | {row["final_mean"]:.1f} ± {row["final_std"]:.1f} '
          f'({row["final_episodes"]}) | {row["evaluator_episodes"]:,} | '
          f'{row["actor_steps"]:,} | {row["learner_updates"]:,} | '
          f'{row["wall_clock_minutes"]:.1f} | {row["launches"]} |')
  return lines


def comparison_text(records: Dict[str, List[Dict[str, object]]]) -> str:
  """R2D2's final returns less Ape-X DQN's (`spread.comparison`)."""
  if OURS not in records or BASELINE not in records:
    return (f'**{OURS} less {BASELINE}**, final policies: needs runs of '
            'both: not yet.')
  finals = {setting: [row['final_mean'] for row in rows]
            for setting, rows in records.items()}
  if min(len(finals[OURS]), len(finals[BASELINE])) < 2:
    return (f'**{OURS} less {BASELINE}**, final policies: '
            f'{np.mean(finals[OURS]) - np.mean(finals[BASELINE]):+.1f}; no '
            'interval or test from one seed.')
  return (f'**{OURS} less {BASELINE}**, final policies: the difference of '
          'their IQMs, its 95% interval and Welch\'s t-test of the means: '
          + spread.comparison(OURS, BASELINE, finals[OURS], finals[BASELINE])
          + '.')


def render(data: Dict[str, object]) -> str:
  """The page (results/r2d2_hidden_cartpole.md) from its JSON, `data`,
  alone."""
  records = data['agents']
  target, window = data['target'], data['window']
  count = max(len(rows) for rows in records.values())
  final = {setting: {row['seed']: row['final_mean'] for row in rows}
           for setting, rows in records.items()}
  budget = _thousands(next(iter(records.values()))[0]['budget_steps'])
  lines = [
      '# R2D2 on CartPole without velocities, beside Ape-X DQN', '',
      f'`{data["env"]}` is CartPole with the cart\'s velocity and the '
      'pole\'s angular velocity taken out of the observation: the agent sees '
      'the cart\'s position and the pole\'s angle only, one step at a time, '
      'so a policy without memory cannot tell a pole falling one way from '
      'one swinging back (docs/r2d2.md). Does R2D2, whose LSTM carries what '
      f'it saw, learn it? Each run takes {budget} actor steps; beside '
      f'R2D2 (`--preset=cartpole_hidden`), Ape-X DQN with its CartPole '
      'preset (`--preset=cartpole`) on the same observations, '
      f'{spread.seeds_phrase(count, "an agent")}.', '',
      f'**Reaching {target}**: when the in-run evaluator\'s mean over '
      f'{window} consecutive episodes first reached {target}, counted at the '
      'actor steps by which the parameters those episodes played had been '
      'learned (each evaluation round\'s, as tests/test_learning.py counts '
      'them), of parameters learned within the budget.', '',
      *[f'- {reached_text(setting, rows, target)}'
        for setting, rows in records.items()], '',
      (goal_text(records[OURS], data['seeds_goal'], target)
       if OURS in records else f'The goal: no run of {OURS} yet.'), '',
      f'**Final policies**: each run\'s last learner checkpoint, greedy, '
      f'over {data["final_episodes"]} episodes of programs/evaluate.py '
      'drawing from the run\'s seed (a return of 500 is an episode played '
      f'to its end){spread.how_stated(count)}.', '',
      *spread.seed_table(
          'agent', f'final policy, {data["final_episodes"]} episodes', final,
          extra={
              f'seeds that reached {target} within {budget}': [
                  f'{sum(row["reached_steps"] is not None for row in rows)}'
                  f' of {len(rows)}' for rows in records.values()],
              f'actor steps to reach {target}': [
                  spread.reached_text([row['reached_steps'] for row in rows],
                                      '{:,.0f}')
                  for rows in records.values()]}), '',
      comparison_text(records), '',
      spread.how_compared(count) + ' The actor steps to reach '
      f'{target}: the median over the seeds that reached it, with how many '
      'did (a seed that never reached it is left out, not counted as '
      'slow).', '',
      *summary_table(records, window), '',
      f'![The evaluator\'s mean of {window} episodes by actor steps]'
      f'({ANALYSIS}.png)', '',
      '## The runs', '',
      'One run after another, each resumed from its '
      'checkpoints if interrupted (its minutes: the launches\' sum, '
      'start-up included). The evaluator plays a round of episodes every '
      'so many learner updates (the table above), all of a round with the '
      'same parameters: the actor steps between its rounds are the '
      'resolution of "first reached", and each agent\'s preset ties its '
      'updates to its actor steps at a rate of its own.'
      + (f' {data["notes"]}' if data['notes'] else ''), '',
      *runs_table(records, target, window), '',
      '## How it was made', '',
      '```sh',
      f'.venv/bin/python -m results.{ANALYSIS} '
      f'--seeds={",".join(map(str, data["seeds"]))} '
      '--runs=<dir outside the repository>', '```', '',
      'runs, for each agent and seed (here seed 0):', '', '```sh',
      *data['commands'].values(), '```', '',
      '`--max_actor_steps` stops the actors at the budget; then '
      f'`programs/evaluate.py --workdir=<workdir> '
      f'--episodes={data["final_episodes"]} --seed=<seed>` plays the final '
      'checkpoint. The same command again resumes what is unfinished.', '']
  return '\n'.join(lines)


def report(seeds: List[int]):
  """Writes results/r2d2_hidden_cartpole.{png,json,md} from the finished
  runs."""
  run.write_page(ANALYSIS, render(collect(seeds)))


def main(argv):
  del argv
  page_runs.main(ANALYSIS, list(SPEC['settings']),
                 [int(seed) for seed in run.FLAGS.seeds], [FINAL], report)

page_registry.register(ANALYSIS, render)


if __name__ == '__main__':
  app.run(main)
