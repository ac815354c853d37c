"""Environment factories shared by the Ape-X agents.

An environment is named by a string `<kind>:<name>`:

* `atari:<Game>`: an Atari 2600 game from ALE (gymnasium + ale-py) with the DQN
  preprocessing of Mnih et al. (2015): 84x84 grey frames, action repeat 4,
  a stack of the last 4 frames, training episodes capped at 50,000 frames
  (Ape-X §4.1) on the deterministic emulator, as Ape-X trained, or with
  sticky actions (`ATARI_TRAININGS`). Evaluation episodes are capped at 108,000
  frames (30 minutes of play: the usual cap, e.g. Hessel et al. 2018; the
  paper says only that its evaluation episodes are longer than its training
  ones, Table 2) and are made independent by one of `ATARI_EVALUATIONS`:
  sticky actions (the default; Machado et al. 2018, §5.2) or up to 30 random
  no-op starts (the paper's protocol, §4.1). A greedy policy on the
  deterministic emulator plays the same episode from the same start, so
  without either, "10 episodes" would be a few outcomes, repeated.
* `gym:<id>`: any registered gymnasium environment with a discrete action space
  and a flat vector observation, e.g. `gym:CartPole-v1`.
* `minatar:<game>`: a MinAtar game (Young & Tian 2019), 10x10 binary images,
  with sticky actions (p = 0.1, MinAtar's own) and the game's minimal action
  set (MinAtar's `-v1` environments: Breakout's 3 actions, Freeway's 3, ...);
  `minatar:<game>:full` plays it with all 6 of MinAtar's actions, as Young &
  Tian's agents did (their §4), so that epsilon's random actions and the
  network's choice are among the same actions as theirs.

For continuous actions (Ape-X DPG):

* `control:<domain>:<task>`: a DeepMind Control Suite task, e.g.
  `control:manipulator:bring_ball`; its observation dict is flattened into one
  float32 vector. Episodes end by their time limit (1,000 steps) with
  discount 1, so the n-step targets bootstrap through it.
* `gym:<id>`: a gymnasium environment with a 1-D Box action space and flat
  vector observations, e.g. `gym:Pendulum-v1`.

Every factory returns a `dm_env.Environment`; `GymnasiumToDmEnv` maps
gymnasium's `terminated` to a last step with discount 0 and `truncated` (a time
limit) to a last step with discount 1, so that n-step targets bootstrap through
time limits but not through true terminations.
"""

import dataclasses
import functools
import importlib
import os
import warnings
from typing import Any, Callable, Dict, Optional, Tuple

import dm_env
import gymnasium
import numpy as np
from acme import specs
from dm_env import specs as dm_specs

ACCEPTED_DISCRETE_FORMS = (
    'atari:<Game> (e.g. atari:Pong, atari:Breakout), '
    'gym:<id> (a gymnasium environment with a discrete action space and vector '
    'observations, e.g. gym:CartPole-v1), '
    'minatar:<game> (asterix, breakout, freeway, seaquest, space_invaders; '
    'its minimal action set) or minatar:<game>:full (all 6 actions)')
ACCEPTED_CONTINUOUS_FORMS = (
    'control:<domain>:<task> (a dm_control suite task, e.g. '
    'control:manipulator:bring_ball, control:humanoid:run), '
    'gym:<id> (a gymnasium environment with a Box action space and vector '
    'observations, e.g. gym:Pendulum-v1)')

# Ape-X App. C / Mnih et al. 2015: DQN's Atari preprocessing.
ATARI_FRAME_SKIP = 4
ATARI_FRAME_STACK = 4
ATARI_SCREEN_SIZE = 84
ATARI_MAX_EPISODE_FRAMES = 50_000  # Ape-X §4.1: training episodes, 50K frames.
ATARI_MAX_EVALUATION_EPISODE_FRAMES = 108_000  # 30 minutes (module docstring).
ATARI_EVAL_NOOP_MAX = 30  # Ape-X §4.1: 30 random no-op starts for evaluation.
# Machado et al. 2018, §5.2: at each frame, the emulator repeats the previous
# action instead of the agent's with this probability.
ATARI_STICKY_ACTION_PROBABILITY = 0.25


@dataclasses.dataclass(frozen=True)
class AtariEvaluation:
  """How evaluation episodes of an Atari game differ from one another."""
  repeat_action_probability: float
  noop_max: int
  description: str


