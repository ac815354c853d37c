"""The bank of finished runs: each finished run's small files, kept in the
repository under `results/banked/<analysis>/<setting>/seed<k>/` (the
layout of the runs directory), so that a run outlives the machine that made
it. A results table needs more runs than one working session makes, and the
runs directory (outside the repository) is lost when the machine is
replaced; the pages need only these files of a run.

  .venv/bin/python -m results.bank --runs=<dir>              # every analysis
  .venv/bin/python -m results.bank --runs=<dir> minatar dpg  # these

A run's small files (`small_files`): its records (the JSON files at its top:
finished.json, run.json, launches.json, stop.json, the evaluations of its
final policy), its output (output.txt), its nodes' CSV logs
(logs/<node>/logs.csv) and the counter's and coordinator's logs (the final
counts). Not its checkpoints, policy snapshots, TensorBoard events or the
other nodes' logs: a banked run can be read, not resumed or evaluated.

The bank is in git, and a run's files name where it was made (its
commands' --workdir, its status lines): a banked copy names the run's own
directory `<run>`, the directory of its runs `<runs>` and the repository
`<repo>` instead (`banked_bytes`), and is compared with the run as so
written.

A banked run is the record: banking again adds the files it lacks (an
evaluation made since) and never changes one it holds; a run whose file
differs from its banked copy is refused (`Refused`), naming both. results/run.py
and results/minatar.py read a banked run as a finished one (`choose`) and
bank each run when it is finished (and evaluated), unless `--nobank`.
"""

import os
import re
import shutil
import sys
from typing import List, NamedTuple, Optional

from absl import app
from absl import flags

flags.DEFINE_string('runs', None, 'Directory of the runs (default: '
                    'results/runs).')
flags.DEFINE_string('bank_dir', None, 'Directory of the bank of finished '
                    'runs (default: results/banked).')
flags.DEFINE_bool('bank', True, 'Bank each run of the runs directory once '
                  'it is finished (results.minatar: and evaluated).')
FLAGS = flags.FLAGS

RESULTS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(RESULTS)
FINISHED = 'finished.json'
# A run's small files besides its top-level JSON records.
OUTPUT = 'output.txt'
NODE_CSV = re.compile(r'logs/[^/]+/logs\.csv')
# The final counts (results/run.py's `final_counts`).
COUNT_LOGS = ('logs/counter.log', 'logs/coordinator.log')
SEED = re.compile(r'seed\d+')
# A banked run above this size is pointed out: the bank is in git.
LARGE_RUN_BYTES = 2 ** 20


def runs_directory() -> str:
  """Where the runs are made: `--runs`, else results/runs."""
  return FLAGS.runs or os.path.join(RESULTS, 'runs')


def directory() -> str:
  """Where the finished runs are banked: `--bank_dir`, else
  results/banked."""
  return FLAGS.bank_dir or os.path.join(RESULTS, 'banked')


def finished(workdir: str) -> bool:
  return os.path.isfile(os.path.join(workdir, FINISHED))


def holds(workdir: str) -> bool:
  """Whether `workdir` is in the bank."""
  bank = os.path.abspath(directory())
  return os.path.commonpath([bank, os.path.abspath(workdir)]) == bank


def small_files(workdir: str) -> List[str]:
  """The paths (relative, '/'-separated, sorted) of the files of `workdir`
  that are banked."""
  found = []
  for top, _, names in os.walk(workdir):
    for name in names:
      path = os.path.relpath(os.path.join(top, name), workdir).replace(
          os.sep, '/')
      if (('/' not in path and (path.endswith('.json') or path == OUTPUT))
          or NODE_CSV.fullmatch(path) or path in COUNT_LOGS):
        found.append(path)
  return sorted(found)


def size(workdir: str) -> int:
  """Bytes of the small files of `workdir`."""
  return sum(os.path.getsize(os.path.join(workdir, path))
             for path in small_files(workdir))


