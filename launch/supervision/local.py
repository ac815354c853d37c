"""The processes of one machine (local_mp): what keeps a run alive there.

Launchpad's local_mp runs each node as a process under a shell wrapper,
whose exit status hides the node's, and leaves the rest of a program running
when one node dies. On this platform:

* every node writes its process id to `<workdir>/nodes/<label>.pid` (for
  the coordinator's watch, for operators, and for tests that kill a node);
* the coordinator watches the learner, the counter, the variable cachers
  and the actors by those files (`NodeWatch`), and stops a program whose
  learner, counter, a cacher or last actor has died;
* a stop watchdog (`stop_watchdog.py`) ends a node that calls other nodes
  and still runs a grace period after the program's stop, which only a
  genuinely stuck node does (`launch.supervision.coordinator` stops the
  nodes in an order in which none waits on one that has gone);
* the terminal's Ctrl-C, which reaches every process of the program, is
  left to the launcher, which has the coordinator stop the nodes in order;
* the replay node runs its Reverb server in a child process that it
  restarts, from the newest replay checkpoint, if the server dies.
"""

import atexit
import faulthandler
import functools
import json
import multiprocessing
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import cloudpickle
import launchpad as lp
from absl import logging

from launch import node_groups
from launch.runs import faults as fault_records
from launch.supervision import keeper
from launch.supervision import platforms
from launch.supervision import stop_watchdog

NODES = 'nodes'  # <workdir>/nodes/<label>.pid

# Launchpad kills a program whose nodes outlive its 10 s stop notice, and the
# program then exits -9. Launchpad stops a node by sending its process
# SIGTERM, whose Python handler runs only when the main thread returns to the
# interpreter; a main thread blocked in a C++ call to a node that has
# already stopped (Courier waits for its server to come back) never does,
# nor does one that holds the GIL or is finalising the interpreter. The
# C-level handler still writes the signal's number to the wake-up fd: a
# watchdog process reads it and ends the node a grace period after the
# signal, first having it print every thread's traceback.
STOP_GRACE_SECONDS = 5.0
# How long a node waits for its stop watchdog to be watching.
WATCHDOG_START_SECONDS = 30.0
_WATCHDOG = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                         'stop_watchdog.py')
_KEEPER = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                       'keeper.py')


def install_stop_watchdog():
  """Ends this process soon after a stop request (see `stop_watchdog.py`).

  Must be called from the main thread. The node's own stop handling still
  runs first when it can.
  """
  if threading.current_thread() is not threading.main_thread():
    return
  read_fd, write_fd = os.pipe()
  os.set_blocking(write_fd, False)
  previous = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
  if previous != -1:  # Someone else owns the wake-up fd: leave it to them.
    signal.set_wakeup_fd(previous)
    os.close(read_fd)
    os.close(write_fd)
    logging.warning('The signal wake-up fd is taken; a node blocked at stop '
                    'may be killed by Launchpad.')
    return
  # Answered by the C-level handler, GIL or not: the watchdog's request for
  # this process's tracebacks before it kills it.
  faulthandler.register(stop_watchdog.DUMP_SIGNAL, all_threads=True)
  ready_read, ready_write = os.pipe()
  subprocess.Popen(  # pylint: disable=consider-using-with
      [sys.executable, '-S', _WATCHDOG, str(read_fd), str(os.getpid()),
       str(STOP_GRACE_SECONDS), str(ready_write)],
      pass_fds=(read_fd, ready_write), stdin=subprocess.DEVNULL)
  os.close(read_fd)  # The pipe ends for the watchdog when this process ends.
  os.close(ready_write)
  # The grace period runs from when the watchdog reads the stop, so it must
  # be reading before the node goes on: on a loaded machine its interpreter
  # can take seconds to start, and a stop that came first would be timed
  # from then, past Launchpad's notice.
  answer = stop_watchdog.read(ready_read, WATCHDOG_START_SECONDS)
  os.close(ready_read)
  if answer != stop_watchdog.READY:
    logging.warning('The stop watchdog did not start within %.0f s; a node '
                    'blocked at stop may be killed by Launchpad.',
                    WATCHDOG_START_SECONDS)


