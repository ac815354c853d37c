"""An actor's parameter pulls: when it asks the learner for parameters, and
that it copies them only when the learner's have changed.

The parts are the program's own: the builder's actor (its period in actor
steps from `--variable_update_period` in frames, its
`agents.variables.NewestVariableClient`), the actors' loop
(`agents.actor_loop.VectorEnvironmentLoop`, one `update` per batch of K
environment steps) and a real `ApeXDQNLearner`, trained on hand-made
batches, whose `get_variables_if_newer` answers with the parameters only
when its step differs from the version the actor holds. The learner is
reached through a recorder that notes every request: the actor's step, the
version asked for, and whether parameters came back.

Expected: hand-computed request steps (0 at construction, then every
period: `--variable_update_period` frames / frames per step), copies only
after the learner has stepped, and, between pulls, the actor's Q-values
those of the learner's network at the version the actor holds, as the
learner computed them when it was at that version.

Acme's client sends a request from its own thread and copies the answer at
the next `update` after it arrives. So that what is counted is steps, not
thread timing, the loop's `should_stop` (called between iterations) waits
until every request sent so far has been answered.
"""

import copy
import dataclasses
from typing import Callable, Dict, List, Optional

import acme
import dm_env
import numpy as np
import pytest
import sonnet as snt
from acme import specs
from dm_env import specs as dm_specs

from agents.envs import environments
from agents import actor_loop
from agents.apex_dqn.builder import ApeXDQNBuilder
from agents.apex_dqn.config import ApeXDQNConfig
from agents.apex_dqn.learning import ApeXDQNLearner
import replay_items

NUM_ACTIONS = 5
OBSERVATION_SIZE = 4
EPISODE_LENGTH = 7
NUM_ENVIRONMENTS = 2


class Steps(dm_env.Environment):
  """Episodes of EPISODE_LENGTH steps of random observations, cut by a time
  limit; counts the steps it takes."""

  def __init__(self, seed: int):
    self._rng = np.random.default_rng(seed)
    self._t = 0
    self.steps = 0

  def _observation(self) -> np.ndarray:
    return self._rng.normal(size=OBSERVATION_SIZE).astype(np.float32)

  def reset(self) -> dm_env.TimeStep:
    self._t = 0
    return dm_env.restart(self._observation())

  def step(self, action) -> dm_env.TimeStep:
    assert 0 <= int(action) < NUM_ACTIONS
    self._t += 1
    self.steps += 1
    if self._t == EPISODE_LENGTH:
      return dm_env.truncation(0.5, self._observation())
    return dm_env.transition(0.5, self._observation())

  def observation_spec(self):
    return dm_specs.Array((OBSERVATION_SIZE,), np.float32, name='observation')

  def action_spec(self):
    return dm_specs.DiscreteArray(NUM_ACTIONS, name='action')


def environment_spec(frames_per_step: int) -> environments.EnvironmentSpec:
  """`Steps` as the builders see an environment, each step standing for
  `frames_per_step` frames (Atari's: 4)."""
  return environments.EnvironmentSpec(
      name='steps', kind='gym', spec=specs.make_environment_spec(Steps(0)),
      frames_per_step=frames_per_step, pixels=False,
      make=lambda seed=None, evaluation=False: Steps(seed or 0))


def make_builder(variable_update_period: int,
                 frames_per_step: int = 1) -> ApeXDQNBuilder:
  config = ApeXDQNConfig(mlp_hidden_sizes='16', dueling_hidden_size=8,
                         variable_update_period=variable_update_period)
  config.validate()
  return ApeXDQNBuilder(config, environment_spec(frames_per_step))


def make_learner(builder: ApeXDQNBuilder) -> ApeXDQNLearner:
  """The agent's learner (the builder's network, its target a copy) on
  hand-made batches instead of replay."""
  samples = [replay_items.hand_made_batch(
      seed, 8, OBSERVATION_SIZE, 100, 0.99**3,
      actions=lambda rng, size: rng.integers(
          0, NUM_ACTIONS, size=size).astype(np.int32)) for seed in range(8)]
  network = builder.make_network()
  return ApeXDQNLearner(
      network=network, target_network=copy.deepcopy(network),
      optimizer=snt.optimizers.SGD(learning_rate=0.5), max_gradient_norm=40.0,
      iterator=replay_items.iterator_over(samples), replay_client=None,
      importance_sampling_exponent=0.4, target_update_period=1000)


@dataclasses.dataclass
class Request:
  actor_step: int  # Steps each environment had taken when it arrived.
  asked: Optional[int]  # The version the actor held (None: none yet).
  answered: int  # The learner's version (its step) at the answer.
  copied: bool  # Whether parameters came back.


class RecordedLearner(acme.VariableSource):
  """The learner as actors reach it (as the learner node serves it), with
  every request recorded."""

  def __init__(self, learner: ApeXDQNLearner, actor_steps: Callable[[], int]):
    self.learner = learner
    self._actor_steps = actor_steps
    self.requests: List[Request] = []

  def get_variables(self, names):
    return self.learner.get_variables(names)

  def get_variables_if_newer(self, names, version):
    current, values = self.learner.get_variables_if_newer(names, version)
    self.requests.append(Request(self._actor_steps(), version, current,
                                 values is not None))
    return current, values


