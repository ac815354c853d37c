"""The evaluator's schedule (`EvaluatorNode`, `--evaluation_period`): with a
period P > 0 a round of evaluation starts once the learner has made P steps
since the previous round ended (the first at once), and not one learner
step earlier; with P = 0 rounds follow each other, never pausing, whatever
the learner does. Each round plays parameters pulled as it began.

The node is the program's own, built from the Ape-X DQN builder, running
its `run` loop in this process's main thread as in a node's process. Its
counter is Acme's, as the program's counter node holds it; a learner thread
of the test increments `learner_steps` in it, and the evaluator's
environment (a scripted one, of 5-step episodes) also makes the learner
advance while a round plays, so that "since the previous round ended" and
"since it began" differ. The node pauses between its checks of the
learner's count on its stop event (`stopping.wait(1.0)`), which the test
replaces before `run` with an event that notes each pause: the test holds
the learner one step short of a round until the node has paused twice
after it got there (so it has read that count and decided to wait at least
once), then gives it the last step.

The expected round starts and ends are hand-computed learner steps. No
verdict depends on how long anything takes (waits have bounds only to
catch a hang).
"""

import dataclasses
import signal
import threading
from typing import Callable, List, Optional

import acme
import dm_env
import numpy as np
import pytest
from acme import specs
from acme.utils import counting
from dm_env import specs as dm_specs

from agents.envs import environments
from agents.apex_dqn.builder import ApeXDQNBuilder
from agents.apex_dqn.config import ApeXDQNConfig
from launch import nodes
from launch.options import RunOptions
from launch.runs import loggers
import helpers

NUM_ACTIONS = 3
OBSERVATION_SIZE = 4
EPISODE_LENGTH = 5
HANG = 300  # Seconds: only a hung evaluator takes that long.
# The actors' steps the test's learner counts with each of its steps.
ACTOR_STEPS_PER_UPDATE = 8


@dataclasses.dataclass
class Round:
  start: int  # The learner's steps as the round's episode began.
  end: Optional[int] = None  # ... and as it ended.
  pauses_at_end: int = 0  # The node's pauses before it ended.
  counted: int = 0  # Evaluator episodes in the program's counter as it began.


class Records:
  """What the evaluator did, as its environment and stop event saw it."""

  def __init__(self):
    self.changed = threading.Condition()
    self.pauses: List[int] = []  # The learner's steps at each pause.
    self.rounds: List[Round] = []

  def note(self, update: Callable[[], None]):
    with self.changed:
      update()
      self.changed.notify_all()

  def wait_for(self, predicate: Callable[[], bool], what: str):
    with self.changed:
      if not self.changed.wait_for(predicate, timeout=HANG):
        raise AssertionError(f'no {what} within {HANG} s; rounds '
                             f'{self.rounds}, pauses {self.pauses[-10:]}')

  def paused_after_round(self, count: int) -> bool:
    """`count` rounds have ended, and the node has paused since (so it has
    scheduled the next)."""
    return (len(self.rounds) == count and self.rounds[-1].end is not None
            and len(self.pauses) > self.rounds[-1].pauses_at_end)


def learner_steps(counter: counting.Counter) -> int:
  return counter.get_counts().get('learner_steps', 0)


def learn(counter: counting.Counter, steps: int):
  """`steps` learner steps, and the actors' steps that came with them."""
  counter.increment(learner_steps=steps,
                    actor_steps=ACTOR_STEPS_PER_UPDATE * steps)


class PauseNotingEvent(threading.Event):
  """The node's stop event, noting each timed wait on it (the node's pause
  between two checks of the learner's count) with the count then."""

  def __init__(self, counter: counting.Counter, records: Records):
    super().__init__()
    self._counter = counter
    self._records = records

  def wait(self, timeout=None):
    steps = learner_steps(self._counter)
    self._records.note(lambda: self._records.pauses.append(steps))
    return super().wait(timeout)