def pid_path(workdir: str, label: str) -> str:
  return os.path.join(workdir, NODES, f'{label}.pid')


def write_pid_file(workdir: str, label: str, pid: int):
  """<workdir>/nodes/<label>.pid, written whole or not at all."""
  os.makedirs(os.path.join(workdir, NODES), exist_ok=True)
  path = pid_path(workdir, label)
  with open(f'{path}.tmp', 'w') as f:
    f.write(f'{pid}\n')
  os.replace(f'{path}.tmp', path)


def _set_up_node_process(workdir: str, label: str, before: Callable[[], None]):
  # The terminal's Ctrl-C reaches every process of the program at once; the
  # launcher alone answers it, by an ordered stop (see module docstring).
  signal.signal(signal.SIGINT, signal.SIG_IGN)
  # A node that calls no other node (`NodeGroup.server`) cannot be blocked
  # in a call to one that has stopped, which is what the stop watchdog is
  # for, and its stop does work that must not be cut short (replay's and
  # the counter's final checkpoints, which take seconds on a loaded
  # machine; Launchpad's own stop notice stays their bound).
  if not node_groups.group_of(label).server:
    install_stop_watchdog()
  # A node that then fails to start (a learner that cannot restore its
  # checkpoint) or waits (an actor for its first parameters) is already
  # known to the coordinator's watch.
  write_pid_file(workdir, label, os.getpid())
  before()


def proc_stat(pid: int) -> Optional[List[str]]:
  """The fields of /proc/<pid>/stat after the command's name (the state
  first, then the parent), or None if the process is gone."""
  try:
    with open(f'/proc/{pid}/stat') as f:
      return f.read().rsplit(')', 1)[1].split()
  except (OSError, IndexError):
    return None


def _parent_of(pid: int) -> Optional[int]:
  """The parent of a live (not zombie) process, from /proc; None if gone."""
  fields = proc_stat(pid)
  if fields is None:
    return None
  return None if fields[0] in ('Z', 'X') else int(fields[1])


def _is_of_launch(pid: int, launcher: Optional[int]) -> bool:
  """Whether the live process `pid` is a node of the launch whose launcher
  is `launcher` (or a replay node's server, a child of one): Launchpad's
  shell wrapper is its parent (or, under a keeper, its grandparent) and
  the launcher that wrapper's parent."""
  parent = _parent_of(pid)
  for _ in range(3):
    if parent is None:
      return False
    grandparent = _parent_of(parent)
    if grandparent == launcher:
      return True
    parent = grandparent
  return False


class NodeWatch:
  """Tells when a node of this launch has died (a crash, an out-of-memory
  kill, `kill -9`). A node is watched once its pid file names a live process
  of this launch (the same launcher as the watcher's: a file of an earlier
  launch names none); it has died once that process has been gone for
  `confirm_seconds` (a stopping program's nodes end at about the same time
  as the watcher is told to stop). `launcher`: the launcher's pid (by
  default the watcher is a node, whose grandparent it is). A node started
  again by its keeper writes its new pid: the watch then follows it."""

  def __init__(self, workdir: str, label: str, confirm_seconds: float = 3.0,
               launcher: Optional[int] = None):
    self.label = label
    self._path = pid_path(workdir, label)
    self._launcher = (launcher if launcher is not None
                      else launcher_of_this_node())
    self._confirm_seconds = confirm_seconds
    self.pid = None
    self._gone_since = None

  def _named(self) -> Optional[int]:
    """The live process of this launch its pid file names, if any."""
    try:
      with open(self._path) as f:
        pid = int(f.read())
    except (OSError, ValueError):
      return None
    return pid if _is_of_launch(pid, self._launcher) else None

  def find(self) -> Optional[int]:
    """The node's pid, once its pid file names a live process of this
    launch; None until then."""
    if self.pid is None or _parent_of(self.pid) is None:
      pid = self._named()
      if pid is not None:
        self.pid = pid
    return self.pid

  def dead(self) -> bool:
    if self.find() is None:
      return False
    if _parent_of(self.pid) is not None:
      self._gone_since = None
      return False
    if self._gone_since is None:
      self._gone_since = time.time()
    return time.time() - self._gone_since >= self._confirm_seconds


