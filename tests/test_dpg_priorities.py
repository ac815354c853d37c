"""Ape-X DPG actor-side initial priorities against a slow reference.

A real ApeXDPGActor with an adder acts in a real environment (gym Pendulum,
dm_control cartpole) and writes to a real Reverb table. A wrapping environment
records every observation, action and reward; every item is then read back
from the table and matched to the transition it must be, whose n-step return,
discount and priority |R + Gamma q(s_{t+n}, pi(s_{t+n})) - q(s_t, a_t)| are
recomputed one transition at a time, in numpy float64, from the actor's own
networks (which no learner step changes during the run).
"""

import dataclasses
from typing import List

import acme
import dm_env
import numpy as np
import pytest
import reverb
import sonnet as snt
import tensorflow as tf
from acme.utils import loggers

from agents.apex_dpg.actor import ApeXDPGActor
from agents.apex_dpg.builder import ApeXDPGBuilder
from agents.apex_dpg.config import ApeXDPGConfig
from agents.envs.control import FlatControlEnvironment
from agents.envs.environments import resolve_continuous
from replay_items import Item, read_all_items, table_size

CAPACITY = 10_000  # More than any test writes: nothing is evicted.
N_STEP = 3
GAMMA = 0.97
SIGMA = 0.3


def make_config(flush_size: int) -> ApeXDPGConfig:
  config = ApeXDPGConfig(n_step=N_STEP, discount=GAMMA, sigma=SIGMA,
                         replay_capacity=CAPACITY, min_replay_size=1,
                         batch_size=1, prefetch_size=1,
                         actor_flush_size=flush_size,
                         critic_hidden_sizes='16,8',
                         policy_hidden_sizes='16,8')
  config.validate()
  return config


# --------------------------------------------------------------------------
# Reverb helpers.


@pytest.fixture(scope='module')
def pendulum():
  return resolve_continuous('gym:Pendulum-v1')


@pytest.fixture(scope='module')
def cartpole():
  return resolve_continuous('control:cartpole:balance')


@pytest.fixture
def server(request):
  servers = []

  def start(builder: ApeXDPGBuilder) -> reverb.Client:
    servers.append(reverb.Server(builder.make_replay_tables(), port=None))
    return reverb.Client(f'localhost:{servers[-1].port}')

  yield start
  for server_ in servers:
    server_.stop()


# --------------------------------------------------------------------------
# Recording what the actor did.


@dataclasses.dataclass
class Episode:
  observations: list  # T + 1 observations.
  actions: list = dataclasses.field(default_factory=list)  # T actions.
  rewards: list = dataclasses.field(default_factory=list)
  discounts: list = dataclasses.field(default_factory=list)
  ended: bool = False

  @property
  def length(self) -> int:
    return len(self.actions)


class Recorder(dm_env.Environment):
  """Passes everything through and keeps a copy of each episode."""

  def __init__(self, environment: dm_env.Environment):
    self._environment = environment
    self.episodes: List[Episode] = []

  def reset(self):
    timestep = self._environment.reset()
    self.episodes.append(Episode([np.array(timestep.observation)]))
    return timestep

  def step(self, action):
    episode = self.episodes[-1]
    assert not episode.ended
    episode.actions.append(np.array(action, copy=True))
    timestep = self._environment.step(action)
    assert not timestep.first()
    episode.observations.append(np.array(timestep.observation))
    episode.rewards.append(float(timestep.reward))
    episode.discounts.append(float(timestep.discount))
    episode.ended = timestep.last()
    return timestep

  def observation_spec(self):
    return self._environment.observation_spec()

  def action_spec(self):
    return self._environment.action_spec()

  def reward_spec(self):
    return self._environment.reward_spec()

  def discount_spec(self):
    return self._environment.discount_spec()

  def close(self):
    self._environment.close()


def short_cartpole(seed: int, time_limit: float) -> FlatControlEnvironment:
  """control:cartpole:balance with episodes of time_limit / 0.01 steps."""
  from dm_control import suite  # pylint: disable=g-import-not-at-top
  return FlatControlEnvironment(suite.load(
      'cartpole', 'balance',
      task_kwargs={'random': seed, 'time_limit': time_limit}))


