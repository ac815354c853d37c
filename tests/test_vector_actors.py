"""Actors of K environments: `ApeXActor`'s batched acting, per-environment
exploration, n-step windows and priorities, `VectorEnvironmentLoop`'s
counting, logging and failure handling, the builders' per-environment
exploration, an evaluator's round (`play_episodes`: one episode in each
environment, one batched pass a step, no parameter pulls), and a real
program with `--envs_per_actor=3`.

The environments are small hand-written dm_env environments whose episode
lengths, endings (termination or truncation) and rewards are scripted, and
which record every step they take. Transitions go through the actor's real
adders into a real Reverb server with the project's table; every item is read
back and matched to a transition recomputed here, one environment and one
step at a time, from what the environments recorded and from the Q-values of
a separately held copy of the actor's network.
"""

import collections
import dataclasses
import math
import os
import time
from typing import Dict, List, Optional, Sequence, Tuple

import acme
import dm_env
import numpy as np
import pytest
import reverb
import tensorflow as tf
from acme import specs
from acme.utils import counting
from acme.utils import loggers
from dm_env import specs as dm_specs

from agents.envs import environments
from agents.envs import resilience
from agents import actor_loop
from agents.apex_dpg import priorities as dpg_priorities
from agents.apex_dpg.actor import ApeXDPGActor
from agents.apex_dpg.builder import ApeXDPGBuilder
from agents.apex_dpg.config import ApeXDPGConfig
from agents.apex_dqn.actor import ApeXDQNActor
from agents.apex_dqn.actor import apex_epsilons
from agents.apex_dqn.builder import ApeXDQNBuilder
from agents.apex_dqn.config import ApeXDQNConfig
import helpers
from replay_items import Item, Reference, check_item
from replay_items import read_all_items, table_size

NUM_ACTIONS = 5
# observation = [environment id, episode index, step index, noise].
OBSERVATION_SIZE = 4
N_STEP = 3
GAMMA = 0.9
CAPACITY = 10_000  # More than any test writes: nothing is evicted.

TERMINATES, TRUNCATED = False, True


# --------------------------------------------------------------------------
# Scripted environments that record what they did.


@dataclasses.dataclass
class Episode:
  env_id: int
  index: int
  scripted_length: int
  truncated: bool
  observations: list  # s_0 .. s_L (L steps taken so far).
  actions: list = dataclasses.field(default_factory=list)
  rewards: list = dataclasses.field(default_factory=list)
  discounts: list = dataclasses.field(default_factory=list)
  ended: bool = False  # Reached its scripted end (not abandoned or open).

  @property
  def length(self) -> int:
    return len(self.actions)


class ScriptedEnvironment(dm_env.Environment):
  """Episodes of scripted lengths and endings, cycling through `script`.

  Every observation is [env_id, episode index, step index, noise], unique in
  a test. Rewards depend on the environment, the step and the action. A
  fault at (episode index, step number) makes that step raise (`'raise'`)
  or return a NaN observation (`'nan'`), in which case the step is not
  recorded (the loop drops it); `reset_faults` lists resets (counted from 0)
  that raise.
  """

  def __init__(self, env_id: int, script: Sequence[Tuple[int, bool]],
               faults: Optional[Dict[Tuple[int, int], str]] = None,
               reset_faults: Sequence[int] = (), step_sleep: float = 0.0):
    self.env_id = env_id
    self._script = list(script)
    self._faults = dict(faults or {})
    self._reset_faults = set(reset_faults)
    self._step_sleep = step_sleep
    self._rng = np.random.default_rng(1000 + env_id)
    self._num_resets = 0
    self.episodes: List[Episode] = []
    self.step_calls = 0  # Every call of `step`, failing ones included.
    self.total_steps = 0  # Steps recorded (taken and handed to the loop).

  def _observation(self, episode: int, step: int) -> np.ndarray:
    return np.array([self.env_id, episode, step, self._rng.normal()],
                    np.float32)

  def reset(self) -> dm_env.TimeStep:
    reset_number = self._num_resets
    self._num_resets += 1
    if reset_number in self._reset_faults:
      raise RuntimeError(f'env {self.env_id}: reset {reset_number} crashed')
    index = len(self.episodes)
    length, truncated = self._script[index % len(self._script)]
    observation = self._observation(index, 0)
    self.episodes.append(Episode(self.env_id, index, length, truncated,
                                 [observation]))
    return dm_env.restart(observation)

  def step(self, action) -> dm_env.TimeStep:
    self.step_calls += 1
    if self._step_sleep:
      time.sleep(self._step_sleep)
    assert self.episodes and not self.episodes[-1].ended, (
        f'env {self.env_id}: step without reset')
    episode = self.episodes[-1]
    action = int(action)
    assert 0 <= action < NUM_ACTIONS, action
    step = episode.length + 1
    fault = self._faults.get((episode.index, step))
    if fault == 'raise':
      raise RuntimeError(f'env {self.env_id}: step {step} of episode '
                         f'{episode.index} crashed')
    observation = self._observation(episode.index, step)
    reward = np.float32((self.env_id % 7 + 1) * 0.5 - 0.1 * step +
                        0.3 * action + self._rng.normal())
    if fault == 'nan':
      observation[3] = np.nan
      return dm_env.transition(reward, observation)
    if step < episode.scripted_length:
      timestep = dm_env.transition(reward, observation)
    elif episode.truncated:
      timestep = dm_env.truncation(reward, observation)
    else:
      timestep = dm_env.termination(reward, observation)
    episode.observations.append(observation)
    episode.actions.append(action)
    episode.rewards.append(float(reward))
    episode.discounts.append(float(timestep.discount))
    episode.ended = timestep.last()
    self.total_steps += 1
    return timestep

  def observation_spec(self):
    return dm_specs.Array((OBSERVATION_SIZE,), np.float32, name='observation')

  def action_spec(self):
    return dm_specs.DiscreteArray(NUM_ACTIONS, name='action')

  def reward_spec(self):
    return dm_specs.Array((), np.float32, name='reward')

  def discount_spec(self):
    return dm_specs.BoundedArray((), np.float32, 0.0, 1.0, name='discount')

  def finished_episodes(self) -> List[Episode]:
    return [episode for episode in self.episodes if episode.ended]


