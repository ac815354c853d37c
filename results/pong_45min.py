"""The opening of results/pong_45min.md, made from results/pong_45min.json:
the `atari_small` preset beside its starting point on Pong, 45 minutes, 3
seeds each, with the tests of their difference; and settings that ran on
different days compared at equal learner updates (`BY_UPDATES`), not at
equal minutes. The rest of the page (the single runs of variants, what the
runs show) is written by hand; the JSON holds every run's figures.
`results/pages.py` writes the opening anew.

A run made by the page's protocol (`COMMAND`) becomes an entry of the JSON
with

  .venv/bin/python -m results.pong_45min --workdir=<run> --name=<key> \
      --commit=<commit it ran> --machine=quiet --placement=sized \
      --bare_learner_updates_per_second=<benchmarks/bare_loops.py learner>

which evaluates its final policy both ways (unless its directory holds the
evaluations already) and refuses a run made otherwise, or a key already in
the JSON.
"""

import csv
import json
import math
import os
import re
import subprocess
import sys
from typing import Dict, List, Optional, Sequence, Tuple

from absl import app
from absl import flags
import numpy as np
from scipy import stats

from launch.runs import run_manifest
from results import page_registry
from results import spread

NAME = 'pong_45min'
BEGIN = '<!-- opening: made by python -m results.pages pong_45min -->'
END = '<!-- end of the opening -->'

# The settings of the page's comparisons: each one's label and the pattern
# of its runs' keys (the whole key; a run of another length or resumed past
# the budget has a key of its own that none matches).
GROUPS = (('`atari_small`', r'atari_small_seed\d+'),
          ('starting point', r'issue_start_onednn(_seed\d+)?'),
          ('`atari_small` with placement', r'atari_small_placed_seed\d+'),
          ('`atari_small` before placement',
           r'atari_small_tf_default_seed\d+'))
# The comparisons of final policies, after the same minutes on one day: a
# setting, the one it is measured against (indices into GROUPS), the
# alternative of the rank test: whether the first is ahead ('greater'), or
# either way ('two-sided': a change that should not move the return, as
# placing the nodes); and what the design leaves open, said beside the
# verdict (empty when the two ran alike). The preset and its starting point
# ran one after another on one day, on one commit.
COMPARISONS = ((0, 1, 'greater', ''),)
# The comparisons of settings whose runs ran on different days, alike but
# made at equal learner updates (`at_equal_updates`): the machine's speed
# varied from day to day, so the same minutes gave one day's runs more
# updates than another's. Placement is measured against the three seeds of
# an earlier day and commit, and against the program before it
# (`--placement=tf_default`), whose seeds 2 and 3 each ran back to back
# with the placed run of that seed, the other placed seeds on days of their
# own. What each leaves open has neither ': ' nor '; ' (the README's table
# splits its cell at those).
ACROSS_DAYS = ('the two ran on different commits, and the page\'s same-day '
               'pair of the two commits, one seed, shows no difference the '
               'code makes')
PARTLY_ACROSS_DAYS = ('seeds 2 and 3 of the two ran back to back on one '
                      'day, the other placed seeds on days of their own')
BY_UPDATES = ((2, 0, 'two-sided', ACROSS_DAYS),
              (2, 3, 'two-sided', PARTLY_ACROSS_DAYS))
# A run's return at a mark of U learner updates: the mean of its
# evaluator's rounds (10 episodes at the evaluator's epsilon, 0.001) whose
# policy's learner steps lie within MARK_WINDOW of U; the marks are the
# multiples of MARK_SPACING, as the page's hand-written table of rounds.
MARK_SPACING = 8000
MARK_WINDOW = 4000
# Each final policy's two evaluations: the key of its figures in a run, and
# what it was.
EVALUATIONS = (('greedy_return', 'greedy, 10 episodes'),
               ('epsilon_0.001_return', 'epsilon 0.001, 30 episodes'))
# The command of every run on the page, its workdir written <workdir>; and
# the values its run.json must hold for it.
COMMAND = ('python programs/apex_dqn.py --lp_launch_type=local_mp '
           '--preset=atari_small --seed={seed} --workdir=<workdir> '
           '--checkpoint_every=300 --max_seconds=2700 '
           '--atari_evaluation=noops')
