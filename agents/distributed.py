"""The Ape-X distributed program, shared by every Ape-X agent.

    actors ──(n-step transitions + initial priorities)──▶ replay (Reverb)
      ▲                                                     │  ▲
      └──────────(network parameters)── learner ◀─(batches)─┘  │
                                          └──(new priorities)──┘
    evaluator ◀─(parameters)─ learner;  every node ─(step counts)─▶ counter

An agent supplies a builder (see `agents/apex_dqn/builder.py`) with
`make_replay_tables`, `make_learner`, `make_actor`, `actor_exploration` and
`evaluation_exploration` (see `agents/builders.py`); this module wires the
nodes and runs their loops.
"""

import collections
from concurrent import futures
import dataclasses
import faulthandler
import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import acme
import launchpad as lp
import numpy as np
import reverb
from absl import logging
from acme.utils import counting
from acme.utils import signals

from agents import checkpointing
from agents import loggers as loggers_lib
from agents import resilience
from agents import run_manifest
from agents import stop_watchdog
from agents import vector_loop


@dataclasses.dataclass(frozen=True)
class RunOptions:
  """What a run needs beyond the agent's hyper-parameters."""
  workdir: str
  num_actors: int = 4
  max_actor_steps: Optional[int] = None
  seed: int = 0
  log_every: float = 10.0
  """Seconds between two log rows of a learner or actor (evaluator: every
  episode)."""
  evaluation_period: int = 0
  """Learner steps between two rounds of evaluation; 0: evaluate without a
  pause. On a small machine the pause leaves the cores to learner and actors."""
  evaluation_episodes: int = 10
  """Episodes in one round of evaluation."""
  launch_type: str = 'local_mp'
  """Launchpad launch type; under local_mp every node is its own process."""
  checkpoint_every: float = 600.0
  """Seconds between two checkpoints of the learner (and of the counter,
  saved right after it); 0: no checkpoints."""
  replay_checkpoint_every: float = 3600.0
  """Seconds between two checkpoints of the replay table; 0: none."""
  actor_max_failures: int = 5
  """Environment failures within a minute after which an actor stops."""
  envs_per_actor: int = 1
  """Environments per actor process, acted in with one batched forward pass."""
  num_evaluators: int = 1
  """Evaluator processes (0 or 1)."""
  max_seconds: Optional[float] = None
  """Stop the whole program this many seconds after the actors' first step
  (a wall-clock budget, as when comparing numbers of actors)."""


# Launchpad kills a program whose nodes outlive its 10 s stop notice, and the
# program then exits -9. Under local_mp, Launchpad stops a node by sending its
# process SIGTERM, whose Python handler runs only when the main thread returns
# to the interpreter; a main thread blocked in a C++ call to a node that has
# already stopped (Courier waits for its server to come back) never does, nor
# does one that holds the GIL or is finalising the interpreter. The C-level
# handler still writes the signal's number to the wake-up fd: a watchdog
# process (agents/stop_watchdog.py) reads it and ends the node a grace period
# after the signal, first having it print every thread's traceback.
STOP_GRACE_SECONDS = 5.0
_WATCHDOG = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                         'stop_watchdog.py')


def exit_soon_after_stop(launch_type: str):
  """Under local_mp, ends this node's process soon after a stop request.

  Must be called from the main thread of the node's process. The node's own
  stop handling (Acme's `runtime_terminator`) still runs first when it can.
  """
  if launch_type != 'local_mp':
    return
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
  subprocess.Popen(  # pylint: disable=consider-using-with
      [sys.executable, '-S', _WATCHDOG, str(read_fd), str(os.getpid()),
       str(STOP_GRACE_SECONDS)],
      pass_fds=(read_fd,), stdin=subprocess.DEVNULL)
  os.close(read_fd)  # The pipe ends for the watchdog when this process ends.


NODES = run_manifest.NODES


def setup_node_process(options: RunOptions, label: str):
  """Under local_mp: installs the stop watchdog and writes this process's
  PID to <workdir>/nodes/<label>.pid (for the coordinator's watch, for
  operators, and for tests that kill a node)."""
  if options.launch_type != 'local_mp':
    return
  exit_soon_after_stop(options.launch_type)
  run_manifest.write_pid_file(options.workdir, label, os.getpid())