SPEC = specs.make_environment_spec(ScriptedEnvironment(0, [(1, False)]))

SCRIPTS = [
    [(5, TERMINATES), (2, TRUNCATED), (7, TRUNCATED), (1, TERMINATES),
     (4, TERMINATES)],
    [(3, TRUNCATED), (8, TERMINATES), (1, TRUNCATED), (2, TERMINATES)],
    [(6, TRUNCATED), (4, TERMINATES), (3, TERMINATES), (2, TRUNCATED),
     (9, TRUNCATED)],
]


def scripted_spec() -> environments.EnvironmentSpec:
  """The scripted environments as the builders see an environment."""

  def make(seed=None, evaluation=False):
    del seed, evaluation
    return ScriptedEnvironment(0, SCRIPTS[0])

  return environments.EnvironmentSpec(
      name='scripted', kind='gym', spec=SPEC, frames_per_step=1, pixels=False,
      make=make)


# --------------------------------------------------------------------------
# Reverb (conftest's `server` for SPEC and CAPACITY, and `client`), the DQN
# actor and its independent twin network.


class FixedVariableSource(acme.VariableSource):
  """Serves the weights of one network (a learner that never learns)."""

  def __init__(self, network):
    self._network = network

  def get_variables(self, names):
    return [[v.numpy() for v in self._network.trainable_variables]
            for _ in names]


def dqn_config(**kwargs) -> ApeXDQNConfig:
  config = ApeXDQNConfig(**{
      'n_step': N_STEP, 'discount': GAMMA, 'replay_capacity': CAPACITY,
      'min_replay_size': 1, 'batch_size': 1, 'actor_flush_size': 4,
      'mlp_hidden_sizes': '16', 'dueling_hidden_size': 8,
      'variable_update_period': 10**6, **kwargs})
  config.validate()
  return config


def make_dqn_actor(client, epsilons, seed=0, config=None):
  """(actor, twin network): the builder's actor with one adder per
  environment, whose network holds the twin's weights."""
  builder = ApeXDQNBuilder(config or dqn_config(), scripted_spec())
  tf.random.set_seed(seed)
  twin = builder.make_network()
  actor = builder.make_actor(FixedVariableSource(twin), np.asarray(epsilons),
                             replay_client=client, seed=seed)
  return actor, twin


# --------------------------------------------------------------------------
# The slow per-environment reference.


def q_values(network, observation: np.ndarray) -> np.ndarray:
  return network(observation[None]).numpy()[0].astype(np.float64)


def reference_transitions(episodes: Sequence[Episode], network,
                          n_step: int = N_STEP, gamma: float = GAMMA
                          ) -> Dict[Tuple[int, int, int], Reference]:
  """Every transition the adders must have written, by (env, episode, t).

  An episode that reached its end contributes all its steps; one that was
  abandoned (a failure) or is still open when the loop stops contributes
  the transitions whose n steps were all taken and whose bootstrap values
  were computed (t + n < L): the open window is dropped.
  """
  result = {}
  for episode in episodes:
    length = episode.length
    for t in range(length):
      if not episode.ended and t + n_step >= length:
        continue
      m = min(n_step, length - t)
      n_step_return = 0.0
      for k in range(m):
        n_step_return += gamma**k * episode.rewards[t + k]
      terminal = (episode.ended and t + m == length and
                  not episode.truncated)
      discount = 0.0 if terminal else gamma**m
      q_t = q_values(network, episode.observations[t])
      q_boot = q_values(network, episode.observations[t + m])
      best = max(range(NUM_ACTIONS), key=lambda a: q_boot[a])
      target = n_step_return + discount * q_boot[best]
      result[(episode.env_id, episode.index, t)] = Reference(
          observation=episode.observations[t],
          action=episode.actions[t],
          n_step_return=n_step_return,
          discount=discount,
          next_observation=episode.observations[t + m],
          priority=abs(target - q_t[episode.actions[t]]))
  return result


def check_items(items: List[Item], expected):
  """Each item is one expected transition, each transition is there once,
  and no item joins the steps of two environments or two episodes."""
  seen = set()
  for item in items:
    assert np.all(np.isfinite(item.observation))
    assert np.all(np.isfinite(item.next_observation))
    # s_t and s_{t+n} of one environment and one episode.
    np.testing.assert_array_equal(item.observation[:2],
                                  item.next_observation[:2])
    key = tuple(int(x) for x in item.observation[:3])
    assert key in expected, key
    assert key not in seen, key
    seen.add(key)
    check_item(item, expected[key], key)
  assert seen == set(expected), sorted(set(expected) - seen)
  priorities = np.array([item.priority for item in items])
  assert len(np.unique(priorities)) > len(priorities) // 2