PROTOCOL = {'program': 'apex_dqn', 'env': 'atari:Pong', 'preset': 'atari_small'}
PROTOCOL_FLAGS = {'checkpoint_every': 300.0, 'max_seconds': 2700.0,
                  'atari_evaluation': 'noops'}
# The launcher's --placement, which run.json does not record (a relaunch
# may change it); a run with another has it in its command.
DEFAULT_PLACEMENT = 'sized'
# Each evaluation's file in the run's directory and programs/evaluate.py's
# flags for it (the greedy one with the program's default seed, 0).
EVALUATION_RUNS = {
    'greedy_return': ('evaluation_greedy_10.json',
                      ['--episodes=10', '--atari_evaluation=noops']),
    'epsilon_0.001_return': ('evaluation_epsilon_0.001_30.json',
                             ['--episodes=30', '--epsilon=0.001', '--seed=1',
                              '--atari_evaluation=noops']),
}
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def group_values(data, pattern: str, key: str) -> Dict[int, float]:
  """{seed: mean return} of the runs whose key is `pattern` (a regular
  expression, matching the whole key), from their evaluation `key`."""
  return {run['seed']: run[key]['mean'] for run in group_runs(data, pattern)}


def group_runs(data, pattern: str) -> List[Dict[str, object]]:
  """The runs whose key is `pattern` (as `group_values`)."""
  return [run for name, run in sorted(data['runs'].items())
          if re.fullmatch(pattern, name)]


def evaluations(data) -> List[Tuple[str, str, List[Dict[int, float]]]]:
  """For each of EVALUATIONS: (its key, what it was, each group's {seed:
  mean return} in the order of GROUPS)."""
  return [(key, evaluation,
           [group_values(data, pattern, key) for _, pattern in GROUPS])
          for key, evaluation in EVALUATIONS]


def value_at(run, updates: int) -> Optional[float]:
  """The mean return of `run`'s evaluator rounds whose learner steps are
  within MARK_WINDOW of `updates` (None if it has none there)."""
  returns = [value for steps, value in zip(
      run.get('evaluator_rounds_learner_steps', []),
      run.get('evaluator_rounds_mean_return', []))
             if abs(steps - updates) <= MARK_WINDOW]
  return float(np.mean(returns)) if returns else None


def common_mark(runs: Sequence[Dict[str, object]]) -> int:
  """The largest multiple of MARK_SPACING at which every one of `runs` has
  an evaluator round (`value_at`): the most updates all of them reached,
  as their evaluators saw it.

  Raises:
    ValueError: no mark has a round of every run.
  """
  top = max(max(run.get('evaluator_rounds_learner_steps', [0]) or [0])
            for run in runs)
  for mark in range(top // MARK_SPACING * MARK_SPACING + MARK_SPACING, 0,
                    -MARK_SPACING):
    if all(value_at(run, mark) is not None for run in runs):
      return mark
  raise ValueError('no mark of updates has an evaluator round of every run')


def at_equal_updates(data, comparison: Tuple[int, int, str, str]
                     ) -> Tuple[int, Dict[int, float], Dict[int, float]]:
  """(the mark U, the first setting's {seed: return at U}, the second's) of
  a comparison of BY_UPDATES: U the largest mark every run of both reached
  (`common_mark`), each run's return there `value_at`'s."""
  one, other = (group_runs(data, GROUPS[index][1])
                for index in comparison[:2])
  mark = common_mark(one + other)
  return (mark, {run['seed']: value_at(run, mark) for run in one},
          {run['seed']: value_at(run, mark) for run in other})


def tests(first: Sequence[float], second: Sequence[float],
          alternative: str = 'greater') -> Tuple[float, float, float]:
  """The difference of the means (first minus second), Welch's t-test's
  two-sided p and the exact Mann-Whitney U test's p (`alternative`:
  'greater', the first ahead; or 'two-sided'). Where values tie (rounds
  of 0.1 may), the p is that of U over every split of the pooled values,
  ties counting half (SciPy's 'exact' method assumes no ties)."""
  welch = stats.ttest_ind(first, second, equal_var=False)
  pooled = list(first) + list(second)
  method = ('exact' if len(set(pooled)) == len(pooled) else
            stats.PermutationMethod(
                n_resamples=math.comb(len(pooled), len(first))))
  ranks = stats.mannwhitneyu(first, second, alternative=alternative,
                             method=method)
  return (float(np.mean(first) - np.mean(second)), float(welch.pvalue),
          float(ranks.pvalue))