# Ape-X gives every actor one CPU core: an actor's TensorFlow runs its batched
# forward pass on one thread. On this project's machines one thread is also
# faster (a batch-1 Nature CNN: 1.1 ms against 1.4-1.8 ms with two threads
# sharing the actor's core), and leaves the other cores to the learner.
ACTOR_TF_THREADS = 1


def use_actor_threads():
  """Sets this process's TensorFlow thread pools for an actor. Must run
  before the process's first TensorFlow operation; in a process shared by
  several nodes (local_mt, test_mt) that has run one, it changes nothing."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  try:
    tf.config.threading.set_intra_op_parallelism_threads(ACTOR_TF_THREADS)
    tf.config.threading.set_inter_op_parallelism_threads(ACTOR_TF_THREADS)
  except RuntimeError:
    pass  # TensorFlow has started in this process: keep its pools.


def _seed(options: RunOptions, offset: int) -> int:
  return int(np.random.SeedSequence([options.seed, offset]).generate_state(1)[0])


class LearnerNode(acme.Learner, acme.VariableSource):
  """Runs the agent's learner, serves its parameters to actors, and saves
  its checkpoints (then asks the counter to save its own)."""

  def __init__(self, builder, replay_client: reverb.Client,
               counter: counting.Counter, options: RunOptions):
    # First: a learner that fails to start (e.g. to restore its checkpoint)
    # must already be known to the coordinator, which watches its PID.
    setup_node_process(options, 'learner')
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
            options.workdir, 'learner', steps_key='learner_steps',
            max_actor_steps=options.max_actor_steps),
        log_every=options.log_every)
    self._checkpointer = checkpointing.make_checkpointer(
        self._learner.state, options.workdir, 'learner',
        options.checkpoint_every)
    # Next to each checkpoint: the policy as a SavedModel (agents/snapshots).
    self._snapshot = builder.policy_snapshot(self._learner.state)
    self._options = options

  def step(self):
    self._learner.step()

  def get_variables(self, names: Sequence[str]) -> List[Any]:
    return self._learner.get_variables(names)

  def get_variables_if_newer(self, names: Sequence[str], version):
    return self._learner.get_variables_if_newer(names, version)

  @property
  def variable_names(self) -> List[str]:
    return self._learner.variable_names

  def _align_counter(self):
    """After a restore, the counts claim the checkpoint's learner steps."""
    counted = self._counter.get_counts().get('learner_steps', 0)
    if self._learner.num_steps > counted:
      self._learner_counter.increment(steps=self._learner.num_steps - counted)

  def _save(self, force: bool = False) -> bool:
    """A checkpoint (and policy snapshot) if one is due or `force`d."""
    if self._checkpointer is None or not self._checkpointer.save(force):
      return False
    self._snapshot.export(self._options.workdir, self._learner.num_steps)
    return True

  def run(self):
    logging.info('Learner starts at step %d (parameters checksum %s).',
                 self._learner.num_steps,
                 checkpointing.parameters_checksum(
                     self._learner.get_variables(self.variable_names)))
    self._align_counter()
    with signals.runtime_terminator():
      while True:
        self._learner.step()
        if self._save():
          self._counter.save_checkpoint()
    # The stop request ended the loop: a final log row and checkpoint. Only
    # the learner's own: the counter saves itself when it stops. None before
    # the first update (the loop saves only after one): nothing is learned
    # yet, and the optimiser's state, made by its first step, would be
    # missing from it, so that a relaunch could not restore it.
    self._learner.write_final_log()
    if self._learner.num_steps:
      self._save(force=True)


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

  def __init__(self, builder, replay_client: reverb.Client,
               variable_source: acme.VariableSource,
               counter: counting.Counter, actor_id: int, options: RunOptions):
    self._label = actor_label(actor_id)
    # First: building the actor waits for the learner's parameters, a wait
    # that a stop request must be able to end (the watchdog).
    setup_node_process(options, self._label)
    if options.launch_type == 'local_mp':
      use_actor_threads()  # Before this process's first TensorFlow operation.
    self._builder = builder
    self._actor_id = actor_id
    self._options = options
    self._num_built = 0
    self._actor = builder.make_actor(
        variable_source,
        exploration=builder.actor_exploration(actor_id, options.num_actors,
                                              options.envs_per_actor),
        replay_client=replay_client,
        seed=_seed(options, 100_000 + actor_id))
    self._logger = loggers_lib.make_logger(
        options.workdir, self._label, steps_key='actor_steps',
        max_actor_steps=options.max_actor_steps)
    self._counter = _FlushableCounter(counter, prefix='actor')
    self._stopping = threading.Event()
    self._budget = resilience.RetryBudget(options.actor_max_failures)
    self._loop = vector_loop.VectorEnvironmentLoop(
        [self._make_environment() for _ in range(options.envs_per_actor)],
        self._actor, counter=self._counter, logger=self._logger,
        log_every=options.log_every, on_failure=self._on_failure)

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
      self._counter.flush()  # Send the counts before leaving.
      return None
    if self._stopping.wait(self._budget.backoff_seconds):
      return None
    self._loop.environments[index].close()
    return self._make_environment()

  def run(self):
    lp.register_stop_handler(self._stopping.set)
    # As in acme.EnvironmentLoop: under local_mt / test_mt the stop request
    # also raises in this thread, so that it cannot stay blocked in a call
    # (a rate-limited insert, a Courier call) to a node that has stopped.
    with signals.runtime_terminator():
      self._loop.run(should_stop=self._stopping.is_set)
    # The counts since the last sync (at most a second's steps) would be
    # lost: the counter waits for them before its final save.
    self._counter.flush()
    logging.info('Actor %d stops after %d environment steps.',
                 self._actor_id, self._counter.own_counts['steps'])


