"""Where the nodes run, and what their processes need there.

The program graph (`agents.distributed.program`) asks its platform for each
node, so that what a place needs (pid files and a stop watchdog on this
machine, for instance) is added in one place and not by branches on the
launch type inside the nodes:

  SharedProcess   every node a thread of one process (local_mt, test_mt)
  ProcessPerNode  every node a process of its own
  LocalProcesses  (agents/distributed/local.py) the processes of one machine
                  (local_mp): pid files, node watching, a stop watchdog, a
                  supervised replay server
"""

import functools
from typing import Callable, Optional, Sequence

import launchpad as lp
import reverb
from absl import logging


class InProcessReplayServer:
  """The replay node's Reverb server, in the node's own process."""

  def __init__(self, tables_fn, port: int, checkpoint_directory: Optional[str]):
    checkpointer = None
    if checkpoint_directory is not None:
      checkpointer = reverb.checkpointers.DefaultCheckpointer(
          checkpoint_directory)
    self._server = reverb.Server(tables=tables_fn(), port=port,
                                 checkpointer=checkpointer)
    logging.info('Replay starts with %s items.', {
        name: info.current_size for name, info in
        self._server.localhost_client().server_info().items()})

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


def _nothing():
  pass


class SharedProcess:
  """Every node a thread of one process (local_mt, test_mt): there is no
  process of a node's own to set up, and a node cannot die alone."""

  def process_setup(self, label: str,
                    constructor=None) -> Callable[[], None]:
    """What runs first in the process of node `label` (of class
    `constructor`, if a Courier node)."""
    del label, constructor
    return _nothing

  def courier_node(self, label: str, constructor, *args) -> lp.CourierNode:
    """A Courier node named `label` (its pid file, its logs) whose process
    is set up for this platform before `constructor(*args)` runs."""
    return lp.CourierNode(
        _ConstructedAfter(self.process_setup(label, constructor),
                          constructor), *args)

  def replay_server(self) -> Callable[..., InProcessReplayServer]:
    """Starts the replay node's server: (tables_fn, port, checkpoint
    directory or None) -> an object with `stop()`."""
    return InProcessReplayServer

  def node_watch(self, actor_labels: Sequence[str]):
    """None, or a factory (called in the coordinator's process) of a watch
    over the learner, the counter and the actors `actor_labels` (see
    `agents.distributed.coordinator.Coordinator`)."""
    del actor_labels
    return None


def use_tf_threads(count: Optional[int]):
  """Sets this process's TensorFlow thread pools, before its first
  TensorFlow operation."""
  if count is None:
    return
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  tf.config.threading.set_intra_op_parallelism_threads(count)
  tf.config.threading.set_inter_op_parallelism_threads(count)


class ProcessPerNode(SharedProcess):
  """Every node a process of its own: a node class may set its process's
  TensorFlow threads (`tf_threads_per_process`; the actors: one, as Ape-X
  gives each actor one core)."""

  def process_setup(self, label: str,
                    constructor=None) -> Callable[[], None]:
    del label
    return functools.partial(
        use_tf_threads, getattr(constructor, 'tf_threads_per_process', None))