def banked_bytes(workdir: str, path: str) -> bytes:
  """The content of `workdir`'s file `path` as the bank holds it: this
  machine's directories (the run's, its parent's parent's, the
  repository's) named by placeholders, longest first."""
  with open(os.path.join(workdir, path), 'rb') as f:
    data = f.read()
  run = os.path.abspath(workdir)
  runs = os.path.dirname(os.path.dirname(os.path.dirname(run)))
  for directory_, name in ((run, b'<run>'), (runs, b'<runs>'),
                           (ROOT, b'<repo>')):
    if len(directory_) > 1:  # Never the root directory alone.
      data = data.replace(directory_.encode(), name)
  return data


def _same(workdir: str, banked: str, path: str) -> bool:
  """Whether `path` of `workdir`, as banked, is `banked`'s copy."""
  with open(os.path.join(banked, path), 'rb') as f:
    return banked_bytes(workdir, path) == f.read()


class Differences(NamedTuple):
  """How a run's small files differ from its banked copy's."""
  changed: List[str]  # In both, with different bytes.
  unbanked: List[str]  # In the run alone.
  only_banked: List[str]  # In the bank alone.


def differences(workdir: str, banked: str) -> Differences:
  ours, theirs = set(small_files(workdir)), set(small_files(banked))
  changed = [path for path in sorted(ours & theirs)
             if not _same(workdir, banked, path)]
  return Differences(changed, sorted(ours - theirs), sorted(theirs - ours))


class Refused(ValueError):
  """A run whose small files differ from its banked copy's: the bank keeps
  its copy. The message names both and what to do."""

  def __init__(self, workdir: str, banked: str, changed: List[str]):
    super().__init__(
        f'{workdir} differs from its banked copy {banked} in '
        f'{", ".join(changed)}: the banked copy is the record, and is kept. '
        'If the run in the runs directory is the one to keep, remove the '
        f'banked copy (git rm -r {banked}) and bank again; otherwise move '
        'the run in the runs directory away.')


def bank(workdir: str, banked: str) -> Optional[str]:
  """Copies the small files of the finished run in `workdir` to `banked`
  (its place in the bank), and says what it did: banked the run, or added
  the files its banked copy lacked; None if it was banked already. A new
  banked run appears whole (copied beside it, then renamed).

  Raises:
    Refused: a file of the run differs from its banked copy's.
  """
  if not finished(workdir):
    raise ValueError(f'{workdir} is not a finished run (no {FINISHED}).')
  if not os.path.isdir(banked):
    partial = f'{banked}.partial'
    if os.path.isdir(partial):
      shutil.rmtree(partial)
    _copy(workdir, partial, small_files(workdir))
    os.rename(partial, banked)
    return f'banked {banked} ({_kib(size(banked))})'
  found = differences(workdir, banked)
  if found.changed:
    raise Refused(workdir, banked, found.changed)
  if not found.unbanked:
    return None
  # A finished record before the rest would make a part look whole.
  _copy(workdir, banked, sorted(found.unbanked, key=lambda p: p == FINISHED))
  return (f'added {", ".join(found.unbanked)} to {banked} '
          f'({_kib(size(banked))})')


def _copy(workdir: str, banked: str, paths: List[str]):
  """Copies `paths` of `workdir` to `banked`, each written beside its place
  and renamed into it."""
  for path in paths:
    target = os.path.join(banked, path)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(f'{target}.partial', 'wb') as f:
      f.write(banked_bytes(workdir, path))
    os.replace(f'{target}.partial', target)


def copy_missing(workdir: str, banked: str, paths: List[str]):
  """Copies each of `paths` that `workdir` has and `banked` does not yet:
  a banked file is never changed (results/chaos.py's and
  results/a3c_diagnosis.py's records)."""
  for path in paths:
    source, target = os.path.join(workdir, path), os.path.join(banked, path)
    if os.path.exists(source) and not os.path.exists(target):
      os.makedirs(os.path.dirname(target), exist_ok=True)
      shutil.copyfile(source, target)


