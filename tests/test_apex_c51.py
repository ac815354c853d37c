"""The distributional Ape-X DQN (agents/apex_c51/): its dueling categorical
network, its learner's loss, priorities and SGD step, and its actors'
initial priorities, against numpy float64 references.

The network has a numpy twin (the torso and both streams' layers); the
loss is n-step categorical double Q-learning, the bootstrap action chosen
by the online network's means and its distribution the target network's,
projected as C51's Algorithm 1 projects (tests/test_distributional.py's
loop); the reference gradient is a central finite difference of the numpy
loss. No TensorFlow computation is a reference.
"""

from typing import Dict, List

import acme
import numpy as np
import pytest
import reverb
import sonnet as snt
import tensorflow as tf
from acme.utils import loggers

from agents.networks import torsos
from agents.apex_c51 import networks
from agents.apex_c51.builder import ApeXC51Builder
from agents.apex_c51.config import ApeXC51Config
from agents.apex_c51.learning import ApeXC51Learner
from agents.envs.environments import resolve_discrete
from agents.replay import adders
import helpers
import replay_items
from test_distributional import reference_td
from test_dpg_priorities import Recorder
from test_learner import _mlp_np

OBS_DIM = 4
NUM_ACTIONS = 3
ATOMS = np.linspace(-3.0, 5.0, 9)
BATCH = 8
TABLE_SIZE = 40


def _parts(net) -> Dict[str, List[snt.Linear]]:
  # pylint: disable=protected-access
  return {'torso': list(net._torso._mlp._layers),
          'value': list(net._value._layers),
          'advantage': list(net._advantage._layers)}


def make_network(seed: int, atoms=ATOMS, num_actions=NUM_ACTIONS):
  net = networks.DuelingCategoricalNetwork(torsos.MLPTorso([5]), num_actions,
                                           hidden_size=4, atoms=atoms)
  net(tf.zeros([1, OBS_DIM], tf.float32))
  rng = np.random.default_rng(seed)
  for layers in _parts(net).values():
    for layer in layers:
      layer.w.assign(rng.normal(0.0, 0.8, layer.w.shape).astype(np.float32))
      layer.b.assign(rng.normal(0.0, 0.3, layer.b.shape).astype(np.float32))
  return net


def params_of(net):
  return {part: [(layer.w.numpy().astype(np.float64),
                  layer.b.numpy().astype(np.float64)) for layer in layers]
          for part, layers in _parts(net).items()}


def logits_np(params, observations) -> np.ndarray:
  """[batch, actions, atoms]: v + adv - mean_a adv, one vector a stream."""
  embedding = _mlp_np(params['torso'],
                      np.asarray(observations, np.float64), True)
  value = _mlp_np(params['value'], embedding, False)[:, None, :]
  advantage = _mlp_np(params['advantage'], embedding, False).reshape(
      len(embedding), -1, value.shape[-1])
  return value + advantage - advantage.mean(axis=1, keepdims=True)


def means_np(logits, atoms=ATOMS) -> np.ndarray:
  probabilities = np.exp(logits - logits.max(-1, keepdims=True))
  probabilities /= probabilities.sum(-1, keepdims=True)
  return probabilities @ atoms


def reference(online, target, sample, beta: float, select_with=None):
  """(loss, priorities) in numpy float64; `select_with` the params whose
  means choose the bootstrap action (default: the online network's)."""
  data = {k: v.numpy() for k, v in sample.data.items()}
  rows = np.arange(len(data[adders.ACTION]))
  probabilities = sample.info.probability.numpy()
  weights = (sample.info.table_size.numpy() * probabilities) ** (-beta)
  weights = weights / weights.max()
  next_observations = data[adders.NEXT_OBSERVATION]
  best = np.argmax(means_np(logits_np(select_with or online,
                                      next_observations)), axis=-1)
  logits_t = logits_np(target, next_observations)[rows, best]
  logits_taken = logits_np(online, data[adders.OBSERVATION])[
      rows, data[adders.ACTION]]
  cross_entropy, divergence = reference_td(
      logits_taken, data[adders.N_STEP_RETURN].astype(np.float64),
      data[adders.DISCOUNT].astype(np.float64), logits_t, ATOMS)
  return np.mean(weights * cross_entropy), divergence