def stop_after(iterations: int):
  """A `should_stop` that lets the loop run exactly `iterations` times."""
  calls = [0]

  def should_stop():
    calls[0] += 1
    return calls[0] > iterations

  should_stop.calls = calls
  return should_stop


# --------------------------------------------------------------------------
# 1. One batched forward pass equals one forward pass per observation.


def test_batched_greedy_actions_and_kept_q_values_equal_per_row(client):
  tf.random.set_seed(3)
  # Nothing is written before the end: what the adders hold is inspected.
  builder = ApeXDQNBuilder(dqn_config(actor_flush_size=1000), scripted_spec())
  network = builder.make_network()
  count = 7
  rng = np.random.default_rng(0)
  actor_adders = [builder.make_adder(client) for _ in range(count)]
  actor = ApeXDQNActor(network, SPEC.observations, epsilon=[0.0] * count,
                       adders=actor_adders, seed=0)
  assert actor.num_environments == count
  greedy = set()
  for batch in range(20):
    observations = (3 * rng.normal(size=(count, OBSERVATION_SIZE))).astype(
        np.float32)
    for i in range(count):
      actor.observe_first_at(i, dm_env.restart(observations[i]))
    actions = actor.select_actions(observations)
    assert actions.shape == (count,) and actions.dtype == np.int32
    for i in range(count):
      q = q_values(network, observations[i])
      assert actions[i] == np.argmax(q)
      greedy.add(int(actions[i]))
      # The single-environment API gives the same action.
      assert actor.select_action(observations[i]) == actions[i]
    # What environment i's adder receives: the Q-values of row i.
    actor.select_actions(observations)
    for i in reversed(range(count)):  # Any order of the environments.
      actor.observe_at(i, actions[i],
                       dm_env.termination(1.0, observations[i] + 1))
    for i in range(count):
      pending = actor_adders[i].pending[-1]
      assert len(actor_adders[i].pending) == batch + 1
      assert pending.action == actions[i]
      np.testing.assert_allclose(pending.values,
                                 q_values(network, observations[i]),
                                 rtol=1e-5, atol=1e-6)
  # The network is not trivially constant.
  assert len(greedy) >= 2
  actor.close()
  assert table_size(client) == 20 * count


def test_dpg_batched_noiseless_actions_and_kept_values_equal_per_row():
  continuous = environments.resolve_continuous('gym:Pendulum-v1')
  config = ApeXDPGConfig(n_step=1, replay_capacity=CAPACITY,
                         min_replay_size=1, batch_size=1,
                         actor_flush_size=1000, policy_hidden_sizes='16',
                         critic_hidden_sizes='16')
  builder = ApeXDPGBuilder(config, continuous)
  tf.random.set_seed(4)
  policy, critic = builder.make_policy(), builder.make_critic()
  dpg_server = reverb.Server(builder.make_replay_tables(), port=None)
  try:
    dpg_client = reverb.Client(f'localhost:{dpg_server.port}')
    count = 5
    actor_adders = [builder.make_adder(dpg_client) for _ in range(count)]
    actor = ApeXDPGActor(policy, critic, continuous.spec.observations,
                         continuous.spec.actions, sigma=[0.0] * count,
                         adders=actor_adders, seed=0)
    rng = np.random.default_rng(1)
    observations = rng.normal(size=(count, 3)).astype(np.float32)
    for i in range(count):
      actor.observe_first_at(i, dm_env.restart(observations[i]))
    actions = actor.select_actions(observations)
    for i in range(count):
      actor.observe_at(i, actions[i],
                       dm_env.termination(0.5, observations[i]))
    for i in range(count):
      pi = policy(observations[i][None]).numpy()[0]
      np.testing.assert_allclose(actions[i], pi, rtol=1e-6, atol=1e-7)
      q_taken = critic(observations[i][None], actions[i][None]).numpy()[0]
      q_policy = critic(observations[i][None], pi[None]).numpy()[0]
      values = actor_adders[i].pending[-1].values
      np.testing.assert_allclose(values[dpg_priorities.Q_TAKEN], q_taken,
                                 rtol=1e-5, atol=1e-6)
      np.testing.assert_allclose(values[dpg_priorities.Q_POLICY], q_policy,
                                 rtol=1e-5, atol=1e-6)
    assert len({float(a[0]) for a in actions}) == count
    actor.close()
  finally:
    dpg_server.stop()


# --------------------------------------------------------------------------
# 2. Exploration is per environment.


def test_dqn_epsilon_per_environment(client):
  tf.random.set_seed(5)
  network = ApeXDQNBuilder(dqn_config(), scripted_spec()).make_network()
  epsilons = [0.0, 1.0, 0.3]
  actor = ApeXDQNActor(network, SPEC.observations, epsilon=epsilons, seed=11)
  rng = np.random.default_rng(2)
  observations = (3 * rng.normal(size=(3, OBSERVATION_SIZE))).astype(
      np.float32)
  greedy = [int(np.argmax(q_values(network, o))) for o in observations]
  num_draws = 2000
  actions = np.array([actor.select_actions(observations)
                      for _ in range(num_draws)])
  assert actions.shape == (num_draws, 3)
  # Environment 0: always greedy.
  assert np.all(actions[:, 0] == greedy[0])
  # Environment 1: uniform over the actions (chi-square, 4 degrees of
  # freedom: P(chi^2 > 18.47) = 0.001).
  counts = np.bincount(actions[:, 1], minlength=NUM_ACTIONS)
  assert counts.shape == (NUM_ACTIONS,)
  expected = num_draws / NUM_ACTIONS
  assert np.sum((counts - expected)**2 / expected) < 18.47, counts
  # Environment 2: a random action (non-greedy with probability
  # (A - 1) / A) at rate 0.3: within 4 standard deviations.
  p = 0.3 * (NUM_ACTIONS - 1) / NUM_ACTIONS
  sigma = math.sqrt(p * (1 - p) / num_draws)
  assert abs(np.mean(actions[:, 2] != greedy[2]) - p) < 4 * sigma