# --atari_evaluation: the name of one of these.
ATARI_EVALUATIONS = {
    'sticky': AtariEvaluation(
        ATARI_STICKY_ACTION_PROBABILITY, 0,
        f'sticky actions (p = {ATARI_STICKY_ACTION_PROBABILITY}, Machado et '
        'al. 2018)'),
    'noops': AtariEvaluation(
        0.0, ATARI_EVAL_NOOP_MAX,
        f'up to {ATARI_EVAL_NOOP_MAX} random no-op starts on the '
        'deterministic emulator (Ape-X §4.1)'),
}
DEFAULT_ATARI_EVALUATION = 'sticky'

# --atari_training: what the actors' emulators do with an action. The Ape-X
# paper's actors played the deterministic emulator; Machado et al. (2018,
# §5.2) propose sticky actions for training as well as evaluation, so that a
# policy cannot learn to replay one action sequence, which sticky
# evaluation episodes then break.
ATARI_TRAININGS = {
    'deterministic': 0.0,
    'sticky': ATARI_STICKY_ACTION_PROBABILITY,
}
DEFAULT_ATARI_TRAINING = 'deterministic'

MINATAR_GAMES = ('asterix', 'breakout', 'freeway', 'seaquest', 'space_invaders')
# minatar:<game>:<this>: every one of MinAtar's actions (module docstring).
MINATAR_FULL_ACTION_SET = 'full'


class UnknownEnvironmentError(ValueError):
  """A user-supplied environment name that cannot be used."""


def _fail(env_name: str, why: str,
          accepted: str = ACCEPTED_DISCRETE_FORMS) -> UnknownEnvironmentError:
  return UnknownEnvironmentError(
      f'--env={env_name!r}: {why}. Accepted forms: {accepted}.')


class _Float32Adapter(dm_env.Environment):
  """Base of the adapters below: `_observation_spec` and `_action_spec` set
  by the subclass, float32 rewards and discounts, `close` passed on."""

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


class GymnasiumToDmEnv(_Float32Adapter):
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


class FlatControlEnvironment(_Float32Adapter):
  """A dm_control task with its observation dict flattened to one float32
  vector (in the order of the task's observation spec) and float32 actions,
  rewards and discounts."""

  def __init__(self, environment: dm_env.Environment):
    self._environment = environment
    self.frames_per_step = 1
    size = sum(int(np.prod(spec.shape))
               for spec in environment.observation_spec().values())
    self._observation_spec = dm_specs.Array((size,), np.float32,
                                            name='observation')
    action = environment.action_spec()
    self._action_spec = dm_specs.BoundedArray(
        action.shape, np.float32, np.asarray(action.minimum, np.float32),
        np.asarray(action.maximum, np.float32), name='action')

  def _convert(self, timestep: dm_env.TimeStep) -> dm_env.TimeStep:
    observation = np.concatenate([
        np.asarray(value, np.float32).ravel()
        for value in timestep.observation.values()])
    reward = None if timestep.first() else np.float32(timestep.reward)
    discount = None if timestep.first() else np.float32(timestep.discount)
    return timestep._replace(observation=observation, reward=reward,
                             discount=discount)

  def reset(self) -> dm_env.TimeStep:
    return self._convert(self._environment.reset())

  def step(self, action) -> dm_env.TimeStep:
    return self._convert(
        self._environment.step(np.asarray(action, np.float64)))

  @property
  def physics(self):
    """The MuJoCo physics, for rendering."""
    return self._environment.physics

  @property
  def control_timestep(self) -> float:
    """Simulated seconds per environment step."""
    return float(self._environment.control_timestep())

  def render(self, height: int = 240, width: int = 320) -> np.ndarray:
    """The scene from the task's first camera, RGB uint8 [H, W, 3],
    rendered off-screen (MUJOCO_GL=egl by default)."""
    return self._environment.physics.render(height=height, width=width,
                                            camera_id=0)


def _import_suite():
  # Off-screen rendering (videos) through EGL; physics needs no display.
  os.environ.setdefault('MUJOCO_GL', 'egl')
  from dm_control import suite  # pylint: disable=g-import-not-at-top
  return suite


def _make_control(domain: str, task: str, seed: Optional[int] = None,
                  evaluation: bool = False):
  del evaluation
  environment = _import_suite().load(domain, task,
                                     task_kwargs={'random': seed})
  return FlatControlEnvironment(environment)


def _register_ale():
  import ale_py  # pylint: disable=g-import-not-at-top
  gymnasium.register_envs(ale_py)