def launcher_of_this_node() -> Optional[int]:
  """The launcher's pid, seen from a node's process (the coordinator's):
  its grandparent, with Launchpad's shell wrapper in between."""
  return _parent_of(os.getppid())


def end_node(workdir: str, label: str, launcher: Optional[int] = None):
  """SIGKILLs the process of node `label` of this launch, if it runs (a
  frozen node does not end on the program's SIGTERM, and its stop watchdog
  does not hear of that SIGTERM). `launcher`: as for `NodeWatch`."""
  pid = NodeWatch(workdir, label, launcher=launcher).find()
  if pid is None:
    return
  logging.warning('Ending the %s (pid %d), which no longer answers.',
                  label, pid)
  try:
    os.kill(pid, signal.SIGKILL)
  except ProcessLookupError:
    pass


class ProgramWatch:
  """The coordinator's watch over the processes of the nodes the program
  cannot go on without (`node_groups.NodeGroup.needed`): the learner
  (actors would act on for nobody), the counter (every node would wait on
  it forever), each replay shard, each variable cacher (its actors would
  act on ever older parameters) and the actors (all of them). `labels`:
  {group: its nodes' labels}.

  With keepers (`kept`, `launch.supervision.keeper`) a node whose process dies is
  started again: it counts as dead only once its keeper has given up on
  it."""

  def __init__(self, workdir: str, labels: Dict[str, Sequence[str]],
               kept: bool = False):
    self._workdir = workdir
    self._kept = kept
    self._single, self._actors = [], []
    for name, group_labels in labels.items():  # Named in this order.
      group = node_groups.BY_NAME[name]
      if group.needed == node_groups.NONE:
        continue
      watches = [NodeWatch(workdir, label) for label in group_labels]
      (self._actors if group.needed == node_groups.ALL else
       self._single).extend(watches)

  def _dead(self, watch: NodeWatch) -> bool:
    if self._kept:
      return keeper.gave_up(self._workdir, watch.label) is not None
    return watch.dead()

  def dead(self) -> Optional[str]:
    """What has died (e.g. "the learner's process (pid 123) has died"), or
    None."""
    for watch in self._single:
      if self._dead(watch):
        return (keeper.gave_up(self._workdir, watch.label) if self._kept else
                f'the {watch.label}\'s process (pid {watch.pid}) has died '
                f'(its log, logs/{watch.label}.log, says why)')
    # Every actor's watch is asked, every time: a watch learns its node's
    # process while it lives (it cannot tell a dead process of this launch
    # from an earlier launch's).
    dead_actors = [self._dead(watch) for watch in self._actors]
    if dead_actors and all(dead_actors):
      return (f'all {len(self._actors)} actor processes have died (their '
              'logs, logs/actor*.log, say why)')
    return None

  def end_nodes(self, labels: Sequence[str]):
    """SIGKILLs the processes of the nodes `labels` of this launch (a frozen
    node does not end on the program's SIGTERM)."""
    for label in labels:
      end_node(self._workdir, label)

  def dead_actors(self) -> List[int]:
    """The ids of the actors whose process has died (and, with keepers,
    not yet been started again)."""
    return [actor_id for actor_id, watch in enumerate(self._actors)
            if watch.dead() or self._kept and self._dead(watch)]