# --------------------------------------------------------------------------
# Networks: random weights large enough for q to depend on the action, and
# numpy twins of the actor's networks.


def linears(module: snt.Module) -> List[snt.Linear]:
  # pylint: disable=protected-access
  return [layer for layer in module._network._layers
          if isinstance(layer, snt.Linear)]


def randomise(module: snt.Module, seed: int, final_scale: float):
  rng = np.random.default_rng(seed)
  layers = linears(module)
  for index, layer in enumerate(layers):
    fan_in = layer.w.shape[0]
    scale = final_scale if index == len(layers) - 1 else 1.5 / np.sqrt(fan_in)
    layer.w.assign(rng.normal(0.0, scale, layer.w.shape).astype(np.float32))
    layer.b.assign(rng.normal(0.0, 0.2, layer.b.shape).astype(np.float32))


def params_of(module: snt.Module):
  return [(layer.w.numpy().astype(np.float64),
           layer.b.numpy().astype(np.float64)) for layer in linears(module)]


def _torso_np(params, x: np.ndarray) -> np.ndarray:
  """Hidden layers (the first tanh, the others ReLU), then the linear
  output layer."""
  for index, (w, b) in enumerate(params):
    x = x @ w + b
    if index == 0 and len(params) > 1:
      x = np.tanh(x)
    elif index < len(params) - 1:
      x = np.maximum(x, 0.0)
  return x


class NumpyNets:
  """float64 twins of a policy and critic, one transition at a time."""

  def __init__(self, policy, critic, minimum, maximum):
    self.policy_params = params_of(policy)
    self.critic_params = params_of(critic)
    self.minimum = np.asarray(minimum, np.float64)
    self.maximum = np.asarray(maximum, np.float64)

  def pi(self, observation: np.ndarray) -> np.ndarray:
    assert observation.ndim == 1
    squashed = np.tanh(_torso_np(self.policy_params,
                                 observation.astype(np.float64)))
    return (self.minimum + self.maximum) / 2 + (
        self.maximum - self.minimum) / 2 * squashed

  def q(self, observation: np.ndarray, action: np.ndarray) -> float:
    assert observation.ndim == 1 and action.ndim == 1
    x = np.concatenate([observation.astype(np.float64),
                        action.astype(np.float64)])
    (value,) = _torso_np(self.critic_params, x)
    return float(value)


def snapshot(*modules) -> np.ndarray:
  return np.concatenate([v.numpy().ravel() for module in modules
                         for v in module.trainable_variables])


def make_learner_with_random_networks(builder: ApeXDPGBuilder,
                                      client: reverb.Client, seed: int):
  """The builder's learner, as the actors' variable source; its networks
  get weights that make q depend on the action (the default final layers
  are nearly zero)."""
  tf.random.set_seed(seed)
  learner = builder.make_learner(client)
  randomise(learner.state['policy'], seed, final_scale=0.3)
  randomise(learner.state['critic'], seed + 1, final_scale=1.5)
  return learner


# --------------------------------------------------------------------------
# The slow reference and the checks.


@dataclasses.dataclass
class Expected:
  observation: np.ndarray
  action: np.ndarray
  n_step_return: float
  discount: float
  next_observation: np.ndarray
  priority: float
  # What a wrong priority would be, to check the comparison can tell.
  priority_taken_bootstrap: float  # q(s_{t+n}, a_{t+n}) in the bootstrap.
  priority_policy_start: float  # q(s_t, pi(s_t)) instead of q(s_t, a_t).
  priority_no_bootstrap: float


