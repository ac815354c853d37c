"""The gymnasium suite: `gym:<id>`, any registered gymnasium environment
with flat vector observations: with a discrete action space for Ape-X DQN
(e.g. `gym:CartPole-v1`), a bounded 1-D Box one for Ape-X DPG (e.g.
`gym:Pendulum-v1`), either for A3C. `gym:<module>:<id>` imports `module`
first (gymnasium's convention for environments a user's module
registers).

`gym:<id>:hide_velocity` is one of the environments of `HIDDEN_VELOCITIES`
with the velocities taken out of its observations: only positions (and
angles) are seen, so a policy must infer how fast things move from several
steps. A policy without memory cannot tell a pole falling left from one
rising right: this is a task for a recurrent agent (R2D2), and a stateless
one's (Ape-X DQN's) baseline. No frames are stacked."""

import functools
import importlib
import os
from typing import Dict, Optional, Tuple

import gymnasium
import numpy as np

from agents.envs import suites
from agents.envs.environments import GymnasiumToDmEnv
from agents.envs.environments import UnknownEnvironmentError
from agents.envs.environments import describe


# gym:<id>:<this>: the environment without its velocities.
HIDE_VELOCITY = 'hide_velocity'
# The elements of each environment's observation that `hide_velocity`
# keeps, as gymnasium documents its observations:
HIDDEN_VELOCITIES: Dict[str, Tuple[int, ...]] = {
    # [cart position, cart velocity, pole angle, pole angular velocity]
    'CartPole-v1': (0, 2),
    # [cos, sin of joint 1, cos, sin of joint 2, their angular velocities]
    'Acrobot-v1': (0, 1, 2, 3),
    # [cos, sin of the angle, angular velocity]
    'Pendulum-v1': (0, 1),
}


class HideVelocity(gymnasium.ObservationWrapper):
  """Keeps the observation's elements `kept` (its positions and angles),
  with their bounds."""

  def __init__(self, environment: gymnasium.Env, kept: Tuple[int, ...]):
    super().__init__(environment)
    self._kept = np.asarray(kept)
    space = environment.observation_space
    self.observation_space = gymnasium.spaces.Box(
        space.low[self._kept], space.high[self._kept], dtype=space.dtype)

  def observation(self, observation):
    return np.asarray(observation)[self._kept]


def _gymnasium(env_id: str, hide_velocity: bool, **kwargs) -> gymnasium.Env:
  environment = gymnasium.make(env_id, **kwargs)
  if hide_velocity:
    environment = HideVelocity(environment, HIDDEN_VELOCITIES[env_id])
  return environment


def _make_gym(env_id: str, seed: Optional[int] = None, evaluation: bool = False,
              hide_velocity: bool = False):
  del evaluation
  # 'rgb_array' where the game offers it (CartPole's own drawing, with
  # pygame): it draws only when asked (videos), not at every step.
  return GymnasiumToDmEnv(
      _gymnasium(env_id, hide_velocity, **_rgb_array_if_offered(env_id)),
      seed, observation_dtype=np.float32)


def _without_variant(name: str) -> Tuple[str, bool]:
  """(the gymnasium id of `<id>[:hide_velocity]`, whether its velocities
  are hidden)."""
  env_id, sep, variant = name.rpartition(':')
  if not sep or variant != HIDE_VELOCITY:
    return name, False
  if env_id not in HIDDEN_VELOCITIES:
    raise UnknownEnvironmentError(
        f'{env_id!r} has no {HIDE_VELOCITY} form: it is known for '
        f'{", ".join(HIDDEN_VELOCITIES)}')
  return env_id, True


def _rgb_array_if_offered(env_id: str) -> Dict[str, str]:
  """`render_mode='rgb_array'` for a gymnasium game that can draw itself.
  Its drawing (pygame's SDL) then needs no screen and no sound card."""
  os.environ.setdefault('SDL_VIDEODRIVER', 'dummy')
  os.environ.setdefault('SDL_AUDIODRIVER', 'dummy')
  module, _, name = env_id.rpartition(':')  # <module>:<id>, as make takes.
  if module:
    importlib.import_module(module)
  entry_point = gymnasium.spec(name).entry_point
  if isinstance(entry_point, str):
    module, _, name = entry_point.partition(':')
    entry_point = getattr(importlib.import_module(module), name)
  modes = getattr(entry_point, 'metadata', {}).get('render_modes', ())
  return {'render_mode': 'rgb_array'} if 'rgb_array' in modes else {}


