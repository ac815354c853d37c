"""The MinAtar suite: `minatar:<game>`, a MinAtar game (Young & Tian 2019),
10x10 binary images, with sticky actions (p = 0.1, MinAtar's own) and the
game's minimal action set (MinAtar's `-v1` environments: Breakout's 3
actions, Freeway's 3, ...); `minatar:<game>:full` plays it with all 6 of
MinAtar's actions, as Young & Tian's agents did (their §4), so that
epsilon's random actions and the network's choice are among the same
actions as theirs."""

import functools
from typing import Optional

import gymnasium
import numpy as np

from agents.envs import suites
from agents.envs.environments import GymnasiumToDmEnv
from agents.envs.environments import UnknownEnvironmentError
from agents.envs.environments import describe

MINATAR_GAMES = ('asterix', 'breakout', 'freeway', 'seaquest', 'space_invaders')
# minatar:<game>:<this>: every one of MinAtar's actions (module docstring).
MINATAR_FULL_ACTION_SET = 'full'


def _register_minatar():
  from minatar import gym as minatar_gym  # pylint: disable=g-import-not-at-top
  if 'MinAtar/Breakout-v1' not in gymnasium.registry:
    minatar_gym.register_envs()


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



def resolve(env_name: str, actions: str):
  """The spec of `minatar:<game>[:full]` (`suites.Suite.resolve`)."""
  del actions  # Discrete only: the registry checks.
  game, sep, action_set = env_name.split(':', 1)[1].partition(':')
  if game not in MINATAR_GAMES:
    raise UnknownEnvironmentError(
        f'MinAtar has no game called {game!r}; games: '
        f'{", ".join(MINATAR_GAMES)}')
  if sep and action_set != MINATAR_FULL_ACTION_SET:
    raise UnknownEnvironmentError(
        f'{action_set!r} is not an action set of MinAtar: minatar:{game} '
        f'plays its minimal set, minatar:{game}:{MINATAR_FULL_ACTION_SET} '
        'all 6 actions')
  return describe(env_name, functools.partial(
      _make_minatar, game, full_action_set=bool(sep)), pixels=True)


SUITE = suites.register(suites.Suite(
    name='minatar', resolve=resolve,
    forms={'discrete': (
        'minatar:<game> (asterix, breakout, freeway, seaquest, '
        'space_invaders; its minimal action set) or minatar:<game>:full '
        '(all 6 actions)')},
    # Young & Tian 2019's convolution; A3C's, with their 128-unit layer.
    torsos={'features': 'agents.networks.torsos:MinAtarCNN',
            'dense': 'agents.networks.torsos:minatar_dense'},
    # Breakout, 50,000 transitions (`benchmarks/replay_memory.py`):
    # small observations, dominated by Reverb's per-item cost.
    replay_bytes_per_transition=1_960))