def test_dpg_sigma_per_environment():
  continuous = environments.resolve_continuous('gym:Pendulum-v1')
  builder = ApeXDPGBuilder(ApeXDPGConfig(policy_hidden_sizes='16',
                                         critic_hidden_sizes='16'),
                           continuous)
  tf.random.set_seed(6)
  policy, critic = builder.make_policy(), builder.make_critic()
  sigmas = [0.0, 0.2, 0.05]
  actor = ApeXDPGActor(policy, critic, continuous.spec.observations,
                       continuous.spec.actions, sigma=sigmas, seed=12)
  observations = np.random.default_rng(3).normal(size=(3, 3)).astype(
      np.float32)
  pi = policy(observations).numpy()
  half_range = float(continuous.spec.actions.maximum[0] -
                     continuous.spec.actions.minimum[0]) / 2
  assert half_range == 2.0
  num_draws = 2000
  actions = np.array([actor.select_actions(observations)
                      for _ in range(num_draws)])
  assert actions.shape == (num_draws, 3, 1)
  # Sigma 0: exactly pi(s), every time.
  assert np.all(actions[:, 0] == actions[0, 0])
  np.testing.assert_allclose(actions[0, 0], pi[0], rtol=1e-6, atol=1e-7)
  # Others: pi(s) + N(0, (sigma * half range)^2); pi(s) is far enough from
  # the bounds that clipping does not matter at these scales.
  assert np.all(np.abs(pi) < 0.5)
  for i in (1, 2):
    noise = actions[:, i, 0] - pi[i, 0]
    std = sigmas[i] * half_range
    assert abs(noise.mean()) < 4 * std / math.sqrt(num_draws)
    # The sample std's relative error is ~1 / sqrt(2 n) = 1.6%.
    assert abs(noise.std() / std - 1) < 0.08, (i, noise.std(), std)


# --------------------------------------------------------------------------
# 3. Per-environment n-step windows and priorities, through the loop.


def test_vector_loop_writes_each_environments_transitions(client):
  actor, twin = make_dqn_actor(client, [0.3, 1.0, 0.0], seed=7)
  assert actor.num_environments == 3
  envs = [ScriptedEnvironment(i, SCRIPTS[i]) for i in range(3)]
  loop = actor_loop.VectorEnvironmentLoop(envs, actor)
  iterations = 51
  loop.run(should_stop=stop_after(iterations))
  actor.close()
  # Lockstep: every environment took one step per iteration. By hand:
  # env 0 (cycle 19 = 5 + 2 + 7 + 1 + 4): 51 = 2 * 19 + 5 + 2 + 6, 6 steps
  # into a 7-step episode (3 transitions complete); env 1 (cycle 14):
  # 51 = 3 * 14 + 3 + 6, 6 steps into an 8-step episode (3 complete);
  # env 2 (cycle 24): 51 = 2 * 24 + 3, 3 steps into a 6-step episode (none
  # complete).
  assert [env.total_steps for env in envs] == [iterations] * 3
  assert [len(env.finished_episodes()) for env in envs] == [12, 13, 10]
  assert [env.episodes[-1].length for env in envs] == [6, 6, 3]
  expected = reference_transitions(
      [e for env in envs for e in env.episodes], twin)
  per_env = collections.Counter(key[0] for key in expected)
  assert per_env == {0: 48, 1: 48, 2: 48}
  # Truncated and terminated endings, and transitions that reach them.
  assert {r.discount for r in expected.values()} >= {0.0, GAMMA,
                                                     GAMMA**2, GAMMA**3}
  items = read_all_items(client)
  check_items(items, expected)
  # Each environment's exploration: env 2 is greedy (epsilon 0).
  for episode in envs[2].episodes:
    for t, action in enumerate(episode.actions):
      assert action == np.argmax(q_values(twin, episode.observations[t]))


# --------------------------------------------------------------------------
# 4. Counting and logging.


class LoopClock:
  """Stands in for the `time` module in agents/actor_loop.py: the real
  clock, keeping every reading the loop takes."""

  def __init__(self):
    self.readings = []

  def time(self) -> float:
    self.readings.append(time.time())
    return self.readings[-1]


class RecordingLogger(loggers.Logger):
  """Keeps every row, the loop's clock reading it was written at, and how
  many steps the environments had taken and finished by then."""

  def __init__(self, envs, clock: LoopClock):
    self._envs = envs
    self._clock = clock
    self.rows = []

  def write(self, data):
    finished = [e for env in self._envs for e in env.finished_episodes()]
    self.rows.append(dict(
        data=dict(data), time=self._clock.readings[-1],
        total_steps=sum(env.total_steps for env in self._envs),
        finished_steps=sum(e.length for e in finished),
        finished_episodes=len(finished),
        last_episodes=[(e.length, sum(e.rewards))
                       for env in self._envs
                       for e in env.finished_episodes()[-1:]]))

  def close(self):
    pass


