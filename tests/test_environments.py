"""Environment adapters, environment-name resolution and config validation."""

import dataclasses
import re

import dm_env
import gymnasium
import numpy as np
import pytest
from gymnasium import wrappers

from agents.envs import atari
from agents.envs import environments
from agents.envs import suites
from agents.apex_dqn.config import ApeXDQNConfig
from agents.envs.environments import GymnasiumToDmEnv
from agents.envs.environments import UnknownEnvironmentError
from agents.envs.environments import resolve_discrete
from launch.options import RunOptions

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


@pytest.mark.parametrize('protocol, sticky, noop_max', [
    (None, 0.25, 0),  # The default: sticky actions (Machado et al. 2018).
    ('sticky', 0.25, 0),
    ('noops', 0.0, 30),  # The Ape-X paper's: random no-op starts.
])
def test_atari_evaluation_environment_settings(pong, protocol, sticky,
                                               noop_max):
  chosen = {} if protocol is None else {'atari_evaluation': protocol}
  env = pong.make_environment(seed=1, evaluation=True, **chosen)
  assert env.frames_per_step == 4
  preprocessing = _find_wrapper(env, wrappers.AtariPreprocessing)
  assert preprocessing.noop_max == noop_max
  ale = env._environment.unwrapped.ale  # pylint: disable=protected-access
  assert ale.getFloat('repeat_action_probability') == pytest.approx(sticky)
  # Longer than training episodes: 30 minutes of play at 60 frames a second.
  assert ale.getInt('max_num_frames_per_episode') == 30 * 60 * 60
  timestep = env.reset()
  assert timestep.first()
  pong.spec.observations.validate(timestep.observation)
  for _ in range(3):
    timestep = env.step(np.int32(0))
    assert timestep.mid()
    pong.spec.observations.validate(timestep.observation)
  env.close()


@pytest.mark.parametrize('training, sticky', [
    (None, 0.0),  # The default: the deterministic emulator, as Ape-X's.
    ('deterministic', 0.0),
    ('sticky', 0.25),  # Machado et al. (2018) for training too.
])
def test_atari_training_environment_settings(pong, training, sticky):
  chosen = {} if training is None else {'atari_training': training}
  env = pong.make_environment(seed=1, **chosen)
  ale = env._environment.unwrapped.ale  # pylint: disable=protected-access
  assert ale.getFloat('repeat_action_probability') == pytest.approx(sticky)
  assert ale.getInt('max_num_frames_per_episode') == 50_000
  assert _find_wrapper(env, wrappers.AtariPreprocessing).noop_max == 0
  env.close()
  # An evaluation environment plays its own protocol, whatever training's.
  env = pong.make_environment(seed=1, evaluation=True,
                              atari_evaluation='noops', **chosen)
  ale = env._environment.unwrapped.ale  # pylint: disable=protected-access
  assert ale.getFloat('repeat_action_probability') == 0.0
  env.close()


