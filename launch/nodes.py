"""What every program's nodes are made of, and the evaluator.

A program's nodes compose these: a node's stop (`Stop`), its seeds
(`node_seed`), the counter a node sends its counts through
(`FlushableCounter`), the loop of the node in the learner's place
(`LearningNode`: updates, parameters served, checkpoints) and of a node in
an actor's place (`ActingNode`: guarded environments, failures, counts,
logs), whatever either learns from or writes to; and the evaluator
(`EvaluatorNode`), which every program has. The nodes of a program with
replay (replay, learner, actors) are in `launch.replay_nodes`; those of a
program of workers in `launch.worker_nodes`.

Each node is what runs in one node's process (or thread); the program graph
(`launch.program`) wires them, the platform
(`launch.supervision.platforms`) sets up their processes, and the
coordinator (`launch.supervision.coordinator`) stops them in order: the
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
from absl import logging
from acme.utils import counting
from launchpad.launch import worker_manager

from agents import variables as variables_lib
from launch.runs import checkpointing
from launch.runs import loggers as loggers_lib
from agents.envs import resilience
from agents import actor_loop
from launch.supervision import keeper
from launch.supervision import program_stop
from launch.options import RunOptions
from launch.node_groups import actor_label

# Seconds between the learner's syncs of its counts with the counter's node.
COUNTER_SYNC_SECONDS = 1.0


def node_seed(options: RunOptions, offset: int) -> int:
  """The seed of a node's part number `offset` (an actor, an environment):
  one of the run's `--seed`, the same in every launch of it. A node's
  process started again by its keeper (`launch.supervision.keeper`) draws from a stream
  of its own (its environments do not replay the episodes its last process
  played)."""
  entropy = [options.seed, offset]
  if keeper.restarts():
    entropy.append(keeper.restarts())
  return int(np.random.SeedSequence(entropy).generate_state(1)[0])


class Stop:
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
    self._program_stopping.set()  # Before `requested`: see `by_program`.
    self.requested.set()

  @property
  def by_program(self) -> bool:
    """Whether the stop is the program's (Launchpad's), not an ordered
    one; set before `requested` is, so a loop ended by it knows."""
    return self._program_stopping.is_set()

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


class LearningNode(acme.Learner, acme.VariableSource):
  """The node in the learner's place: runs the learner that
  `builder.make_learner(**learner_args, counter=, logger=, log_every=)`
  makes, serves its parameters, and saves its checkpoints (then asks the
  counter to save its own). What the learner learns from is its own: a
  replay (`replay_nodes.LearnerNode`), or calls of other nodes."""

  def __init__(self, builder, counter: counting.Counter, options: RunOptions,
               **learner_args):
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    tf.random.set_seed(node_seed(options, 0))
    self._counter = counter
    # Synced once a second (each sync is a call to the counter's node, which
    # at every update took about 15% of a fast learner's time), and flushed
    # before the counter saves and as the learner stops, so that the
    # counter's learner_steps is the learner's own count whenever either
    # is saved. Its own rows count every update: Acme's counter adds those
    # not yet synced to what it returns.
    self._learner_counter = FlushableCounter(counter, prefix='learner',
                                             time_delta=COUNTER_SYNC_SECONDS)
    # The parameters it sends to actors, cachers and the evaluator, logged
    # with its rows (`parameter_bytes_sent`).
    self._served = variables_lib.ServedBytes()
    self._learner = builder.make_learner(
        **learner_args,
        counter=self._learner_counter,
        logger=loggers_lib.WithColumns(loggers_lib.make_logger(
            options.node_workdir, 'learner', steps_key='learner_steps',
            max_actor_steps=options.max_actor_steps),
                                       self._served.columns),
        log_every=options.log_every)
    # Written by a thread of their own from a copy of the learner's state,
    # each followed by the policy as a SavedModel (agents/snapshots.py) made
    # from the same copy.
    self._checkpoints = checkpointing.LearnerCheckpoints(
        self._learner.state, lambda: self._learner.num_steps,
        options.node_workdir, 'learner', options.checkpoint_every,
        after_write=self._export_snapshot)
    self._snapshot = (builder.policy_snapshot(self._checkpoints.shadow)
                      if self._checkpoints.enabled else None)
    self._options = options
    self._stop = Stop()
    # The updates it started from.
    self._started_at = int(self._learner.num_steps)

  def step(self):
    self._learner.step()

  def get_variables(self, names: Sequence[str]) -> List[Any]:
    values = self._learner.get_variables(names)
    self._served.add(values)
    return values

  def get_variables_if_newer(self, names: Sequence[str], version):
    version, values = self._learner.get_variables_if_newer(names, version)
    self._served.add(values)
    return version, values

  @property
  def variable_names(self) -> List[str]:
    return self._learner.variable_names

  def ping(self):
    """The coordinator's heartbeat (`launch.supervision.heartbeat`): the learner's
    updates, those of its newest checkpoint (a restart goes back to them)
    and those it started from."""
    return {'updates': int(self._learner.num_steps),
            'updates_checkpointed': self._checkpoints.saved_steps,
            'updates_at_start': self._started_at}

  def stop(self, timeout: float) -> bool:
    """Ends learning after the current update, with a final log row and
    checkpoint; True once done within `timeout` seconds."""
    return self._stop.stop(timeout)

  def _align_counter(self):
    """The counter's learner steps made the learner's own: after a restore
    (the counter, which saves on its own, may have counted updates this
    checkpoint lacks, or lost some in a fault of its own), and at each
    checkpoint."""
    counted = self._learner_counter.flush().get('learner_steps', 0)
    if self._learner.num_steps != counted:
      self._learner_counter.increment(steps=self._learner.num_steps - counted)

  def _export_snapshot(self, learner_steps: int):
    self._snapshot.export(self._options.node_workdir, learner_steps)

  def _save(self, force: bool = False) -> bool:
    """Begins a checkpoint (and policy snapshot) if one is due or `force`d
    (which waits until it is written)."""
    if not self._checkpoints.save(force):
      return False
    self._align_counter()
    return True

  def run(self):
    self._stop.register()
    logging.info('Learner starts at step %d (parameters checksum %s).',
                 self._learner.num_steps,
                 checkpointing.parameters_checksum(
                     self._learner.get_variables(self.variable_names)))
    self._align_counter()
    # A stop, ordered or the program's, is seen between updates, or between
    # two waits for what the learner learns from (replay: rate-limited once
    # the actors have stopped).
    with program_stop.interrupt_if_stuck('The learner'):
      while not self._stop.requested.is_set():
        if self._learner.try_step():
          self._save()
    if self._stop.by_program:
      # Not an ordered stop: the nodes it would save to may have gone, and
      # Launchpad ends this one shortly. The last checkpoint stands.
      return
    # A final log row and checkpoint. Only the learner's own: the counter
    # saves itself when it stops. None before the first update (the loop
    # saves only after one): nothing is learned yet, and the optimiser's
    # state, made by its first step, would be missing from it, so that a
    # relaunch could not restore it.
    self._learner.write_final_log()
    if self._learner.num_steps:
      self._save(force=True)
    self._learner_counter.flush()  # Before the counter saves as it stops.
    self._stop.finish()


class FlushableCounter(counting.Counter):
  """Acme's counter, which sends its counts to its parent at most once per
  `time_delta`, with a way to send them at once (before an actor leaves, as
  an evaluation round ends), and a tally of this node's own counts
  (`own_counts`)."""

  def __init__(self, *args, **kwargs):
    super().__init__(*args, **kwargs)
    self.own_counts = collections.Counter()

  def increment(self, **counts):
    self.own_counts.update(counts)
    return super().increment(**counts)

  def flush(self):
    self._last_sync_time = 0.0  # As Acme's own `restore` does.
    return self.get_counts()


class ActingNode:
  """A node in an actor's place: K environments (`envs_per_actor`) acted in
  by one batched `actor`, which the node's own kind makes, writing where
  that kind says (to replay, to another node).

  A failing environment (an exception, or a NaN/inf observation or reward)
  costs its current episode, not the node: the failure is logged and
  counted (`actor_environment_errors`, `actor_nonfinite_steps`), the
  environment is rebuilt after a back-off (a non-finite step only restarts
  the episode), and acting goes on. After `actor_max_failures` environment
  errors within a minute the node stops and says why; the rest of the
  program keeps training.
  """

  # Ape-X gives every actor one CPU core (Horgan et al. 2018, §4.1): in a
  # process of its own, an actor's TensorFlow runs its batched forward pass
  # on one thread. Two threads would only share that core, and one leaves
  # the other cores to the learner.
  tf_threads_per_process = 1

  def __init__(self, builder, actor: acme.Actor, counter: counting.Counter,
               actor_id: int, options: RunOptions):
    self._label = actor_label(actor_id)
    self._builder = builder
    self._actor_id = actor_id
    self._options = options
    self._num_built = 0
    self._actor = actor
    # Each row says which parameters the actor acts with: the learner's step
    # that made them (-1: none yet, or a source without versions).
    self._logger = loggers_lib.WithColumns(
        loggers_lib.make_logger(
            options.node_workdir, self._label, steps_key='actor_steps',
            max_actor_steps=options.max_actor_steps),
        self._parameters_version)
    self._counter = FlushableCounter(counter, prefix='actor')
    self._stop = Stop()
    self._budget = resilience.RetryBudget(options.actor_max_failures)
    self._loop = actor_loop.VectorEnvironmentLoop(
        [self._make_environment() for _ in range(options.envs_per_actor)],
        self._actor, counter=self._counter, logger=self._logger,
        log_every=options.log_every, on_failure=self._on_failure)

  def _parameters_version(self):
    version = getattr(self._actor, 'parameters_version', None)
    return {'parameters_version': -1 if version is None else version}

  @staticmethod
  def actor_seed(options: RunOptions, actor_id: int) -> int:
    """The seed of the actor of node `actor_id`."""
    return node_seed(options, 100_000 + actor_id)

  def ping(self):
    """The coordinator's heartbeat (`launch.supervision.heartbeat`): this process's
    environment steps."""
    return {'steps': int(self._counter.own_counts['steps'])}

  def stop(self, timeout: float) -> bool:
    """Ends acting after the current step, with this node's counts sent;
    True once done within `timeout` seconds."""
    return self._stop.stop(timeout)

  def _make_environment(self) -> resilience.GuardedEnvironment:
    # Every environment ever built by this actor gets its own seed: a rebuilt
    # one must not lead back into the state that broke its predecessor.
    seed = node_seed(self._options,
                     1 + self._actor_id + 1_000 * self._num_built)
    self._num_built += 1
    return resilience.GuardedEnvironment(
        self._builder.environment.make_environment(
            seed=seed, **self._options.environment_options()))

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
    # A call to a node that has stopped (a rate-limited insert, a Courier
    # call) fails, or is interrupted, after the program's stop.
    with program_stop.interrupt_if_stuck(f'Actor {self._actor_id}'):
      self._loop.run(should_stop=self._stop.requested.is_set)
      # The counts since the last sync (at most a second's steps) would be
      # lost otherwise; the counter waits for them after the program's stop.
      self._counter.flush()
    logging.info('Actor %d stops after %d environment steps.',
                 self._actor_id, self._counter.own_counts['steps'])
    self._stop.finish()


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
  all of them (`actor_loop.play_episodes`), as an actor steps its
  environments: a batched pass costs little more than one
  (docs/performance.md), so a round takes a fraction of the processor time
  of its episodes played one after another, which the learner gets back. Every
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
        seed=node_seed(options, 300_000))
    self._logger = loggers_lib.make_logger(
        options.node_workdir, 'evaluator', steps_key='actor_steps',
        max_actor_steps=options.max_actor_steps)
    self._counter = counter
    # Flushed as each round ends: Acme's counter would hold a round's last
    # episode until the next round's first (minutes on Atari), and a stop in
    # between would lose it, so that a resumed run counted it again.
    self._evaluator_counter = FlushableCounter(counter, prefix='evaluator')
    self._round_started_at = 0  # Its episodes when the round began.
    self._options = options
    self._stop = Stop()
    self._environments = [self._make_environment() for _ in range(count)]

  def ping(self):
    """The coordinator's heartbeat (`launch.supervision.heartbeat`): the episodes of
    the round under way that have ended (a restart loses them)."""
    return {'round_episodes': int(
        self._evaluator_counter.own_counts['episodes'] -
        self._round_started_at)}

  def stop(self, timeout: float) -> bool:
    """Ends evaluation at the next step; True once done within `timeout`
    seconds."""
    return self._stop.stop(timeout)

  def _make_environment(self) -> _StoppableEnvironment:
    # Every environment ever built here gets its own seed (of its sticky
    # actions or no-op starts).
    seed = node_seed(self._options, 200_000 + 1_000 * self._num_environments)
    self._num_environments += 1
    return _StoppableEnvironment(
        self._builder.environment.make_environment(
            seed=seed, evaluation=True,
            **self._options.environment_options()),
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
    self._round_started_at = self._evaluator_counter.own_counts['episodes']
    # Every row of the round names it (`loggers_lib.split_rounds`).
    counts = self._counter.get_counts()
    round_fields = {
        loggers_lib.ROUND_STARTED: time.time(),
        loggers_lib.ROUND_LEARNER_STEPS: counts.get('learner_steps', 0),
        loggers_lib.ROUND_ACTOR_STEPS: counts.get('actor_steps', 0)}
    try:
      actor_loop.play_episodes(
          self._environments, self._actor, counter=self._evaluator_counter,
          logger=self._logger, on_failure=self._on_failure,
          should_stop=self._stop.requested.is_set, log_fields=round_fields)
    except _Stopped:
      pass
    self._evaluator_counter.flush()

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
