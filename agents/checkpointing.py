"""Checkpoints and resumption (Ape-X App. F, "Failure tolerance").

Every stateful node saves its work periodically and when the program stops,
and resumes from its newest checkpoint when a program is launched again with
the same `--workdir`:

  <workdir>/run.json             what runs here: program, environment and the
                                 config values the checkpoints depend on
  <workdir>/checkpoints/learner/ networks, target networks, optimiser state,
                                 learner step count (TensorFlow checkpoints)
  <workdir>/checkpoints/counter/ the counter's counts
  <workdir>/checkpoints/replay/  the replay table (Reverb's own checkpoints)

Saves are atomic: TensorFlow writes a checkpoint's files before it updates
the `checkpoint` index that names the newest one, and a Reverb checkpoint
counts only once its DONE marker is written. A process killed while saving
leaves the previous checkpoint as the newest usable one.
"""

import hashlib
import json
import os
import signal
import threading
import time
from typing import Any, Dict, Mapping, Optional

import launchpad as lp
import numpy as np
import reverb
import tree
from absl import logging
from acme.tf import savers
from acme.utils import counting
from launchpad import address as lp_address
from launchpad.launch import worker_manager

from agents import run_manifest

# Seconds the replay server keeps serving after its final checkpoint, so that
# a learner step in flight at the stop request can finish (and the learner
# write its final checkpoint) before the server goes away.
REPLAY_LINGER_SECONDS = 2.0
CHECKPOINTS = run_manifest.CHECKPOINTS


def checkpoint_directory(workdir: str, name: str) -> str:
  return os.path.join(workdir, CHECKPOINTS, name)


def parameters_checksum(variables) -> str:
  """A short digest of variables' values, to compare parameters across
  processes (e.g. a checkpoint and the learner that restored it)."""
  digest = hashlib.sha256()
  for variable in tree.flatten(variables):
    digest.update(np.ascontiguousarray(np.asarray(variable)).tobytes())
  return digest.hexdigest()[:16]


def make_checkpointer(objects: Mapping[str, Any], workdir: str, name: str,
                      period_seconds: float) -> Optional[savers.Checkpointer]:
  """Acme's checkpointer on <workdir>/checkpoints/<name>; restores the newest
  checkpoint there, if any. None when `period_seconds` is 0 (disabled)."""
  if period_seconds <= 0:
    return None
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


class CheckpointedCounter(counting.Counter):
  """The program's counter; restores its newest checkpoint when it starts.

  It saves when asked (`save_checkpoint`, called by the learner right after
  each learner checkpoint, so that the counts never claim learner steps that
  the learner's checkpoint does not hold) and when the program stops.
  """

  def __init__(self, workdir: str, enabled: bool):
    super().__init__()
    self._checkpointer = None
    if enabled:
      # The period is the learner's business: `save_checkpoint` forces.
      self._checkpointer = make_checkpointer({'counter': self}, workdir,
                                             'counter', period_seconds=1.0)
      logging.info('Counter starts from %s', self.get_counts())

  def save(self):
    with self._lock:
      return {'counts': dict(self._counts), 'cache': dict(self._cache)}

  def save_checkpoint(self) -> bool:
    if self._checkpointer is None:
      return False
    return self._checkpointer.save(force=True)

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


def _table_sizes(server: reverb.Server) -> Dict[str, int]:
  return {name: info.current_size
          for name, info in server.localhost_client().server_info().items()}


def _serve_replay(priority_tables_fn, port: int, directory: Optional[str]):
  """The replay server process: serves until killed, or until its parent
  (the replay node) is gone."""
  # The node stops this process itself, after the final checkpoint; a
  # Ctrl-C or SIGTERM meant for the program must not take it down first.
  signal.signal(signal.SIGINT, signal.SIG_IGN)
  signal.signal(signal.SIGTERM, signal.SIG_IGN)
  try:  # Linux: die with the parent, whatever kills it.
    import ctypes  # pylint: disable=g-import-not-at-top
    ctypes.CDLL('libc.so.6').prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
  except OSError:
    pass
  parent = os.getppid()
  checkpointer = None
  if directory is not None:
    checkpointer = reverb.checkpointers.DefaultCheckpointer(directory)
  server = reverb.Server(tables=priority_tables_fn(), port=port,
                         checkpointer=checkpointer)
  # Read at once, before actors (waiting to reconnect) write to it.
  print(f'Replay starts with {_table_sizes(server)} items.', flush=True)
  while os.getppid() == parent:
    time.sleep(1.0)
  server.stop()


