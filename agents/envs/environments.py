"""What every environment suite shares: the `dm_env` adapters, the
`EnvironmentSpec` an agent's builder sees, and resolving a name.

An environment is named by a string `<suite>:<rest>`; its suite
(`agents.envs.suites`) resolves the rest. The built-in suites, each a module
of this folder:

* `atari:<Game>` (`atari.py`): an ALE game with DQN's preprocessing;
* `minatar:<game>` and `minatar:<game>:full` (`minatar.py`);
* `gym:<id>` (`gym.py`): a gymnasium environment of vector observations,
  with discrete actions or a bounded Box of them;
* `control:<domain>:<task>` (`control.py`): a DeepMind Control Suite task.

Every factory returns a `dm_env.Environment`; `GymnasiumToDmEnv` maps
gymnasium's `terminated` to a last step with discount 0 and `truncated` (a time
limit) to a last step with discount 1, so that n-step targets bootstrap through
time limits but not through true terminations.
"""

import dataclasses
import warnings
from typing import Any, Callable, Optional, Tuple

import dm_env
import gymnasium
import numpy as np
from acme import specs
from dm_env import specs as dm_specs

from agents.envs import suites
from agents.envs.suites import UnknownEnvironmentError  # pylint: disable=unused-import  # What a suite raises.


class Float32Adapter(dm_env.Environment):
  """Base of the adapters to `dm_env`: `_observation_spec` and
  `_action_spec` set by the subclass, float32 rewards and discounts,
  `close` passed on."""
  _environment: Any
  _observation_spec: dm_specs.Array
  _action_spec: dm_specs.Array

  def observation_spec(self):
    return self._observation_spec

  def action_spec(self):
    return self._action_spec

  def reward_spec(self):
    return dm_specs.Array((), np.float32, name='reward')

  def discount_spec(self):
    return dm_specs.BoundedArray((), np.float32, 0.0, 1.0, name='discount')

  def close(self):
    self._environment.close()


class GymnasiumToDmEnv(Float32Adapter):
  """Adapts a gymnasium environment to the `dm_env.Environment` interface.

  `terminated` ends the episode with discount 0; `truncated` (a time limit)
  ends it with discount 1. Observations are cast to `observation_dtype`.
  """

  def __init__(self,
               environment: gymnasium.Env,
               seed: Optional[int] = None,
               observation_dtype: np.dtype = np.float32,
               channels_last: bool = False,
               frames_per_step: int = 1):
    self._environment = environment
    self._seed = seed
    self._observation_dtype = np.dtype(observation_dtype)
    self._channels_last = channels_last
    self._reset_next_step = True
    self.frames_per_step = frames_per_step
    observation = self._convert(
        np.zeros(environment.observation_space.shape,
                 environment.observation_space.dtype))
    self._observation_spec = dm_specs.Array(
        observation.shape, self._observation_dtype, name='observation')
    space = environment.action_space
    if isinstance(space, gymnasium.spaces.Discrete):
      self._action_spec = dm_specs.DiscreteArray(
          int(space.n), dtype=np.int32, name='action')
      self._to_gym_action = int
    else:
      self._action_spec = dm_specs.BoundedArray(
          space.shape, np.float32, space.low.astype(np.float32),
          space.high.astype(np.float32), name='action')
      self._to_gym_action = lambda action: np.asarray(action, space.dtype)

  def _convert(self, observation) -> np.ndarray:
    observation = np.asarray(observation)
    if self._channels_last:
      observation = np.moveaxis(observation, 0, -1)
    return np.ascontiguousarray(observation, dtype=self._observation_dtype)

  def reset(self) -> dm_env.TimeStep:
    self._reset_next_step = False
    # Seed only the first reset; later resets continue the same RNG stream.
    observation, _ = self._environment.reset(seed=self._seed)
    self._seed = None
    return dm_env.restart(self._convert(observation))

  def step(self, action) -> dm_env.TimeStep:
    if self._reset_next_step:
      return self.reset()
    observation, reward, terminated, truncated, _ = self._environment.step(
        self._to_gym_action(action))
    observation = self._convert(observation)
    reward = np.float32(reward)
    if terminated:
      self._reset_next_step = True
      return dm_env.termination(reward, observation)
    if truncated:
      self._reset_next_step = True
      return dm_env.truncation(reward, observation)
    return dm_env.transition(reward, observation)

  def render(self) -> np.ndarray:
    """The current screen, RGB uint8 [H, W, 3]: the ALE's screen for Atari
    games, the environment's own rendering where it was made with
    `render_mode='rgb_array'` (MinAtar, gymnasium's own games such as
    CartPole)."""
    unwrapped = self._environment.unwrapped
    if hasattr(unwrapped, 'ale'):
      return unwrapped.ale.getScreenRGB()
    if getattr(self._environment, 'render_mode', None) == 'rgb_array':
      with warnings.catch_warnings():  # MinAtar's float colours: see below.
        warnings.simplefilter('ignore', UserWarning)
        frame = np.asarray(self._environment.render())
      if frame.dtype != np.uint8:  # MinAtar: colours as floats in [0, 1].
        frame = np.round(np.clip(frame, 0, 1) * 255).astype(np.uint8)
      return frame
    name = getattr(self._environment.spec, 'id', 'this environment')
    raise ValueError(
        f'{name} has no RGB rendering here; videos are made of atari:*, '
        'minatar:*, control:* and gym:* games that draw themselves '
        '(render_mode rgb_array).')