def smallest_rank_p(first: int, second: int, alternative: str) -> float:
  """The smallest p the exact rank test can give with `first` runs against
  `second`: every run of one above every run of the other."""
  return (1 if alternative == 'greater' else 2) / math.comb(
      first + second, first)


def compare(first: Sequence[float], second: Sequence[float],
            comparison: Tuple[int, int, str, str] = COMPARISONS[0]
            ) -> Tuple[float, float, float, float, float, str]:
  """(difference of the means, low, high, Welch's p, Mann-Whitney p, the
  verdict) of the `comparison`'s first setting's seeds (`first`) against
  its second's: the interval is `spread.difference_interval`'s, the verdict
  `spread.verdict`'s, followed by what the comparison's design leaves
  open, if anything."""
  one, other, alternative, open_ = comparison
  difference, welch, ranks = tests(first, second, alternative)
  _, low, high = spread.difference_interval(first, second)
  said = spread.verdict(GROUPS[one][0], f'the {GROUPS[other][0]}', low,
                        high, welch, seeds=min(len(first), len(second)))
  if open_:
    said += f' ({open_})'
  return difference, low, high, welch, ranks, said


def _comparison(what: str, groups: Dict[int, Dict[int, float]],
                comparison: Tuple[int, int, str, str]) -> str:
  """The line of a comparison of `what` (an evaluation, or the evaluator's
  rounds at a mark): `groups` holds each compared setting's {seed: value}
  by its index into GROUPS."""
  one, other, alternative, _ = comparison
  first, second = (list(groups[one].values()), list(groups[other].values()))
  difference, low, high, welch, ranks, said = compare(first, second,
                                                      comparison)
  sided = 'one-sided' if alternative == 'greater' else 'two-sided'
  if min(first) > max(second):
    apart = f': every run of {GROUPS[one][0]} above every run of the other'
  elif max(first) < min(second):
    apart = f': every run of {GROUPS[one][0]} below every run of the other'
  else:
    apart = ''
  return (f'- {what}, {GROUPS[one][0]} minus {GROUPS[other][0]}: '
          f'{difference:.1f} {spread.interval_text(low, high)} (Welch\'s '
          f't-test, two-sided p = {welch:.2f}; Mann-Whitney U test, {sided} '
          f'exact p = {ranks:.2f}, at least '
          f'{smallest_rank_p(len(first), len(second), alternative):.2f} with '
          f'{_runs(len(first))} against {len(second)}{apart}): {said}')


def at_mark(mark: int) -> str:
  """What a comparison at equal updates compares: '... at 32K updates'."""
  return f'the evaluator\'s rounds at {mark / 1000:.0f}K updates'


def _where(data) -> str:
  """Where each setting's runs ran: their commits, machines and, where
  measured, the machine's speed (the bare learner's updates a second);
  settings whose runs ran alike are named together."""
  where: Dict[str, List[str]] = {}
  for label, pattern in GROUPS:
    runs = group_runs(data, pattern)
    commits = sorted({run['commit'] for run in runs})
    machines = sorted({run['machine'] for run in runs})
    if len(machines) == 1:
      machine = f'on a {machines[0]} machine'
    else:  # Each run's, by seed.
      machine = 'the machine ' + '; '.join(
          f'{run["machine"]} (seed {run["seed"]})' for run in runs)
    speeds = sorted({run['bare_learner_updates_per_second'] for run in runs
                     if 'bare_learner_updates_per_second' in run})
    speed = (f' (the bare learner update: {", ".join(map(str, speeds))} a '
             'second those days)' if speeds else '')
    where.setdefault(
        f'on commit{"s" if len(commits) > 1 else ""} {", ".join(commits)}, '
        f'{machine}{speed}', []).append(label)
  return '; '.join(f'{" and ".join(labels)} {said}'
                   for said, labels in where.items())


def _runs(count: int) -> str:
  return f'{count} run{"" if count == 1 else "s"}'


