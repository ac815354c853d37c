"""Environment adapters, environment-name resolution and config validation."""

import re

import dm_env
import gymnasium
import numpy as np
import pytest
from gymnasium import wrappers

from agents import environments
from agents.apex_dqn.config import ApeXDQNConfig
from agents.environments import GymnasiumToDmEnv
from agents.environments import UnknownEnvironmentError
from agents.environments import resolve_discrete

# --------------------------------------------------------------------------
# GymnasiumToDmEnv
# --------------------------------------------------------------------------


class ScriptedEnv(gymnasium.Env):
  """Action 1 terminates, action 2 terminates *and* truncates; otherwise the
  episode is truncated (a time limit) after `horizon` steps. Observations are
  float64 [number of resets, step, 0.5]."""

  observation_space = gymnasium.spaces.Box(-np.inf, np.inf, (3,), np.float64)
  action_space = gymnasium.spaces.Discrete(3)

  def __init__(self, horizon: int = 3):
    self.horizon = horizon
    self.t = 0
    self.resets = 0
    self.reset_seeds = []

  def _observation(self):
    return np.array([self.resets, self.t, 0.5], np.float64)

  def reset(self, *, seed=None, options=None):
    super().reset(seed=seed)
    self.reset_seeds.append(seed)
    self.resets += 1
    self.t = 0
    return self._observation(), {}

  def step(self, action):
    self.t += 1
    terminated = action in (1, 2)
    truncated = action == 2 or (self.t >= self.horizon and not terminated)
    return self._observation(), 0.25 * self.t, terminated, truncated, {}


def test_specs_and_dtypes():
  env = GymnasiumToDmEnv(ScriptedEnv(), seed=0)
  assert env.observation_spec().shape == (3,)
  assert env.observation_spec().dtype == np.float32
  assert isinstance(env.action_spec(), dm_env.specs.DiscreteArray)
  assert env.action_spec().num_values == 3
  assert env.action_spec().dtype == np.int32
  timestep = env.reset()
  assert timestep.first()
  assert timestep.observation.dtype == np.float32
  timestep = env.step(np.int32(0))
  assert timestep.mid()
  assert timestep.reward == pytest.approx(0.25)
  assert timestep.reward.dtype == np.float32
  assert timestep.discount == 1.0
  env.observation_spec().validate(timestep.observation)


def test_termination_is_last_step_with_discount_zero():
  env = GymnasiumToDmEnv(ScriptedEnv(horizon=10), seed=0)
  env.reset()
  env.step(0)
  timestep = env.step(1)
  assert timestep.last()
  assert timestep.discount == 0.0
  assert timestep.reward == pytest.approx(0.5)
  np.testing.assert_array_equal(timestep.observation, [1, 2, 0.5])


def test_truncation_is_last_step_with_discount_one():
  env = GymnasiumToDmEnv(ScriptedEnv(horizon=3), seed=0)
  env.reset()
  assert env.step(0).mid()
  assert env.step(0).mid()
  timestep = env.step(0)
  assert timestep.last()
  assert timestep.discount == 1.0
  assert timestep.reward == pytest.approx(0.75)


def test_terminated_and_truncated_together_is_a_termination():
  env = GymnasiumToDmEnv(ScriptedEnv(horizon=10), seed=0)
  env.reset()
  timestep = env.step(2)
  assert timestep.last()
  assert timestep.discount == 0.0


@pytest.mark.parametrize('ending_action', [0, 1])  # Truncation, termination.
def test_step_after_last_step_resets(ending_action):
  scripted = ScriptedEnv(horizon=2)
  env = GymnasiumToDmEnv(scripted, seed=5)
  env.reset()
  env.step(0)
  assert env.step(ending_action).last()
  assert scripted.resets == 1
  timestep = env.step(1)  # Ignored: the environment resets instead.
  assert timestep.first()
  assert timestep.reward is None and timestep.discount is None
  assert scripted.resets == 2
  assert scripted.t == 0
  np.testing.assert_array_equal(timestep.observation, [2, 0, 0.5])
  # The next episode runs normally.
  assert env.step(0).mid()
  # Only the first reset is seeded.
  assert scripted.reset_seeds == [5, None]


