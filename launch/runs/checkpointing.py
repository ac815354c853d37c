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

import hashlib
import json
import os
import threading
import time
from typing import Any, Mapping, Optional

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


# How long the counter keeps serving after a stop request, for the last
# counts of the stopping nodes.
FINAL_COUNTS_WAIT_SECONDS = 2.0


COUNTS_FILE = run_manifest.COUNTS_FILE


class CheckpointedCounter(counting.Counter):
  """The program's counter; restores its counts when it starts.

  It saves when asked (`save_checkpoint`, called by the learner right after
  each learner checkpoint, so that the counts never claim learner steps that
  the learner's checkpoint does not hold) and when the program stops.

  The counts are a small JSON file, `<workdir>/checkpoints/counter/
  counts.json`, written whole and renamed over the last, rather than a
  TensorFlow checkpoint: the counter's process then needs no TensorFlow
  (a few CPU-seconds and a few hundred MB less at every start). A run whose
  counter saved TensorFlow checkpoints is read once from its newest one.
  """

  def __init__(self, workdir: str, enabled: bool):
    super().__init__()
    self._path = None
    self._save_lock = threading.Lock()  # The learner's saves, and the last.
    if enabled:
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
    stopping.wait()
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