def opening(data) -> List[str]:
  """The answer: each group's final returns over seeds, and the tests; then
  the settings of different days at equal updates."""
  minutes = data['budget_seconds'] / 60
  values, comparisons = {}, []
  for _, evaluation, groups in evaluations(data):
    for (label, _), by_seed in zip(GROUPS, groups):
      values[f'{label}, {evaluation}'] = by_seed
    comparisons += [_comparison(evaluation, dict(enumerate(groups)),
                                comparison)
                    for comparison in COMPARISONS]
  sizes = [len(by_seed) for by_seed in groups]
  at_updates, by_updates, marks = {}, [], set()
  for comparison in BY_UPDATES:
    mark, first, second = at_equal_updates(data, comparison)
    marks.add(mark)
    for index, by_seed in zip(comparison[:2], (first, second)):
      at_updates[f'{GROUPS[index][0]}, {at_mark(mark)}'] = by_seed
    by_updates.append(_comparison(
        at_mark(mark), {comparison[0]: first, comparison[1]: second},
        comparison))
  return [
      f'**After {minutes:.0f} minutes ({data["budget_seconds"]:,} s) on 2 '
      f'cores, up to {spread.seeds_phrase(max(sizes), "a setting")}**, one '
      f'run after another: {_where(data)}. Each final policy '
      'was evaluated twice, each episode from up to 30 random no-op starts '
      '(`--atari_evaluation=noops`): greedy over 10 episodes '
      '(`programs/evaluate.py --episodes=10 --atari_evaluation=noops`) and '
      'over 30 episodes at the evaluator\'s epsilon (`--episodes=30 '
      '--epsilon=0.001 --seed=1 --atari_evaluation=noops`). '
      f'Its mean return{spread.how_stated(max(sizes))}:', '',
      *spread.seed_table('setting, evaluation', 'mean return', values), '',
      'Each difference of IQMs, its 95% interval (each setting\'s seeds '
      'resampled on their own) and two tests of the difference. '
      f'{spread.how_compared(max(sizes))} The final policies compare the '
      'preset with its starting point, whose runs ran one after another on '
      'one day:', '', *comparisons, '',
      '**Settings that ran on different days compare at equal learner '
      'updates**, not at equal minutes: the machine\'s speed varied from '
      'day to day (the bare learner update above), so 45 minutes gave one '
      'day\'s runs more updates than another\'s. A run\'s return at a mark '
      'of U updates is the mean of its evaluator\'s rounds (10 episodes '
      'each at its epsilon, 0.001) whose policy\'s learner steps lie within '
      f'{MARK_WINDOW:,} of U, as in the table of rounds below; U is the '
      f'largest multiple of {MARK_SPACING:,} at which every run of both '
      'settings has such a round, here '
      f'{" and ".join(f"{mark:,}" for mark in sorted(marks))} updates. '
      'Each run\'s return at the mark:', '',
      *spread.seed_table('setting, at the mark', 'mean return', at_updates),
      '', 'The same tests, the same rule:', '', *by_updates, '',
      f'Every run\'s figures: [{NAME}.json]({NAME}.json).']


def with_current_opening(text: str, data) -> str:
  """`text` (the page) with the opening between BEGIN and END made anew
  from `data` (the page's JSON)."""
  head, rest = text.split(BEGIN, 1)
  _, tail = rest.split(END, 1)
  return '\n'.join([f'{head}{BEGIN}', *opening(data), f'{END}{tail}'])


def check_protocol(manifest) -> List[str]:
  """What in a run's run.json (`manifest`) differs from the page's
  protocol; empty when it followed it."""
  wrong = [f'{key} {manifest.get(key)!r} (the page\'s: {value!r})'
           for key, value in PROTOCOL.items() if manifest.get(key) != value]
  wrong += [f'--{name}={manifest["flags"].get(name)!r} (the page\'s: '
            f'{value!r})' for name, value in PROTOCOL_FLAGS.items()
            if manifest['flags'].get(name) != value]
  if manifest.get('flag_changes'):
    wrong.append('flags changed on a resume '
                 f'({manifest["flag_changes"][-1]["changed"]})')
  return wrong


def protocol_manifest(workdir: str) -> Dict[str, object]:
  """The run.json of the run in `workdir`; ValueError naming what differs
  if the run did not follow the page's protocol."""
  with open(os.path.join(workdir, 'run.json')) as f:
    manifest = json.load(f)
  wrong = check_protocol(manifest)
  if wrong:
    raise ValueError(f'{workdir} was not run by the page\'s protocol: '
                     f'{"; ".join(wrong)}.')
  return manifest


