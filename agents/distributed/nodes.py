"""The nodes of the programs: replay, learner, actors, evaluator; and for
A3C, which has no replay, the parameter server in the learner's place and
the workers in the actors'.

Each is what runs in one node's process (or thread); the program graph
(`agents.distributed.program`) wires them, the platform
(`agents.distributed.platforms`) sets up their processes, and the
coordinator (`agents.distributed.coordinator`) stops them in order: the
nodes that call others (actors, evaluator) first, then the learner, then the
rest of the program. So `stop()` of a node ends its loop, does its last work
(its counts sent, its final checkpoint written), answers, and leaves the node
idle, making no more calls to other nodes, until the program stops.
"""

import collections
import threading
import time
from typing import Any, List, Sequence

import acme
import dm_env
import launchpad as lp
import numpy as np
import reverb
from absl import logging
from acme.utils import counting
from acme.utils import signals
from launchpad import address as lp_address
from launchpad.launch import worker_manager

from agents.runs import checkpointing
from agents.replay import eviction as eviction_lib
from agents.runs import loggers as loggers_lib
from agents.envs import resilience
from agents.runs import storage
from agents.envs import vector_loop
from agents.distributed.options import RunOptions
from agents.distributed.options import actor_label


def _seed(options: RunOptions, offset: int) -> int:
  return int(np.random.SeedSequence([options.seed, offset]).generate_state(1)[0])


class _Stop:
  """A node's stop: asked by the coordinator (`stop`, the ordered stop) or
  by Launchpad (the whole program's stop, at once)."""

  def __init__(self):
    self.requested = threading.Event()
    self._program_stopping = threading.Event()
    self._done = threading.Event()

  def register(self):
    """Makes the program's stop a stop of this node too (in its `run`)."""
    lp.register_stop_handler(self._on_program_stop)

  def _on_program_stop(self):
    self._program_stopping.set()
    self.requested.set()

  def stop(self, timeout: float) -> bool:
    """Asks the node to stop; True once its loop has ended within
    `timeout` seconds and its last work is done."""
    self.requested.set()
    return self._done.wait(timeout)

  def finish(self):
    """At the end of the node's `run` (asked to stop, or an actor that gave
    up): answers `stop`, then waits for the program's stop, so that the
    node leaves with the program's other nodes and answers the
    coordinator's `stop` until then."""
    self._done.set()
    try:
      worker_manager.get_worker_manager()
    except RuntimeError:
      return  # Run directly, not as a node of a program: nothing to wait for.
    self._program_stopping.wait()


