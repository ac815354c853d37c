"""Checkpoints and resumption (Ape-X App. F, "Failure tolerance").

Every stateful node saves its work periodically and when the program stops,
and resumes from its newest checkpoint when a program is launched again with
the same `--workdir`:

  <workdir>/run.json             what runs here: program, environment and the
                                 config values the checkpoints depend on
  <workdir>/checkpoints/learner/ networks, target networks, optimiser state,
                                 learner step count (TensorFlow checkpoints)
  <workdir>/checkpoints/counter/ the counter's counts (counts.json)
  <workdir>/checkpoints/replay/  the replay table (Reverb's own checkpoints)

Saves are atomic: TensorFlow writes a checkpoint's files before it updates
the `checkpoint` index that names the newest one, the counts are written to
a file of their own and then renamed over the last, and a Reverb checkpoint
counts only once its DONE marker is written. A process killed while saving
leaves the previous checkpoint as the newest usable one.
"""

import collections
import copy
import hashlib
import json
import os
import threading
import time
from concurrent import futures
from typing import Any, Callable, Mapping, Optional

import launchpad as lp
import numpy as np
import tree
from absl import logging
from acme.utils import counting

from launch.runs import run_manifest
from launch.runs import storage

CHECKPOINTS = run_manifest.CHECKPOINTS


def checkpoint_directory(workdir: str, name: str) -> str:
  return os.path.join(workdir, CHECKPOINTS, name)


def holds_work(workdir: str, node: str) -> bool:
  """Whether the checkpoint node `node` would come back from holds some of
  the run's work: the learner's parameters, the counter's counts of actor
  steps (it saves when the learner does, and the learner's first checkpoint
  can come before any actor's counts), a replay shard's finished Reverb
  checkpoint. Other nodes keep no checkpoint: always True."""
  directory = checkpoint_directory(workdir, node)
  kind = node.split('_')[0]
  if kind == 'learner':
    return os.path.exists(os.path.join(directory, 'checkpoint'))
  if kind == 'counter':
    counts = run_manifest.saved_counts(workdir)
    return bool(counts) and counts.get('actor_steps', 0) > 0
  if kind == 'replay':
    try:
      return any(os.path.exists(os.path.join(directory, name, 'DONE'))
                 for name in os.listdir(directory))
    except FileNotFoundError:
      return False
  return True


def parameters_checksum(variables) -> str:
  """A short digest of variables' values, to compare parameters across
  processes (e.g. a checkpoint and the learner that restored it)."""
  digest = hashlib.sha256()
  for variable in tree.flatten(variables):
    digest.update(np.ascontiguousarray(np.asarray(variable)).tobytes())
  return digest.hexdigest()[:16]


def make_checkpointer(objects: Mapping[str, Any], workdir: str, name: str,
                      period_seconds: float):
  """Acme's checkpointer (`acme.tf.savers.Checkpointer`) on
  <workdir>/checkpoints/<name>; restores the newest checkpoint there, if
  any. None when `period_seconds` is 0 (disabled)."""
  if period_seconds <= 0:
    return None
  # Imported here: it imports TensorFlow, which the counter's process, a
  # user of this module, does without.
  from acme.tf import savers  # pylint: disable=g-import-not-at-top
  checkpointer = savers.Checkpointer(
      objects_to_save=dict(objects),
      directory=workdir,
      subdirectory=name,
      time_delta_minutes=period_seconds / 60.0,
      add_uid=False,
      max_to_keep=2)
  return checkpointer


class LearnerCheckpoints:
  """A learner's checkpoints, written beside its updates instead of between
  them, so that they can be frequent.

  The learner's state (`state`, what `make_checkpointer` takes) is restored
  from the newest checkpoint as `make_checkpointer` does. Then a copy of it is
  made (`copy.deepcopy`: the same objects, so the same checkpoint), the
  *shadow*. A save copies the learner's variables into the shadow, in the
  learner's thread and between two of its updates (a memory copy; its cost:
  benchmarks/checkpoint_cost.py), and a thread of its own writes the shadow
  as a TensorFlow checkpoint, then calls `after_write(learner_steps)` (the
  export of a policy snapshot made from the shadow), while the learner
  goes on. A save is due `period_seconds` after the last
  began (the first at the first call), and waits while one is being
  written, so the newest finished checkpoint is at most a period and a
  write old.

  Checkpoints are named by the learner's step count (`ckpt-<updates>`), and
  the newest two are kept.
  """

  def __init__(self, state: Mapping[str, Any], steps: Callable[[], int],
               workdir: str, name: str, period_seconds: float,
               after_write: Optional[Callable[[int], Any]] = None):
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    self._period = period_seconds
    self._after_write = after_write
    self._restorer = make_checkpointer(state, workdir, name, period_seconds)
    self.enabled = self._restorer is not None
    self._steps = steps
    self.saved_steps = int(steps())
    if not self.enabled:
      return
    memo = {}
    self.shadow = copy.deepcopy(dict(state), memo)
    holder = tf.Module()
    holder.state = dict(state)
    # Each variable with its copy; `tf.Module.variables` finds them in
    # modules, dicts and lists, and deepcopy's memo pairs them.
    self._pairs = [(variable, memo[id(variable)])
                   for variable in holder.variables]
    self._checkpoint = tf.train.Checkpoint(**self.shadow)
    self._manager = tf.train.CheckpointManager(
        self._checkpoint, self._restorer.directory, max_to_keep=2)
    self._writer = futures.ThreadPoolExecutor(
        1, thread_name_prefix=f'{name}_checkpoints')
    self._writing: Optional[futures.Future] = None
    self._began = -float('inf')  # The first update's save is due.
    # The seconds of the latest saves' copies (the learner's own cost), and
    # of their writes with what follows them (the writer thread's).
    self.copy_seconds = collections.deque(maxlen=100)
    self.write_seconds = collections.deque(maxlen=100)

  @property
  def writing(self) -> bool:
    return self._writing is not None and not self._writing.done()

  def save(self, force: bool = False) -> bool:
    """Begins a checkpoint if one is due (or `force`d; a forced save also
    waits for it to be written). True if one began."""
    if not self.enabled:
      return False
    if not force and (self.writing or
                      time.monotonic() - self._began < self._period):
      return False
    self.wait()
    self._began = time.monotonic()
    copy_began = time.perf_counter()
    for variable, shadow in self._pairs:
      shadow.assign(variable)
    steps = int(self._steps())
    self.copy_seconds.append(time.perf_counter() - copy_began)
    self._writing = self._writer.submit(self._write, steps)
    if force and not self.wait():
      raise RuntimeError(
          f'The checkpoint of step {steps} could not be written under '
          f'{self._restorer.directory} (the log above says why): its newest '
          f'earlier one, of step {self.saved_steps}, stays the newest.')
    return True

  def wait(self) -> bool:
    """Waits for the checkpoint being written, if any; False if its write
    failed (logged; the newest earlier checkpoint stays the newest)."""
    writing, self._writing = self._writing, None
    return True if writing is None else writing.result()

  def _write(self, steps: int) -> bool:
    began = time.perf_counter()
    try:
      self._manager.save(checkpoint_number=steps)
    except Exception:  # pylint: disable=broad-except
      logging.exception('No checkpoint of step %d: the newest earlier one '
                        'stays the newest.', steps)
      return False
    self.saved_steps = steps
    if self._after_write is not None:
      try:
        self._after_write(steps)
      except Exception:  # pylint: disable=broad-except
        logging.exception('The checkpoint of step %d is written, but what '
                          'follows it failed.', steps)
    self.write_seconds.append(time.perf_counter() - began)
    return True


