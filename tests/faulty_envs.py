"""Gymnasium environments that fail on purpose, for the fault tests.

Importing this module registers them; the programs take them as
`--env=gym:tests.faulty_envs:<Id>` (gymnasium's module:Id convention).
"""

import json
import os

import gymnasium
import numpy as np
from gymnasium.envs.classic_control import cartpole


class FaultyCartPole(cartpole.CartPoleEnv):
  """CartPole whose `step` misbehaves every so many steps of its life.

  raise_every: raise RuntimeError on every k-th step (a crashing simulator).
  nan_every: return a NaN observation on every k-th step.
  inf_reward_every: return an infinite reward on every k-th step.
  """

  def __init__(self, raise_every: int = 0, nan_every: int = 0,
               inf_reward_every: int = 0, **kwargs):
    super().__init__(**kwargs)
    self._raise_every = raise_every
    self._nan_every = nan_every
    self._inf_reward_every = inf_reward_every
    self._steps = 0

  def step(self, action):
    self._steps += 1
    if self._raise_every and self._steps % self._raise_every == 0:
      raise RuntimeError(f'simulated simulator crash at step {self._steps}')
    observation, reward, terminated, truncated, info = super().step(action)
    if self._nan_every and self._steps % self._nan_every == 0:
      observation = np.array(observation, copy=True)
      observation[self._steps % len(observation)] = np.nan
    if self._inf_reward_every and self._steps % self._inf_reward_every == 0:
      reward = np.inf
    return observation, reward, terminated, truncated, info


# The replica of an emulated Vertex AI job whose environments always crash
# (ReplicaCrashingCartPole-v0): "<pool>-<index>", as CLUSTER_SPEC's task.
CRASHING_REPLICA = 'APEX_TEST_CRASHING_REPLICA'


class ReplicaCrashingCartPole(FaultyCartPole):
  """CartPole that crashes on every step in one replica of a Vertex AI job
  (`CRASHING_REPLICA`, matched against CLUSTER_SPEC's task) and nowhere
  else: one actor of the job keeps failing, the others act."""

  def __init__(self, **kwargs):
    task = json.loads(os.environ.get('CLUSTER_SPEC', '{}')).get('task', {})
    replica = f'{task.get("type")}-{task.get("index")}'
    crashing = os.environ.get(CRASHING_REPLICA) == replica
    super().__init__(raise_every=1 if crashing else 0, **kwargs)


def _register(env_id: str, **kwargs):
  if env_id not in gymnasium.registry:
    gymnasium.register(env_id, entry_point=FaultyCartPole,
                       max_episode_steps=500, kwargs=kwargs)


_register('FaultyCartPole-v0', raise_every=1000, nan_every=97,
          inf_reward_every=131)
_register('AlwaysCrashingCartPole-v0', raise_every=1)
if 'ReplicaCrashingCartPole-v0' not in gymnasium.registry:
  gymnasium.register('ReplicaCrashingCartPole-v0',
                     entry_point=ReplicaCrashingCartPole,
                     max_episode_steps=500)
