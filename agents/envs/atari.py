"""The Atari suite: `atari:<Game>`, an Atari 2600 game from ALE
(gymnasium + ale-py) with the DQN preprocessing of Mnih et al. (2015).

84x84 grey frames, action repeat 4, a stack of the last 4 frames, training
episodes capped at 50,000 frames (Ape-X §4.1) on the deterministic emulator,
as Ape-X trained, or with sticky actions (`ATARI_TRAININGS`). Evaluation
episodes are capped at 108,000 frames (30 minutes of play: the usual cap,
e.g. Hessel et al. 2018; the paper says only that its evaluation episodes
are longer than its training ones, Table 2) and are made independent by one
of `ATARI_EVALUATIONS`: sticky actions (the default; Machado et al. 2018,
§5.2) or up to 30 random no-op starts (the paper's protocol, §4.1). A greedy
policy on the deterministic emulator plays the same episode from the same
start, so without either, "10 episodes" would be a few outcomes, repeated.
"""

import dataclasses
import functools
import operator
from typing import Any, Mapping, Optional

import dm_env
import gymnasium
import numpy as np

from agents.envs import suites
from agents.envs.environments import GymnasiumToDmEnv
from agents.envs.environments import UnknownEnvironmentError
from agents.envs.environments import describe

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


def _register_ale():
  import ale_py  # pylint: disable=g-import-not-at-top
  gymnasium.register_envs(ale_py)


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



def resolve(env_name: str, actions: str):
  """The spec of `atari:<Game>` (`suites.Suite.resolve`)."""
  del actions  # Discrete only: the registry checks.
  name = env_name.partition(':')[2]
  _register_ale()
  if f'ALE/{name}-v5' not in gymnasium.registry:
    raise UnknownEnvironmentError(
        f'ALE has no game called {name!r} (names are CamelCase, e.g. Pong, '
        'Breakout, SpaceInvaders)')
  return describe(env_name, functools.partial(make_atari, name),
                  pixels=True, stacked_frames=ATARI_FRAME_STACK)


# The suite's run options, each a flag of every program.
RUN_OPTIONS = (
    suites.RunOption(
        'atari_evaluation', str, DEFAULT_ATARI_EVALUATION,
        'Atari only: what makes the evaluator\'s episodes differ from one '
        'another (a greedy policy on the deterministic emulator replays one '
        'episode): sticky (sticky actions, p = 0.25, Machado et al. 2018) or '
        'noops (up to 30 random no-op starts, the Ape-X paper\'s protocol).',
        choices=tuple(ATARI_EVALUATIONS)),
    suites.RunOption(
        'atari_training', str, DEFAULT_ATARI_TRAINING,
        'Atari only: the actors\' emulators: deterministic (the Ape-X '
        'paper\'s) or sticky (sticky actions, p = 0.25, as Machado et al. '
        '2018 propose for training too: a greedy policy that learned to '
        'replay one action sequence loses to sticky evaluation episodes). A '
        'run can change it when resumed.',
        choices=tuple(ATARI_TRAININGS)),
    suites.RunOption(
        'atari_noop_starts', int, 0,
        'Atari only: each of the actors\' episodes begins with a random '
        'number of no-ops, from 1 to this; 0: none (the Ape-X paper names '
        'no-op starts for evaluation only, §4.1). The agent sees every 4th '
        'frame from the episode\'s first, so without no-ops it trains at one '
        'phase of its action repeat only, and may play badly at the others '
        '(results/pong.md). A run can change it when resumed.',
        check=functools.partial(operator.le, 0), must='>= 0 (0: none)'),
)


def evaluation_note(options: Mapping[str, Any]) -> str:
  """What made the evaluation episodes differ."""
  return ATARI_EVALUATIONS[options.get(
      'atari_evaluation', DEFAULT_ATARI_EVALUATION)].description


SUITE = suites.register(suites.Suite(
    name='atari', resolve=resolve,
    forms={'discrete': 'atari:<Game> (e.g. atari:Pong, atari:Breakout)'},
    torsos={'features': 'agents.networks.torsos:NatureCNN',
            'dense': 'agents.networks.torsos:SmallAtariCNN'},
    # DQN (Mnih et al. 2015) clips Atari rewards to [-1, 1].
    reward_clip=1.0,
    # Replay's resident-memory growth per transition: Pong, 20,000
    # transitions (`benchmarks/replay_memory.py`,
    # `benchmarks/results/replay_memory.json`, docs/replay.md). Frames are
    # stored once per step and compressed.
    replay_bytes_per_transition=2_390,
    replay_load_measured=True,
    frames_per_step=ATARI_FRAME_SKIP,
    frames_per_second=60.0,  # The ALE's emulator: 60 frames/s.
    episode_start=noops_played,
    options=(*RUN_OPTIONS, 'noops'),
    evaluation_note=evaluation_note))