def choose(workdir: str, banked: str) -> Optional[str]:
  """The finished run to read: the one in the runs directory (`workdir`)
  if the bank has none, or an identical one (its checkpoints let it be
  evaluated); else the banked one (`banked`), with a warning when the runs
  directory holds a finished run that differs from it. None when neither
  is finished."""
  if not finished(banked):
    return workdir if finished(workdir) else None
  if not finished(workdir):
    return banked
  found = differences(workdir, banked)
  if any(found):
    what = '; '.join(f'{label}: {", ".join(paths)}' for label, paths in (
        ('changed', found.changed), ('not banked', found.unbanked),
        ('banked alone', found.only_banked)) if paths)
    fix = (f' (.venv/bin/python -m results.bank --runs={runs_directory()} '
           'banks the files it lacks)' if not found.changed else '')
    sys.stderr.write(f'warning: {workdir} differs from its banked copy '
                     f'({what}): reading the banked copy {banked}{fix}.\n')
    return banked
  return workdir


def _kib(count: int) -> str:
  return f'{count / 1024:,.0f} KiB'


def finished_runs(runs: str, analyses: List[str]) -> List[str]:
  """The finished runs' directories under `runs`
  (<analysis>/<setting>/seed<k>), of `analyses` (all when empty)."""
  if not os.path.isdir(runs):
    raise ValueError(f'There is no runs directory {runs}: pass --runs=<the '
                     'directory of the runs>.')
  found = []
  for analysis in analyses or sorted(os.listdir(runs)):
    if not os.path.isdir(os.path.join(runs, analysis)):
      raise ValueError(f'{runs} has no runs of {analysis!r}.')
    for setting in sorted(os.listdir(os.path.join(runs, analysis))):
      parent = os.path.join(runs, analysis, setting)
      if not os.path.isdir(parent):
        continue
      found += [os.path.join(parent, seed) for seed in sorted(
          os.listdir(parent)) if SEED.fullmatch(seed) and
                finished(os.path.join(parent, seed))]
  return found


def bank_all(runs: str, analyses: List[str]) -> List[Refused]:
  """Banks every finished run under `runs` (of `analyses`, all when empty),
  saying what it did for each; returns the refusals, each said too."""
  refused = []
  for workdir in finished_runs(runs, analyses):
    banked = os.path.join(directory(), os.path.relpath(workdir, runs))
    try:
      print(bank(workdir, banked) or f'already banked: {banked}')
    except Refused as error:
      print(f'refused: {error}')
      refused.append(error)
      continue
    if size(banked) > LARGE_RUN_BYTES:
      print(f'  note: {banked} holds {_kib(size(banked))} (its logs: '
            f'{", ".join(_largest(banked))})')
  return refused


def _largest(banked: str, count: int = 3) -> List[str]:
  paths = sorted(small_files(banked),
                 key=lambda path: -os.path.getsize(os.path.join(banked, path)))
  return [f'{path} {_kib(os.path.getsize(os.path.join(banked, path)))}'
          for path in paths[:count]]


def main(argv):
  runs = runs_directory()
  try:
    refused = bank_all(runs, argv[1:])
  except ValueError as error:
    sys.stderr.write(f'error: {error}\n')
    sys.exit(2)
  bank_dir = directory()
  banked = [os.path.dirname(os.path.join(top, FINISHED))
            for top, _, names in os.walk(bank_dir) if FINISHED in names]
  total = sum(size(workdir) for workdir in banked)
  print(f'The bank ({bank_dir}): {len(banked)} runs, {_kib(total)}.')
  if refused:
    sys.stderr.write(f'error: {len(refused)} run(s) refused (above).\n')
    sys.exit(1)


if __name__ == '__main__':
  app.run(main)