class Episodes(dm_env.Environment):
  """Episodes of EPISODE_LENGTH steps, each step also `learner_per_step`
  learner steps (the learner trains while the evaluator plays); notes each
  episode's start and end in `records`."""

  def __init__(self, counter: counting.Counter, records: Records,
               learner_per_step: int):
    self._counter = counter
    self._records = records
    self._learner_per_step = learner_per_step
    self._t = 0

  def _observation(self):
    return np.full(OBSERVATION_SIZE, self._t, np.float32)

  def reset(self):
    self._t = 0
    round_ = Round(learner_steps(self._counter),
                   counted=self._counter.get_counts().get(
                       'evaluator_episodes', 0))
    self._records.note(lambda: self._records.rounds.append(round_))
    return dm_env.restart(self._observation())

  def step(self, action):
    del action
    self._t += 1
    if self._learner_per_step:
      learn(self._counter, self._learner_per_step)
    if self._t < EPISODE_LENGTH:
      return dm_env.transition(1.0, self._observation())
    ended = learner_steps(self._counter)

    def end_round():
      round_ = self._records.rounds[-1]
      round_.end, round_.pauses_at_end = ended, len(self._records.pauses)

    self._records.note(end_round)
    return dm_env.termination(1.0, self._observation())

  def observation_spec(self):
    return dm_specs.Array((OBSERVATION_SIZE,), np.float32, name='observation')

  def action_spec(self):
    return dm_specs.DiscreteArray(NUM_ACTIONS, name='action')


class Parameters(acme.VariableSource):
  """A learner's parameters that never change; notes, at each pull, how
  many rounds had begun (`rounds_at_pulls`)."""

  def __init__(self, network, records: Records):
    self._network = network
    self._records = records
    self.rounds_at_pulls: List[int] = []

  def get_variables(self, names):
    with self._records.changed:
      self.rounds_at_pulls.append(len(self._records.rounds))
    return [[v.numpy() for v in self._network.trainable_variables]
            for _ in names]


@pytest.fixture
def signal_handlers():
  """The node's `run` registers Launchpad's stop handler, which takes over
  SIGINT, SIGTERM, SIGQUIT and SIGALRM; they are given back after the
  test."""
  numbers = (signal.SIGINT, signal.SIGTERM, signal.SIGQUIT, signal.SIGALRM)
  saved = {number: signal.getsignal(number) for number in numbers}
  yield
  for number, handler in saved.items():
    signal.signal(number, handler)


def run_evaluator(tmp_path, period: int, learner_per_step: int,
                  learner: Callable[[counting.Counter, Records], None]):
  """Runs an evaluator node with `--evaluation_period=period` in this thread
  while `learner(counter, records)` runs in another; stops the node when
  `learner` returns or fails. Returns (records, the rounds begun at each
  pull of parameters)."""
  records = Records()
  counter = counting.Counter()

  def make(seed=None, evaluation=False):
    del seed
    assert evaluation
    return Episodes(counter, records, learner_per_step)

  spec = environments.EnvironmentSpec(
      name='episodes', kind='gym',
      spec=specs.make_environment_spec(Episodes(counter, Records(), 0)),
      frames_per_step=1, pixels=False, make=make)
  builder = ApeXDQNBuilder(
      ApeXDQNConfig(mlp_hidden_sizes='8', dueling_hidden_size=4), spec)
  source = Parameters(builder.make_network(), records)
  options = RunOptions(workdir=str(tmp_path), evaluation_period=period,
                       evaluation_episodes=1)
  options.validate()
  node = nodes.EvaluatorNode(builder, source, counter, options)
  assert source.rounds_at_pulls == [0]  # As it was made.
  node._stop.requested = PauseNotingEvent(counter, records)  # pylint: disable=protected-access
  errors = []

  def learn():
    try:
      learner(counter, records)
    except BaseException as error:  # pylint: disable=broad-except
      errors.append(error)
    finally:
      node.stop(HANG)

  thread = threading.Thread(target=learn, daemon=True)
  thread.start()
  node.run()
  thread.join(HANG)
  assert not thread.is_alive()
  if errors:
    raise errors[0]
  return records, source.rounds_at_pulls


