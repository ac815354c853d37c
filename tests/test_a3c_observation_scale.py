"""--scale_observations: each bounded observation dimension mapped onto
[-1, 1] by the bounds gymnasium declares, the unbounded ones unchanged;
refused, before anything starts, where there are no bounds."""

import gymnasium
import numpy as np

from agents.a3c import builder as builder_lib
from agents.a3c import networks
from agents.a3c.config import A3CConfig
from agents.envs import environments
from tests import helpers


def test_a_gym_environment_declares_gymnasiums_observation_bounds():
  for name in ('Acrobot-v1', 'Pendulum-v1', 'CartPole-v1'):
    space = gymnasium.make(name).observation_space
    low, high = environments.resolve_any(f'gym:{name}').observation_bounds
    np.testing.assert_array_equal(low, space.low)
    np.testing.assert_array_equal(high, space.high)
  assert environments.resolve_any(
      'control:cartpole:balance').observation_bounds is None


def test_bounded_dimensions_go_onto_minus_one_to_one_the_others_unchanged():
  # CartPole's: position and angle are bounded, the two velocities are not.
  low = np.array([-4.8, -np.inf, -0.42, -np.inf], np.float32)
  high = -low
  scale = networks.BoundsScale(low, high)
  observation = np.array([[-4.8, 3.0, 0.21, -7.5],
                          [2.4, -1.0, -0.42, 0.0]], np.float32)
  expected = [[-1.0, 3.0, 0.5, -7.5],
              [0.5, -1.0, -1.0, 0.0]]
  np.testing.assert_allclose(scale(observation).numpy(), expected, rtol=1e-6)
  # Asymmetric bounds (MountainCar's position): the midpoint goes to 0.
  scale = networks.BoundsScale(np.array([-1.2, -0.07], np.float32),
                               np.array([0.6, 0.07], np.float32))
  np.testing.assert_allclose(
      scale(np.array([[-0.3, 0.07], [0.6, -0.035]], np.float32)).numpy(),
      [[0.0, 1.0], [1.0, -0.5]], atol=1e-6)


def test_the_network_sees_scaled_observations():
  environment = environments.resolve_any('gym:Acrobot-v1')
  scaled = builder_lib.A3CBuilder(
      A3CConfig(scale_observations=True), environment).make_network()
  plain = builder_lib.A3CBuilder(A3CConfig(), environment).make_network()
  for mine, theirs in zip(scaled.trainable_variables,
                          plain.trainable_variables):
    theirs.assign(mine)
  low, high = environment.observation_bounds
  # Acrobot's highest observation is every dimension at its top: the plain
  # network, given ones, answers as the scaled one does given the bounds.
  ones = np.ones((1,) + low.shape, np.float32)
  top = scaled(high[None])
  same = plain(ones)
  np.testing.assert_allclose(top.value.numpy(), same.value.numpy(),
                             rtol=1e-5)
  np.testing.assert_allclose(top.policy.logits.numpy(),
                             same.policy.logits.numpy(), rtol=1e-5)
  # And not as it does given the bounds themselves (velocities of 12.6 and
  # 28.3 are far from 1).
  assert not np.allclose(plain(high[None]).value.numpy(),
                         same.value.numpy(), rtol=1e-3)


def test_an_environment_without_bounds_is_refused_before_anything_starts():
  result = helpers.run(helpers.program_command(
      'a3c', '--env=control:cartpole:balance', '--scale_observations',
      '--print_config'), timeout=300)
  assert result.returncode != 0
  assert ('--scale_observations: control:cartpole:balance declares no '
          'bounds of its observations') in result.stdout, result.stdout[-2000:]
  assert '"scale_observations"' not in result.stdout