def test_cartpole_time_limit_truncation_has_discount_one():
  env = GymnasiumToDmEnv(
      gymnasium.make('CartPole-v1', max_episode_steps=5), seed=0)
  timestep = env.reset()
  assert timestep.first()
  for t in range(1, 6):
    timestep = env.step(t % 2)  # Alternating pushes keep the pole up.
    if t < 5:
      assert timestep.mid(), t
  assert timestep.last()
  assert timestep.discount == 1.0
  assert timestep.reward == 1.0
  assert env.step(0).first()
  env.close()


def test_cartpole_termination_has_discount_zero():
  env = GymnasiumToDmEnv(gymnasium.make('CartPole-v1'), seed=0)
  env.reset()
  for steps in range(1, 100):
    timestep = env.step(1)  # Always pushing right: the pole falls quickly.
    if timestep.last():
      break
  assert timestep.last()
  assert steps < 100
  assert timestep.discount == 0.0
  assert env.step(0).first()
  env.close()


def test_first_reset_is_seeded():
  seeded = GymnasiumToDmEnv(gymnasium.make('CartPole-v1'), seed=7)
  expected, _ = gymnasium.make('CartPole-v1').reset(seed=7)
  np.testing.assert_array_equal(seeded.reset().observation, expected)
  again = GymnasiumToDmEnv(gymnasium.make('CartPole-v1'), seed=7)
  np.testing.assert_array_equal(again.reset().observation, expected)


# --------------------------------------------------------------------------
# resolve_discrete
# --------------------------------------------------------------------------


def test_resolve_gym_cartpole():
  spec = resolve_discrete('gym:CartPole-v1')
  assert spec.kind == 'gym'
  assert spec.name == 'gym:CartPole-v1'
  assert spec.frames_per_step == 1
  assert not spec.pixels
  assert spec.spec.observations.shape == (4,)
  assert spec.spec.observations.dtype == np.float32
  assert spec.spec.actions.num_values == 2
  env = spec.make_environment(seed=0)
  timestep = env.reset()
  spec.spec.observations.validate(timestep.observation)
  timestep = env.step(np.int32(0))
  assert timestep.mid()
  env.close()


def _find_wrapper(env: GymnasiumToDmEnv, cls):
  inner = env._environment  # pylint: disable=protected-access
  while isinstance(inner, gymnasium.Wrapper):
    if isinstance(inner, cls):
      return inner
    inner = inner.env
  raise AssertionError(f'no {cls.__name__} wrapper')


@pytest.fixture(scope='module')
def pong():
  return resolve_discrete('atari:Pong')


def test_resolve_atari_pong_spec(pong):
  assert pong.kind == 'atari'
  assert pong.pixels
  assert pong.frames_per_step == 4
  assert pong.spec.observations.shape == (84, 84, 4)
  assert pong.spec.observations.dtype == np.uint8
  assert pong.spec.actions.num_values == 6


def test_atari_training_environment_steps(pong):
  env = pong.make_environment(seed=0)
  assert env.frames_per_step == 4
  assert _find_wrapper(env, wrappers.AtariPreprocessing).noop_max == 0
  timestep = env.reset()
  assert timestep.first()
  previous = timestep.observation
  pong.spec.observations.validate(previous)
  for _ in range(4):
    timestep = env.step(np.int32(1))
    assert timestep.mid()
    pong.spec.observations.validate(timestep.observation)
    assert timestep.reward.dtype == np.float32
    # Channels are the stacked frames, oldest first: the stack shifted by one.
    np.testing.assert_array_equal(timestep.observation[..., :3],
                                  previous[..., 1:])
    previous = timestep.observation
  assert previous.max() > 0  # A real screen, not zeros.
  env.close()