def _register_minatar():
  from minatar import gym as minatar_gym  # pylint: disable=g-import-not-at-top
  if 'MinAtar/Breakout-v1' not in gymnasium.registry:
    minatar_gym.register_envs()


class _FrameCounter(gymnasium.Wrapper):
  """Counts the emulator's frames since its last reset. Under
  AtariPreprocessing, read just after a reset, that is the episode's no-op
  start (`noops_played`)."""

  def __init__(self, environment: gymnasium.Env):
    super().__init__(environment)
    self.frames_since_reset = 0

  def reset(self, **kwargs):
    self.frames_since_reset = 0
    return self.env.reset(**kwargs)

  def step(self, action):
    self.frames_since_reset += 1
    return self.env.step(action)


class _FixedNoops(gymnasium.Wrapper):
  """Begins every episode with `count` NOOP frames, as AtariPreprocessing
  begins one with a random number of them."""

  def __init__(self, environment: gymnasium.Env, count: int):
    super().__init__(environment)
    self._count = count

  def reset(self, **kwargs):
    observation, info = self.env.reset(**kwargs)
    for _ in range(self._count):
      observation, _, terminated, truncated, info = self.env.step(0)
      if terminated or truncated:
        observation, info = self.env.reset()
    return observation, info


def noops_played(environment: dm_env.Environment) -> Optional[int]:
  """How many no-ops started the episode of `environment` just reset (an
  Atari game made with a no-op start, inside any wrappers of this
  project's); None for one made without."""
  layer = environment
  while layer is not None and not isinstance(layer, _FrameCounter):
    # A gymnasium wrapper's inner environment, or a dm_env adapter's.
    layer = getattr(layer, 'env', None) or getattr(layer, '_environment',
                                                   None)
  return layer.frames_since_reset if layer is not None else None


def make_atari(game: str, seed: Optional[int] = None, evaluation: bool = False,
                atari_evaluation: str = DEFAULT_ATARI_EVALUATION,
                atari_training: str = DEFAULT_ATARI_TRAINING,
                atari_noop_starts: int = 0,
                noops: Optional[int] = None):
  """An Atari game as the programs play it: a training one begins each
  episode with 1 to `atari_noop_starts` random no-ops (0: none); `noops`,
  for analyses (results/pong_phase.py): exactly that many NOOP frames begin
  every episode, in place of either random no-op start."""
  from gymnasium import wrappers  # pylint: disable=g-import-not-at-top
  _register_ale()
  # Training: as `atari_training` says (the deterministic ALE, as Ape-X used
  # it, or sticky actions); evaluation: made independent as
  # `atari_evaluation` says (module docstring).
  protocol = ATARI_EVALUATIONS[atari_evaluation] if evaluation else None
  environment = gymnasium.make(
      f'ALE/{game}-v5',
      frameskip=1,  # AtariPreprocessing repeats actions itself.
      repeat_action_probability=(protocol.repeat_action_probability
                                 if protocol else
                                 ATARI_TRAININGS[atari_training]),
      full_action_space=False,
      max_num_frames_per_episode=(ATARI_MAX_EVALUATION_EPISODE_FRAMES
                                  if evaluation else ATARI_MAX_EPISODE_FRAMES))
  noop_max = protocol.noop_max if protocol else atari_noop_starts
  if noop_max or noops is not None:
    environment = _FrameCounter(environment)  # For `noops_played`.
  if noops is not None:
    environment, noop_max = _FixedNoops(environment, noops), 0
  environment = wrappers.AtariPreprocessing(
      environment,
      noop_max=noop_max,
      frame_skip=ATARI_FRAME_SKIP,
      screen_size=ATARI_SCREEN_SIZE,
      terminal_on_life_loss=False,
      grayscale_obs=True,
      scale_obs=False)
  environment = wrappers.FrameStackObservation(environment, ATARI_FRAME_STACK)
  return GymnasiumToDmEnv(environment, seed, observation_dtype=np.uint8,
                          channels_last=True, frames_per_step=ATARI_FRAME_SKIP)


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


def _make_minatar(game: str, seed: Optional[int] = None,
                  evaluation: bool = False, full_action_set: bool = False):
  del evaluation
  _register_minatar()
  # MinAtar registers each game as -v1 with its minimal action set and as
  # -v0 with all 6 actions; gymnasium warns that -v0 is out of date at every
  # make, so the full set is -v1 with its option turned off. 'rgb_array'
  # renders only when asked (videos), not at every step.
  environment = gymnasium.make(f'MinAtar/{_minatar_id(game)}-v1',
                               use_minimal_action_set=not full_action_set,
                               render_mode='rgb_array')
  return GymnasiumToDmEnv(environment, seed, observation_dtype=np.uint8)