class EvaluatorNode:
  """Runs the near-greedy policy and reports every episode's return.

  A failing environment costs the episode: it is logged, the environment is
  rebuilt after a pause, and evaluation goes on.
  """

  def __init__(self, builder, variable_source: acme.VariableSource,
               counter: counting.Counter, options: RunOptions):
    setup_node_process(options, 'evaluator')  # First, as the actors do.
    self._builder = builder
    self._num_environments = 0
    self._actor = builder.make_actor(
        variable_source, exploration=builder.evaluation_exploration,
        seed=_seed(options, 300_000))
    self._logger = loggers_lib.make_logger(
        options.workdir, 'evaluator', steps_key='actor_steps',
        max_actor_steps=options.max_actor_steps)
    self._counter = counter
    self._evaluator_counter = counting.Counter(counter, prefix='evaluator')
    self._options = options
    self._loop = self._make_loop()

  def _make_loop(self) -> acme.EnvironmentLoop:
    seed = _seed(self._options, 200_000 + 1_000 * self._num_environments)
    self._num_environments += 1
    environment = resilience.GuardedEnvironment(
        self._builder.environment.make_environment(seed=seed,
                                                   evaluation=True))
    return acme.EnvironmentLoop(environment, self._actor,
                                counter=self._evaluator_counter,
                                logger=self._logger)

  def _learner_steps(self) -> int:
    return self._counter.get_counts().get('learner_steps', 0)

  def _evaluate(self, stopping: threading.Event,
                num_episodes: Optional[int] = None):
    """Runs episodes; a failing environment is rebuilt and skipped."""
    try:
      self._loop.run(num_episodes=num_episodes)
    except resilience.EnvironmentFailure as error:
      logging.warning('Evaluator: the environment failed (%s); it is '
                      'rebuilt and the episode skipped.', error)
      if not stopping.wait(1.0):
        self._loop = self._make_loop()

  def run(self):
    stopping = threading.Event()
    lp.register_stop_handler(stopping.set)
    next_round = 0
    while not stopping.is_set():
      if not self._options.evaluation_period:
        self._evaluate(stopping)
        continue
      if self._learner_steps() < next_round:
        stopping.wait(1.0)
        continue
      # Evaluate the newest parameters, whatever the variable client's period.
      self._actor.update(wait=True)
      self._evaluate(stopping, self._options.evaluation_episodes)
      if stopping.is_set():
        break  # The other nodes may be gone: make no more calls.
      next_round = self._learner_steps() + self._options.evaluation_period


# Counter key: actors that stopped after repeated environment failures.
ACTORS_GIVEN_UP = 'actor_stopped_on_failures'


