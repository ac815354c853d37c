"""Where the nodes run, and what their processes need there.

The program graph (`launch.program`) asks its platform for each
node, so that what a place needs (pid files and a stop watchdog on this
machine, for instance) is added in one place and not by branches on the
launch type inside the nodes:

  SharedProcess   every node a thread of one process (local_mt, test_mt)
  ProcessPerNode  every node a process of its own
  ClusterProcesses every node a replica on a machine of its own (vertex_ai):
                  the coordinator is the job's primary replica, and its exit,
                  once everything is saved, ends the job
  LocalProcesses  (launch/supervision/local.py) the processes of one machine
                  (local_mp): pid files, node watching, a stop watchdog, a
                  supervised replay server
"""

from concurrent import futures
import functools
import os
import signal
import sys
import time
from typing import Any, Callable, Dict, Optional, Sequence

import launchpad as lp
from absl import logging

from launch.supervision import keeper

from launch.runs import faults as fault_records
from launch import node_groups
from launch.console import node_output
from launch.machine import placement
from launch.runs import storage


def start_reverb_server(tables_fn, port: int,
                        checkpoint_directory: Optional[str]):
  """A Reverb server of `tables_fn()` on `port`, restored from the newest
  checkpoint in `checkpoint_directory` (None: no checkpoints); and its
  tables' sizes as it starts, read before any writer reaches it.

  Reverb (and with it TensorFlow) is imported here, not with this module:
  the coordinator's and the counter's processes, which unpickle this
  module's platforms, then start without TensorFlow.
  """
  import reverb  # pylint: disable=g-import-not-at-top
  checkpointer = None
  if checkpoint_directory is not None:
    checkpointer = reverb.checkpointers.DefaultCheckpointer(
        checkpoint_directory)
  server = reverb.Server(tables=tables_fn(), port=port,
                         checkpointer=checkpointer)
  sizes = {name: info.current_size
           for name, info in server.localhost_client().server_info().items()}
  return server, sizes


class InProcessReplayServer:
  """The replay node's Reverb server, in the node's own process."""

  def __init__(self, tables_fn, port: int, checkpoint_directory: Optional[str]):
    self._server, sizes = start_reverb_server(tables_fn, port,
                                              checkpoint_directory)
    logging.info('Replay starts with %s items.', sizes)

  def stop(self):
    self._server.stop()


class _ConstructedAfter:
  """A node's constructor that first runs `setup` in the node's process."""

  def __init__(self, setup: Callable[[], None], constructor):
    self._setup = setup
    self._constructor = constructor

  def __call__(self, *args, **kwargs):
    self._setup()
    return self._constructor(*args, **kwargs)


# What a node's heartbeat answers count that a fault can lose (`KeptNodeRecords.
# recovered`): an actor's steps are its own and start again from 0, not lost.
LOST = ('updates', 'actor_steps', 'items', 'round_episodes')


class KeptNodeRecords:
  """What the coordinator writes of the nodes that keepers keep
  (`launch.supervision.keeper`) in `workdir` (as this process reaches it): a node's
  return after its fault."""

  def __init__(self, workdir: str):
    self._workdir = workdir

  def recovered(self, label: str, before: Dict[str, Any],
                after: Dict[str, Any]):
    """Records that node `label` answers again after a fault: how long after
    its keeper saw the fault, and what it lost, from its last heartbeat's
    answer before the fault and its first after (`launch.supervision.heartbeat`), or
    what its new process says it started from: the learner's updates, the
    counter's actor steps, a replay shard's items (their net fall: items
    written and sampled out between the two answers count too), the
    evaluator's episodes of its round."""
    faults = [record for record in fault_records.read_faults(self._workdir)
              if record.get('node') == label and
              record.get('event') == 'fault']
    lost = {}
    for key in LOST:
      if key in before:
        # What its new process started from, where it says (what it has
        # done since is not a loss), else its first answer.
        start = after.get(f'{key}_at_start', after.get(key, 0))
        lost[key] = max(0, int(before[key]) - int(start))
    record = {'node': label, 'event': 'recovered',
              'pid': self.process(label), 'lost': lost,
              'answered_before_fault': before, 'answered_after': after}
    if faults:
      record['seconds_since_fault'] = round(
          time.time() - faults[-1]['time'], 1)
      record['restarts_before'] = faults[-1].get('restarts_before', 0) + 1
    fault_records.append_fault(self._workdir, record, 'coordinator')
    logging.info('The %s answers again after its fault; lost: %s.', label,
                 lost or 'nothing it counts')

  def process(self, label: str) -> Optional[int]:
    """Which process does node `label`'s work now (None: none)."""
    raise NotImplementedError