def _minatar_id(game: str) -> str:
  return ''.join(part.capitalize() for part in game.split('_'))


@dataclasses.dataclass(frozen=True)
class EnvironmentSpec:
  """A validated environment name and what the agents need to know of it."""
  name: str
  kind: str
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

  def make_environment(
      self, seed: Optional[int] = None, evaluation: bool = False,
      atari_evaluation: str = DEFAULT_ATARI_EVALUATION,
      atari_training: str = DEFAULT_ATARI_TRAINING,
      atari_noop_starts: int = 0,
      noops: Optional[int] = None) -> dm_env.Environment:
    """Builds a fresh environment instance; an evaluation one of an Atari
    game is made independent as `atari_evaluation` names
    (`ATARI_EVALUATIONS`), a training one plays as `atari_training` names
    (`ATARI_TRAININGS`), from up to `atari_noop_starts` random no-ops; the
    other kinds need nothing of the kind. `noops`: an Atari game's episodes
    all begin with that many NOOP frames (`make_atari`)."""
    if self.kind == 'atari':
      return self.make(seed=seed, evaluation=evaluation,
                       atari_evaluation=atari_evaluation,
                       atari_training=atari_training,
                       atari_noop_starts=atari_noop_starts, noops=noops)
    if noops is not None:
      raise ValueError(f'{self.name} is not an Atari game: it has no no-op '
                       'start to fix.')
    return self.make(seed=seed, evaluation=evaluation)


def _registered(name: str) -> bool:
  """Whether gymnasium knows `name`; `module:EnvId` imports `module` first
  (gymnasium's convention for environments registered by a user's module)."""
  module, sep, env_id = name.rpartition(':')
  if sep:
    import importlib  # pylint: disable=g-import-not-at-top
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


def _check_discrete_vector_env(env_name: str, environment: gymnasium.Env):
  if not isinstance(environment.action_space, gymnasium.spaces.Discrete):
    raise _fail(env_name, 'the action space is '
                f'{environment.action_space}, but Ape-X DQN needs a discrete '
                '(gymnasium.spaces.Discrete) action space; use apex_dpg for '
                'continuous actions')
  space = environment.observation_space
  if not isinstance(space, gymnasium.spaces.Box) or len(space.shape) != 1:
    raise _fail(env_name, f'the observation space is {space}, but gym: '
                'environments must have flat vector (1-D Box) observations; '
                'use atari:<Game> for pixels')


def resolve_discrete(env_name: str) -> EnvironmentSpec:
  """Validates a discrete-action environment name and returns its spec.

  Builds one instance to read its specs, so that a bad name is reported here,
  before any Launchpad process starts.

  Raises:
    UnknownEnvironmentError: the name is not of an accepted form, the environment is
      unknown, or its spaces are unsuitable. The message lists accepted forms.
  """
  kind, sep, name = env_name.partition(':')
  if not sep or not name:
    raise _fail(env_name, 'the name has no <kind>: prefix')
  stacked_frames = 0
  bounds = None
  if kind == 'atari':
    _register_ale()
    if f'ALE/{name}-v5' not in gymnasium.registry:
      raise _fail(env_name, f'ALE has no game called {name!r} (names are '
                  'CamelCase, e.g. Pong, Breakout, SpaceInvaders)')
    make = functools.partial(make_atari, name)
    pixels, frames_per_step = True, ATARI_FRAME_SKIP
    stacked_frames = ATARI_FRAME_STACK
  elif kind == 'gym':
    if not _registered(name):
      raise _fail(env_name, f'gymnasium has no environment registered as '
                  f'{name!r}')
    probe = gymnasium.make(name)
    try:
      _check_discrete_vector_env(env_name, probe)
      bounds = _observation_bounds(probe)
    finally:
      probe.close()
    make = functools.partial(_make_gym, name)
    pixels, frames_per_step = False, 1
  elif kind == 'minatar':
    game, sep, actions = name.partition(':')
    if game not in MINATAR_GAMES:
      raise _fail(env_name, f'MinAtar has no game called {game!r}; games: '
                  f'{", ".join(MINATAR_GAMES)}')
    if sep and actions != MINATAR_FULL_ACTION_SET:
      raise _fail(env_name, f'{actions!r} is not an action set of MinAtar: '
                  f'minatar:{game} plays its minimal set, '
                  f'minatar:{game}:{MINATAR_FULL_ACTION_SET} all 6 actions')
    make = functools.partial(_make_minatar, game,
                             full_action_set=bool(sep))
    pixels, frames_per_step = True, 1
  else:
    raise _fail(env_name, f'unknown kind {kind!r}')
  environment = make()
  try:
    spec = specs.make_environment_spec(environment)
  finally:
    environment.close()
  return EnvironmentSpec(name=env_name, kind=kind, spec=spec,
                         frames_per_step=frames_per_step, pixels=pixels,
                         make=make, stacked_frames=stacked_frames,
                         observation_bounds=bounds)