class CheckpointingReverbNode(lp.ReverbNode):
  """The replay node: a Reverb server that checkpoints its tables through
  Reverb's own checkpointer every `period_seconds` and at stop, and loads the
  newest checkpoint when it starts.

  With `supervise` (local_mp), the server runs in a child process that the
  node restarts on the same port if it dies, from the newest checkpoint (or
  empty without checkpoints). Actors' writers and the learner's dataset wait
  for it and reconnect; the learner's rate limiter holds it back until
  `min_replay_size` items are in the table again.
  """

  def __init__(self, priority_tables_fn, workdir: str, period_seconds: float,
               supervise: bool = False, max_restarts: int = 10):
    self._workdir = workdir
    self._directory = checkpoint_directory(workdir, 'replay')
    self._period_seconds = period_seconds
    self._supervise = supervise
    self._max_restarts = max_restarts
    checkpoint_ctor = None
    if period_seconds > 0:
      checkpoint_ctor = self._make_checkpointer
    super().__init__(priority_tables_fn, checkpoint_ctor)

  def _make_checkpointer(self):
    return reverb.checkpointers.DefaultCheckpointer(self._directory)

  def _start_server_process(self, port: int):
    import multiprocessing  # pylint: disable=g-import-not-at-top
    process = multiprocessing.get_context('spawn').Process(
        target=_serve_replay, name='replay_server', daemon=True,
        args=(self._priority_tables_fn, port,
              self._directory if self._checkpoint_ctor else None))
    process.start()
    run_manifest.write_pid_file(self._workdir, 'replay_server', process.pid)
    return process

  def _supervise_server(self, port: int, stopping: threading.Event):
    """Restarts the server process whenever it dies, until `stopping`."""
    restarts = 0
    while not stopping.wait(0.5):
      if self._process.is_alive():
        continue
      if stopping.is_set():
        return
      restarts += 1
      if restarts > self._max_restarts:
        logging.error('The replay server died %d times; giving up.',
                      restarts)
        return
      logging.error('The replay server (pid %d) died (exit code %s); '
                    'restarting it on port %d from %s.', self._process.pid,
                    self._process.exitcode, port,
                    'its newest checkpoint' if self._checkpoint_ctor
                    else 'empty tables (replay checkpoints are off)')
      self._process = self._start_server_process(port)

  @staticmethod
  def _checkpoint(client: reverb.Client, final: bool = False):
    try:
      path = client.checkpoint()
    except RuntimeError as error:  # The server is down (being restarted).
      logging.warning('Replay checkpoint failed (%s); the previous one '
                      'stays the newest.', error)
      return
    logging.info('%s replay checkpoint: %s', 'Final' if final else 'Periodic',
                 path)

  def run(self):
    port = lp_address.get_port_from_address(self._address.resolve())
    stopping = threading.Event()
    if self._supervise:
      self._process = self._start_server_process(port)
      supervisor = threading.Thread(
          target=self._supervise_server, args=(port, stopping),
          name='replay_supervisor', daemon=True)
      supervisor.start()
    else:
      checkpointer = self._checkpoint_ctor() if self._checkpoint_ctor else None
      server = reverb.Server(tables=self._priority_tables_fn(), port=port,
                             checkpointer=checkpointer)
      logging.info('Replay starts with %s items.', _table_sizes(server))
    client = reverb.Client(f'localhost:{port}')
    period = self._period_seconds if self._checkpoint_ctor else None
    while not worker_manager.wait_for_stop(period):
      self._checkpoint(client)
    if self._checkpoint_ctor:
      self._checkpoint(client, final=True)
    # The learner may be in the middle of a step that needs the server.
    time.sleep(REPLAY_LINGER_SECONDS)
    stopping.set()
    if self._supervise:
      self._process.kill()
      self._process.join()
    else:
      server.stop()