def budget_counts(workdir: str) -> Dict[str, int]:
  """The counts the coordinator recorded as the wall-clock budget ran out
  (its stop.json): the actor steps of the budget."""
  stop = run_manifest.read_record(workdir, run_manifest.STOP_RECORD)
  if (stop is None or stop.get('failed') or
      not stop.get('reason', '').startswith('ran for ')):
    raise ValueError(f'{workdir} did not reach its budget (its stop.json: '
                     f'{stop}).')
  return stop['counts']


def evaluator_rounds(rows: List[Dict[str, str]], size: int = 10
                     ) -> Tuple[List[float], List[int]]:
  """The mean return of each complete round of `size` episodes of the
  evaluator's log (`rows`, its logs.csv), and the learner steps of the
  policy it evaluated (round_learner_steps), in the order they ran."""
  rounds: Dict[int, List[float]] = {}
  for row in rows:
    rounds.setdefault(int(float(row['round_learner_steps'])), []).append(
        float(row['episode_return']))
  complete = [(steps, returns[:size]) for steps, returns in rounds.items()
              if len(returns) >= size]
  return ([round(float(np.mean(returns)), 1) for _, returns in complete],
          [steps for steps, _ in complete])


def _greedy(evaluation) -> Dict[str, float]:
  returns = np.asarray(evaluation['returns'], dtype=float)
  return {'mean': round(float(returns.mean()), 1),
          'median': round(float(np.median(returns)), 1),
          'std': round(float(returns.std(ddof=1)), 2),
          'min': float(returns.min()), 'max': float(returns.max()),
          'mean_length': round(float(np.mean(evaluation['lengths'])), 1)}


def _epsilon(evaluation) -> Dict[str, float]:
  returns = np.asarray(evaluation['returns'], dtype=float)
  distinct = set(zip(evaluation['returns'], evaluation['lengths']))
  return {'episodes': len(returns), 'seed': evaluation['seed'],
          'mean': round(float(returns.mean()), 2),
          'standard_error': round(
              float(returns.std(ddof=1) / math.sqrt(len(returns))), 2),
          'median': float(np.median(returns)),
          'min': float(returns.min()), 'max': float(returns.max()),
          'distinct_episodes': len(distinct)}


def short_commit(commit: str) -> str:
  """`commit` as the page names commits: its first 7 hex digits.

  Raises:
    ValueError: `commit` is not a hash of 7 to 40 hex digits.
  """
  if not re.fullmatch(r'[0-9a-f]{7,40}', commit):
    raise ValueError(f'--commit={commit}: give the hash of the commit the '
                     'run was made with (git rev-parse --short HEAD).')
  return commit[:7]


def entry(workdir: str, evaluations_: Dict[str, dict], commit: str,
          machine: str, onednn: bool, placement: Optional[str],
          bare_updates_per_second: Optional[float]) -> Dict[str, object]:
  """The JSON entry of the run in `workdir`, whose final policy's
  `evaluations_` ({key of EVALUATION_RUNS: programs/evaluate.py's output})
  were made.

  Raises:
    ValueError: the run did not follow the page's protocol, or did not reach
      its budget, or its evaluations are of different policies.
  """
  commit = short_commit(commit)
  manifest = protocol_manifest(workdir)
  steps = {evaluation['learner_steps'] for evaluation in evaluations_.values()}
  if len(steps) != 1:
    raise ValueError(f'the evaluations of {workdir} are of different '
                     f'policies (learner steps {sorted(steps)}).')
  with open(os.path.join(workdir, 'logs', 'evaluator', 'logs.csv')) as f:
    rounds, round_steps = evaluator_rounds(list(csv.DictReader(f)))
  greedy = evaluations_['greedy_return']
  epsilon = evaluations_['epsilon_0.001_return']
  run = {
      'command': COMMAND.format(seed=manifest['flags']['seed']) + (
          f' --placement={placement}'
          if placement not in (None, DEFAULT_PLACEMENT) else ''),
      'commit': commit, 'seed': manifest['flags']['seed'],
      'learner_steps': steps.pop(),
      'actor_steps': budget_counts(workdir)['actor_steps'],
      'greedy_return': _greedy(greedy),
      'greedy_returns': [float(r) for r in greedy['returns']],
      'evaluator_rounds_mean_return': rounds,
      'evaluator_rounds_learner_steps': round_steps,
      'machine': machine, 'onednn': onednn,
  }
  if placement:
    run['placement'] = placement
  if bare_updates_per_second is not None:
    run['bare_learner_updates_per_second'] = bare_updates_per_second
  run['epsilon_0.001_return'] = _epsilon(epsilon)
  run['epsilon_0.001_returns'] = [float(r) for r in epsilon['returns']]
  return run


