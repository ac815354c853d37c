"""The gymnasium suite: `gym:<id>`, any registered gymnasium environment
with flat vector observations: with a discrete action space for Ape-X DQN
(e.g. `gym:CartPole-v1`), a bounded 1-D Box one for Ape-X DPG (e.g.
`gym:Pendulum-v1`), either for A3C. `gym:<module>:<id>` imports `module`
first (gymnasium's convention for environments a user's module
registers)."""

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


def _make_gym(env_id: str, seed: Optional[int] = None, evaluation: bool = False):
  del evaluation
  # 'rgb_array' where the game offers it (CartPole's own drawing, with
  # pygame): it draws only when asked (videos), not at every step.
  return GymnasiumToDmEnv(
      gymnasium.make(env_id, **_rgb_array_if_offered(env_id)), seed,
      observation_dtype=np.float32)


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
  name = env_name.partition(':')[2]
  if not _registered(name):
    raise UnknownEnvironmentError(
        f'gymnasium has no environment registered as {name!r}')
  probe = gymnasium.make(name)
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
  return describe(env_name, functools.partial(_make_gym, name),
                  observation_bounds=bounds)


SUITE = suites.register(suites.Suite(
    name='gym', resolve=resolve,
    forms={'discrete': (
        'gym:<id> (a gymnasium environment with a discrete action space and '
        'vector observations, e.g. gym:CartPole-v1)'),
           'continuous': (
               'gym:<id> (a gymnasium environment with a Box action space and '
               'vector observations, e.g. gym:Pendulum-v1)')},
    # CartPole-v1, 50,000 transitions (`benchmarks/replay_memory.py`).
    replay_bytes_per_transition=1_920))