def reference_transitions(episodes: List[Episode], nets: NumpyNets,
                          n_step: int, gamma: float) -> dict:
  """{s_t bytes: Expected}, by direct loops over each recorded episode.

  In an episode that has not ended, a transition is complete (written) once
  the actor has acted at s_{t+n}.
  """
  result = {}
  for episode in episodes:
    length = episode.length
    # An unfinished episode: only transitions whose n-step window closed.
    for t in range(length if episode.ended else length - n_step):
      m = min(n_step, length - t)
      n_step_return, discount = 0.0, 1.0
      for k in range(m):
        n_step_return += discount * episode.rewards[t + k]
        discount *= gamma * episode.discounts[t + k]
      s_t = episode.observations[t]
      a_t = episode.actions[t]
      s_tn = episode.observations[t + m]
      q_taken = nets.q(s_t, a_t)
      bootstrap = nets.q(s_tn, nets.pi(s_tn))
      target = n_step_return + discount * bootstrap
      if t + m < length:
        taken_bootstrap = nets.q(s_tn, episode.actions[t + m])
      else:
        taken_bootstrap = bootstrap  # No action was taken at s_T.
      key = s_t.tobytes()
      assert key not in result  # Observations identify transitions.
      result[key] = Expected(
          observation=s_t,
          action=a_t,
          n_step_return=n_step_return,
          discount=discount,
          next_observation=s_tn,
          priority=abs(target - q_taken),
          priority_taken_bootstrap=abs(
              n_step_return + discount * taken_bootstrap - q_taken),
          priority_policy_start=abs(target - nets.q(s_t, nets.pi(s_t))),
          priority_no_bootstrap=abs(n_step_return - q_taken))
  return result


