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

import dataclasses
import os
import signal
import threading
import time
from typing import Any, List, Optional, Sequence

import acme
import launchpad as lp
import numpy as np
import reverb
from absl import logging
from acme.utils import counting
from acme.utils import signals

from agents import checkpointing
from agents import loggers as loggers_lib


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


# Launchpad kills a program whose nodes outlive its 10 s stop notice, and the
# program then exits -9. Under local_mp, Launchpad stops a node by sending its
# process SIGTERM, whose Python handler runs only when the main thread returns
# to the interpreter; a main thread blocked in a C++ call to a node that has
# already stopped (Courier waits for its server to come back) never does. The
# C-level handler still writes the signal's number to the wake-up fd, so a
# watchdog thread reading it ends the process a grace period after the signal.
STOP_GRACE_SECONDS = 5.0
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


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

  def watch():
    while True:
      received = os.read(read_fd, 64)
      if any(number in _STOP_SIGNALS for number in received):
        break
    time.sleep(STOP_GRACE_SECONDS)
    logging.warning('Still running %.0f s after the stop request: exiting.',
                    STOP_GRACE_SECONDS)
    os._exit(0)  # pylint: disable=protected-access

  threading.Thread(target=watch, name='stop_watchdog', daemon=True).start()


def _seed(options: RunOptions, offset: int) -> int:
  return int(np.random.SeedSequence([options.seed, offset]).generate_state(1)[0])


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
        logger=loggers_lib.make_logger(options.workdir, 'learner',
                                       steps_key='learner_steps'),
        log_every=options.log_every)
    self._checkpointer = checkpointing.make_checkpointer(
        self._learner.state, options.workdir, 'learner',
        options.checkpoint_every)
    self._options = options

  def step(self):
    self._learner.step()

  def get_variables(self, names: Sequence[str]) -> List[Any]:
    return self._learner.get_variables(names)

  def _align_counter(self):
    """After a restore, the counts claim the checkpoint's learner steps."""
    counted = self._counter.get_counts().get('learner_steps', 0)
    if self._learner.num_steps > counted:
      self._learner_counter.increment(steps=self._learner.num_steps - counted)

  def _save(self, force: bool = False):
    if self._checkpointer is not None and self._checkpointer.save(force):
      self._counter.save_checkpoint()

  def run(self):
    exit_soon_after_stop(self._options.launch_type)
    self._align_counter()
    with signals.runtime_terminator():
      while True:
        self._learner.step()
        self._save()
    # The stop request ended the loop: a final checkpoint. Only the learner's
    # own: the counter saves itself when it stops.
    if self._checkpointer is not None:
      self._checkpointer.save(force=True)


class ActorNode:
  """One actor: its own environment, epsilon and replay writer."""

  def __init__(self, builder, replay_client: reverb.Client,
               variable_source: acme.VariableSource,
               counter: counting.Counter, actor_id: int, options: RunOptions):
    environment = builder.environment.make_environment(
        seed=_seed(options, 1 + actor_id))
    actor = builder.make_actor(
        variable_source,
        exploration=builder.actor_exploration(actor_id, options.num_actors),
        replay_client=replay_client,
        seed=_seed(options, 100_000 + actor_id))
    # Acme's convention: the first actor writes `logs/actor/`.
    label = 'actor' if actor_id == 0 else f'actor_{actor_id}'
    logger = loggers_lib.make_logger(options.workdir, label,
                                     time_delta=options.log_every,
                                     steps_key='actor_steps')
    self._options = options
    self._loop = acme.EnvironmentLoop(
        environment, actor, counter=counting.Counter(counter, prefix='actor'),
        logger=logger)

  def run(self):
    exit_soon_after_stop(self._options.launch_type)
    self._loop.run()


class EvaluatorNode:
  """Runs the near-greedy policy and reports every episode's return."""

  def __init__(self, builder, variable_source: acme.VariableSource,
               counter: counting.Counter, options: RunOptions):
    environment = builder.environment.make_environment(
        seed=_seed(options, 200_000), evaluation=True)
    actor = builder.make_actor(variable_source,
                               exploration=builder.evaluation_exploration,
                               seed=_seed(options, 300_000))
    logger = loggers_lib.make_logger(options.workdir, 'evaluator',
                                     steps_key='actor_steps')
    self._actor = actor
    self._counter = counter
    self._options = options
    self._loop = acme.EnvironmentLoop(
        environment, actor,
        counter=counting.Counter(counter, prefix='evaluator'), logger=logger)

  def _learner_steps(self) -> int:
    return self._counter.get_counts().get('learner_steps', 0)

  def run(self):
    exit_soon_after_stop(self._options.launch_type)
    if not self._options.evaluation_period:
      self._loop.run()
      return
    next_round = 0
    stopping = threading.Event()
    with signals.runtime_terminator(stopping.set):
      while not stopping.is_set():
        if self._learner_steps() < next_round:
          stopping.wait(1.0)
          continue
        # Evaluate the newest parameters, whatever the variable client's period.
        self._actor.update(wait=True)
        self._loop.run(num_episodes=self._options.evaluation_episodes)
        if stopping.is_set():
          break  # The other nodes may be gone: make no more calls.
        next_round = self._learner_steps() + self._options.evaluation_period


class StepLimiter:
  """Stops the whole program once the actors have taken `max_actor_steps`."""

  def __init__(self, counter: counting.Counter, max_actor_steps: int,
               poll_seconds: float = 1.0):
    self._counter = counter
    self._max_actor_steps = max_actor_steps
    self._poll_seconds = poll_seconds

  def run(self):
    with signals.runtime_terminator():
      while True:
        actor_steps = self._counter.get_counts().get('actor_steps', 0)
        if actor_steps >= self._max_actor_steps:
          logging.info('Reached %d actor steps (limit %d): stopping.',
                       actor_steps, self._max_actor_steps)
          lp.stop()
          return
        time.sleep(self._poll_seconds)


def make_program(builder, options: RunOptions) -> lp.Program:
  """The Ape-X program: replay, counter, learner, actors, evaluator."""
  program = lp.Program(name=builder.name)
  with program.group('replay'):
    replay = program.add_node(checkpointing.CheckpointingReverbNode(
        builder.make_replay_tables, options.workdir,
        options.replay_checkpoint_every))
  with program.group('counter'):
    counter = program.add_node(lp.CourierNode(
        checkpointing.CheckpointedCounter, options.workdir,
        options.checkpoint_every > 0))
  if options.max_actor_steps:
    with program.group('coordinator'):
      program.add_node(
          lp.CourierNode(StepLimiter, counter, options.max_actor_steps))
  with program.group('learner'):
    learner = program.add_node(
        lp.CourierNode(LearnerNode, builder, replay, counter, options))
  with program.group('actor'):
    for actor_id in range(options.num_actors):
      program.add_node(
          lp.CourierNode(ActorNode, builder, replay, learner, counter,
                         actor_id, options))
  with program.group('evaluator'):
    program.add_node(
        lp.CourierNode(EvaluatorNode, builder, learner, counter, options))
  return program