@dataclasses.dataclass(frozen=True)
class EnvironmentSpec:
  """A validated environment name and what the agents need to know of it."""
  name: str
  kind: str
  """Its suite's name (`agents.envs.suites`)."""
  spec: specs.EnvironmentSpec
  frames_per_step: int
  pixels: bool
  make: Callable[..., dm_env.Environment]
  # Observations are the last N frames stacked on their last axis (Atari:
  # 4); replay stores each frame once. 0: they are not stacks of frames.
  stacked_frames: int = 0
  # gym: vector environments: their observation space's (low, high), each
  # bound possibly infinite; None where the environment declares none.
  observation_bounds: Optional[Tuple[np.ndarray, np.ndarray]] = None
  suite: Any = None
  """Its `agents.envs.suites.Suite`; by default the one registered as
  `kind`. It travels with the spec to every node's process."""

  def __post_init__(self):
    if self.suite is None:
      object.__setattr__(self, 'suite', suites.get(self.kind))

  def make_environment(self, seed: Optional[int] = None,
                       evaluation: bool = False, noops: Optional[int] = None,
                       **options) -> dm_env.Environment:
    """Builds a fresh environment instance, for evaluation or training,
    given those of the run options `options` its suite takes
    (`Suite.options`: an Atari game's `atari_evaluation`,
    `atari_training` and `atari_noop_starts`); the others are not
    passed. `noops`, for analyses (results/pong_phase.py): every episode
    begins with exactly that many NOOP frames, where the suite takes it."""
    options = self.suite.take_options(options)
    if noops is not None:
      if 'noops' not in self.suite.option_names:
        raise ValueError(f'{self.name} is not an Atari game: it has no no-op '
                         'start to fix.')
      options['noops'] = noops
    return self.make(seed=seed, evaluation=evaluation, **options)


def describe(env_name: str, make: Callable[..., dm_env.Environment],
             pixels: bool = False, stacked_frames: int = 0,
             observation_bounds=None) -> EnvironmentSpec:
  """The spec of `env_name`, whose environments `make(seed=, evaluation=,
  **options)` builds: one is built to read its specs and its
  `frames_per_step` (1 if it has none), so that a bad environment is
  reported here, before any Launchpad process starts. For a suite's
  `resolve`."""
  environment = make()
  try:
    spec = specs.make_environment_spec(environment)
    frames_per_step = int(getattr(environment, 'frames_per_step', 1))
  finally:
    environment.close()
  return EnvironmentSpec(
      name=env_name, kind=env_name.partition(':')[0], spec=spec,
      frames_per_step=frames_per_step, pixels=pixels, make=make,
      stacked_frames=stacked_frames, observation_bounds=observation_bounds)


def resolve(env_name: str, actions: str) -> EnvironmentSpec:
  """The spec of `env_name` for an agent of `actions` ('discrete',
  'continuous' or 'any'): `suites.resolve`."""
  return suites.resolve(env_name, actions)


def resolve_discrete(env_name: str) -> EnvironmentSpec:
  """Validates a discrete-action environment name and returns its spec.

  Raises:
    UnknownEnvironmentError: the name is not of an accepted form, the
      environment is unknown, or its spaces are unsuitable. The message
      lists the accepted forms.
  """
  return resolve(env_name, 'discrete')


def resolve_continuous(env_name: str) -> EnvironmentSpec:
  """Validates a continuous-action environment name and returns its spec;
  raises `UnknownEnvironmentError` as `resolve_discrete` does."""
  return resolve(env_name, 'continuous')


def resolve_any(env_name: str) -> EnvironmentSpec:
  """A discrete- or continuous-action environment's spec (A3C takes both):
  for gym: the action space decides. Raises `UnknownEnvironmentError` as
  `resolve_discrete` does, listing every form."""
  return resolve(env_name, 'any')