def check_items(items: List[Item], expected: dict, minimum, maximum):
  assert len(items) == len(expected)
  seen = set()
  for item in items:
    key = item.observation.tobytes()
    assert key in expected
    assert key not in seen
    seen.add(key)
    want = expected[key]
    np.testing.assert_array_equal(item.next_observation,
                                  want.next_observation)
    # The action stored is the action taken, bit for bit.
    assert item.action.dtype == np.float32
    assert item.action.shape == want.action.shape
    np.testing.assert_array_equal(item.action, want.action)
    assert np.all(item.action >= minimum) and np.all(item.action <= maximum)
    np.testing.assert_allclose(item.n_step_return, want.n_step_return,
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(item.discount, want.discount, rtol=1e-6)
    np.testing.assert_allclose(item.priority, want.priority,
                               rtol=1e-4, atol=1e-4)
  assert seen == set(expected)

  # The comparison is discriminative: priorities from the wrong bootstrap
  # action, from pi(s_t) at the start, or without bootstrap would have
  # failed it on most transitions.
  def mismatches(field):
    return np.mean([abs(getattr(want, field) - want.priority) > 1e-3
                    for want in expected.values()])
  assert mismatches('priority_taken_bootstrap') > 0.8
  assert mismatches('priority_policy_start') > 0.8
  assert mismatches('priority_no_bootstrap') > 0.95
  priorities = np.array([item.priority for item in items])
  assert priorities.std() > 0.1
  assert len(np.unique(priorities)) > 0.9 * len(priorities)


def check_episode_ends(episodes: List[Episode], expected: dict,
                       episode_length: int):
  """Every episode was truncated by its time limit (discount 1): its last n
  transitions bootstrap from s_T with Gamma = gamma^m > 0."""
  for episode in episodes:
    assert episode.length == episode_length
    assert episode.discounts[-1] == 1.0
    for m in range(1, N_STEP + 1):
      want = expected[episode.observations[episode.length - m].tobytes()]
      np.testing.assert_array_equal(want.next_observation,
                                    episode.observations[-1])
      assert want.discount == pytest.approx(GAMMA ** m)


def check_exploration(episodes: List[Episode], nets: NumpyNets,
                      minimum, maximum, sigma: float):
  """a_t = clip(pi(s_t) + noise): Gaussian noise of std sigma * half range,
  drawn independently at every step, clipped into the bounds."""
  noise, clipped = [], 0
  for episode in episodes:
    for observation, action in zip(episode.observations, episode.actions):
      assert np.all(action >= minimum) and np.all(action <= maximum)
      greedy = nets.pi(observation)
      at_bound = (action == minimum) | (action == maximum)
      clipped += int(at_bound.sum())
      noise.append(np.where(at_bound, np.nan, action - greedy))
  noise = np.array(noise)  # [steps, action dims]; nan where clipped.
  scale = sigma * (maximum - minimum) / 2
  for j in range(noise.shape[1]):
    column = noise[:, j]
    inside = column[~np.isnan(column)]
    assert len(inside) > 0.8 * len(column)
    assert np.std(inside) == pytest.approx(scale[j], rel=0.15)
    assert abs(np.mean(inside)) < 4 * scale[j] / np.sqrt(len(inside))
    # Independent draws (not Ornstein-Uhlenbeck): no lag-1 correlation.
    pairs = ~np.isnan(column[1:]) & ~np.isnan(column[:-1])
    correlation = np.corrcoef(column[1:][pairs], column[:-1][pairs])[0, 1]
    assert abs(correlation) < 0.2
  return clipped


# --------------------------------------------------------------------------
# Tests.


def test_pendulum_actor_priorities_match_reference(pendulum, server):
  """The builder's actor (variables pulled from the builder's learner) in
  acme.EnvironmentLoop on gym:Pendulum-v1: two 200-step episodes ending by
  truncation. A flush size dividing 200 leaves nothing pending."""
  config = make_config(flush_size=8)
  builder = ApeXDPGBuilder(config, pendulum)
  client = server(builder)
  learner = make_learner_with_random_networks(builder, client, seed=3)
  actor = builder.make_actor(learner, builder.actor_exploration(0, 1),
                             replay_client=client, seed=7)
  # pylint: disable=protected-access
  policy, critic = actor._policy, actor._critic
  # The actor pulled the learner's (randomised) weights.
  np.testing.assert_array_equal(
      snapshot(policy, critic),
      snapshot(learner.state['policy'], learner.state['critic']))
  before = snapshot(policy, critic)

  spec = pendulum.spec.actions
  np.testing.assert_array_equal(spec.minimum, [-2.0])
  np.testing.assert_array_equal(spec.maximum, [2.0])
  environment = Recorder(pendulum.make_environment(seed=5))
  acme.EnvironmentLoop(environment, actor, logger=loggers.NoOpLogger(),
                       should_update=True).run(num_episodes=2)
  # No learner step: the actor's parameters did not change.
  np.testing.assert_array_equal(snapshot(policy, critic), before)
  assert learner.num_steps == 0

  episodes = environment.episodes
  nets = NumpyNets(policy, critic, spec.minimum, spec.maximum)
  expected = reference_transitions(episodes, nets, N_STEP, GAMMA)
  assert len(expected) == 400
  actor._adders[0].wait_until_written()  # pylint: disable=protected-access
  assert table_size(client) == 400
  assert not actor._adders[0].pending  # pylint: disable=protected-access
  actor._adders[0].close()  # pylint: disable=protected-access
  check_episode_ends(episodes, expected, episode_length=200)
  clipped = check_exploration(episodes, nets, spec.minimum, spec.maximum,
                              SIGMA)
  assert clipped > 0  # Some actions were clipped into the bounds.
  check_items(read_all_items(client), expected, spec.minimum, spec.maximum)


def test_cartpole_actor_priorities_match_reference(cartpole, server):
  """An ApeXDPGActor built by hand with the builder's adder, driven by hand
  on dm_control cartpole:balance with a 1.5 s (150-step) time limit; a flush
  size of 17 leaves transitions pending across the episode boundary and at
  the end, until the adder is closed."""
  config = make_config(flush_size=17)
  builder = ApeXDPGBuilder(config, cartpole)
  client = server(builder)
  tf.random.set_seed(11)
  policy, critic = builder.make_policy(), builder.make_critic()
  randomise(policy, 11, final_scale=0.3)
  randomise(critic, 12, final_scale=1.5)
  spec = cartpole.spec
  adder = builder.make_adder(client)
  actor = ApeXDPGActor(policy, critic, spec.observations, spec.actions,
                       sigma=SIGMA, adders=[adder], seed=13)
  before = snapshot(policy, critic)

  environment = Recorder(short_cartpole(seed=17, time_limit=1.5))
  assert environment.observation_spec() == spec.observations
  for _ in range(2):
    timestep = environment.reset()
    actor.observe_first(timestep)
    while not timestep.last():
      action = actor.select_action(timestep.observation)
      timestep = environment.step(action)
      actor.observe(action, timestep)
  total = sum(episode.length for episode in environment.episodes)
  # By hand: each flush writes what is pending, 17 transitions except at an
  # episode's last step (which completes n + 1). Episode 1 leaves
  # 150 - 8 * 17 = 14 pending across the boundary; the 300 in all leave
  # 300 - 17 * 17 = 11, written on close.
  assert [episode.length for episode in environment.episodes] == [150, 150]
  assert len(adder.pending) == 11
  adder.wait_until_written()
  assert table_size(client) + len(adder.pending) == total
  adder.close()
  np.testing.assert_array_equal(snapshot(policy, critic), before)

  episodes = environment.episodes
  actions = spec.actions
  nets = NumpyNets(policy, critic, actions.minimum, actions.maximum)
  expected = reference_transitions(episodes, nets, N_STEP, GAMMA)
  assert len(expected) == total == 300
  check_episode_ends(episodes, expected, episode_length=150)
  check_exploration(episodes, nets, actions.minimum, actions.maximum, SIGMA)
  check_items(read_all_items(client), expected, actions.minimum,
              actions.maximum)


def test_full_length_cartpole_episode_prefix(cartpole, server):
  """The suite's own environment (1000-step episodes) as resolve_continuous
  makes it: the first 250 steps, then the adder is closed mid-episode. Only
  transitions whose n-step window is complete were written."""
  config = make_config(flush_size=16)
  builder = ApeXDPGBuilder(config, cartpole)
  client = server(builder)
  learner = make_learner_with_random_networks(builder, client, seed=21)
  actor = builder.make_actor(learner, SIGMA, replay_client=client, seed=23)
  environment = Recorder(cartpole.make_environment(seed=29))
  steps = 250
  timestep = environment.reset()
  actor.observe_first(timestep)
  for _ in range(steps):
    action = actor.select_action(timestep.observation)
    timestep = environment.step(action)
    actor.observe(action, timestep)
    assert not timestep.last()
  actor._adders[0].close()  # pylint: disable=protected-access
  (episode,) = environment.episodes
  assert not episode.ended
  # pylint: disable=protected-access
  nets = NumpyNets(actor._policy, actor._critic, cartpole.spec.actions.minimum,
                   cartpole.spec.actions.maximum)
  expected = reference_transitions([episode], nets, N_STEP, GAMMA)
  assert len(expected) == steps - N_STEP
  assert all(want.discount == pytest.approx(GAMMA ** N_STEP)
             for want in expected.values())
  check_items(read_all_items(client), expected, cartpole.spec.actions.minimum,
              cartpole.spec.actions.maximum)


def test_actor_without_adder(pendulum, server):
  """sigma = 0 and no adder (the evaluator): pi(s), to within 1e-5 (the
  actor's compiled policy and this test's eager call may round differently:
  oneDNN fuses a graph's matmul and bias). sigma > 0 and no adder: noisy
  actions inside the bounds."""
  config = make_config(flush_size=8)
  builder = ApeXDPGBuilder(config, pendulum)
  client = server(builder)
  learner = make_learner_with_random_networks(builder, client, seed=31)
  policy = learner.state['policy']
  spec = pendulum.spec.actions
  evaluator = builder.make_actor(learner, builder.evaluation_exploration)
  assert builder.evaluation_exploration == 0.0
  noisy = builder.make_actor(learner, 0.5, seed=37)
  observations = np.random.default_rng(41).uniform(
      [-1, -1, -8], [1, 1, 8], (300, 3)).astype(np.float32)
  greedy_actions, noisy_actions = [], []
  for observation in observations:
    action = evaluator.select_action(observation)
    assert action.dtype == np.float32 and action.shape == spec.shape
    greedy = policy(observation[None])[0].numpy()
    np.testing.assert_allclose(action, greedy, rtol=1e-5, atol=1e-5)
    # Deterministic: the same observation, the same action.
    np.testing.assert_array_equal(evaluator.select_action(observation),
                                  action)
    greedy_actions.append(greedy)
    noisy_actions.append(noisy.select_action(observation))
  greedy_actions = np.array(greedy_actions)
  noisy_actions = np.array(noisy_actions)
  assert greedy_actions.std() > 0.1  # pi depends on s.
  assert np.all(noisy_actions >= spec.minimum)
  assert np.all(noisy_actions <= spec.maximum)
  inside = (noisy_actions > spec.minimum) & (noisy_actions < spec.maximum)
  differences = (noisy_actions - greedy_actions)[inside]
  assert np.all(differences != 0)
  # std sigma * half range = 0.5 * 2, less a little for the clipped tails.
  assert 0.8 < differences.std() < 1.1
  # The evaluator writes nothing.
  assert table_size(client) == 0