class KeptNodes(platforms.KeptNodeRecords):
  """The coordinator's hands on the nodes that keepers keep (local_mp):
  which process does each node's work now, and ending one that froze, so
  that its keeper starts it again."""

  def __init__(self, workdir: str):
    super().__init__(workdir)
    self._launcher = launcher_of_this_node()
    self._stopped: Dict[str, Tuple[int, float]] = {}  # label: (pid, since)

  def _node(self, label: str) -> Optional[int]:
    return NodeWatch(self._workdir, label, launcher=self._launcher).find()

  def process(self, label: str) -> Optional[int]:
    """The live process of this launch doing node `label`'s work, if any:
    a replay node's server (`SupervisedReplayServer`), or the node's."""
    server = f'{label}_server'
    if os.path.exists(pid_path(self._workdir, server)):
      pid = NodeWatch(self._workdir, server, launcher=self._launcher).find()
      if pid is not None and _parent_of(pid) == self._node(label):
        return pid
    return self._node(label)

  def stopped_for(self, label: str) -> float:
    """Seconds for which node `label`'s own process has been seen stopped
    (SIGSTOP: its state in /proc is T), 0 if it is not: a replay node's
    process, which answers no heartbeat (its server does)."""
    pid = self._node(label)
    fields = proc_stat(pid) if pid is not None else None
    if not fields or fields[0] != 'T':
      self._stopped.pop(label, None)
      return 0.0
    since = self._stopped.setdefault(label, (pid, time.time()))
    if since[0] != pid:
      self._stopped[label] = since = (pid, time.time())
    return time.time() - since[1]

  def end(self, label: str, cause: str) -> Optional[int]:
    """SIGKILLs node `label`'s process (with a replay node's, its server),
    its keeper told `cause` first; the pid ended, or None if none ran."""
    pid = self._node(label)
    if pid is None:
      return None
    keeper.mark_fault(self._workdir, label, cause)
    logging.warning('Ending the %s (pid %d): %s; its keeper starts it '
                    'again.', label, pid, cause)
    try:
      os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
      pass
    return pid


def keeper_resources(program: lp.Program, labels: Dict[Tuple[str, int], str],
                     workdir: str, max_restarts: int,
                     window: float) -> Dict[str, Any]:
  """Launchpad's `local_resources` that run every node of `program` but the
  coordinator under a keeper (`launch.supervision.keeper`); `labels`: each node's label
  by (group, index). The keeper stands in Launchpad's command where the
  interpreter would: a script of this launch that runs it with this
  Python."""
  from launchpad.nodes.python import local_multi_processing  # pylint: disable=g-import-not-at-top
  directory = tempfile.mkdtemp(prefix='keeper')
  atexit.register(shutil.rmtree, directory, ignore_errors=True)
  script = os.path.join(directory, 'keeper')
  with open(script, 'w') as f:
    f.write(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -S '
            f'{shlex.quote(_KEEPER)} "$@"\n')
  os.chmod(script, 0o700)
  keeper.clear(workdir, list(labels.values()))
  fault_records.launched(workdir)
  resources = {}
  for group, nodes in program.groups.items():
    if not node_groups.BY_NAME[group].kept:
      continue
    settings = {**keeper.settings(workdir, max_restarts, window),
                'labels': [labels[(group, index)]
                           for index in range(len(nodes))]}
    # Launchpad 0.5 takes the interpreter from this private field only.
    resources[group] = local_multi_processing.PythonProcess(
        env={keeper.SETTINGS: json.dumps(settings)},
        _absolute_interpreter_path=script)
  return resources


def _serve_replay(pickled_tables_fn: bytes, port: int,
                  directory: Optional[str]):
  """The replay server process: serves until killed, or until its parent
  (the replay node) is gone. `pickled_tables_fn`: the tables' function,
  cloudpickled (`SupervisedReplayServer._start` says why)."""
  # The node stops this process itself, after the final checkpoint; a
  # Ctrl-C or SIGTERM meant for the program must not take it down first.
  signal.signal(signal.SIGINT, signal.SIG_IGN)
  signal.signal(signal.SIGTERM, signal.SIG_IGN)
  keeper.die_with_parent()
  parent = os.getppid()
  server, sizes = platforms.start_reverb_server(
      cloudpickle.loads(pickled_tables_fn), port, directory)
  print(f'Replay starts with {sizes} items.', flush=True)
  while os.getppid() == parent:
    time.sleep(1.0)
  server.stop()