class LearnerNode(acme.Learner, acme.VariableSource):
  """Runs the agent's learner, serves its parameters to actors, and saves
  its checkpoints (then asks the counter to save its own)."""

  def __init__(self, builder, replay_client: reverb.Client,
               counter: counting.Counter, options: RunOptions):
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    tf.random.set_seed(_seed(options, 0))
    self._counter = counter
    # Synced at every step, so that the counter's learner_steps is the
    # learner's own count whenever either is saved.
    self._learner_counter = counting.Counter(counter, prefix='learner',
                                             time_delta=0.0)
    self._learner = builder.make_learner(
        replay_client,
        counter=self._learner_counter,
        logger=loggers_lib.make_logger(
            options.node_workdir, 'learner', steps_key='learner_steps',
            max_actor_steps=options.max_actor_steps),
        log_every=options.log_every)
    self._checkpointer = checkpointing.make_checkpointer(
        self._learner.state, options.node_workdir, 'learner',
        options.checkpoint_every)
    # Next to each checkpoint: the policy as a SavedModel (agents/runs/snapshots).
    self._snapshot = builder.policy_snapshot(self._learner.state)
    self._options = options
    self._stop = _Stop()

  def step(self):
    self._learner.step()

  def get_variables(self, names: Sequence[str]) -> List[Any]:
    return self._learner.get_variables(names)

  def get_variables_if_newer(self, names: Sequence[str], version):
    return self._learner.get_variables_if_newer(names, version)

  @property
  def variable_names(self) -> List[str]:
    return self._learner.variable_names

  def ping(self) -> bool:
    """The coordinator's heartbeat (`agents.distributed.heartbeat`)."""
    return True

  def stop(self, timeout: float) -> bool:
    """Ends learning after the current update, with a final log row and
    checkpoint; True once done within `timeout` seconds."""
    return self._stop.stop(timeout)

  def _align_counter(self):
    """After a restore, the counts claim the checkpoint's learner steps."""
    counted = self._counter.get_counts().get('learner_steps', 0)
    if self._learner.num_steps > counted:
      self._learner_counter.increment(steps=self._learner.num_steps - counted)

  def _save(self, force: bool = False) -> bool:
    """A checkpoint (and policy snapshot) if one is due or `force`d."""
    if self._checkpointer is None or not self._checkpointer.save(force):
      return False
    self._snapshot.export(self._options.node_workdir, self._learner.num_steps)
    return True

  def run(self):
    self._stop.register()
    logging.info('Learner starts at step %d (parameters checksum %s).',
                 self._learner.num_steps,
                 checkpointing.parameters_checksum(
                     self._learner.get_variables(self.variable_names)))
    self._align_counter()
    # A program stop (not an ordered one) ends an update in the middle. An
    # ordered one is seen between updates, or between two waits for replay
    # (rate-limited once the actors have stopped).
    with signals.runtime_terminator():
      while not self._stop.requested.is_set():
        if self._learner.try_step() and self._save():
          self._counter.save_checkpoint()
    # A final log row and checkpoint. Only the learner's own: the counter
    # saves itself when it stops. None before the first update (the loop
    # saves only after one): nothing is learned yet, and the optimiser's
    # state, made by its first step, would be missing from it, so that a
    # relaunch could not restore it.
    self._learner.write_final_log()
    if self._learner.num_steps:
      self._save(force=True)
    self._stop.finish()


class _FlushableCounter(counting.Counter):
  """Acme's counter, which sends its counts to its parent at most once per
  `time_delta`, with a way to send them at once (before a node leaves), and
  a tally of this node's own counts (`own_counts`)."""

  def __init__(self, *args, **kwargs):
    super().__init__(*args, **kwargs)
    self.own_counts = collections.Counter()

  def increment(self, **counts):
    self.own_counts.update(counts)
    return super().increment(**counts)

  def flush(self):
    self._last_sync_time = 0.0  # As Acme's own `restore` does.
    return self.get_counts()