# How long the counter keeps serving after a stop request, for the last
# counts of the stopping nodes.
FINAL_COUNTS_WAIT_SECONDS = 2.0


COUNTS_FILE = run_manifest.COUNTS_FILE


class CheckpointedCounter(counting.Counter):
  """The program's counter; restores its counts when it starts.

  It saves every `period_seconds` (0: never) on its own, when asked
  (`save_checkpoint`: a Vertex AI job's last act) and when the program
  stops. Its learner steps are the learner's to set: a learner that comes
  back from an older checkpoint makes them its own count again
  (`launch.nodes.LearningNode`).

  The counts are a small JSON file, `<workdir>/checkpoints/counter/
  counts.json`, written whole and renamed over the last, rather than a
  TensorFlow checkpoint: the counter's process then needs no TensorFlow
  (a few CPU-seconds and a few hundred MB less at every start). A run whose
  counter saved TensorFlow checkpoints is read once from its newest one.
  """

  def __init__(self, workdir: str, period_seconds: float):
    super().__init__()
    self._path = None
    self._period = period_seconds
    self._save_lock = threading.Lock()  # Its own saves, and one asked for.
    if period_seconds > 0:
      workdir = storage.node_path(workdir)
      directory = checkpoint_directory(workdir, 'counter')
      os.makedirs(directory, exist_ok=True)
      self._path = os.path.join(directory, COUNTS_FILE)
      state = read_counts_state(workdir)
      if state is not None:
        self.restore(state)
      logging.info('Counter starts from %s', self.get_counts())
    self._started_at = self._saved_at = int(
        self._counts.get('actor_steps', 0))

  def save(self):
    with self._lock:
      return {'counts': dict(self._counts), 'cache': dict(self._cache)}

  def ping(self):
    """The coordinator's heartbeat (`launch.supervision.heartbeat`): the actors' steps
    counted, those it started from, and those of its newest checkpoint (a
    restart goes back to them)."""
    return {'actor_steps': int(self._counts.get('actor_steps', 0)),
            'actor_steps_at_start': self._started_at,
            'actor_steps_saved': self._saved_at}

  def save_checkpoint(self) -> bool:
    if self._path is None:
      return False
    state = tree.map_structure(_plain_number, self.save())
    saved_at = int(state['counts'].get('actor_steps', 0))
    partial = f'{self._path}.partial'
    with self._save_lock:
      with open(partial, 'w') as f:
        json.dump(state, f, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
      os.replace(partial, self._path)
    self._saved_at = saved_at
    return True

  def run(self):
    stopping = threading.Event()
    lp.register_stop_handler(stopping.set)
    while not stopping.wait(self._period if self._path else None):
      self.save_checkpoint()
    # The stopping actors send their last counts (they sync at most once a
    # second while running): serve them before the final save.
    time.sleep(FINAL_COUNTS_WAIT_SECONDS)
    self.save_checkpoint()
    logging.info('Final counts: %s', json.dumps(
        {key: int(value) for key, value in sorted(self.get_counts().items())}))


def _plain_number(value):
  """A count as JSON holds it (counts may be NumPy numbers)."""
  return value.item() if isinstance(value, np.generic) else value


def read_counts_state(workdir: str) -> Optional[Mapping[str, Any]]:
  """The state the counter of the run in `workdir` (a local path) saved
  (`CheckpointedCounter.save`'s form), or None if it saved none."""
  state = run_manifest.read_saved_counter(workdir)
  if state is not None:
    return state
  directory = checkpoint_directory(workdir, 'counter')
  if not os.path.exists(os.path.join(directory, 'checkpoint')):
    return None
  # A run from before the counts were JSON: its newest TensorFlow checkpoint.
  legacy = counting.Counter()
  make_checkpointer({'counter': legacy}, workdir, 'counter',
                    period_seconds=1.0)
  return legacy.save()