def test_atari_emulator_settings(pong):
  """Deterministic ALE, action repeat in the wrapper only, 50K-frame cap."""
  env = pong.make_environment(seed=0)
  ale = env._environment.unwrapped.ale  # pylint: disable=protected-access
  assert ale.getFloat('repeat_action_probability') == 0.0
  assert ale.getInt('frame_skip') == 1
  assert ale.getInt('max_num_frames_per_episode') == 50_000
  assert _find_wrapper(env, wrappers.AtariPreprocessing).frame_skip == 4
  env.close()


def test_atari_evaluation_environment_uses_noop_starts(pong):
  env = pong.make_environment(seed=1, evaluation=True)
  assert env.frames_per_step == 4
  preprocessing = _find_wrapper(env, wrappers.AtariPreprocessing)
  assert preprocessing.noop_max == environments.ATARI_EVAL_NOOP_MAX == 30
  timestep = env.reset()
  assert timestep.first()
  pong.spec.observations.validate(timestep.observation)
  for _ in range(3):
    timestep = env.step(np.int32(0))
    assert timestep.mid()
    pong.spec.observations.validate(timestep.observation)
  env.close()


def test_resolve_minatar_breakout():
  spec = resolve_discrete('minatar:breakout')
  assert spec.kind == 'minatar'
  assert spec.pixels
  assert spec.frames_per_step == 1
  assert spec.spec.observations.shape == (10, 10, 4)
  assert spec.spec.observations.dtype == np.uint8
  assert spec.spec.actions.num_values == 3
  env = spec.make_environment(seed=0)
  timestep = env.reset()
  spec.spec.observations.validate(timestep.observation)
  assert set(np.unique(timestep.observation)) <= {0, 1}
  assert timestep.observation.any()
  for _ in range(3):
    timestep = env.step(np.int32(0))
    spec.spec.observations.validate(timestep.observation)
  env.close()


def test_resolve_minatar_snake_case_name():
  spec = resolve_discrete('minatar:space_invaders')
  assert spec.spec.observations.shape[:2] == (10, 10)
  assert spec.spec.actions.num_values >= 2


@pytest.mark.parametrize('name', [
    'Pong',  # No prefix.
    'atari:NoSuchGame',
    'gym:NoSuchEnv-v0',
    'gym:Pendulum-v1',  # Continuous actions.
    'foo:bar',
    'minatar:nosuch',
    'atari:',
])
def test_bad_names_are_refused_with_accepted_forms(name):
  with pytest.raises(UnknownEnvironmentError) as info:
    resolve_discrete(name)
  assert isinstance(info.value, ValueError)
  message = str(info.value)
  assert repr(name) in message
  assert 'Accepted forms' in message
  for form in ('atari:<Game>', 'gym:<id>', 'minatar:<game>'):
    assert form in message


def test_continuous_action_error_says_why():
  with pytest.raises(UnknownEnvironmentError, match='discrete'):
    resolve_discrete('gym:Pendulum-v1')


# --------------------------------------------------------------------------
# Config validation
# --------------------------------------------------------------------------


def test_default_config_validates():
  ApeXDQNConfig().validate()


@pytest.mark.parametrize('kwargs, flag', [
    (dict(batch_size=0), 'batch_size'),
    (dict(batch_size=8, min_replay_size=100, replay_capacity=50),
     'min_replay_size'),
    (dict(discount=1.5), 'discount'),
    (dict(importance_sampling_exponent=-0.1), 'importance_sampling_exponent'),
    (dict(samples_per_insert=0), 'samples_per_insert'),
    (dict(mlp_hidden_sizes='a,b'), 'mlp_hidden_sizes'),
])
def test_invalid_config_names_its_flag(kwargs, flag):
  with pytest.raises(ValueError, match=rf'--{flag}='):
    ApeXDQNConfig(**kwargs).validate()


def test_invalid_config_message_gives_value_and_range():
  with pytest.raises(ValueError) as info:
    ApeXDQNConfig(discount=1.5).validate()
  assert re.search(r'--discount=1\.5\b', str(info.value))
  assert 'in [0, 1]' in str(info.value)