class ActorNode:
  """One actor: K environments (`envs_per_actor`) acted in by one batched
  policy, each with its own exploration, n-step window and replay writer.

  A failing environment (an exception, or a NaN/inf observation or reward)
  costs its current episode, not the actor: the failure is logged and
  counted (`actor_environment_errors`, `actor_nonfinite_steps`), the
  environment is rebuilt after a back-off (a non-finite step only restarts
  the episode), and acting goes on. After `actor_max_failures` environment
  errors within a minute the actor stops and says why; the rest of the
  program keeps training.
  """

  # Ape-X gives every actor one CPU core: in a process of its own, an
  # actor's TensorFlow runs its batched forward pass on one thread. On this
  # project's machines one thread is also faster (a batch-1 Nature CNN:
  # 1.1 ms against 1.4-1.8 ms with two threads sharing the actor's core),
  # and leaves the other cores to the learner.
  tf_threads_per_process = 1

  def __init__(self, builder, replay_client: reverb.Client,
               variable_source: acme.VariableSource,
               counter: counting.Counter, actor_id: int, options: RunOptions):
    self._label = actor_label(actor_id)
    self._builder = builder
    self._actor_id = actor_id
    self._options = options
    self._num_built = 0
    self._actor = self._make_actor(replay_client, variable_source,
                                   _seed(options, 100_000 + actor_id))
    self._logger = loggers_lib.make_logger(
        options.node_workdir, self._label, steps_key='actor_steps',
        max_actor_steps=options.max_actor_steps)
    self._counter = _FlushableCounter(counter, prefix='actor')
    self._stop = _Stop()
    self._budget = resilience.RetryBudget(options.actor_max_failures)
    self._loop = vector_loop.VectorEnvironmentLoop(
        [self._make_environment() for _ in range(options.envs_per_actor)],
        self._actor, counter=self._counter, logger=self._logger,
        log_every=options.log_every, on_failure=self._on_failure)

  def _make_actor(self, replay_client: reverb.Client,
                  variable_source: acme.VariableSource, seed: int):
    return self._builder.make_actor(
        variable_source,
        exploration=self._builder.actor_exploration(
            self._actor_id, self._options.num_actors,
            self._options.envs_per_actor),
        replay_client=replay_client, seed=seed)

  def ping(self) -> bool:
    """The coordinator's heartbeat (`agents.distributed.heartbeat`)."""
    return True

  def stop(self, timeout: float) -> bool:
    """Ends acting after the current step, with this actor's counts sent;
    True once done within `timeout` seconds. Its writes that replay holds
    back are not waited for: the learner, which would let them through,
    may itself wait for a replay shard whose actors have already stopped."""
    self._stop_waiting_for_replay()
    return self._stop.stop(timeout)

  def _stop_waiting_for_replay(self):
    self._actor.stop_waiting_for_replay()

  def _make_environment(self) -> resilience.GuardedEnvironment:
    # Every environment ever built by this actor gets its own seed: a rebuilt
    # one must not lead back into the state that broke its predecessor.
    seed = _seed(self._options, 1 + self._actor_id + 1_000 * self._num_built)
    self._num_built += 1
    return resilience.GuardedEnvironment(
        self._builder.environment.make_environment(seed=seed))

  def _on_failure(self, index: int, error: Exception):
    """The environment to go on with, or None when the actor gives up."""
    if isinstance(error, resilience.NonFiniteStep):
      logging.warning('Actor %d: %s; the step is dropped and the episode '
                      'restarted.', self._actor_id, error)
      self._counter.increment(nonfinite_steps=1)
      return self._loop.environments[index]
    logging.error('Actor %d: environment %d failed: %s', self._actor_id,
                  index, error, exc_info=error)
    self._counter.increment(environment_errors=1)
    if not self._budget.record_failure():
      logging.error(
          'Actor %d stops: %d environment failures within %.0f s, the last: '
          '%s. The rest of the program keeps training.', self._actor_id,
          self._budget.max_failures, self._budget.window_seconds, error)
      # Counted, so that the coordinator stops a program left without actors.
      self._counter.increment(stopped_on_failures=1)
      return None
    if self._stop.requested.wait(self._budget.backoff_seconds):
      return None
    self._loop.environments[index].close()
    return self._make_environment()

  def run(self):
    self._stop.register()
    # As in acme.EnvironmentLoop: under local_mt / test_mt a program stop
    # also raises in this thread, so that it cannot stay blocked in a call
    # (a rate-limited insert, a Courier call) to a node that has stopped.
    with signals.runtime_terminator():
      self._loop.run(should_stop=self._stop.requested.is_set)
    # The counts since the last sync (at most a second's steps) would be
    # lost otherwise.
    self._counter.flush()
    logging.info('Actor %d stops after %d environment steps.',
                 self._actor_id, self._counter.own_counts['steps'])
    self._stop.finish()


class ParameterServerNode(LearnerNode):
  """A3C's shared parameters in the learner's place (`builder.make_learner`
  is an `agents.a3c.learning.A3CParameterServer`): the workers'
  `apply_gradients` calls update them, each in a thread of the node's
  server, none waiting for another (Hogwild); its loop only checkpoints, as
  the learner's does, and ends in the learner's way at a stop."""

  def __init__(self, builder, counter: counting.Counter,
               options: RunOptions):
    super().__init__(builder, None, counter, options)

  def apply_gradients(self, gradients, steps: int, statistics=None):
    """A worker's update (`A3CParameterServer.apply_gradients`); returns the
    newest parameters."""
    return self._learner.apply_gradients(gradients, steps, statistics)


class WorkerNode(ActorNode):
  """An A3C worker (an actor-learner, Algorithm S3) in an actor's place: one
  environment, the actor's loop, failure handling, counts, logs and stop;
  its rollouts' gradients go to the parameter server (`variable_source`)."""

  def __init__(self, builder, parameter_server, counter: counting.Counter,
               actor_id: int, options: RunOptions):
    super().__init__(builder, None, parameter_server, counter, actor_id,
                     options)

  def _stop_waiting_for_replay(self):
    pass  # A worker writes to no replay.

  def _make_actor(self, replay_client, variable_source, seed: int):
    del replay_client  # None: A3C has no replay.
    return self._builder.make_worker(variable_source, seed=seed)


