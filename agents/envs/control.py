"""The DeepMind Control suite: `control:<domain>:<task>`, e.g.
`control:manipulator:bring_ball`; its observation dict is flattened into
one float32 vector. Episodes end by their time limit (1,000 steps) with
discount 1, so the n-step targets bootstrap through it.

`control:<domain>:<task>:repeat=<k>` repeats each action for k simulator
steps and sums their rewards (an episode is then 1,000 / k agent steps),
as the standard results of the suite at a fixed budget are measured: CURL's
(Laskin et al. 2020, §5.1) repeats 8 on cartpole, 2 on finger and walker and
4 elsewhere, and counts simulator steps. The repeat is part of the
environment's name, so a run, its checkpoints, its snapshots and
`programs/evaluate.py` all play what the policy learned on; each agent step
counts k frames (`frames_per_step`)."""

import functools
import os
from typing import Optional

import dm_env
import numpy as np
from dm_env import specs as dm_specs

from agents.envs import suites
from agents.envs.environments import Float32Adapter
from agents.envs.environments import UnknownEnvironmentError
from agents.envs.environments import describe


class FlatControlEnvironment(Float32Adapter):
  """A dm_control task with its observation dict flattened to one float32
  vector (in the order of the task's observation spec) and float32 actions,
  rewards and discounts."""

  def __init__(self, environment: dm_env.Environment, action_repeat: int = 1):
    self._environment = environment
    self.frames_per_step = action_repeat
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
    """`action` for `frames_per_step` simulator steps, or until the episode
    ends: the rewards summed, the discounts multiplied (dm_control's are 1
    but at a termination), the last observation."""
    action = np.asarray(action, np.float64)
    reward, discount = 0.0, 1.0
    for _ in range(self.frames_per_step):
      timestep = self._environment.step(action)
      if timestep.first():  # Stepped after its last step: a new episode.
        return self._convert(timestep)
      reward += timestep.reward
      discount *= timestep.discount
      if timestep.last():
        break
    return self._convert(timestep._replace(reward=reward, discount=discount))

  @property
  def physics(self):
    """The MuJoCo physics, for rendering."""
    return self._environment.physics

  @property
  def control_timestep(self) -> float:
    """Simulated seconds per agent step (the action repeat's steps)."""
    return float(self._environment.control_timestep()) * self.frames_per_step

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


def _make_control(domain: str, task: str, action_repeat: int = 1,
                  seed: Optional[int] = None, evaluation: bool = False):
  del evaluation
  environment = _import_suite().load(domain, task,
                                     task_kwargs={'random': seed})
  return FlatControlEnvironment(environment, action_repeat)


# The largest action repeat taken: an episode of 1,000 simulator steps is
# then 10 agent steps, already fewer than Ape-X DPG's n-step window needs.
MAX_ACTION_REPEAT = 100
NAMED = ('control environments are named '
         'control:<domain>:<task>[:repeat=<k>]')


def _action_repeat(part: str) -> int:
  """k of a name's `repeat=<k>` part."""
  key, sep, value = part.partition('=')
  if key != 'repeat' or not sep:
    raise UnknownEnvironmentError(
        f'{NAMED}, not with {part!r} after the task')
  if not value.isdigit() or not 1 <= int(value) <= MAX_ACTION_REPEAT:
    raise UnknownEnvironmentError(
        f'the action repeat must be a whole number from 1 to '
        f'{MAX_ACTION_REPEAT}, not {value!r}')
  return int(value)


def resolve(env_name: str, actions: str):
  """The spec of `control:<domain>:<task>[:repeat=<k>]`
  (`suites.Suite.resolve`)."""
  del actions  # Continuous only: the registry checks.
  parts = env_name.split(':')[1:]
  if len(parts) not in (2, 3) or not all(parts[:2]):
    raise UnknownEnvironmentError(NAMED)
  domain, task = parts[:2]
  if (domain, task) not in _import_suite().ALL_TASKS:
    raise UnknownEnvironmentError(
        f'the dm_control suite has no task {domain}:{task}')
  action_repeat = _action_repeat(parts[2]) if len(parts) == 3 else 1
  return describe(env_name, functools.partial(_make_control, domain, task,
                                              action_repeat))


SUITE = suites.register(suites.Suite(
    name='control', resolve=resolve,
    forms={'continuous': (
        'control:<domain>:<task> (a dm_control suite task, e.g. '
        'control:manipulator:bring_ball, control:humanoid:run; '
        ':repeat=<k> after the task repeats each action k times)')},
    # Every task's reward is in [0, 1] per simulator step (Tassa et al.
    # 2018, "DeepMind Control Suite": the suite's rewards are in the unit
    # interval).
    reward_range=(0.0, 1.0),
    # Vector observations: as gym's (`benchmarks/replay_memory.py`).
    replay_bytes_per_transition=1_920))