def _episode_starts(env, episodes: int = 3, steps: int = 150):
  """The observations of the first `steps` steps of each of `episodes`
  episodes played with one fixed sequence of actions (up and down in turn,
  as a deterministic policy would), as bytes."""
  starts = []
  for _ in range(episodes):
    timestep = env.reset()
    frames = [timestep.observation.tobytes()]
    for step in range(steps):
      timestep = env.step(np.int32(2 + (step // 5) % 2))  # UP, then DOWN.
      frames.append(timestep.observation.tobytes())
    starts.append(b''.join(frames))
  env.close()
  return starts


def test_one_policy_plays_different_evaluation_episodes(pong):
  # The training emulator is deterministic: one action sequence replays one
  # episode, as a greedy policy would at every evaluation episode. Each
  # evaluation protocol makes the episodes differ.
  training = _episode_starts(pong.make_environment(seed=3))
  assert len(set(training)) == 1
  sticky_training = _episode_starts(pong.make_environment(
      seed=3, atari_training='sticky'))
  assert len(set(sticky_training)) == len(sticky_training)
  for protocol in atari.ATARI_EVALUATIONS:
    evaluation = _episode_starts(pong.make_environment(
        seed=3, evaluation=True, atari_evaluation=protocol))
    assert len(set(evaluation)) == len(evaluation), protocol


def _bare_pong() -> gymnasium.Env:
  """Pong on the deterministic emulator, frame by frame, nothing around it."""
  return gymnasium.make('ALE/Pong-v5', frameskip=1,
                        repeat_action_probability=0.0)


def _ram_after_noops(bare: gymnasium.Env, count: int) -> np.ndarray:
  """The memory of `bare` (`_bare_pong`) `count` NOOP frames after its
  reset."""
  bare.reset(seed=0)
  for _ in range(count):
    bare.step(0)
  return bare.unwrapped.ale.getRAM()


@pytest.mark.parametrize('made_as', [
    {'evaluation': True, 'atari_evaluation': 'noops'},  # The paper's.
    {'atari_noop_starts': 30},  # An actor's, with --atari_noop_starts=30.
    {'atari_noop_starts': 30, 'atari_training': 'sticky'},
])
def test_noops_played_is_the_no_op_start_that_made_the_episode(pong, made_as):
  # Each count, played as that many NOOP frames on a bare deterministic
  # emulator from its reset, gives the emulator's memory the episode began
  # with (sticky actions repeat the reset's NOOP).
  env = pong.make_environment(seed=5, **made_as)
  bare = _bare_pong()
  counts = []
  for _ in range(6):
    env.reset()
    count = atari.noops_played(env)
    counts.append(count)
    ram = env._environment.unwrapped.ale.getRAM()  # pylint: disable=protected-access
    assert (_ram_after_noops(bare, count) == ram).all(), count
    bare.step(0)  # Not one frame more: the next count's memory differs.
    assert (bare.unwrapped.ale.getRAM() != ram).any(), count
  assert all(1 <= count <= atari.ATARI_EVAL_NOOP_MAX
             for count in counts)
  assert len(set(counts)) > 1  # Drawn afresh for each episode.
  env.close()
  bare.close()
  # Other protocols and kinds play no no-op start.
  sticky = pong.make_environment(seed=5, evaluation=True)
  sticky.reset()
  assert atari.noops_played(sticky) is None
  sticky.close()
  training = pong.make_environment(seed=5)
  training.reset()
  assert atari.noops_played(training) is None
  training.close()


@pytest.mark.parametrize('count', [0, 3, 6])
@pytest.mark.parametrize('protocol', ['sticky', 'noops'])
def test_a_fixed_no_op_start_replaces_the_protocols(count, protocol):
  # As `make_atari(noops=...)` starts every episode, a bare deterministic
  # emulator after `count` NOOP frames; the protocol's sticky actions stay.
  env = atari.make_atari('Pong', seed=2, evaluation=True,
                                atari_evaluation=protocol, noops=count)
  bare = _bare_pong()
  expected = _ram_after_noops(bare, count)
  ale = env._environment.unwrapped.ale  # pylint: disable=protected-access
  for _ in range(3):
    env.reset()
    assert atari.noops_played(env) == count
    assert (ale.getRAM() == expected).all()
    env.step(np.int32(2))
  assert ale.getFloat('repeat_action_probability') == pytest.approx(
      atari.ATARI_EVALUATIONS[protocol].repeat_action_probability)
  env.close()
  bare.close()


def test_non_atari_environments_take_no_atari_evaluation():
  # The option names an Atari protocol; other kinds have none to apply.
  spec = resolve_discrete('gym:CartPole-v1')
  env = spec.make_environment(seed=0, evaluation=True,
                              atari_evaluation='noops')
  assert env.reset().first()
  env.close()
  with pytest.raises(ValueError, match='gym:CartPole-v1 is not an Atari game'):
    spec.make_environment(seed=0, evaluation=True, noops=3)


def test_a_suites_run_options_are_named_after_it_and_checked():
  steps = suites.RunOption('toy_steps', int, 10, 'Steps.',
                           check=lambda value: value >= 1, must='>= 1')
  mode = suites.RunOption('toy_mode', str, 'a', 'Mode.', choices=('a', 'b'))
  toy = suites.Suite(name='toy', resolve=None, forms={'discrete': 'toy:<n>'},
                     options=(steps, mode, 'noops'))
  assert toy.option_names == ('toy_steps', 'toy_mode', 'noops')
  assert toy.run_options == (steps, mode)
  assert toy.take_options({'toy_mode': 'b', 'noops': 2, 'seed': 1}) == {
      'toy_mode': 'b', 'noops': 2}
  steps.validate(1)
  with pytest.raises(ValueError, match=re.escape(
      '--toy_steps=0 is out of range: it must be >= 1.')):
    steps.validate(0)
  with pytest.raises(ValueError, match=re.escape(
      '--toy_mode=c is out of range: it must be a or b.')):
    mode.validate('c')
  with pytest.raises(ValueError, match=re.escape(
      "Suite 'toy': its run option 'steps' must be named toy_<...>.")):
    suites.Suite(name='toy', resolve=None, forms={'discrete': 'toy:<n>'},
                 options=(dataclasses.replace(steps, name='steps'),))
  with pytest.raises(ValueError, match='a check needs `must`'):
    suites.RunOption('toy_steps', int, 10, 'Steps.', check=bool)
  # The run's options as its environments get them: Atari's own, given or
  # at their defaults.
  given = RunOptions(suite_options={'atari_training': 'sticky'})
  given.validate()
  taken = atari.SUITE.take_options(given.environment_options())
  assert taken == {'atari_evaluation': 'sticky', 'atari_training': 'sticky',
                   'atari_noop_starts': 0}
  with pytest.raises(ValueError, match=re.escape(
      '--atari_noop_starts=-2 is out of range: it must be >= 0 (0: none).')):
    RunOptions(suite_options={'atari_noop_starts': -2}).validate()
  # An option that no registered suite declares.
  with pytest.raises(ValueError, match=re.escape(
      '--toy_steps: no environment suite has such a run option')):
    RunOptions(suite_options={'toy_steps': 3}).validate()


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


# Each game's actions besides no-op, by its rules (Young & Tian 2019, §3):
# Breakout's paddle and Freeway's chicken move two ways, Asterix's player
# four, Space Invaders' cannon moves and fires, Seaquest's submarine does
# all of it. MinAtar's full set is those 6: no-op, left, up, right, down,
# fire.
MINATAR_MINIMAL_ACTIONS = {'asterix': 5, 'breakout': 3, 'freeway': 3,
                           'seaquest': 6, 'space_invaders': 4}


@pytest.mark.parametrize('game', sorted(MINATAR_MINIMAL_ACTIONS))
def test_minatar_plays_its_minimal_action_set_or_all_six(game):
  minimal = resolve_discrete(f'minatar:{game}')
  full = resolve_discrete(f'minatar:{game}:full')
  assert minimal.spec.actions.num_values == MINATAR_MINIMAL_ACTIONS[game]
  assert full.spec.actions.num_values == 6
  assert full.spec.observations == minimal.spec.observations
  assert full.name == f'minatar:{game}:full'
  env = full.make_environment(seed=0)
  timestep = env.reset()
  for action in range(6):  # Every one of the six is a move of the game.
    if timestep.last():
      timestep = env.reset()
    timestep = env.step(np.int32(action))
    full.spec.observations.validate(timestep.observation)
  env.close()


def test_minatar_refuses_another_action_set():
  with pytest.raises(UnknownEnvironmentError,
                     match="'all' is not an action set of MinAtar"):
    resolve_discrete('minatar:breakout:all')


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


# Every range `ApeXDQNConfig.validate` enforces, by flag: values at or next
# to its edges that it accepts, and values just outside that it refuses
# (the other fields at their defaults).
ABOVE_1 = float(np.nextafter(1.0, 2.0))
BELOW_0 = float(np.nextafter(0.0, -1.0))
ABOVE_0 = float(np.nextafter(0.0, 1.0))
RANGE_EDGES = {
    # flag: (accepted, refused)
    'n_step': ([1], [0]),
    # Capacity, batch and the size before learning are bound together:
    # batch_size <= min_replay_size <= replay_capacity (a batch larger than
    # the default 50,000, or a capacity below it, is refused naming
    # --min_replay_size).
    'replay_capacity': ([50_000], [0]),
    'batch_size': ([1, 50_000], [0, 2_000_001]),
    'min_replay_size': ([512, 2_000_000], [511, 2_000_001]),
    'replay_shards': ([1], [0]),
    'actor_flush_size': ([1], [0]),
    'variable_update_period': ([1], [0]),
    'prefetch_size': ([1], [0]),
    'discount': ([0.0, 1.0], [BELOW_0, ABOVE_1]),
    'importance_sampling_exponent': ([0.0, 1.0], [BELOW_0, ABOVE_1]),
    'priority_exponent': ([0.0], [BELOW_0]),
    'eviction_priority_exponent': ([-ABOVE_0], [0.0]),
    'samples_per_insert': ([None, ABOVE_0], [0.0]),
    'replay_remover': (['fifo', 'min_heap', 'inverse_priority'],
                       ['lifo', 'prioritized']),
    'initial_priority': (['actor', 'max'], ['min']),
    'learner_precision': (['auto', 'float32', 'bfloat16'], ['bf16', 'half']),
    'learning_rate': ([ABOVE_0], [0.0]),
    'max_gradient_norm': ([ABOVE_0], [0.0]),
    'target_update_period': ([1], [0]),
    'dueling_hidden_size': ([1], [0]),
    'epsilon_base': ([0.0, 1.0], [BELOW_0, ABOVE_1]),
    'evaluation_epsilon': ([0.0, 1.0], [BELOW_0, ABOVE_1]),
    'rmsprop_decay': ([0.0, 1.0], [BELOW_0, ABOVE_1]),
    'max_abs_reward': ([None, ABOVE_0], [0.0]),
    'mlp_hidden_sizes': (['1', '64,64'], ['0', '64,', '', 'a']),
    'rmsprop_epsilon': ([ABOVE_0], [0.0]),
    'epsilon_alpha': ([0.0, 7.0], [BELOW_0]),
}
# Fields `validate` does not check: any value passes.
UNCHECKED = ('jit_compile',)  # A bool: either value is valid.


def test_default_config_lies_inside_every_range_validate_enforces():
  default = ApeXDQNConfig()
  default.validate()
  # Every field is in the table, or knowingly unchecked: a new flag needs
  # its range here.
  fields = {field.name for field in dataclasses.fields(ApeXDQNConfig)}
  assert fields == set(RANGE_EDGES) | set(UNCHECKED)
  for flag, (accepted, refused) in RANGE_EDGES.items():
    for value in accepted:
      dataclasses.replace(default, **{flag: value}).validate()
    for value in refused:
      with pytest.raises(ValueError, match=rf'^--{flag}='):
        dataclasses.replace(default, **{flag: value}).validate()


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


# --------------------------------------------------------------------------
# resolve_continuous
# --------------------------------------------------------------------------


def _load_dm_control(domain, task, seed):
  """dm_control's own task, independently of agents.envs.environments."""
  from dm_control import suite  # pylint: disable=g-import-not-at-top
  return suite.load(domain, task, task_kwargs={'random': seed})


def _flatten(observation_dict):
  return np.concatenate([np.asarray(value).ravel()
                         for value in observation_dict.values()])


# (domain, task, observation size counted by hand from dm_control's
# observation dicts, action dimension).
CONTROL_TASKS = [
    # position (3: cart x, cos/sin pole) + velocity (2).
    ('cartpole', 'balance', 5, 1),
    # arm_pos 8x2 + arm_vel 8 + touch 5 + hand_pos 4 + object_pos 4
    # + object_vel 3 + target_pos 4.
    ('manipulator', 'bring_ball', 44, 5),
    # joint_angles 21 + head_height (scalar) 1 + extremities 12
    # + torso_vertical 3 + com_velocity 3 + velocity 27.
    ('humanoid', 'stand', 67, 21),
    ('humanoid', 'walk', 67, 21),
    ('humanoid', 'run', 67, 21),
]


@pytest.mark.parametrize('domain, task, size, action_size', CONTROL_TASKS)
def test_resolve_control_specs(domain, task, size, action_size):
  name = f'control:{domain}:{task}'
  spec = environments.resolve_continuous(name)
  assert spec.name == name
  assert spec.kind == 'control'
  assert spec.frames_per_step == 1
  assert not spec.pixels

  reference = _load_dm_control(domain, task, seed=0)
  observation = reference.reset().observation
  # The flat size is the number of values in dm_control's observation dict.
  assert sum(np.asarray(value).size for value in observation.values()) == size
  assert spec.spec.observations.shape == (size,)
  assert spec.spec.observations.dtype == np.float32

  actions = spec.spec.actions
  assert isinstance(actions, dm_env.specs.BoundedArray)
  assert actions.dtype == np.float32
  assert actions.shape == (action_size,) == reference.action_spec().shape
  np.testing.assert_array_equal(actions.minimum,
                                reference.action_spec().minimum)
  np.testing.assert_array_equal(actions.maximum,
                                reference.action_spec().maximum)
  assert spec.spec.rewards.dtype == np.float32
  assert spec.spec.discounts.dtype == np.float32
  reference.close()


@pytest.mark.parametrize('domain, task, size, action_size', CONTROL_TASKS)
def test_control_observation_is_the_concatenated_dict(domain, task, size,
                                                      action_size):
  """Stepped side by side with dm_control's own task (same seed, same
  actions), every observation is its dict's values concatenated in order."""
  spec = environments.resolve_continuous(f'control:{domain}:{task}')
  env = spec.make_environment(seed=3)
  reference = _load_dm_control(domain, task, seed=3)
  timestep, expected = env.reset(), reference.reset()
  assert timestep.first()
  assert timestep.reward is None and timestep.discount is None
  rng = np.random.default_rng(0)
  for t in range(5):
    assert timestep.observation.dtype == np.float32
    assert timestep.observation.shape == (size,)
    np.testing.assert_array_equal(
        timestep.observation, _flatten(expected.observation).astype(np.float32))
    spec.spec.observations.validate(timestep.observation)
    if t:
      assert timestep.mid()
      assert timestep.reward.dtype == np.float32
      assert timestep.reward == np.float32(expected.reward)
      assert timestep.discount == 1.0
    action = rng.uniform(-1, 1, size=action_size)
    timestep = env.step(action.astype(np.float32))
    expected = reference.step(action.astype(np.float32).astype(np.float64))
  env.close()
  reference.close()


@pytest.mark.parametrize('domain, task, repeat, action_size',
                         [('cheetah', 'run', 4, 6), ('cartpole', 'swingup', 8, 1),
                          ('walker', 'walk', 3, 6)])
def test_control_action_repeat_is_k_simulator_steps(domain, task, repeat,
                                                    action_size):
  """`:repeat=k`, beside dm_control's own task stepped k times per action:
  the same observations, the k rewards summed, 1000 / k steps an episode
  (the last agent step takes what is left), k frames a step."""
  spec = environments.resolve_continuous(
      f'control:{domain}:{task}:repeat={repeat}')
  assert spec.frames_per_step == repeat
  env = spec.make_environment(seed=5)
  reference = _load_dm_control(domain, task, seed=5)
  timestep, expected = env.reset(), reference.reset()
  rng = np.random.default_rng(1)
  steps = 0
  while not timestep.last():
    action = rng.uniform(-1, 1, size=action_size).astype(np.float32)
    timestep = env.step(action)
    steps += 1
    rewards = []
    for _ in range(repeat):
      expected = reference.step(action.astype(np.float64))
      rewards.append(expected.reward)
      if expected.last():
        break
    np.testing.assert_array_equal(
        timestep.observation, _flatten(expected.observation).astype(np.float32))
    assert timestep.reward == pytest.approx(sum(rewards), rel=1e-6)
    assert timestep.last() == expected.last()
  assert steps == -(-1000 // repeat)
  assert env.control_timestep == pytest.approx(
      repeat * reference.control_timestep())
  env.close()
  reference.close()


@pytest.mark.parametrize('name', ['control:cartpole:balance',
                                  'control:manipulator:bring_ball'])
def test_control_episodes_are_truncated_after_1000_steps(name):
  spec = environments.resolve_continuous(name)
  env = spec.make_environment(seed=0)
  env.reset()
  action = np.zeros(spec.spec.actions.shape, np.float32)
  for t in range(1, 1001):
    timestep = env.step(action)
    if t < 1000:
      assert timestep.mid(), t
  # A time limit: the last step bootstraps (discount 1), unlike a termination.
  assert timestep.last()
  assert timestep.discount == 1.0
  assert timestep.discount.dtype == np.float32
  # The next step starts a new episode.
  timestep = env.step(action)
  assert timestep.first()
  assert timestep.reward is None and timestep.discount is None
  env.close()


def test_resolve_gym_pendulum():
  spec = environments.resolve_continuous('gym:Pendulum-v1')
  assert spec.kind == 'gym'
  assert spec.frames_per_step == 1
  assert not spec.pixels
  assert spec.spec.observations.shape == (3,)  # cos, sin, angular velocity.
  assert spec.spec.observations.dtype == np.float32
  actions = spec.spec.actions
  assert isinstance(actions, dm_env.specs.BoundedArray)
  assert actions.shape == (1,)
  assert actions.dtype == np.float32
  np.testing.assert_array_equal(actions.minimum, [-2.0])
  np.testing.assert_array_equal(actions.maximum, [2.0])


def test_pendulum_is_truncated_after_200_steps():
  spec = environments.resolve_continuous('gym:Pendulum-v1')
  env = spec.make_environment(seed=0)
  timestep = env.reset()
  spec.spec.observations.validate(timestep.observation)
  for t in range(1, 201):
    timestep = env.step(np.array([2.0], np.float32))
    if t < 200:
      assert timestep.mid(), t
    # Pendulum's reward is -(theta^2 + 0.1 thetadot^2 + 0.001 u^2) <= 0.
    assert timestep.reward <= 0.0
  assert timestep.last()
  assert timestep.discount == 1.0
  assert env.step(np.array([0.0], np.float32)).first()
  env.close()


def test_pendulum_actions_reach_gymnasium_unchanged():
  """The adapter passes a float32 action to gymnasium as it is: stepped side
  by side with gymnasium's own Pendulum, the observations agree."""
  spec = environments.resolve_continuous('gym:Pendulum-v1')
  env = spec.make_environment(seed=4)
  reference = gymnasium.make('Pendulum-v1')
  expected, _ = reference.reset(seed=4)
  np.testing.assert_array_equal(env.reset().observation, expected)
  for action in (-2.0, 1.5, 0.25):
    timestep = env.step(np.array([action], np.float32))
    expected, reward, _, _, _ = reference.step(np.array([action], np.float32))
    np.testing.assert_array_equal(timestep.observation,
                                  expected.astype(np.float32))
    assert timestep.reward == pytest.approx(reward, rel=1e-6)
  env.close()
  reference.close()


@pytest.mark.parametrize('name', ['control:cartpole:balance',
                                  'control:humanoid:run', 'gym:Pendulum-v1'])
def test_continuous_seeding(name):
  spec = environments.resolve_continuous(name)

  def first_observation(seed):
    env = spec.make_environment(seed=seed)
    observation = env.reset().observation
    env.close()
    return observation

  np.testing.assert_array_equal(first_observation(1), first_observation(1))
  assert not np.array_equal(first_observation(1), first_observation(2))


@pytest.mark.parametrize('name, why', [
    ('gym:CartPole-v1', 'continuous'),  # Discrete actions.
    ('atari:Pong', 'apex_dqn'),
    ('minatar:breakout', 'apex_dqn'),
    ('control:cartpole', 'control:<domain>:<task>'),  # No task.
    ('control:cartpole:', 'control:<domain>:<task>'),
    ('control:cartpole:balance:extra', 'control:<domain>:<task>'),
    ('control:cartpole:balance:repeat=0', 'from 1 to 100'),
    ('control:cartpole:balance:repeat=2.5', 'from 1 to 100'),
    ('control:cartpole:balance:repeat=2:x', 'control:<domain>:<task>'),
    ('control:nope:x', 'no task nope:x'),
    ('control:cartpole:nope', 'no task cartpole:nope'),
    ('gym:NoSuchEnv-v0', 'no environment registered'),
    ('cartpole', 'prefix'),  # No prefix.
    ('Pendulum-v1', 'prefix'),
    ('foo:bar', 'unknown kind'),
])
def test_bad_continuous_names_are_refused_with_accepted_forms(name, why):
  with pytest.raises(UnknownEnvironmentError) as info:
    environments.resolve_continuous(name)
  assert isinstance(info.value, ValueError)
  message = str(info.value)
  assert repr(name) in message
  assert why in message
  assert 'Accepted forms' in message
  for form in ('control:<domain>:<task>', 'gym:<id>'):
    assert form in message
  # The discrete agent's forms are not offered as valid here.
  assert 'minatar:<game>' not in message


@pytest.mark.parametrize('name, discrete', [
    ('gym:CartPole-v1', True),
    ('gym:Pendulum-v1', False),
    ('minatar:breakout', True),
    ('control:cartpole:balance', False),
])
def test_resolve_any_takes_either_action_space(name, discrete):
  # A3C's resolver: the action space decides, for gym: by probing it.
  spec = environments.resolve_any(name)
  assert spec.name == name
  actions = spec.spec.actions
  assert np.issubdtype(actions.dtype, np.integer) == discrete
  if not discrete:
    assert np.all(np.isfinite(actions.minimum))


@pytest.mark.parametrize('name, says', [
    ('nowhere:Pong', "unknown kind 'nowhere'"),
    ('Pong', 'no <kind>: prefix'),
    ('gym:NoSuchEnv-v0', 'gymnasium has no environment'),
    ('control:cartpole:fly', 'no task cartpole:fly'),
])
def test_resolve_any_refuses_with_every_accepted_form(name, says):
  with pytest.raises(UnknownEnvironmentError) as raised:
    environments.resolve_any(name)
  message = str(raised.value)
  assert says in message, message
  assert 'Accepted forms' in message and 'gym:<id>' in message