def test_counts_are_every_step_taken_and_rows_carry_steps_per_second(
    monkeypatch):
  envs = [ScriptedEnvironment(i, SCRIPTS[i], step_sleep=0.001)
          for i in range(3)]
  tf.random.set_seed(8)
  network = ApeXDQNBuilder(dqn_config(), scripted_spec()).make_network()
  actor = ApeXDQNActor(network, SPEC.observations, epsilon=[0.5, 0.5, 0.5],
                       seed=1)
  parent = counting.Counter()
  counter = counting.Counter(parent, prefix='actor', time_delta=0.0)
  clock = LoopClock()
  monkeypatch.setattr(actor_loop, 'time', clock)
  logger = RecordingLogger(envs, clock)
  loop = actor_loop.VectorEnvironmentLoop(envs, actor, counter=counter,
                                           logger=logger, log_every=0.2)
  iterations = 300
  loop.run(should_stop=stop_after(iterations))
  start = clock.readings[0]  # When the loop started (its first reading).
  assert [env.total_steps for env in envs] == [iterations] * 3
  finished = [e for env in envs for e in env.finished_episodes()]
  # By hand: env 0: 300 = 15 * 19 + 5 + 2 + 7 + 1, 15 * 5 + 4 episodes,
  # nothing open; env 1: 300 = 21 * 14 + 3 + 3, 21 * 4 + 1 episodes and 3
  # steps open; env 2: 300 = 12 * 24 + 6 + 4 + 2, 12 * 5 + 2 episodes and 2
  # steps open.
  assert [len(env.finished_episodes()) for env in envs] == [79, 85, 62]
  counts = parent.get_counts()
  assert counts['actor_episodes'] == len(finished) == 79 + 85 + 62
  assert sum(e.length for e in finished) == 300 + 297 + 298
  # The open episodes' 3 + 2 steps are counted as the loop stops: every
  # step taken.
  assert counts['actor_steps'] == 3 * iterations

  rows = logger.rows
  assert len(rows) >= 3, len(rows)
  previous_time, previous_steps = start, 0
  for row in rows:
    data = row['data']
    for key in ('episode_length', 'episode_return', 'steps_per_second',
                'actor_steps', 'actor_episodes'):
      assert key in data, key
    assert data['actor_steps'] == row['finished_steps']
    assert data['actor_episodes'] == row['finished_episodes']
    # The episode that just ended: the last finished one of some environment.
    assert any(data['episode_length'] == length and
               data['episode_return'] == pytest.approx(ret, abs=1e-9)
               for length, ret in row['last_episodes']), (data, row)
    # steps_per_second: the environment steps of all environments since
    # the previous row, over the loop's time since then (its own clock
    # readings: exactly, whatever else runs on the machine).
    steps = data['steps_per_second'] * (row['time'] - previous_time)
    assert steps == pytest.approx(row['total_steps'] - previous_steps,
                                  rel=1e-9), (data, row)
    assert row['time'] - previous_time >= 0.2
    previous_time, previous_steps = row['time'], row['total_steps']

  # Run again: the open episodes go on, and their steps counted at the
  # first stop are not counted twice as they end.
  loop.run(should_stop=stop_after(100))
  assert [env.total_steps for env in envs] == [iterations + 100] * 3
  finished = [e for env in envs for e in env.finished_episodes()]
  counts = parent.get_counts()
  assert counts['actor_episodes'] == len(finished) > 79 + 85 + 62
  assert counts['actor_steps'] == 3 * (iterations + 100)


# --------------------------------------------------------------------------
# 5. A failing environment costs only its own episode.


