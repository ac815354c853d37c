"""The nodes of a program with replay (Ape-X's): the replay servers, the
learner sampling them, and the actors writing to them.

They are made of the pieces every program's nodes share
(`launch.nodes`): the learner is a `nodes.LearningNode` given
its replay, an actor an `nodes.ActingNode` whose actor writes to one replay
server. The program graph (`launch.program`) wires them.
"""

import time

import acme
import launchpad as lp
import reverb
from absl import logging
from acme.utils import counting
from launchpad import address as lp_address
from launchpad.launch import worker_manager

from launch.runs import checkpointing
from agents.replay import eviction as eviction_lib
from launch.runs import storage
from launch import nodes
from launch.options import RunOptions


class LearnerNode(nodes.LearningNode):
  """Runs the agent's learner, which samples the replay behind
  `replay_client` (a client, or one per shard), serves its parameters to
  actors, and saves its checkpoints (then asks the counter to save its
  own)."""

  def __init__(self, builder, replay_client: reverb.Client,
               counter: counting.Counter, options: RunOptions):
    super().__init__(builder, counter, options, replay_client=replay_client)


class ActorNode(nodes.ActingNode):
  """One actor: K environments (`envs_per_actor`) acted in by one batched
  policy, each with its own exploration and replay writer (the builder's
  adder, writing to the replay server behind `replay_client`); its loop,
  failure handling, counts and logs are an `ActingNode`'s."""

  def __init__(self, builder, replay_client: reverb.Client,
               variable_source: acme.VariableSource,
               counter: counting.Counter, actor_id: int, options: RunOptions):
    actor = builder.make_actor(
        variable_source,
        exploration=builder.actor_exploration(
            actor_id, options.num_actors, options.envs_per_actor),
        replay_client=replay_client,
        seed=self.actor_seed(options, actor_id))
    super().__init__(builder, actor, counter, actor_id, options)

  def stop(self, timeout: float) -> bool:
    """Ends acting after the current step, with this actor's counts sent;
    True once done within `timeout` seconds. Its writes that replay holds
    back are not waited for: the learner, which would let them through,
    may itself wait for a replay shard whose actors have already stopped."""
    stop_waiting = getattr(self._actor, 'stop_waiting_for_replay', None)
    if stop_waiting is not None:  # `builders.Builder.make_actor`.
      stop_waiting()
    return super().stop(timeout)


# Seconds the replay server keeps serving after its final checkpoint, so that
# in a program stopped at once (not in order) a learner step in flight can
# finish, and the learner write its final checkpoint, before the server goes.
REPLAY_LINGER_SECONDS = 2.0
# How often the replay node checks whether a round of eviction is due.
EVICTION_POLL_SECONDS = 0.25


class ReplayNode(lp.ReverbNode):
  """The replay node: a Reverb server (started by the platform's
  `start_server`) that checkpoints its tables through Reverb's own
  checkpointer every `checkpoint_every` seconds and at stop, loads the
  newest checkpoint when it starts, and runs the table's rounds of eviction
  (`eviction`, an `agents.replay.eviction.InversePriorityEviction`) if it has
  any."""

  def __init__(self, tables_fn, workdir: str, checkpoint_every: float,
               process_setup, start_server, eviction=None,
               label: str = 'replay'):
    super().__init__(tables_fn)
    self._label = label  # Its checkpoints' directory: one per shard.
    # Made in the launcher: the checkpoints' directory is named in `run`,
    # under the mount of the replica the node runs in.
    self._workdir = workdir if checkpoint_every > 0 else None
    self._checkpoint_every = checkpoint_every
    self._process_setup = process_setup
    self._start_server = start_server
    self._eviction = eviction

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

  def _evict(self, client: reverb.Client) -> bool:
    """A round of eviction if one is due; True if it ran (its snapshot is
    then the newest checkpoint)."""
    try:
      if not self._eviction.due(client):
        return False
      evicted = self._eviction.evict(client)
    except RuntimeError as error:  # The server is down (being restarted).
      logging.warning('Replay eviction skipped (%s).', error)
      return False
    logging.log_every_n_seconds(
        logging.INFO, 'Replay eviction: %d items in this round, %d in %d '
        'rounds so far.', 60, evicted, self._eviction.evicted,
        self._eviction.rounds)
    return True

  def run(self):
    self._process_setup()
    port = lp_address.get_port_from_address(self._address.resolve())
    directory = None
    if self._workdir:
      directory = checkpointing.checkpoint_directory(
          storage.node_path(self._workdir), self._label)
    if self._eviction is not None:
      directory = eviction_lib.checkpoint_directory(directory)
    server = self._start_server(self._priority_tables_fn, port, directory)
    client = reverb.Client(f'localhost:{port}')
    period = self._checkpoint_every if self._workdir else None
    if self._eviction is None:
      while not worker_manager.wait_for_stop(period):
        self._checkpoint(client)
    else:
      next_checkpoint = time.monotonic() + (period or float('inf'))
      while not worker_manager.wait_for_stop(EVICTION_POLL_SECONDS):
        if self._evict(client):
          next_checkpoint = time.monotonic() + (period or float('inf'))
        elif time.monotonic() >= next_checkpoint:
          self._checkpoint(client)
          next_checkpoint = time.monotonic() + period
    if self._workdir:
      self._checkpoint(client, final=True)
    time.sleep(REPLAY_LINGER_SECONDS)
    server.stop()