class _Stopped(Exception):
  """Raised by `_StoppableEnvironment` once its node is asked to stop."""


class _StoppableEnvironment(resilience.GuardedEnvironment):
  """A guarded environment (`resilience`) that ends an episode of Acme's
  environment loop, which has no stop of its own, at the first step after
  `requested` is set."""

  def __init__(self, environment: dm_env.Environment,
               requested: threading.Event):
    super().__init__(environment)
    self._requested = requested

  def step(self, action):
    if self._requested.is_set():
      raise _Stopped()
    return super().step(action)


class EvaluatorNode:
  """Plays the near-greedy policy in rounds and reports every episode's
  return.

  A round is `evaluation_episodes` episodes played side by side, one in
  each of as many environments, with one batched forward pass per step for
  all of them (`vector_loop.play_episodes`), as an actor steps its
  environments: a batched pass costs little more than one (README,
  Performance), so a round takes a fraction of the processor time of its
  episodes played one after another, which the learner gets back. Every
  episode of a round plays the parameters pulled as it began. With
  `evaluation_period` > 0 a round starts once the learner has made that
  many steps since the last one ended; with 0, rounds follow each other.

  A failing environment costs its episode: it is logged, the environment is
  rebuilt after a pause, and evaluation goes on.
  """

  def __init__(self, builder, variable_source: acme.VariableSource,
               counter: counting.Counter, options: RunOptions):
    self._builder = builder
    self._num_environments = 0
    count = options.evaluation_episodes
    self._actor = builder.make_actor(
        variable_source,
        exploration=np.full(count, builder.evaluation_exploration),
        seed=_seed(options, 300_000))
    self._logger = loggers_lib.make_logger(
        options.node_workdir, 'evaluator', steps_key='actor_steps',
        max_actor_steps=options.max_actor_steps)
    self._counter = counter
    self._evaluator_counter = counting.Counter(counter, prefix='evaluator')
    self._options = options
    self._stop = _Stop()
    self._environments = [self._make_environment() for _ in range(count)]

  def ping(self) -> bool:
    """The coordinator's heartbeat (`agents.distributed.heartbeat`)."""
    return True

  def stop(self, timeout: float) -> bool:
    """Ends evaluation at the next step; True once done within `timeout`
    seconds."""
    return self._stop.stop(timeout)

  def _make_environment(self) -> _StoppableEnvironment:
    # Every environment ever built here gets its own seed (no-op starts).
    seed = _seed(self._options, 200_000 + 1_000 * self._num_environments)
    self._num_environments += 1
    return _StoppableEnvironment(
        self._builder.environment.make_environment(seed=seed,
                                                   evaluation=True),
        self._stop.requested)

  def _learner_steps(self) -> int:
    return self._counter.get_counts().get('learner_steps', 0)

  def _on_failure(self, index: int, error: Exception):
    """The environment for later rounds; None once asked to stop."""
    logging.warning('Evaluator: environment %d failed (%s); its episode is '
                    'skipped and the environment rebuilt.', index, error)
    if self._stop.requested.wait(1.0):
      return None
    self._environments[index].close()
    self._environments[index] = self._make_environment()
    return self._environments[index]

  def _evaluate(self):
    """One round: an episode in each environment, with the newest
    parameters."""
    self._actor.update(wait=True)
    try:
      vector_loop.play_episodes(
          self._environments, self._actor, counter=self._evaluator_counter,
          logger=self._logger, on_failure=self._on_failure,
          should_stop=self._stop.requested.is_set)
    except _Stopped:
      pass

  def run(self):
    self._stop.register()
    stopping = self._stop.requested
    next_round = 0
    while not stopping.is_set():
      if self._learner_steps() < next_round:
        stopping.wait(1.0)
        continue
      self._evaluate()
      next_round = self._learner_steps() + self._options.evaluation_period
    self._stop.finish()


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