def _registered(name: str) -> bool:
  """Whether gymnasium knows `name`; `module:EnvId` imports `module` first
  (gymnasium's convention for environments registered by a user's module)."""
  module, sep, env_id = name.rpartition(':')
  if sep:
    try:
      importlib.import_module(module)
    except ImportError:
      return False
    name = env_id
  return name in gymnasium.registry


def _observation_bounds(
    environment: gymnasium.Env) -> Tuple[np.ndarray, np.ndarray]:
  """A gym: vector environment's observation bounds, (low, high)."""
  space = environment.observation_space
  return (np.asarray(space.low, np.float32),
          np.asarray(space.high, np.float32))


def _check_observations(environment: gymnasium.Env, pixels_hint: str = ''):
  space = environment.observation_space
  if not isinstance(space, gymnasium.spaces.Box) or len(space.shape) != 1:
    raise UnknownEnvironmentError(
        f'the observation space is {space}, but gym: environments must have '
        f'flat vector (1-D Box) observations{pixels_hint}')


def _check_discrete_vector_env(environment: gymnasium.Env):
  if not isinstance(environment.action_space, gymnasium.spaces.Discrete):
    raise UnknownEnvironmentError(
        f'the action space is {environment.action_space}, but Ape-X DQN '
        'needs a discrete (gymnasium.spaces.Discrete) action space; use '
        'apex_dpg for continuous actions')
  _check_observations(environment, '; use atari:<Game> for pixels')


def _check_continuous_vector_env(environment: gymnasium.Env):
  space = environment.action_space
  if not isinstance(space, gymnasium.spaces.Box) or len(space.shape) != 1:
    raise UnknownEnvironmentError(
        f'the action space is {space}, but Ape-X DPG needs a continuous (1-D '
        'gymnasium.spaces.Box) action space; use apex_dqn for discrete '
        'actions')
  if not (np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high))):
    raise UnknownEnvironmentError(
        f'the action space {space} is unbounded, but the policy squashes its '
        'actions into finite bounds')
  _check_observations(environment)


def resolve(env_name: str, actions: str):
  """The spec of `gym:<id>` (`suites.Suite.resolve`): for 'any', the
  action space decides."""
  name, hide_velocity = _without_variant(env_name.partition(':')[2])
  if not _registered(name):
    raise UnknownEnvironmentError(
        f'gymnasium has no environment registered as {name!r}')
  probe = _gymnasium(name, hide_velocity)
  try:
    if actions == 'any':
      actions = ('continuous' if isinstance(probe.action_space,
                                            gymnasium.spaces.Box)
                 else 'discrete')
    if actions == 'discrete':
      _check_discrete_vector_env(probe)
    else:
      _check_continuous_vector_env(probe)
    bounds = _observation_bounds(probe)
  finally:
    probe.close()
  return describe(
      env_name, functools.partial(_make_gym, name, hide_velocity=hide_velocity),
      observation_bounds=bounds)


SUITE = suites.register(suites.Suite(
    name='gym', resolve=resolve,
    forms={'discrete': (
        'gym:<id> (a gymnasium environment with a discrete action space and '
        'vector observations, e.g. gym:CartPole-v1; '
        'gym:CartPole-v1:hide_velocity or gym:Acrobot-v1:hide_velocity sees '
        'positions only)'),
           'continuous': (
               'gym:<id> (a gymnasium environment with a Box action space and '
               'vector observations, e.g. gym:Pendulum-v1; '
               'gym:Pendulum-v1:hide_velocity sees its angle only)')},
    # CartPole-v1, 50,000 transitions (`benchmarks/replay_memory.py`).
    replay_bytes_per_transition=1_920))