def test_failures_cost_only_the_failing_environments_episode(client):
  actor, twin = make_dqn_actor(client, [0.3, 0.6, 0.1], seed=9)
  env0 = ScriptedEnvironment(0, SCRIPTS[0])
  # Env 1's 2nd episode crashes at its 6th step (5 steps taken); its
  # replacement, env 11, crashes on its 3rd reset; env 12 then crashes at
  # the 2nd step of its 2nd episode, and the loop is told to stop.
  env1 = ScriptedEnvironment(1, [(6, TERMINATES), (9, TRUNCATED)],
                             faults={(1, 6): 'raise'})
  env11 = ScriptedEnvironment(11, [(4, TRUNCATED), (3, TERMINATES)],
                              reset_faults=[2])
  env12 = ScriptedEnvironment(12, [(5, TERMINATES)],
                              faults={(1, 2): 'raise'})
  # Env 2's 2nd episode returns a NaN observation at its 5th step.
  env2 = ScriptedEnvironment(2, [(6, TRUNCATED), (9, TERMINATES),
                                 (3, TERMINATES), (2, TRUNCATED)],
                             faults={(1, 5): 'nan'})
  guarded = {env.env_id: resilience.GuardedEnvironment(env)
             for env in (env1, env11, env12, env2)}
  ids = {id(wrapper): env_id for env_id, wrapper in guarded.items()}
  replacements = [guarded[11], guarded[12], None]
  calls = []

  def on_failure(index, error):
    failed = loop.environments[index]
    calls.append((index, ids[id(failed)], type(error).__name__, str(error)))
    if isinstance(error, resilience.NonFiniteStep):
      return failed  # A new episode in the same environment.
    return replacements.pop(0)

  counter = counting.Counter()
  loop = actor_loop.VectorEnvironmentLoop(
      [env0, guarded[1], guarded[2]], actor, counter=counter,
      on_failure=on_failure)
  should_stop = stop_after(1000)
  loop.run(should_stop=should_stop)
  # The loop stopped by itself, in iteration 26 (by hand: env 1 fails at
  # 12 = 6 + 6, env 11 runs 13..16 and 17..19 and fails to reset at 19,
  # env 12 runs 20..24 and fails at 26; env 2's NaN is at 11 = 6 + 5).
  assert should_stop.calls[0] == 26
  assert [(index, env_id, kind) for index, env_id, kind, _ in calls] == [
      (2, 2, 'NonFiniteStep'),
      (1, 1, 'EnvironmentFailure'),
      (1, 11, 'EnvironmentFailure'),
      (1, 12, 'EnvironmentFailure'),
  ]
  assert 'env 1: step 6 of episode 1' in calls[1][3]
  assert 'env 11: reset 2' in calls[2][3]
  assert 'env 12: step 2 of episode 1' in calls[3][3]
  assert loop.environments[1] is guarded[12]  # The replacements were used.
  # The other environments went on, one step per iteration: env 0 took
  # all 26; env 2 25 (the last iteration stopped at env 1), one of them the
  # dropped NaN step; env 1's slot 12 + 7 + 7 calls, failing ones included.
  assert env0.step_calls == 26 and env0.total_steps == 26
  assert env2.step_calls == 25 and env2.total_steps == 24
  assert (env1.step_calls, env11.step_calls, env12.step_calls) == (12, 7, 7)
  # Their episodes were not interrupted: each has its scripted length.
  for episode in env0.episodes[:-1] + env2.episodes[:1] + env2.episodes[2:-1]:
    assert episode.ended and episode.length == episode.scripted_length
  assert [e.length for e in env2.episodes[:2]] == [6, 4]
  assert not env2.episodes[1].ended
  assert [e.length for e in env1.episodes] == [6, 5]
  assert [e.length for e in env11.episodes] == [4, 3]
  assert [e.length for e in env12.episodes] == [5, 1]

  # Counts: the finished episodes; and every step the actor was handed, of
  # those, of the abandoned ones (5 + 4 + 1) and of the two left open when
  # the loop stopped (env 0's and env 2's last).
  all_episodes = [e for env in (env0, env1, env11, env12, env2)
                  for e in env.episodes]
  finished = [e for e in all_episodes if e.ended]
  counts = counter.get_counts()
  assert counts['episodes'] == len(finished)
  assert counts['steps'] == sum(e.length for e in finished) + 5 + 4 + 1 + (
      env0.episodes[-1].length + env2.episodes[-1].length)
  assert counts['steps'] == sum(e.length for e in all_episodes)

  actor.close()
  expected = reference_transitions(all_episodes, twin)
  # Kept from the abandoned episodes: the complete transitions only.
  assert {key[2] for key in expected if key[:2] == (1, 1)} == {0, 1}
  assert {key[2] for key in expected if key[:2] == (2, 1)} == {0}
  assert not [key for key in expected if key[:2] == (12, 1)]
  check_items(read_all_items(client), expected)


def test_failure_without_handler_propagates(client):
  actor, _ = make_dqn_actor(client, [0.0, 0.0], seed=10)
  crashing = ScriptedEnvironment(1, [(9, TERMINATES)],
                                 faults={(0, 4): 'raise'})
  loop = actor_loop.VectorEnvironmentLoop(
      [ScriptedEnvironment(0, SCRIPTS[0]),
       resilience.GuardedEnvironment(crashing)], actor)
  with pytest.raises(resilience.EnvironmentFailure, match='env 1: step 4'):
    loop.run(should_stop=stop_after(100))
  actor.close()


# --------------------------------------------------------------------------
# 6. The builders' exploration per environment.


@pytest.fixture(scope='module')
def cartpole():
  return environments.resolve_discrete('gym:CartPole-v1')


@pytest.mark.parametrize('num_actors,envs_per_actor',
                         [(1, 1), (1, 3), (4, 1), (2, 4), (3, 3), (5, 2)])
def test_dqn_actor_exploration_slices_the_schedule(cartpole, num_actors,
                                                   envs_per_actor):
  builder = ApeXDQNBuilder(ApeXDQNConfig(), cartpole)
  slices = [builder.actor_exploration(i, num_actors, envs_per_actor)
            for i in range(num_actors)]
  for values in slices:
    assert len(values) == envs_per_actor
  schedule = apex_epsilons(num_actors * envs_per_actor)
  np.testing.assert_array_equal(np.concatenate(slices), schedule)
  # All N K values, each exactly once.
  assert len(set(np.concatenate(slices).tolist())) == (
      num_actors * envs_per_actor)


def test_dqn_actor_exploration_by_hand(cartpole):
  builder = ApeXDQNBuilder(ApeXDQNConfig(), cartpole)
  # N K = 8: eps_j = 0.4^(1 + j).
  np.testing.assert_allclose(builder.actor_exploration(0, 2, 4),
                             [0.4, 0.16, 0.064, 0.0256])
  np.testing.assert_allclose(builder.actor_exploration(1, 2, 4),
                             [0.4**5, 0.4**6, 0.4**7, 0.4**8])
  # One environment per actor: the paper's per-actor schedule.
  np.testing.assert_allclose(builder.actor_exploration(1, 2), [0.4**8])
  custom = ApeXDQNBuilder(ApeXDQNConfig(epsilon_base=0.5, epsilon_alpha=3.0),
                          cartpole)
  # N K = 4: 0.5^(1 + 3 j / 3), j = 0..3, split over 2 actors.
  np.testing.assert_allclose(custom.actor_exploration(0, 2, 2), [0.5, 0.25])
  np.testing.assert_allclose(custom.actor_exploration(1, 2, 2),
                             [0.125, 0.0625])