def make_sample(seed: int):
  sample = replay_items.hand_made_batch(
      seed, BATCH, OBS_DIM, TABLE_SIZE, 0.99 ** 3,
      actions=lambda rng, size: rng.integers(
          0, NUM_ACTIONS, size=size).astype(np.int32))
  # Returns that reach past the support's ends too.
  returns = np.linspace(-6.0, 8.0, BATCH).astype(np.float32)
  return sample._replace(data=dict(sample.data, **{
      adders.N_STEP_RETURN: tf.constant(returns)}))


def test_network_means_and_dueling_logits_match_numpy():
  net = make_network(1)
  observations = np.random.default_rng(0).normal(size=(7, OBS_DIM))
  logits = net.logits(tf.constant(observations, tf.float32)).numpy()
  expected = logits_np(params_of(net), observations)
  assert logits.shape == (7, NUM_ACTIONS, len(ATOMS))
  np.testing.assert_allclose(logits, expected, rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(net(tf.constant(observations, tf.float32)),
                             means_np(expected), rtol=1e-4, atol=1e-5)


def test_one_update_against_numpy():
  beta, learning_rate = 0.4, 0.1
  sample = make_sample(5)
  online, target = make_network(1), make_network(2)
  before, target_params = params_of(online), params_of(target)
  loss, priorities = reference(before, target_params, sample, beta)
  # The batch tells double Q-learning from its alternatives: selecting by
  # the target network's means would give other priorities.
  _, by_target = reference(before, target_params, sample, beta,
                           select_with=target_params)
  assert np.mean(np.abs(by_target - priorities) > 1e-4) >= 0.25

  def numpy_loss(vector):
    params, start = {}, 0
    for part, layers in before.items():
      params[part] = []
      for w, b in layers:
        params[part].append((vector[start:start + w.size].reshape(w.shape),
                             vector[start + w.size:start + w.size +
                                    b.size].reshape(b.shape)))
        start += w.size + b.size
    # The target (and the selection) are held fixed: only the online
    # network's distribution at s_t moves with the vector.
    data = {k: v.numpy() for k, v in sample.data.items()}
    rows = np.arange(BATCH)
    moved = logits_np(params, data[adders.OBSERVATION])[
        rows, data[adders.ACTION]]
    cross_entropy = reference_td(
        moved, data[adders.N_STEP_RETURN].astype(np.float64),
        data[adders.DISCOUNT].astype(np.float64),
        logits_np(target_params, data[adders.NEXT_OBSERVATION])[
            rows, np.argmax(means_np(logits_np(
                before, data[adders.NEXT_OBSERVATION])), -1)], ATOMS)[0]
    weights = (sample.info.table_size.numpy() *
               sample.info.probability.numpy()) ** (-beta)
    return np.mean(weights / weights.max() * cross_entropy)

  flat = np.concatenate([np.concatenate([w.ravel(), b.ravel()])
                         for layers in before.values() for w, b in layers])
  assert numpy_loss(flat) == pytest.approx(loss, rel=1e-9)
  gradient = np.zeros_like(flat)
  for index in range(flat.size):
    up, down = flat.copy(), flat.copy()
    up[index] += 1e-6
    down[index] -= 1e-6
    gradient[index] = (numpy_loss(up) - numpy_loss(down)) / 2e-6

  learner = ApeXC51Learner(
      network=online, target_network=target,
      optimizer=snt.optimizers.SGD(learning_rate=learning_rate),
      max_gradient_norm=1e6, iterator=replay_items.iterator_over([sample]),
      replay_client=None, importance_sampling_exponent=beta,
      target_update_period=1000)
  learner.step()
  update = learner.last_update
  assert update['loss'] == pytest.approx(loss, rel=1e-4)
  np.testing.assert_allclose(update['priorities'], priorities, rtol=1e-3,
                             atol=1e-5)
  after = params_of(online)
  step = np.concatenate([np.concatenate([(wa - wb).ravel(), (ba - bb).ravel()])
                         for part in before
                         for (wa, ba), (wb, bb) in zip(after[part],
                                                       before[part])])
  assert np.linalg.norm(step) > 1e-3
  np.testing.assert_allclose(step, -learning_rate * gradient, rtol=2e-3,
                             atol=1e-6)


@pytest.fixture
def server():
  servers = []

  def start(builder) -> reverb.Client:
    servers.append(reverb.Server(builder.make_replay_tables(), port=None))
    return reverb.Client(f'localhost:{servers[-1].port}')

  yield start
  for server_ in servers:
    server_.stop()


def test_actors_write_the_kl_priorities_of_their_own_network(server):
  cartpole = resolve_discrete('gym:CartPole-v1')
  n_step, gamma = 3, 0.97
  config = ApeXC51Config(
      n_step=n_step, discount=gamma, num_atoms=11, v_min=0.0, v_max=12.0,
      replay_capacity=10_000, min_replay_size=1, batch_size=1,
      prefetch_size=1, actor_flush_size=8, mlp_hidden_sizes='16',
      dueling_hidden_size=8)
  config.validate()
  builder = ApeXC51Builder(config, cartpole)
  client = server(builder)
  tf.random.set_seed(3)
  learner = builder.make_learner(client)
  rng = np.random.default_rng(3)
  for variable in learner.state['network'].trainable_variables:
    variable.assign(rng.normal(0.0, 0.7, variable.shape).astype(np.float32))
  actor = builder.make_actor(learner, 0.3, replay_client=client, seed=7)
  environment = Recorder(cartpole.make_environment(seed=5))
  acme.EnvironmentLoop(environment, actor, logger=loggers.NoOpLogger(),
                       should_update=True).run(num_episodes=3)
  actor._adders[0].close()  # pylint: disable=protected-access
  network = actor._network  # pylint: disable=protected-access
  atoms = np.linspace(0.0, 12.0, 11)

  def logits(observation):
    return network.logits(observation[None]).numpy()[0].astype(np.float64)

  expected, wrong = {}, {}
  for episode in environment.episodes:
    for t in range(episode.length):
      m = min(n_step, episode.length - t)
      n_step_return, discount = 0.0, 1.0
      for k in range(m):
        n_step_return += discount * episode.rewards[t + k]
        discount *= gamma * episode.discounts[t + k]
      at_start = logits(episode.observations[t])[episode.actions[t]][None]
      bootstrap = logits(episode.observations[t + m])
      means = means_np(bootstrap, atoms)
      key = episode.observations[t].tobytes()
      expected[key] = reference_td(
          at_start, np.array([n_step_return]), np.array([discount]),
          bootstrap[np.argmax(means)][None], atoms)[1][0]
      wrong[key] = reference_td(
          at_start, np.array([n_step_return]), np.array([discount]),
          bootstrap[np.argmin(means)][None], atoms)[1][0]
  items = replay_items.read_all_items(client)
  assert len(items) == len(expected) > 30
  terminal = [episode for episode in environment.episodes
              if episode.discounts[-1] == 0.0]
  assert terminal  # Some episodes ended by falling: no bootstrap there.
  differs = []
  for item in items:
    key = item.observation.tobytes()
    assert item.priority == pytest.approx(expected[key], rel=1e-3, abs=1e-4)
    differs.append(abs(wrong[key] - expected[key]) > 1e-3)
  assert np.std([item.priority for item in items]) > 1e-2
  assert np.mean(differs) > 0.3


def test_program_under_test_mt_learns_and_reprioritises(tmp_path):
  # The probe stops the program once it has seen the table's priorities
  # change, 30 updates apart, and every node has logged.
  result = helpers.run_module('program_probe', '--program=apex_c51',
                              '--lp_launch_type=test_mt',
                              f'--workdir={tmp_path}',
                              '--preset=cartpole_smoke')
  assert result.returncode == 0, result.stdout[-5000:]
  seen = helpers.probe_report(result.stdout, 'PROBE ')
  assert seen['program'] == 'apex_c51'
  helpers.check_probe_report(seen)
  helpers.check_learner_logs(tmp_path, columns=('gradient_norm',),
                             losses=('loss',))