def test_a_round_starts_once_the_learner_has_made_the_period_since_the_last(
    tmp_path, signal_handlers):
  del signal_handlers
  period = 100

  def learner(counter: counting.Counter, records: Records):
    # The first round starts at once, at learner step 0.
    records.wait_for(lambda: records.paused_after_round(1), 'first round')
    for count in (1, 2):
      due = records.rounds[-1].end + period
      learn(counter, due - 1 - learner_steps(counter))
      with records.changed:
        mark = len(records.pauses)
      # The second pause from now follows a check of the count just set.
      records.wait_for(lambda: (len(records.pauses) >= mark + 2 or
                                len(records.rounds) > count),
                       f'two pauses at {due - 1} learner steps')
      assert len(records.rounds) == count, (due, records.rounds)
      assert records.pauses[-1] == due - 1
      learn(counter, 1)
      records.wait_for(lambda: records.paused_after_round(count + 1),
                       f'round {count + 1}')

  records, pulls = run_evaluator(tmp_path, period, learner_per_step=10,
                                 learner=learner)
  # Each round's episode: 5 steps, 10 learner steps each. The next round is
  # due 100 learner steps after the previous one ended: (0, 50), then 150.
  assert [(r.start, r.end) for r in records.rounds] == [
      (0, 50), (150, 200), (300, 350)]
  # No pause during a round; between rounds, pauses only while one was not
  # yet due.
  assert all(steps in (50, 149, 200, 299, 350) for steps in records.pauses), (
      records.pauses)
  # One pull as the node was made, then one as each round began.
  assert pulls == [0, 0, 1, 2]
  # Each episode's row names its round by the counts as its parameters
  # were pulled, not as it ended (50, 200 and 350 learner steps).
  rows = helpers.rows(tmp_path, 'evaluator')
  assert [(int(row[loggers.ROUND_LEARNER_STEPS]),
           int(row[loggers.ROUND_ACTOR_STEPS]), int(row['actor_steps']))
          for row in rows] == [(0, 0, 400), (150, 1200, 1600),
                               (300, 2400, 2800)]


def test_a_period_of_0_plays_rounds_back_to_back(tmp_path, signal_handlers):
  del signal_handlers

  def learner(counter: counting.Counter, records: Records):
    del counter  # The learner makes no step at all.

    def three_rounds_or_a_pause() -> bool:
      finished = sum(r.end is not None for r in records.rounds)
      return finished >= 3 or bool(records.pauses)

    records.wait_for(three_rounds_or_a_pause, 'three rounds, or a pause')

  records, pulls = run_evaluator(tmp_path, 0, learner_per_step=0,
                                 learner=learner)
  finished = [r for r in records.rounds if r.end is not None]
  assert len(finished) >= 3
  assert all((r.start, r.end) == (0, 0) for r in finished)
  # It never paused. A round may have begun before the stop was seen; it
  # ended at its first step.
  assert records.pauses == []
  assert len(records.rounds) - len(finished) <= 1
  # One pull as the node was made, then one as each round began; a last
  # pull may have found the stop before its round's first episode began.
  begun = len(records.rounds)
  assert pulls in ([0] + list(range(begun)),
                   [0] + list(range(begun + 1))), (pulls, records.rounds)


def test_each_round_is_in_the_programs_counter_when_the_next_begins(
    tmp_path, signal_handlers):
  # Acme's counter sends a node's counts to the program's at most once a
  # second, when the node next counts: a round's last episode would wait
  # for the next round's (minutes later on Atari), and be lost, then
  # counted again on resume, if the program stopped in between. Here rounds
  # follow each other within milliseconds, so only a flush as each round
  # ends has it in the program's counter as the next begins.
  del signal_handlers

  def learner(counter: counting.Counter, records: Records):
    del counter
    records.wait_for(
        lambda: sum(r.end is not None for r in records.rounds) >= 4,
        'four rounds')

  records, _ = run_evaluator(tmp_path, 0, learner_per_step=0,
                             learner=learner)
  begun = [r.counted for r in records.rounds]
  assert begun == list(range(len(records.rounds)))