def test_dpg_actor_exploration_is_k_copies_of_sigma():
  builder = ApeXDPGBuilder(ApeXDPGConfig(sigma=0.17),
                           environments.resolve_continuous('gym:Pendulum-v1'))
  for i in range(3):
    np.testing.assert_array_equal(builder.actor_exploration(i, 3, 4),
                                  [0.17] * 4)
  np.testing.assert_array_equal(builder.actor_exploration(0, 1), [0.17])


# --------------------------------------------------------------------------
# 7. An evaluator's round: one episode in each environment, side by side.


class CountingSource(FixedVariableSource):
  """Counts the parameter pulls."""

  def __init__(self, network):
    super().__init__(network)
    self.pulls = 0

  def get_variables(self, names):
    self.pulls += 1
    return super().get_variables(names)


class BatchRecorder:
  """Wraps an actor: keeps the size of every batched forward pass."""

  def __init__(self, actor):
    self._actor = actor
    self.batch_sizes = []

  def select_actions(self, observations):
    self.batch_sizes.append(len(observations))
    return self._actor.select_actions(observations)

  def __getattr__(self, name):
    return getattr(self._actor, name)


def evaluation_actor(count, seed=0):
  """(DQN evaluator of `count` greedy environments, its network, source),
  as the evaluator node builds it, with a parameter pull every step."""
  builder = ApeXDQNBuilder(dqn_config(variable_update_period=1),
                           scripted_spec())
  tf.random.set_seed(seed)
  network = builder.make_network()
  source = CountingSource(network)
  actor = builder.make_actor(source, np.full(count, 0.0), seed=seed)
  return actor, network, source


def test_a_round_plays_one_greedy_episode_per_environment_in_one_pass_a_step(
    monkeypatch):
  actor, network, source = evaluation_actor(3, seed=4)
  pulls = source.pulls  # The one at construction.
  # Scripted first episodes of 5, 3 and 7 steps (a truncation among them).
  envs = [ScriptedEnvironment(0, [(5, TERMINATES), (1, TERMINATES)]),
          ScriptedEnvironment(1, [(3, TRUNCATED), (1, TERMINATES)]),
          ScriptedEnvironment(2, [(7, TERMINATES), (1, TERMINATES)])]
  recorder = BatchRecorder(actor)
  parent = counting.Counter()
  counter = counting.Counter(parent, prefix='evaluator', time_delta=0.0)
  clock = LoopClock()
  logger = RecordingLogger(envs, clock)
  monkeypatch.setattr(actor_loop, 'time', clock)
  finished = actor_loop.play_episodes(envs, recorder, counter=counter,
                                       logger=logger,
                                       log_fields={'round_started': 12.5})
  # One episode each, whole, and none begun after it.
  for env in envs:
    assert len(env.episodes) == 1 and env.episodes[0].ended
    assert env.episodes[0].length == env.episodes[0].scripted_length
  # One forward pass of all three per step, until the longest ended.
  assert recorder.batch_sizes == [3] * 7
  # Every action: the argmax of that observation's Q-values, computed alone.
  for env in envs:
    episode = env.episodes[0]
    for observation, action in zip(episode.observations, episode.actions):
      assert action == np.argmax(q_values(network, observation))
  # In the order they ended, with their returns; counted and logged so.
  expected = [(sum(env.episodes[0].rewards), env.episodes[0].length)
              for env in (envs[1], envs[0], envs[2])]
  assert [length for _, length in finished] == [3, 5, 7]
  for (ret, length), (want_ret, want_length) in zip(finished, expected):
    assert length == want_length and ret == pytest.approx(want_ret, abs=1e-9)
  assert parent.get_counts() == {'evaluator_episodes': 3,
                                 'evaluator_steps': 15}
  rows = logger.rows
  assert [row['data']['episode_length'] for row in rows] == [3, 5, 7]
  assert [row['data']['evaluator_episodes'] for row in rows] == [1, 2, 3]
  assert [row['data']['evaluator_steps'] for row in rows] == [3, 8, 15]
  # Each row names the round.
  assert [row['data']['round_started'] for row in rows] == [12.5] * 3
  for row, (ret, _) in zip(rows, expected):
    assert row['data']['episode_return'] == pytest.approx(ret, abs=1e-9)
    # Steps of the round so far (all environments) over its time so far.
    elapsed = row['time'] - clock.readings[0]
    assert row['data']['steps_per_second'] * elapsed == pytest.approx(
        row['total_steps'], rel=1e-9)
  # The round played one set of parameters: none pulled while it ran.
  assert source.pulls == pulls