def _check_continuous_vector_env(env_name: str, environment: gymnasium.Env):
  space = environment.action_space
  if not isinstance(space, gymnasium.spaces.Box) or len(space.shape) != 1:
    raise _fail(env_name, f'the action space is {space}, but Ape-X DPG needs '
                'a continuous (1-D gymnasium.spaces.Box) action space; use '
                'apex_dqn for discrete actions', ACCEPTED_CONTINUOUS_FORMS)
  if not (np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high))):
    raise _fail(env_name, f'the action space {space} is unbounded, but the '
                'policy squashes its actions into finite bounds',
                ACCEPTED_CONTINUOUS_FORMS)
  space = environment.observation_space
  if not isinstance(space, gymnasium.spaces.Box) or len(space.shape) != 1:
    raise _fail(env_name, f'the observation space is {space}, but gym: '
                'environments must have flat vector (1-D Box) observations',
                ACCEPTED_CONTINUOUS_FORMS)


def resolve_continuous(env_name: str) -> EnvironmentSpec:
  """Validates a continuous-action environment name and returns its spec.

  Builds one instance to read its specs, so that a bad name is reported here,
  before any Launchpad process starts.

  Raises:
    UnknownEnvironmentError: the name is not of an accepted form, the
      environment is unknown, or its spaces are unsuitable. The message lists
      the accepted forms.
  """
  fail = functools.partial(_fail, env_name,
                           accepted=ACCEPTED_CONTINUOUS_FORMS)
  kind, sep, name = env_name.partition(':')
  if not sep or not name:
    raise fail('the name has no <kind>: prefix')
  bounds = None
  if kind == 'control':
    domain, sep, task = name.partition(':')
    if not sep or not task or ':' in task:
      raise fail('control environments are named control:<domain>:<task>')
    if (domain, task) not in _import_suite().ALL_TASKS:
      raise fail(f'the dm_control suite has no task {domain}:{task}')
    make = functools.partial(_make_control, domain, task)
  elif kind == 'gym':
    if not _registered(name):
      raise fail(f'gymnasium has no environment registered as {name!r}')
    probe = gymnasium.make(name)
    try:
      _check_continuous_vector_env(env_name, probe)
      bounds = _observation_bounds(probe)
    finally:
      probe.close()
    make = functools.partial(_make_gym, name)
  elif kind in ('atari', 'minatar'):
    raise fail(f'{kind} games have discrete actions; use apex_dqn for them')
  else:
    raise fail(f'unknown kind {kind!r}')
  environment = make()
  try:
    spec = specs.make_environment_spec(environment)
  finally:
    environment.close()
  return EnvironmentSpec(name=env_name, kind=kind, spec=spec,
                         frames_per_step=1, pixels=False, make=make,
                         observation_bounds=bounds)


def resolve_any(env_name: str) -> EnvironmentSpec:
  """A discrete- or continuous-action environment's spec (A3C takes both):
  control: tasks and gym: environments with a Box action space resolve as
  `resolve_continuous`, the rest as `resolve_discrete`.

  Raises:
    UnknownEnvironmentError: as they do; an unknown kind lists every form.
  """
  kind, sep, name = env_name.partition(':')
  if kind not in ('atari', 'gym', 'minatar', 'control') or not sep:
    raise _fail(env_name, f'unknown kind {kind!r}' if sep else
                'the name has no <kind>: prefix',
                f'{ACCEPTED_DISCRETE_FORMS}; {ACCEPTED_CONTINUOUS_FORMS}')
  if kind == 'control':
    return resolve_continuous(env_name)
  if kind == 'gym' and _registered(name):
    probe = gymnasium.make(name)
    try:
      box = isinstance(probe.action_space, gymnasium.spaces.Box)
    finally:
      probe.close()
    if box:
      return resolve_continuous(env_name)
  return resolve_discrete(env_name)
