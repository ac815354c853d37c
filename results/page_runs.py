"""The runs behind a page of its own (results/minatar.py,
results/dpg_control.py): every setting and seed of one analysis of
results/run.py run to its step budget, resumed from its checkpoints where a
launch stopped, its final policy evaluated by programs/evaluate.py, and
banked; then the page's report. `--dry_run` lists what that would do, and
does nothing.

A run in the runs directory made with another environment than its
setting's (e.g. MinAtar's minimal action set) is refused before anything
runs: its figures would be taken for this protocol's.
"""

import os
from typing import Callable, Dict, List, NamedTuple, Optional, Tuple

from absl import flags

from launch.runs import run_manifest
from results import bank
from results import run

# The settings a page's command runs, by the page's kind of setting: tasks
# (the control suite's pages, A3C's) or games (MinAtar's). Defined here, for
# every page, so that no page reads another's flags.
flags.DEFINE_list('tasks', None, 'The tasks to run (default: all); the page '
                  'has every task with finished runs.')
flags.DEFINE_list('games', None, 'The games to run (default: all five); '
                  'the page has every game with finished runs.')
FLAGS = flags.FLAGS


class Evaluation(NamedTuple):
  """One evaluation of a run's final policy (programs/evaluate.py)."""
  episodes: int
  epsilon: Optional[float]  # None: the program's own (no flag).
  file: str  # In the run's directory.


def environments(analysis: str) -> Dict[str, str]:
  """Each setting's environment (its `--env=` in results/run.py, the
  analysis's or its own)."""
  spec = run.ANALYSES[analysis]
  envs = {}
  for setting in spec['settings']:
    _, setting_flags = run.program_and_flags(spec, setting)
    # The last --env= given wins, as it does on the command line.
    envs[setting] = [flag.split('=', 1)[1] for flag in setting_flags
                     if flag.startswith('--env=')][-1]
  return envs


def chosen(analysis: str, names: Optional[List[str]], flag: str,
           kind: str) -> List[str]:
  """The settings `names` (all when None) in the page's order; ValueError
  naming `flag` for one the analysis does not have, a `kind` (e.g.
  'task')."""
  settings = list(run.ANALYSES[analysis]['settings'])
  unknown = sorted(set(names or settings) - set(settings))
  if unknown:
    raise ValueError(f'{flag}: no {kind} {unknown}; the {kind}s: '
                     f'{", ".join(settings)}.')
  return [setting for setting in settings if setting in (names or settings)]


def evaluation_command(workdir: str, seed: int,
                       evaluation: Evaluation) -> List[str]:
  """programs/evaluate.py on the run's last learner checkpoint. Its
  environment (and epsilon) draw from the run's seed, so that the seeds'
  evaluations are independent of one another."""
  epsilon = ([] if evaluation.epsilon is None
             else [f'--epsilon={evaluation.epsilon:g}'])
  return [os.path.join('.venv', 'bin', 'python'),
          os.path.join('programs', 'evaluate.py'), f'--workdir={workdir}',
          f'--episodes={evaluation.episodes}', *epsilon, f'--seed={seed}',
          f'--output={os.path.join(workdir, evaluation.file)}']


def unevaluated(workdir: str, evaluation: Evaluation) -> str:
  """What to say of a banked run in `workdir` without `evaluation`."""
  return (f'{os.path.join(workdir, evaluation.file)}: the run was banked '
          'without this evaluation, and the bank keeps no checkpoints, so '
          'its final policy cannot be evaluated again. If the run\'s own '
          'directory (with its checkpoints) is still in --runs, remove the '
          f'banked copy (git rm -r {workdir}) and run the same command: it '
          'evaluates the run there and banks it anew; else remove the '
          'banked copy to make the run again.')


def evaluate(workdir: str, seed: int,
             evaluation: Evaluation) -> Dict[str, object]:
  """The final policy's `evaluation` (made now unless already made)."""
  return run.evaluation(workdir, evaluation.file,
                        evaluation_command(workdir, seed, evaluation),
                        unevaluated(workdir, evaluation))


def check_environment(workdir: str, env: str):
  """Refuses a run in `workdir` made with another environment than `env`."""
  if not run.started(workdir):
    return
  made_with = run_manifest.read_manifest(workdir)['env']
  if made_with != env:
    raise ValueError(
        f'{workdir} holds a run of {made_with!r}, not of {env!r}: choose '
        'another --runs for this protocol\'s runs.')


def plan(analysis: str, settings: List[str], seeds: List[int],
         evaluations: List[Evaluation]
         ) -> List[Tuple[str, int, str, List[str]]]:
  """What running `seeds` of `settings` would do now, in order: (setting,
  seed, step, command), the step one of 'train', 'resume', 'evaluate'; or
  'banked' (the banked run read, not run again) and 'missing' (an
  evaluation a banked run lacks, which cannot be made: the bank has no
  checkpoints)."""
  envs = environments(analysis)
  steps = []
  for seed in seeds:
    for setting in settings:
      workdir = run.run_directory(analysis, setting, seed)
      check_environment(workdir, envs[setting])
      if run.banked(analysis, setting, seed):
        banked = run.banked_directory(analysis, setting, seed)
        check_environment(banked, envs[setting])
        steps.append((setting, seed, 'banked', [banked]))
        workdir = run.finished_directory(analysis, setting, seed)
      elif not run.finished(workdir):
        if run.started(workdir):
          steps.append((setting, seed, 'resume',
                        run.resume_command(analysis, setting, workdir)))
        else:
          steps.append((setting, seed, 'train',
                        run.command(analysis, setting, seed, workdir)))
      for evaluation in evaluations:
        if os.path.isfile(os.path.join(workdir, evaluation.file)):
          continue
        if bank.holds(workdir):
          steps.append((setting, seed, 'missing',
                        [unevaluated(workdir, evaluation)]))
        else:
          steps.append((setting, seed, 'evaluate',
                        evaluation_command(workdir, seed, evaluation)))
  return steps


def main(analysis: str, settings: List[str], seeds: List[int],
         evaluations: List[Evaluation], report: Callable[[List[int]], None]):
  """The page's command: `--dry_run` prints `plan`; else each seed's
  settings are run (unless `--report_only`), evaluated and banked, then
  `report` writes the page from every seed with a finished run
  (`run.reported_seeds`), and the runs it evaluated are banked."""
  if FLAGS.dry_run:
    for setting, seed, step, argv in plan(analysis, settings, seeds,
                                          evaluations):
      print(f'{setting} seed {seed} {step}: {" ".join(argv)}')
    return
  envs = environments(analysis)
  if not FLAGS.report_only:
    for seed in seeds:
      for setting in settings:
        check_environment(run.run_directory(analysis, setting, seed),
                          envs[setting])
        workdir = run.run(analysis, setting, seed, resume=True)
        for evaluation in evaluations:
          evaluate(workdir, seed, evaluation)
        if FLAGS.bank:
          run.bank_run(analysis, setting, seed)
  reported = run.reported_seeds(analysis, seeds)
  report(reported)
  if FLAGS.bank:  # Runs the report evaluated: it reads every setting's.
    for seed in reported:
      for setting in run.ANALYSES[analysis]['settings']:
        run.bank_run(analysis, setting, seed)