def test_a_failing_environment_loses_only_its_episode_of_the_round():
  actor, _, _ = evaluation_actor(4, seed=5)
  # Env 1 crashes at its 3rd step; env 2 fails to reset; both are replaced
  # (by envs 11 and 12), which do not play in this round.
  crashing = ScriptedEnvironment(1, [(6, TERMINATES)],
                                 faults={(0, 3): 'raise'})
  unresettable = ScriptedEnvironment(2, [(4, TERMINATES)], reset_faults=[0])
  env11 = ScriptedEnvironment(11, [(2, TERMINATES)])
  env12 = ScriptedEnvironment(12, [(2, TERMINATES)])
  env0 = ScriptedEnvironment(0, [(4, TERMINATES)])
  env3 = ScriptedEnvironment(3, [(5, TRUNCATED)])
  envs = [env0, resilience.GuardedEnvironment(crashing),
          resilience.GuardedEnvironment(unresettable), env3]
  calls = []
  replacements = {1: env11, 2: env12}

  def on_failure(index, error):
    calls.append((index, str(error)))
    return replacements[index]

  counter = counting.Counter()
  finished = actor_loop.play_episodes(envs, actor, counter=counter,
                                       on_failure=on_failure)
  assert [index for index, _ in calls] == [2, 1]
  assert 'env 2: reset 0' in calls[0][1]
  assert 'env 1: step 3 of episode 0' in calls[1][1]
  assert [length for _, length in finished] == [4, 5]
  # The failed episode is neither counted nor logged.
  assert counter.get_counts() == {'episodes': 2, 'steps': 9}
  assert crashing.step_calls == 3 and env11.step_calls == 0
  assert env12.step_calls == 0 and not env12.episodes
  # The next round plays in the replacements.
  envs[1], envs[2] = env11, env12
  finished = actor_loop.play_episodes(envs, actor, counter=counter,
                                       on_failure=on_failure)
  assert sorted(length for _, length in finished) == [2, 2, 4, 5]
  # Without a handler, the failure is raised; a handler's None ends the
  # round at once.
  with pytest.raises(resilience.EnvironmentFailure, match='env 1: step 3'):
    actor_loop.play_episodes(
        [resilience.GuardedEnvironment(ScriptedEnvironment(
            1, [(6, TERMINATES)], faults={(0, 3): 'raise'}))], actor)
  other = ScriptedEnvironment(0, [(9, TERMINATES)])
  assert actor_loop.play_episodes(
      [resilience.GuardedEnvironment(ScriptedEnvironment(
          1, [(6, TERMINATES)], faults={(0, 3): 'raise'})), other],
      actor, on_failure=lambda index, error: None) == []
  # The crash came in the third step, before the other environment's.
  assert other.step_calls == 2


def test_a_round_ends_at_the_first_step_after_it_is_told_to_stop():
  actor, _, _ = evaluation_actor(2, seed=6)
  envs = [ScriptedEnvironment(0, [(50, TERMINATES)]),
          ScriptedEnvironment(1, [(3, TERMINATES)])]
  finished = actor_loop.play_episodes(envs, actor,
                                       should_stop=stop_after(5))
  # 5 steps: env 1's episode ended; env 0's did not and is not reported.
  assert finished == [(pytest.approx(sum(envs[1].episodes[0].rewards)), 3)]
  assert envs[0].step_calls == 4  # stop_after's first call is before resets.


# --------------------------------------------------------------------------
# 8. A real program with --envs_per_actor=3.

# tests/vector_probe.py runs programs/apex_dqn.py's program under test_mt
# and reports what the actors did: the batch sizes of their forward passes,
# how many transitions each adder wrote, and each actor's epsilons. It stops
# the program once every adder has written, the learner and both actors have
# logged, and the actors have logged PROGRAM_ACTOR_STEPS steps.
PROGRAM_ACTOR_STEPS = 4000


def test_program_with_three_environments_per_actor(tmp_path):
  workdir = tmp_path / 'run'
  result = helpers.run_module(
      'vector_probe', '--lp_launch_type=test_mt',
      f'--workdir={workdir}', '--preset=cartpole_smoke',
      '--envs_per_actor=3', '--num_evaluators=0', '--min_replay_size=200',
      '--replay_capacity=10000', '--actor_flush_size=10',
      f'--probe_actor_steps={PROGRAM_ACTOR_STEPS}', '--log_every=0.5',
      '--checkpoint_every=0', '--replay_checkpoint_every=0',
      # Ties the actors to the learner, which then trains throughout.
      '--samples_per_insert=1')
  assert result.returncode == 0, result.stdout[-5000:]
  assert 'did not terminate in time' not in result.stdout
  seen = helpers.probe_report(result.stdout, 'VECTOR_PROBE ')
  # Every forward pass of the actors acted for 3 environments at once, and
  # each of the 2 x 3 environments' adders wrote transitions.
  assert set(seen['batch_sizes']) == {'3'}, seen
  assert len(seen['writers']) == 6 and min(seen['writers']) > 0, seen
  # No evaluator; the two actors' epsilons are the two halves of the
  # schedule over all six environments.
  assert sorted(seen['epsilons']) == sorted(
      [apex_epsilons(6)[:3].tolist(), apex_epsilons(6)[3:].tolist()])
  assert not os.path.exists(os.path.join(workdir, 'logs', 'evaluator'))

  learner = helpers.rows(workdir, 'learner')
  assert learner and int(learner[-1]['learner_steps']) > 0
  assert all(math.isfinite(float(row['loss'])) for row in learner)
  actor_rows = []
  for label in ('actor', 'actor_1'):
    rows = helpers.rows(workdir, label)
    assert rows, label
    assert int(rows[-1]['actor_steps']) > 0
    assert all(float(row['steps_per_second']) > 0 for row in rows)
    actor_rows += rows
  # The counter's actor steps (both actors' six environments) reached what
  # the probe waited for.
  assert max(int(row['actor_steps']) for row in learner + actor_rows) >= (
      PROGRAM_ACTOR_STEPS)