class ClusterKeptNodes(KeptNodeRecords):
  """The coordinator's hands on the nodes that keepers keep in the replicas
  of a cluster (vertex_ai), where it sees no process of another machine:
  the run's workdir, which every replica reaches (Cloud Storage), carries
  the keepers' records of their nodes' faults, and the coordinator's
  request to end a node that froze (`keeper.mark_fault`), which the node's
  keeper carries out (`keeper.Keeper`'s watch for it)."""

  # How often the faults' records are read again (each heartbeat period
  # asks for every node).
  REFRESH_SECONDS = 2.0

  def __init__(self, workdir: str):
    super().__init__(storage.node_path(workdir))
    self._restarts: Dict[str, int] = {}
    self._read = 0.0

  def process(self, label: str) -> Optional[int]:
    """Not a process id: how many times node `label` has been started
    again in this launch (`fault_records.restart_counts`: by its keeper, or with its
    replica), which changes as it starts again."""
    if time.time() - self._read >= self.REFRESH_SECONDS:
      self._restarts = fault_records.restart_counts(fault_records.this_launch(
          fault_records.read_faults(self._workdir)))
      self._read = time.time()
    return self._restarts.get(label, 0)

  def stopped_for(self, label: str) -> float:
    """0: a replica's node answers its heartbeats itself."""
    del label
    return 0.0

  def end(self, label: str, cause: str) -> Optional[int]:
    """Asks node `label`'s keeper to end it (`cause` then its fault's)."""
    keeper.mark_fault(self._workdir, label, cause)
    logging.warning('Asking the %s\'s keeper to end it: %s; it starts it '
                    'again.', label, cause)
    return self.process(label)


class SharedProcess:
  """Every node a thread of one process (local_mt, test_mt): there is no
  process of a node's own to set up, and a node cannot die alone; a node's
  thread is named after it, for its log (`node_output.name_node_thread`)."""

  # The coordinator's last step of a stop (`Coordinator`'s `end_program`);
  # None: Launchpad's stop of every node.
  end_program = None
  # Whether the coordinator watches the nodes by heartbeats: not where a
  # node cannot die or freeze alone.
  heartbeats = False
  # Whether the coordinator writes the stop record when the platform ends
  # the program from outside (`Coordinator`'s `record_outside_stop`).
  records_outside_stop = False

  def process_setup(self, label: str,
                    constructor=None) -> Callable[[], None]:
    """What runs first in the process of node `label` (of class
    `constructor`, if a Courier node)."""
    del constructor
    return functools.partial(node_output.name_node_thread, label)

  def courier_node(self, label: str, constructor, *args,
                   **kwargs) -> lp.CourierNode:
    """A Courier node named `label` (its pid file, its logs) whose process
    is set up for this platform before `constructor(*args, **kwargs)`
    runs."""
    return lp.CourierNode(
        _ConstructedAfter(self.process_setup(label, constructor),
                          constructor), *args, **kwargs)

  def replay_server(self, label: str = 'replay'
                    ) -> Callable[..., InProcessReplayServer]:
    """Starts the server of replay node `label`: (tables_fn, port,
    checkpoint directory or None) -> an object with `stop()`."""
    del label
    return InProcessReplayServer

  # Whether its nodes run under keepers, which start them again
  # (`launch.supervision.keeper`).
  keeps_nodes = False

  def node_watch(self, labels: Dict[str, Sequence[str]]):
    """None, or a factory (called in the coordinator's process) of a watch
    over the processes of the nodes `labels` ({group: its nodes' labels})
    that the program cannot go on without (see
    `launch.supervision.coordinator.Coordinator`)."""
    del labels
    return None

  def kept_nodes(self):
    """None, or a factory (called in the coordinator's process) of the
    coordinator's hands on nodes under keepers (`local.KeptNodes`)."""
    return None


class ProcessPerNode(SharedProcess):
  """Every node a process of its own, placed by `placements` ({group: its
  nodes' `launch.machine.placement.NodePlacement`}: its CPUs, TensorFlow threads
  and nice); without them, a node class may set its process's TensorFlow
  threads (`tf_threads_per_process`; the actors: one, as Ape-X gives each
  actor one core)."""

  heartbeats = True
  placements: Optional[Dict[str, Any]] = None

  def process_setup(self, label: str,
                    constructor=None) -> Callable[[], None]:
    own_threads = getattr(constructor, 'tf_threads_per_process', None)
    if self.placements is None:
      return functools.partial(placement.use_tf_threads, own_threads)
    return functools.partial(
        placement.apply,
        self.placements[node_groups.group_of(label).name], own_threads)


# How long the primary replica waits for the replay's and the counter's final
# checkpoints before it ends the job (a full Atari replay takes minutes).
FINAL_CHECKPOINT_SECONDS = 900.0