def all_answered(actor):
  """Returns once every parameter request the actor has sent is answered
  and its answer is ready to copy: Acme's client sends them to a pool of one
  thread, which runs what it is given in order."""
  client = actor._variable_client  # pylint: disable=protected-access
  client._executor.submit(lambda: None).result(timeout=600)  # pylint: disable=protected-access


class Between:
  """The loop's `should_stop`: after `iterations` iterations it stops.
  Before each iteration it waits for the requests sent so far to be
  answered, then calls `between(done)` (done: iterations so far)."""

  def __init__(self, actor, iterations: int,
               between: Callable[[int], None] = lambda done: None):
    self._actor = actor
    self._iterations = iterations
    self._between = between
    self.done = -1

  def __call__(self) -> bool:
    all_answered(self._actor)
    self.done += 1
    self._between(self.done)
    return self.done >= self._iterations


def make_actor(builder, source):
  return builder.make_actor(source, np.zeros(NUM_ENVIRONMENTS), seed=0)


@pytest.mark.parametrize('frames, frames_per_step, period', [
    (3, 1, 3),
    (12, 4, 3),
    (400, 4, 100),  # The paper's 400 frames of Atari: 100 agent steps.
])
def test_an_actor_asks_for_parameters_every_period_of_steps(
    frames, frames_per_step, period):
  builder = make_builder(frames, frames_per_step)
  assert builder.variable_update_period == period
  environments_ = [Steps(i) for i in range(NUM_ENVIRONMENTS)]
  source = RecordedLearner(make_learner(builder),
                           lambda: environments_[0].steps)
  actor = make_actor(builder, source)
  iterations = 2 * period + period // 2 + 1
  loop = actor_loop.VectorEnvironmentLoop(environments_, actor)
  loop.run(should_stop=Between(actor, iterations))
  assert [env.steps for env in environments_] == [iterations] * 2
  # One request as the actor is made, then one every `period` steps of each
  # of its environments (one loop iteration is a step of each).
  assert [r.actor_step for r in source.requests] == [0, period, 2 * period]
  # The learner never stepped: only the first request copied anything.
  assert [(r.asked, r.answered, r.copied) for r in source.requests] == [
      (None, 0, True), (0, 0, False), (0, 0, False)]


def test_an_actor_copies_only_parameters_it_does_not_hold():
  builder = make_builder(3)
  learner = make_learner(builder)
  environments_ = [Steps(i) for i in range(NUM_ENVIRONMENTS)]
  source = RecordedLearner(learner, lambda: environments_[0].steps)
  actor = make_actor(builder, source)
  probe = np.random.default_rng(9).normal(size=(6, OBSERVATION_SIZE)).astype(
      np.float32)

  def learner_q() -> np.ndarray:
    return learner._network(probe).numpy()  # pylint: disable=protected-access

  # The learner's Q-values at each of its versions, as it computed them.
  q_at: Dict[int, np.ndarray] = {0: learner_q()}
  # Learner steps taken after 4, 10 and 19 iterations (two at once).
  learner_steps = {4: 1, 10: 1, 19: 2}
  # The pulls (every 3 steps) that find newer parameters: at 6 (version 1),
  # 12 (version 2) and 21 (version 4); each is copied at the actor's next
  # step (Acme's client copies an answer at the `update` after it arrives).
  held_from = {0: 0, 7: 1, 13: 2, 22: 4}
  checked = []

  def between(done: int):
    held = held_from[max(step for step in held_from if step <= done)]
    actor_q = np.stack([actor.q_values(row) for row in probe])
    np.testing.assert_allclose(actor_q, q_at[held], rtol=1e-6, atol=1e-6,
                               err_msg=f'after {done} steps')
    checked.append(held)
    for _ in range(learner_steps.get(done, 0)):
      learner.step()
      q_at[learner.num_steps] = learner_q()

  loop = actor_loop.VectorEnvironmentLoop(environments_, actor)
  loop.run(should_stop=Between(actor, 24, between))
  assert learner.num_steps == 4
  assert checked == [0] * 7 + [1] * 6 + [2] * 9 + [4] * 3
  # Each version the actor held acted differently: the comparisons above
  # could tell them apart.
  for version in (1, 2, 4):
    assert not np.allclose(q_at[version], q_at[0], atol=1e-4)
  assert not np.allclose(q_at[4], q_at[2], atol=1e-4)
  assert [(r.actor_step, r.asked, r.answered, r.copied)
          for r in source.requests] == [
              (0, None, 0, True),
              (3, 0, 0, False),
              (6, 0, 1, True),
              (9, 1, 1, False),
              (12, 1, 2, True),
              (15, 2, 2, False),
              (18, 2, 2, False),
              (21, 2, 4, True),
              (24, 4, 4, False),
          ]


class PlainSource(acme.VariableSource):
  """A source as Acme defines one, without versions: counts its copies."""

  def __init__(self, learner, actor_steps: Callable[[], int]):
    self._learner = learner
    self._actor_steps = actor_steps
    self.copies: List[int] = []

  def get_variables(self, names):
    self.copies.append(self._actor_steps())
    return self._learner.get_variables(names)


def test_a_source_without_versions_is_copied_at_every_pull():
  builder = make_builder(4)
  environments_ = [Steps(i) for i in range(NUM_ENVIRONMENTS)]
  source = PlainSource(make_learner(builder), lambda: environments_[0].steps)
  actor = make_actor(builder, source)
  loop = actor_loop.VectorEnvironmentLoop(environments_, actor)
  loop.run(should_stop=Between(actor, 13))
  assert source.copies == [0, 4, 8, 12]
