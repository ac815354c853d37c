"""The task a stateless agent cannot see: `gym:<id>:hide_velocity`
(agents/envs/gym.py), checked against the real environment's own state
(what gymnasium's classic-control games keep in `unwrapped.state`)."""

import numpy as np
import pytest

from agents import registry
from agents.envs import environments


def _real_state(environment):
  return np.asarray(environment._environment.unwrapped.state)  # pylint: disable=protected-access


def test_cartpole_without_velocities_shows_the_position_and_angle_only():
  spec = environments.resolve_discrete('gym:CartPole-v1:hide_velocity')
  assert spec.spec.observations.shape == (2,)
  assert spec.spec.actions.num_values == 2
  low, high = spec.observation_bounds
  # CartPole's own bounds of the cart's position and of the pole's angle.
  np.testing.assert_allclose(high, [2.4 * 2, 12 * 2 * np.pi / 360 * 2], rtol=1e-6)
  np.testing.assert_allclose(low, -high)
  environment = spec.make_environment(seed=3)
  rng = np.random.default_rng(0)
  timestep = environment.reset()
  steps = 0
  velocities_seen = set()
  while True:
    # state: [x, x_dot, theta, theta_dot]; the observation is [x, theta].
    x, x_dot, theta, theta_dot = _real_state(environment)
    np.testing.assert_array_equal(timestep.observation,
                                  np.float32([x, theta]))
    velocities_seen.add((round(float(x_dot), 4), round(float(theta_dot), 4)))
    if timestep.last():
      break
    timestep = environment.step(int(rng.integers(2)))
    steps += 1
  assert timestep.discount == 0.0  # The pole fell: a true termination.
  assert steps >= 5 and len(velocities_seen) > 5  # The velocities changed.


def test_the_full_cartpole_still_shows_its_four_numbers():
  environment = environments.resolve_discrete(
      'gym:CartPole-v1').make_environment(seed=3)
  timestep = environment.reset()
  np.testing.assert_array_equal(timestep.observation,
                                np.float32(_real_state(environment)))


@pytest.mark.parametrize('name, state_to_observation', [
    ('gym:Acrobot-v1:hide_velocity',
     lambda s: [np.cos(s[0]), np.sin(s[0]), np.cos(s[1]), np.sin(s[1])]),
    ('gym:Pendulum-v1:hide_velocity', lambda s: [np.cos(s[0]), np.sin(s[0])]),
])
def test_other_games_without_velocities_show_their_angles(
    name, state_to_observation):
  spec = environments.resolve(name, 'any')
  environment = spec.make_environment(seed=1)
  timestep = environment.reset()
  for _ in range(3):
    np.testing.assert_allclose(
        timestep.observation,
        np.float32(state_to_observation(_real_state(environment))),
        atol=1e-6)
    action = (1 if spec.spec.actions.shape == () else
              np.zeros(spec.spec.actions.shape, np.float32))
    timestep = environment.step(action)


def test_both_agents_take_it_and_a_game_without_the_form_is_refused():
  for agent in ('apex_dqn', 'r2d2'):
    spec = registry.get(agent).resolve_environment(
        'gym:CartPole-v1:hide_velocity')
    assert spec.spec.observations.shape == (2,)
  with pytest.raises(environments.UnknownEnvironmentError,
                     match="'MountainCar-v0' has no hide_velocity form"):
    environments.resolve_discrete('gym:MountainCar-v0:hide_velocity')
  with pytest.raises(environments.UnknownEnvironmentError,
                     match='no environment registered'):
    environments.resolve_discrete('gym:CartPole-v1:hide_speed')