def _final_checkpoints(replays: Dict[str, Any], counter):
  """Has replay (`replays`: {label: client} of its shards not gone) and the
  counter save, as their own stop would (a failed save is logged: the
  newest earlier checkpoint stays); None for a counter that is gone."""
  pool = futures.ThreadPoolExecutor(max(1, len(replays)))
  answers = {label: pool.submit(replay.checkpoint)
             for label, replay in replays.items()}
  answers['counter'] = counter.futures.save_checkpoint() if counter else None
  for name, answer in answers.items():
    if answer is None:
      continue
    try:
      logging.info('Final %s checkpoint: %s', name,
                   answer.result(timeout=FINAL_CHECKPOINT_SECONDS))
    except Exception as error:  # pylint: disable=broad-except
      logging.warning('No final %s checkpoint (%r); its newest earlier one '
                      'stays the newest.', name, error)
  pool.shutdown(wait=False)


def end_as_primary_replica(failed: bool, replays: Dict[str, Any], counter):
  """Ends a Vertex AI job from its primary replica (the coordinator): once
  replay (`replays`: its shards not gone) and the counter have saved, the coordinator's exit ends the job,
  which takes the primary's status: exit 1 (job failed) if the run failed,
  0 (job succeeded) otherwise. (Launchpad's `lp.stop()` there cancels the
  job instead, so that every stop would read as cancelled.)"""
  _final_checkpoints(replays, counter)
  logging.info('Ending the job (%s).', 'failed' if failed else 'succeeded')
  # At once: a SystemExit would unwind through Launchpad's process_entry,
  # which ends with status 0 whatever the exit code, and could wait on
  # threads calling a node that has gone.
  exit_now(1 if failed else 0)


def _with_stop_notice(setup: Callable[[], None]):
  """`setup`; then SIGTERM (the program's stop) waits `STOP_NOTICE_SECONDS`
  before Launchpad's own handler stops the node. The wait holds the main
  thread, whose handler it is, in front of every stop handler (which run
  in an order of their own); the node's servers, served by threads of
  their own, go on answering meanwhile."""
  setup()
  launchpads = signal.getsignal(signal.SIGTERM)
  if not callable(launchpads):
    return

  def after_a_while(signum, frame):
    time.sleep(STOP_NOTICE_SECONDS)
    launchpads(signum, frame)
  try:
    signal.signal(signal.SIGTERM, after_a_while)
  except ValueError:  # Not the main thread: no handler of its own to set.
    pass


def exit_now(status: int):
  """Ends this process at once, its output flushed, without Python's
  finalisation: a Courier client that finalisation (or a garbage
  collection on one of Courier's threads) destroys while its machinery is
  busy aborts the process ("terminate called without an active
  exception")."""
  logging.flush()
  sys.stdout.flush()
  sys.stderr.flush()
  os._exit(status)  # pylint: disable=protected-access


# How long a node of a Vertex AI job goes on answering after the SIGTERM
# that ends the job from outside: longer than the coordinator's wait for
# answers (`coordinator.OUTSIDE_STOP_ANSWER_SECONDS`), shorter than the
# platform's notice before SIGKILL.
STOP_NOTICE_SECONDS = 5.0


class ClusterProcesses(ProcessPerNode):
  """Every node a replica on a machine of its own (vertex_ai): no pid files
  or /proc to watch, no shared disk but the run's workdir; the coordinator
  is the job's primary replica and ends the job (`end_as_primary_replica`).

  Vertex AI ends every replica at once (SIGTERM) when the job is cancelled
  or a replica has failed it; the coordinator then names the nodes that no
  longer answer it. A node that is merely stopping would not answer either,
  and one with nothing in hand (an actor that gave up) stops within
  milliseconds: every other node goes on answering for
  `STOP_NOTICE_SECONDS` after the SIGTERM, so that only a node that is
  gone is named."""

  end_program = staticmethod(end_as_primary_replica)
  records_outside_stop = True

  def __init__(self, workdir: str = '', max_node_restarts: int = 0,
               placements: Optional[Dict[str, Any]] = None):
    self._workdir = workdir
    # Each replica's node under a keeper (`launch.supervision.keeper`), unless no node
    # is to be started again.
    self.keeps_nodes = max_node_restarts > 0 and bool(workdir)
    self.placements = placements

  def kept_nodes(self):
    if not self.keeps_nodes:
      return None
    return functools.partial(ClusterKeptNodes, self._workdir)

  def process_setup(self, label: str,
                    constructor=None) -> Callable[[], None]:
    setup = super().process_setup(label, constructor)
    if label == 'coordinator':
      return setup
    return functools.partial(_with_stop_notice, setup)