def _parent_of(pid: int) -> Optional[int]:
  """The parent of a live (not zombie) process, from /proc; None if gone."""
  try:
    with open(f'/proc/{pid}/stat') as f:
      fields = f.read().rsplit(')', 1)[1].split()
  except (OSError, IndexError):
    return None
  return None if fields[0] in ('Z', 'X') else int(fields[1])


def actor_label(actor_id: int) -> str:
  """An actor's name in logs/ and nodes/ (Acme's convention: the first
  actor writes `logs/actor/`)."""
  return 'actor' if actor_id == 0 else f'actor_{actor_id}'


class CounterNode(checkpointing.CheckpointedCounter):
  """The program's counter. Under local_mp it writes its PID file, for the
  coordinator's watch: every node waits on a dead counter forever."""

  def __init__(self, options: 'RunOptions'):
    if options.launch_type == 'local_mp':
      run_manifest.write_pid_file(options.workdir, 'counter', os.getpid())
    super().__init__(options.workdir, options.checkpoint_every > 0)


class NodeWatch:
  """Under local_mp, tells when a node of this launch has died (a crash, an
  out-of-memory kill, `kill -9`): Launchpad runs each node under a shell
  wrapper whose exit status hides the node's, and leaves the rest of the
  program running. A node is watched once its PID file names a live process
  of this launch (the same launcher as the watcher's: a file of an earlier
  launch names none); it has died once that process has been gone for
  `confirm_seconds` (a stopping program's nodes end at about the same time
  as the watcher is told to stop)."""

  def __init__(self, workdir: str, label: str, confirm_seconds: float = 3.0):
    self._path = run_manifest.pid_path(workdir, label)
    self._launcher = _parent_of(os.getppid())
    self._confirm_seconds = confirm_seconds
    self.pid = None
    self._gone_since = None

  def dead(self) -> bool:
    if self.pid is None:
      try:
        with open(self._path) as f:
          pid = int(f.read())
      except (OSError, ValueError):
        return False
      parent = _parent_of(pid)
      if parent is None or _parent_of(parent) != self._launcher:
        return False
      self.pid = pid
    if _parent_of(self.pid) is not None:
      self._gone_since = None
      return False
    if self._gone_since is None:
      self._gone_since = time.time()
    return time.time() - self._gone_since >= self._confirm_seconds