class SupervisedReplayServer:
  """The replay node's Reverb server in a child process, restarted on the
  same port whenever it dies, from the newest replay checkpoint (empty
  tables without checkpoints). Actors' writers and the learner's dataset
  wait for it and reconnect; the learner's rate limiter holds it back until
  `min_replay_size` items are in the table again."""

  def __init__(self, tables_fn, port: int, checkpoint_directory: Optional[str],
               workdir: str, max_restarts: int = 10, label: str = 'replay'):
    self._label = label  # Its pid file: <workdir>/nodes/<label>_server.pid.
    self._tables_fn = tables_fn
    self._port = port
    self._directory = checkpoint_directory
    self._workdir = workdir
    self._max_restarts = max_restarts
    self._stopping = threading.Event()
    self._process = self._start()
    threading.Thread(target=self._supervise, name='replay_supervisor',
                     daemon=True).start()

  def _start(self):
    # The spawned process takes its arguments through the standard pickle,
    # which refuses what Launchpad's own cloudpickle carried into this node:
    # a function defined in a plug-in's body (a suite's lambda, say).
    process = multiprocessing.get_context('spawn').Process(
        target=_serve_replay, name=f'{self._label}_server', daemon=True,
        args=(cloudpickle.dumps(self._tables_fn), self._port,
              self._directory))
    process.start()
    write_pid_file(self._workdir, f'{self._label}_server', process.pid)
    return process

  def _supervise(self):
    restarts = 0
    while not self._stopping.wait(0.5):
      if self._process.is_alive():
        continue
      if self._stopping.is_set():
        return
      restarts += 1
      if restarts > self._max_restarts:
        logging.error('The %s server died %d times; giving up.',
                      self._label, restarts)
        if keeper.is_kept():  # Its keeper starts the whole node again.
          logging.flush()
          os._exit(1)  # pylint: disable=protected-access
        return
      logging.error('The %s server (pid %d) died (exit code %s); '
                    'restarting it on port %d from %s.', self._label,
                    self._process.pid,
                    self._process.exitcode, self._port,
                    'its newest checkpoint' if self._directory
                    else 'empty tables (replay checkpoints are off)')
      # Multiprocessing's exit code is Popen's: -N for a signal.
      fault_records.append_fault(self._workdir, {
          'node': self._label, 'event': 'fault', 'process': 'server',
          'cause': 'its server was ' + keeper.describe_end(
              self._process.exitcode or 0).replace('exit status',
                                                   'ended with status'),
          'pid': self._process.pid, 'restarts_before': restarts - 1,
          'gave_up': False, 'pause_seconds': 0.0}, self._label)
      self._process = self._start()

  def stop(self):
    self._stopping.set()
    self._process.kill()
    self._process.join()


def end_program(failed: bool, replays, counter):
  """The coordinator's last step under local_mp: Launchpad's stop (replay
  and the counter save their final checkpoints as they stop), then the
  coordinator's process ends at once (`platforms.exit_now`): once aborted
  in its finalisation, after a stop that had gone well."""
  del failed, replays, counter  # Launchpad's stop of each node saves them.
  lp.stop()
  platforms.exit_now(0)


class LocalProcesses(platforms.ProcessPerNode):
  """The processes of this machine (local_mp); see the module docstring."""

  end_program = staticmethod(end_program)

  def __init__(self, workdir: str, max_node_restarts: int = 0,
               placements: Optional[Dict[str, Any]] = None):
    self._workdir = workdir
    # Under keepers (`launch.supervision.keeper`) unless no node is to be started again.
    self.keeps_nodes = max_node_restarts > 0
    self.placements = placements  # `launch.machine.placement.plan`'s.

  def process_setup(self, label: str,
                    constructor=None) -> Callable[[], None]:
    return functools.partial(_set_up_node_process, self._workdir, label,
                             super().process_setup(label, constructor))

  def replay_server(self, label: str = 'replay'):
    return functools.partial(SupervisedReplayServer, workdir=self._workdir,
                             label=label)

  def node_watch(self, labels: Dict[str, Sequence[str]]):
    return functools.partial(ProgramWatch, self._workdir, labels,
                             self.keeps_nodes)

  def kept_nodes(self):
    return (functools.partial(KeptNodes, self._workdir) if self.keeps_nodes
            else None)
