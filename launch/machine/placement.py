"""How the program's processes share this machine's cores (local_mp).

Every node of a local_mp program is a process, and each process's
TensorFlow would size its thread pools (intra-op and inter-op) for the whole
machine: on 2 cores, a learner, two actors, an evaluator, the replay node,
the counter and the coordinator would hold some fifteen pool threads that
contend for two cores. The plan (`plan`) sizes each process's pools for the
cores it should use:

* the learner: every core it may run on (the machine's, or
  `--pin_learner`): the update is most of the arithmetic (a DQN step on
  Atari at 8 samples per insert spends about nine tenths of the machine
  learning, docs/performance.md);
* an actor: one thread, as Ape-X gives each actor one core (§4.1);
* the evaluator: one thread, and a lower priority (nice `EVALUATOR_NICE`),
  so that it yields to the learner and the actors between its rounds'
  steps;
* the replay node, the counter, the variable cachers and the coordinator:
  one thread each (they serve calls; their arithmetic is Reverb's and
  gRPC's, whose pools TensorFlow's settings do not size).

`--pin_learner` and `--pin_others` pin the nodes too: the learner to the
first, and every other node (actors, evaluator, cachers, replay, counter,
coordinator) to the second; each must be CPUs this launch may use
(`os.sched_getaffinity`). Left empty, the operating system places every
node on every core, which on a machine of few cores, where the learner
needs nearly all of them and the actors the rest of the time, is what time
sharing wants.

`--placement=tf_default` keeps TensorFlow's own pool sizes in every process
but the actors' (one thread: the node class's own
`tf_threads_per_process`) and no nice: the program as it was before the
plan, for a comparison back to back (`benchmarks/program_limit.py`).

The pinned wheels link no OpenMP (`ldd` of TensorFlow's libraries), so
there is no OpenMP pool to size. On Vertex AI each replica has a machine of
its own: the pools are sized the same way from the replica's cores, and
nothing is pinned or niced.
"""

import dataclasses
import importlib.abc
import importlib.util
import os
import sys
from typing import Any, Callable, Dict, FrozenSet, Iterable, Optional

from absl import logging

SIZED = 'sized'
TF_DEFAULT = 'tf_default'
PLACEMENTS = (SIZED, TF_DEFAULT)

# The evaluator's nice: it runs whenever the learner and the actors leave a
# core idle, and waits behind them otherwise (Linux's CFS gives a nice-10
# thread about a tenth of a nice-0 thread's share of a contended core).
EVALUATOR_NICE = 10

# The group whose pools take every core it may run on, pinned to
# --pin_learner; every other takes one thread, pinned to --pin_others.
LEARNER_GROUP = 'learner'


@dataclasses.dataclass(frozen=True)
class NodePlacement:
  """Where one node's process runs and how many threads it takes.

  Attributes:
    cpus: the CPUs it is pinned to, or None: wherever the system puts it.
    tf_threads: its TensorFlow intra-op and inter-op pool size; None: each
      core it may run on (`pool_size`); 0: TensorFlow's own default.
    nice: its priority's nice value (0: as the launcher's).
  """

  cpus: Optional[FrozenSet[int]] = None
  tf_threads: Optional[int] = 1
  nice: int = 0

  def pool_size(self) -> int:
    """The pool size it takes in this process: `tf_threads`, or the cores
    it may run on (its pinned CPUs, else the process's affinity)."""
    if self.tf_threads:
      return self.tf_threads
    return len(self.cpus or os.sched_getaffinity(0))

  def describe(self) -> str:
    cpus = 'any CPU' if self.cpus is None else f'CPUs {format_cpus(self.cpus)}'
    threads = ('TensorFlow\'s default pools' if self.tf_threads == 0 else
               f'{self.pool_size()} TensorFlow thread(s) a pool')
    return f'{cpus}, {threads}, nice {self.nice}'


def parse_cpus(text: str) -> FrozenSet[int]:
  """CPUs of a list such as `0-3,6` (empty: none); ValueError for another
  form."""
  cpus = set()
  for part in (piece.strip() for piece in text.split(',')):
    if not part:
      continue
    low, _, high = part.partition('-')
    try:
      first, last = int(low), int(high or low)
    except ValueError:
      raise ValueError(f'{part!r} is not a CPU or a range of CPUs (e.g. '
                       '0-3,6)') from None
    if first < 0 or last < first:
      raise ValueError(f'{part!r} is not a range of CPUs (from low to high, '
                       '>= 0)')
    cpus.update(range(first, last + 1))
  return frozenset(cpus)


def format_cpus(cpus: Iterable[int]) -> str:
  """`0-3,6` for {0, 1, 2, 3, 6}."""
  ranges = []
  for cpu in sorted(cpus):
    if ranges and cpu == ranges[-1][1] + 1:
      ranges[-1][1] = cpu
    else:
      ranges.append([cpu, cpu])
  return ','.join(str(low) if low == high else f'{low}-{high}'
                  for low, high in ranges)


