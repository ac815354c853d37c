"""The DeepMind Control suite: `control:<domain>:<task>`, e.g.
`control:manipulator:bring_ball`; its observation dict is flattened into
one float32 vector. Episodes end by their time limit (1,000 steps) with
discount 1, so the n-step targets bootstrap through it."""

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



def resolve(env_name: str, actions: str):
  """The spec of `control:<domain>:<task>` (`suites.Suite.resolve`)."""
  del actions  # Continuous only: the registry checks.
  domain, sep, task = env_name.split(':', 1)[1].partition(':')
  if not sep or not task or ':' in task:
    raise UnknownEnvironmentError(
        'control environments are named control:<domain>:<task>')
  if (domain, task) not in _import_suite().ALL_TASKS:
    raise UnknownEnvironmentError(
        f'the dm_control suite has no task {domain}:{task}')
  return describe(env_name, functools.partial(_make_control, domain, task))


SUITE = suites.register(suites.Suite(
    name='control', resolve=resolve,
    forms={'continuous': (
        'control:<domain>:<task> (a dm_control suite task, e.g. '
        'control:manipulator:bring_ball, control:humanoid:run)')},
    # Vector observations: as gym's (`benchmarks/replay_memory.py`).
    replay_bytes_per_transition=1_920))