class Coordinator:
  """Stops the whole program once the actors have taken `max_actor_steps`,
  or `max_seconds` after the actors' first step of this launch (either may
  be None): the nodes' start-up, longer with more actors on few cores, is
  not part of a wall-clock budget. Also stops it, as failed, once every
  actor has given up on its environment (a learner left alone would train on
  stale data, or wait forever on a rate limiter), or, under local_mp
  (`watch_nodes`), once the process of the learner (the actors would act on
  forever for nobody), of the counter (every node would wait on it forever)
  or of every actor has died."""

  def __init__(self, counter: counting.Counter,
               max_actor_steps: Optional[int],
               poll_seconds: float = 1.0,
               max_seconds: Optional[float] = None,
               num_actors: int = 1,
               workdir: Optional[str] = None,
               watch_nodes: bool = False):
    self._counter = counter
    self._watches = None
    if watch_nodes and workdir:
      self._watches = (NodeWatch(workdir, 'learner'),
                       NodeWatch(workdir, 'counter'),
                       [NodeWatch(workdir, actor_label(actor_id))
                        for actor_id in range(num_actors)])
    self._max_actor_steps = max_actor_steps
    self._poll_seconds = poll_seconds
    self._max_seconds = max_seconds
    self._num_actors = num_actors
    self._workdir = workdir

  def _dead_node(self) -> Optional[Tuple[str, bool]]:
    """(why, True) once a watched node has died, else None."""
    if self._watches is None:
      return None
    learner, counter, actors = self._watches
    resume = ('(the output above says why); launch again with the same '
              '--workdir to resume from the newest checkpoints')
    if learner.dead():
      return (f'the learner\'s process (pid {learner.pid}) has died {resume}',
              True)
    if counter.dead():
      return (f'the counter\'s process (pid {counter.pid}) has died {resume}',
              True)
    if all([actor.dead() for actor in actors]):  # Each one checked.
      return (f'all {len(actors)} actor processes have died {resume}', True)
    return None

  def _counts(self) -> Tuple[Optional[Dict[str, Any]],
                             Optional[Tuple[str, bool]]]:
    """(the counter's counts, None), or (None, (why, True)) once a watched
    node has died: a dead counter's clients wait for it forever, so its
    answer is awaited in slices, between checks of the watched nodes."""
    requests = getattr(self._counter, 'futures', None)
    if self._watches is None or requests is None:
      return self._counter.get_counts(), None
    answer = requests.get_counts()
    while True:
      try:
        return answer.result(timeout=self._poll_seconds), None
      except futures.TimeoutError:
        dead = self._dead_node()
        if dead is not None:
          answer.cancel()
          return None, dead

  def _reason_to_stop(self, counts, start,
                      given_up: int) -> Optional[Tuple[str, bool]]:
    """(why, whether the run failed), or None to go on."""
    actor_steps = counts.get('actor_steps', 0)
    if given_up >= self._num_actors:
      return (f'all {self._num_actors} actors stopped after repeated '
              'environment failures (their logs name the errors); fix the '
              'environment, or raise --actor_max_failures, and launch again '
              'with the same --workdir to resume', True)
    if self._max_actor_steps and actor_steps >= self._max_actor_steps:
      return (f'reached {actor_steps} actor steps (limit '
              f'{self._max_actor_steps})', False)
    if (self._max_seconds and start is not None and
        time.time() - start >= self._max_seconds):
      return (f'ran for {time.time() - start:.0f} s since the actors started '
              f'(limit {self._max_seconds:.0f} s)', False)
    return self._dead_node()

  def run(self):
    start = None  # When the actors' count first grew in this launch.
    initial = None  # A resumed run's counts.
    reported = 0
    with signals.runtime_terminator():
      counts = {}
      while True:
        new_counts, stop = self._counts()
        if stop is not None:
          break  # With the last counts seen.
        counts = new_counts
        actor_steps = counts.get('actor_steps', 0)
        if initial is None:
          initial = counts
        elif start is None and actor_steps > initial.get('actor_steps', 0):
          start = time.time()
          logging.info('The actors have started: the wall-clock budget '
                       'counts from now.')
        # Actors that gave up in an earlier launch act again in this one.
        given_up = (counts.get(ACTORS_GIVEN_UP, 0) -
                    initial.get(ACTORS_GIVEN_UP, 0))
        if given_up > reported:
          reported = given_up
          logging.warning('%d of %d actors have stopped after repeated '
                          'environment failures.', given_up, self._num_actors)
        stop = self._reason_to_stop(counts, start, given_up)
        if stop is not None:
          break
        time.sleep(self._poll_seconds)
      reason, failed = stop
      counts = {key: int(value) for key, value in sorted(counts.items())}
      # The counts at the stop, for whoever reads the run's output.
      (logging.error if failed else logging.info)(
          'Stopping: %s. Counts: %s', reason, json.dumps(counts))
      if self._workdir:
        run_manifest.write_stop_record(self._workdir, reason, failed, counts)
      lp.stop()


def make_program(builder, options: RunOptions) -> lp.Program:
  """The Ape-X program: replay, counter, learner, actors, evaluator."""
  program = lp.Program(name=builder.name)
  with program.group('replay'):
    replay = program.add_node(checkpointing.CheckpointingReverbNode(
        builder.make_replay_tables, options.workdir,
        options.replay_checkpoint_every,
        supervise=options.launch_type == 'local_mp'))
  with program.group('counter'):
    counter = program.add_node(lp.CourierNode(CounterNode, options))
  with program.group('coordinator'):
    program.add_node(lp.CourierNode(
        Coordinator, counter, options.max_actor_steps,
        max_seconds=options.max_seconds, num_actors=options.num_actors,
        workdir=options.workdir,
        watch_nodes=options.launch_type == 'local_mp'))
  with program.group('learner'):
    learner = program.add_node(
        lp.CourierNode(LearnerNode, builder, replay, counter, options))
  with program.group('actor'):
    for actor_id in range(options.num_actors):
      program.add_node(
          lp.CourierNode(ActorNode, builder, replay, learner, counter,
                         actor_id, options))
  if options.num_evaluators:
    with program.group('evaluator'):
      program.add_node(
          lp.CourierNode(EvaluatorNode, builder, learner, counter, options))
  return program