def check(placement: str, pin_learner: str, pin_others: str,
          launch_type: str, available: Optional[FrozenSet[int]] = None):
  """Raises ValueError naming the flag and the fix for a placement that
  cannot run here: an unknown `--placement`, CPUs given in a bad form, not
  among those this launch may use (`available`, default the launcher's
  affinity), or given where nodes are not this machine's processes."""
  if placement not in PLACEMENTS:
    raise ValueError(f'--placement={placement}: it is one of '
                     f'{", ".join(PLACEMENTS)}.')
  available = frozenset(available if available is not None
                        else os.sched_getaffinity(0))
  for name, text in (('pin_learner', pin_learner),
                     ('pin_others', pin_others)):
    if not text:
      continue
    if launch_type != 'local_mp':
      raise ValueError(
          f'--{name}={text}: CPUs are given to nodes only under local_mp, '
          'where each node is a process of this machine (under '
          f'{launch_type} leave it out).')
    try:
      cpus = parse_cpus(text)
    except ValueError as error:
      raise ValueError(f'--{name}={text}: {error}.') from None
    if not cpus:
      raise ValueError(f'--{name}={text}: it names no CPU; leave it out to '
                       'let the system place the nodes.')
    if not cpus <= available:
      raise ValueError(
          f'--{name}={text}: CPUs {format_cpus(cpus - available)} are not '
          'among those this launch may use '
          f'({format_cpus(available)}); name only those.')


def plan(groups: Iterable[str], placement: str = SIZED,
         pin_learner: str = '', pin_others: str = '',
         pin: bool = True) -> Dict[str, NodePlacement]:
  """{group: its nodes' placement} for the node groups `groups`.

  `pin`: whether CPUs and nice apply (this machine's processes) or only the
  pool sizes (a replica on a machine of its own)."""
  learner = parse_cpus(pin_learner) or None
  others = parse_cpus(pin_others) or None
  placements = {}
  for group in groups:
    cpus = (learner if group == LEARNER_GROUP else others) if pin else None
    if placement == TF_DEFAULT:
      placements[group] = NodePlacement(cpus=cpus, tf_threads=0, nice=0)
      continue
    placements[group] = NodePlacement(
        cpus=cpus, tf_threads=None if group == LEARNER_GROUP else 1,
        nice=EVALUATOR_NICE if group == 'evaluator' and pin else 0)
  return placements


def use_tf_threads(count: Optional[int]):
  """Sets this process's TensorFlow thread pools (intra-op and inter-op) to
  `count` threads, before its first TensorFlow operation; None: leaves
  TensorFlow's defaults."""
  if count is None:
    return
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  tf.config.threading.set_intra_op_parallelism_threads(count)
  tf.config.threading.set_inter_op_parallelism_threads(count)


def _threads() -> Iterable[int]:
  """This process's threads (their ids)."""
  return [int(name) for name in os.listdir('/proc/self/task')]


class _AfterImport(importlib.abc.MetaPathFinder):
  """Calls `callback(module)` once module `name` has been imported (its
  code run), whoever imports it; removes itself on its first use."""

  def __init__(self, name: str, callback: Callable[[Any], None]):
    self._name = name
    self._callback = callback

  def find_spec(self, fullname, path=None, target=None):
    del path, target
    if fullname != self._name:
      return None
    sys.meta_path.remove(self)
    spec = importlib.util.find_spec(fullname)  # By the other finders.
    if spec is None or spec.loader is None:
      return spec
    run_module = spec.loader.exec_module

    def run_then_call(module):
      run_module(module)
      self._callback(module)

    spec.loader.exec_module = run_then_call
    return spec


def when_imported(name: str, callback: Callable[[Any], None]):
  """`callback(module)` now if module `name` is imported, else as soon as
  it is, without importing it here."""
  if name in sys.modules:
    callback(sys.modules[name])
  else:
    sys.meta_path.insert(0, _AfterImport(name, callback))


def apply(placement: NodePlacement, own_threads: Optional[int] = None):
  """Places this process (before its first TensorFlow operation): every
  thread it has now is pinned and niced (Linux sets both per thread; the
  threads started later take them from the thread that starts them), and
  TensorFlow's pools are sized: under `tf_default`, to the node class's
  own `own_threads` (`tf_threads_per_process`: the actors' one) if it has
  one. The pools are sized as TensorFlow is imported, by whatever imports
  it: a node that has no use for it (the counter) does not load it."""
  for thread in _threads():
    try:
      if placement.cpus is not None:
        os.sched_setaffinity(thread, placement.cpus)
      if placement.nice:
        os.setpriority(os.PRIO_PROCESS, thread, placement.nice)
    except ProcessLookupError:  # A thread that has ended since.
      continue
  if placement.tf_threads == 0 and own_threads:
    placement = dataclasses.replace(placement, tf_threads=own_threads)
  logging.info('Placement: %s.', placement.describe())

  def size_pools(tf):
    if placement.tf_threads != 0:
      use_tf_threads(placement.pool_size())
    # As TensorFlow has it (0: its default, a thread per core).
    logging.info('TensorFlow pools: intra-op %d, inter-op %d.',
                 tf.config.threading.get_intra_op_parallelism_threads(),
                 tf.config.threading.get_inter_op_parallelism_threads())

  when_imported('tensorflow', size_pools)
