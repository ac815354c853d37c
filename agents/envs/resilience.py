"""Actors that survive their environment (Ape-X App. F, "Failure tolerance").

An actor's environment is wrapped in `GuardedEnvironment`, which turns any
exception of the simulator into `EnvironmentFailure` and a step whose
observation or reward is NaN or infinite into `NonFiniteStep`, before the
actor sees it. The actor's loop then abandons the episode: transitions whose
n steps were complete are already in its buffer and are kept; the open n-step
window is dropped with the episode, so nothing non-finite, and no transition
stitched across two episodes, reaches the replay.
"""

import collections
import math
import time
from typing import Callable, Deque

import dm_env
import numpy as np
import tree


class EnvironmentFailure(Exception):
  """The environment raised; the actor rebuilds it."""


class NonFiniteStep(EnvironmentFailure):
  """The environment returned a NaN or infinite observation or reward."""


def _finite(value) -> bool:
  if isinstance(value, np.ndarray) and value.dtype.kind in 'iub':
    return True  # Integer frames (Atari), the common case: nothing to check.
  if isinstance(value, (float, np.floating)):
    return math.isfinite(value)  # A reward.
  for leaf in tree.flatten(value):
    if leaf is None:
      continue
    leaf = np.asarray(leaf)
    # Integers (Atari frames) are always finite: no per-step conversion.
    if leaf.dtype.kind in 'fc' and not np.isfinite(leaf).all():
      return False
    if leaf.dtype.kind == 'O' and not np.isfinite(
        leaf.astype(np.float64)).all():
      return False
  return True


class GuardedEnvironment(dm_env.Environment):
  """Raises `EnvironmentFailure` / `NonFiniteStep` for a failing step.

  It hands the specs on itself rather than subclass Acme's
  `EnvironmentWrapper`: importing `acme.wrappers` imports the old `gym`
  package (its gym adapters), which this project does not install.
  """

  def __init__(self, environment: dm_env.Environment):
    self._environment = environment
    self.episode_steps = 0
    """Steps taken since the last reset (the steps an abandoned episode
    took, which the environment loop did not count)."""

  def _check(self, timestep: dm_env.TimeStep) -> dm_env.TimeStep:
    if not _finite(timestep.observation):
      raise NonFiniteStep('the observation is not finite')
    if timestep.reward is not None and not _finite(timestep.reward):
      raise NonFiniteStep(f'the reward is not finite ({timestep.reward})')
    return timestep

  def reset(self) -> dm_env.TimeStep:
    self.episode_steps = 0
    try:
      timestep = self._environment.reset()
    except Exception as error:  # pylint: disable=broad-except
      raise EnvironmentFailure(f'reset() raised {error!r}') from error
    return self._check(timestep)

  def step(self, action) -> dm_env.TimeStep:
    try:
      timestep = self._environment.step(action)
    except Exception as error:  # pylint: disable=broad-except
      raise EnvironmentFailure(f'step() raised {error!r}') from error
    timestep = self._check(timestep)
    self.episode_steps += 1
    return timestep

  def observation_spec(self):
    return self._environment.observation_spec()

  def action_spec(self):
    return self._environment.action_spec()

  def reward_spec(self):
    return self._environment.reward_spec()

  def discount_spec(self):
    return self._environment.discount_spec()

  def close(self):
    try:
      self._environment.close()
    except Exception:  # pylint: disable=broad-except
      pass  # A broken simulator may not close cleanly; it is dropped anyway.


class RetryBudget:
  """At most `max_failures` failures within any `window_seconds`; the wait
  before retrying doubles with each failure in the window (1 s, 2 s, ...)."""

  def __init__(self, max_failures: int = 5, window_seconds: float = 60.0,
               clock: Callable[[], float] = time.monotonic):
    self._max_failures = max_failures
    self._window_seconds = window_seconds
    self._clock = clock
    self._failures: Deque[float] = collections.deque()

  def record_failure(self) -> bool:
    """Records a failure; False once the budget is exhausted."""
    now = self._clock()
    self._failures.append(now)
    while self._failures and now - self._failures[0] > self._window_seconds:
      self._failures.popleft()
    return len(self._failures) < self._max_failures

  @property
  def backoff_seconds(self) -> float:
    return min(2.0 ** max(len(self._failures) - 1, 0), 30.0)

  @property
  def max_failures(self) -> int:
    return self._max_failures

  @property
  def window_seconds(self) -> float:
    return self._window_seconds