def evaluate(workdir: str) -> Dict[str, dict]:
  """Each of EVALUATION_RUNS of the run's final policy, read from its file
  in `workdir`, made first by programs/evaluate.py if it is not there."""
  found = {}
  for key, (file, evaluation_flags) in EVALUATION_RUNS.items():
    path = os.path.join(workdir, file)
    if not os.path.isfile(path):
      argv = [sys.executable, os.path.join('programs', 'evaluate.py'),
              f'--workdir={workdir}', *evaluation_flags, f'--output={path}']
      print(' '.join(argv), flush=True)
      subprocess.check_call(argv, cwd=ROOT)
    with open(path) as f:
      found[key] = json.load(f)
  return found


def add_run(path: str, name: str, run: Optional[Dict[str, object]]):
  """Adds `run` to the page's JSON at `path` as `name`, which must be new:
  a run on the page is never replaced (ValueError). With `run` None, only
  checks that `name` is new."""
  with open(path) as f:
    data = json.load(f)
  if name in data['runs']:
    raise ValueError(f'{path} holds a run named {name!r} already; choose '
                     'another --name (a run on the page is never replaced).')
  if run is None:
    return
  data['runs'][name] = run
  temporary = f'{path}.tmp'
  with open(temporary, 'w') as f:
    json.dump(data, f, indent=1)
    f.write('\n')
  os.replace(temporary, path)


def define_flags():
  """The flags of `main`, defined only when this module runs as a program
  (other results modules define some of these names)."""
  flags.DEFINE_string('workdir', None, 'The run\'s directory.')
  flags.DEFINE_string('json', os.path.join(ROOT, 'results', f'{NAME}.json'),
                      'The page\'s JSON, which gains the run.')
  flags.DEFINE_string('name', None, 'Its key in the JSON, e.g. '
                      'atari_small_placed_seed2. A key that one of GROUPS\' '
                      'patterns matches joins the page\'s comparisons.')
  flags.DEFINE_string('commit', None, 'The commit the run was made with.')
  flags.DEFINE_string('machine', 'quiet', 'What shared the machine.')
  flags.DEFINE_bool('onednn', True, 'Whether the run had oneDNN\'s kernels '
                    '(TF_ENABLE_ONEDNN_OPTS, on unless set to 0).')
  flags.DEFINE_string('placement', None, 'Its launch\'s --placement (sized, '
                      'the default; tf_default, TensorFlow\'s own pools), '
                      'for a run made since the flag.')
  flags.DEFINE_float('bare_learner_updates_per_second', None, 'The machine\'s '
                     'speed that day: benchmarks/bare_loops.py learner '
                     '--preset=atari_small.')


def main(argv: List[str]):
  del argv
  missing = [name for name in ('workdir', 'name', 'commit')
             if getattr(flags.FLAGS, name) is None]
  if missing:
    sys.exit(f'error: give {", ".join("--" + name for name in missing)}.')
  options = flags.FLAGS
  try:
    # The refusals before the evaluations, which take minutes.
    short_commit(options.commit)
    protocol_manifest(options.workdir)
    add_run(options.json, options.name, None)
    run = entry(options.workdir, evaluate(options.workdir), options.commit,
                options.machine, options.onednn, options.placement,
                options.bare_learner_updates_per_second)
    add_run(options.json, options.name, run)
  except ValueError as error:
    sys.exit(f'error: {error}')
  print(f'Added {options.name} to {options.json}: greedy '
        f'{run["greedy_return"]["mean"]}, epsilon 0.001 '
        f'{run["epsilon_0.001_return"]["mean"]}, {run["learner_steps"]:,} '
        f'updates, {run["actor_steps"]:,} actor steps.')

def _render_page(data) -> str:
  """The page as it stands, its opening made again from `data`."""
  with open(page_registry.page_path(NAME)) as f:
    return with_current_opening(f.read(), data)


page_registry.register(NAME, _render_page)


if __name__ == '__main__':
  define_flags()
  app.run(main)
