"""Ape-X exploration: the per-actor epsilons and the epsilon-greedy actor."""

import numpy as np
import pytest
import sonnet as snt
import tensorflow as tf
from acme import specs

from agents.apex_dqn.actor import ApeXDQNActor
from agents.apex_dqn.actor import apex_epsilons

NUM_ACTIONS = 4
OBSERVATION_SPEC = specs.Array((3,), np.float32)


# --------------------------------------------------------------------------
# apex_epsilons: eps_i = 0.4^(1 + 7 i / (N - 1)).


def test_single_actor_gets_the_base_epsilon():
  np.testing.assert_allclose(apex_epsilons(1), [0.4])


def test_two_actors():
  np.testing.assert_allclose(apex_epsilons(2), [0.4, 0.4**8])
  np.testing.assert_allclose(apex_epsilons(2), [0.4, 0.00065536])


def test_eight_actors_by_hand():
  # N = 8: 7 i / (N - 1) = i, so eps_i = 0.4^(1 + i).
  epsilons = apex_epsilons(8)
  assert epsilons.shape == (8,)
  np.testing.assert_allclose(epsilons[0], 0.4)
  np.testing.assert_allclose(epsilons[1], 0.16)
  np.testing.assert_allclose(epsilons[2], 0.064)
  np.testing.assert_allclose(epsilons[3], 0.0256)
  np.testing.assert_allclose(epsilons[7], 0.00065536)


def test_three_actors_by_hand():
  # N = 3: exponents 1, 4.5, 8; 0.4^4.5 = 0.0256 * sqrt(0.4).
  np.testing.assert_allclose(apex_epsilons(3),
                             [0.4, 0.0256 * 0.6324555320336759, 0.00065536])


def test_custom_base_and_alpha():
  # 0.5^(1 + 2 i / 2) for i = 0, 1, 2.
  np.testing.assert_allclose(apex_epsilons(3, base=0.5, alpha=2.0),
                             [0.5, 0.25, 0.125])


@pytest.mark.parametrize('num_actors', [2, 3, 8, 17, 360])
def test_epsilons_decrease_from_base_to_base_to_the_eighth(num_actors):
  epsilons = apex_epsilons(num_actors)
  assert epsilons.shape == (num_actors,)
  assert np.all(np.diff(epsilons) < 0)
  np.testing.assert_allclose(epsilons[0], 0.4)
  np.testing.assert_allclose(epsilons[-1], 0.4**8)
  for i in (0, num_actors // 2, num_actors - 1):
    np.testing.assert_allclose(epsilons[i],
                               0.4**(1 + 7 * i / (num_actors - 1)))


@pytest.mark.parametrize('num_actors', [0, -1, -8])
def test_bad_number_of_actors_raises(num_actors):
  with pytest.raises(ValueError):
    apex_epsilons(num_actors)


# --------------------------------------------------------------------------
# ApeXDQNActor's epsilon-greedy policy.


def make_network() -> snt.Module:
  tf.random.set_seed(1234)
  network = snt.nets.MLP([16, NUM_ACTIONS])
  network(tf.zeros((1, *OBSERVATION_SPEC.shape)))
  return network


def random_observations(count: int, seed: int) -> np.ndarray:
  rng = np.random.default_rng(seed)
  return rng.normal(size=(count, *OBSERVATION_SPEC.shape)).astype(np.float32)


def test_greedy_actor_picks_the_argmax_of_the_network():
  network = make_network()
  actor = ApeXDQNActor(network, OBSERVATION_SPEC, epsilon=0.0, seed=0)
  observations = random_observations(200, seed=1)
  q_values = network(observations).numpy()
  expected = np.argmax(q_values, axis=-1)
  # The network is not trivially constant: several actions are greedy.
  assert len(np.unique(expected)) >= 2
  for observation, q, want in zip(observations, q_values, expected):
    action = actor.select_action(observation)
    assert isinstance(action, np.int32)
    assert action == want
    np.testing.assert_allclose(actor.q_values(observation), q, rtol=1e-5,
                               atol=1e-6)


def test_fully_random_actor_is_roughly_uniform():
  network = make_network()
  actor = ApeXDQNActor(network, OBSERVATION_SPEC, epsilon=1.0, seed=42)
  observation = random_observations(1, seed=2)[0]
  num_draws = 2000
  actions = np.array([actor.select_action(observation)
                      for _ in range(num_draws)])
  assert actions.dtype == np.int32
  counts = np.bincount(actions, minlength=NUM_ACTIONS)
  assert counts.shape == (NUM_ACTIONS,)  # Only valid actions.
  expected = num_draws / NUM_ACTIONS
  chi_square = np.sum((counts - expected)**2 / expected)
  # 3 degrees of freedom: P(chi^2 > 16.27) = 0.001 under uniformity.
  assert chi_square < 16.27, counts
  # Not secretly greedy: the greedy action gets about 1/4, not everything.
  greedy = np.argmax(network(observation[None]).numpy()[0])
  assert counts[greedy] < 0.4 * num_draws


def test_epsilon_greedy_explores_at_the_configured_rate():
  network = make_network()
  epsilon = 0.3
  actor = ApeXDQNActor(network, OBSERVATION_SPEC, epsilon=epsilon, seed=7)
  observation = random_observations(1, seed=3)[0]
  greedy = np.argmax(network(observation[None]).numpy()[0])
  num_draws = 2000
  actions = np.array([actor.select_action(observation)
                      for _ in range(num_draws)])
  # A random action is non-greedy with probability (A - 1) / A.
  p = epsilon * (NUM_ACTIONS - 1) / NUM_ACTIONS
  sigma = np.sqrt(p * (1 - p) / num_draws)
  assert abs(np.mean(actions != greedy) - p) < 4 * sigma


def test_actor_is_deterministic_given_its_seed():
  network = make_network()
  observations = random_observations(50, seed=4)
  runs = []
  for _ in range(2):
    actor = ApeXDQNActor(network, OBSERVATION_SPEC, epsilon=0.5, seed=5)
    runs.append([int(actor.select_action(o)) for o in observations])
  assert runs[0] == runs[1]
