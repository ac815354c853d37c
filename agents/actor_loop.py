"""Acting in K environments, for every agent: an actor's loop, which plays
on until told to stop (`VectorEnvironmentLoop`), an evaluator's round, one
episode in each (`play_episodes`), per-environment exploration
(`per_environment`, `epsilon_greedy`) and a recurrent state's rows
(`begin_again`).

An actor here is any object with `num_environments`, `select_actions(
observations)` (K in, K actions out), `observe_first_at(index, timestep)`,
`observe_at(index, action, timestep)` and `update()` (the Ape-X agents'
`agents.apex.actors.ApeXActor`, A3C's worker, a restored policy).

Each iteration stacks the K current observations, asks the actor for K
actions in one batched forward pass, then steps every environment and hands
its transition to the actor, which keeps exploration, its writes to replay
and any recurrent state per environment. An environment whose episode ends is reset on its
own; the others go on. With K = 1 this is `acme.EnvironmentLoop` with the
failure handling of an actor's node (`launch.nodes.ActingNode`).

A failing environment (`resilience.EnvironmentFailure`, of which
`NonFiniteStep` is one kind) costs only its own episode: the loop asks
`on_failure(index, error)` for a replacement (or the same environment) and
starts a new episode in it; `on_failure` returns None to stop the loop.
"""

import time
from typing import Callable, List, Mapping, Optional, Sequence, Tuple, Union

import dm_env
import numpy as np
import tree
from acme.utils import counting
from acme.utils import loggers

from agents.envs import resilience

FailureHandler = Callable[[int, Exception], Optional[dm_env.Environment]]


def per_environment(value: Union[float, Sequence[float]],
                    name: str) -> np.ndarray:
  """A float, or one float per environment, as a 1-D float array."""
  values = np.atleast_1d(np.asarray(value, np.float64))
  if values.ndim != 1 or not len(values):
    raise ValueError(f'{name} must be a float or a non-empty sequence of '
                     f'floats, one per environment; got {value!r}.')
  return values


def epsilon_greedy(rng: np.random.Generator, values: np.ndarray,
                   epsilons: np.ndarray) -> np.ndarray:
  """Row i's action: with probability `epsilons[i]` a uniformly random one,
  else the argmax of `values[i]` (a batch of Q-values or logits)."""
  count, num_actions = values.shape
  explore = rng.random(count) < epsilons[:count]
  return np.where(explore, rng.integers(num_actions, size=count),
                  np.argmax(values, axis=-1)).astype(np.int32)


def begin_again(state, first, index: int):
  """Row `index` of `state`, a recurrent state of K environments (a nest of
  arrays with a leading axis of K), becomes `first`'s only row (the state
  of one environment at an episode's start), in place: environment
  `index`'s episode begins."""
  for rows, row in zip(tree.flatten(state), tree.flatten(first)):
    rows[index] = row[0]


class VectorEnvironmentLoop:
  """Runs one actor (the module docstring) over K environments until told
  to stop.

  Counts (`steps`, `episodes`) go to `counter` at the end of every episode,
  as `acme.EnvironmentLoop` does, and when the loop stops: the steps of the
  episodes still open then were taken (their transitions are in replay), so
  they are counted, without an episode; if the loop runs again, those
  episodes go on and count only their steps since. Every `log_every` seconds (once an episode
  has finished) the logger gets a row: the most recently finished episode's
  return and length, the counts, and `steps_per_second`, this actor's
  environment steps per second over all its environments since the previous
  row.
  """

  def __init__(self,
               environments: Sequence[dm_env.Environment],
               actor,
               counter: Optional[counting.Counter] = None,
               logger: Optional[loggers.Logger] = None,
               log_every: float = 0.0,
               on_failure: Optional[FailureHandler] = None,
               should_update: bool = True):
    if len(environments) != actor.num_environments:
      raise ValueError(f'{len(environments)} environments for an actor of '
                       f'{actor.num_environments}.')
    self._environments = list(environments)
    self._actor = actor
    self._counter = counter or counting.Counter()
    self._logger = logger or loggers.NoOpLogger()
    self._log_every = log_every
    self._on_failure = on_failure
    self._should_update = should_update
    count = len(self._environments)
    self._timesteps: List[Optional[dm_env.TimeStep]] = [None] * count
    self._returns = [0.0] * count
    self._lengths = [0] * count
    self._counted = [0] * count  # Steps of the open episode counted so far.
    self._steps_since_log = 0
    self._log_time = None
    self._counts = {}
    self._last_episode = None

  @property
  def environments(self) -> List[dm_env.Environment]:
    return list(self._environments)

  def _uncounted(self, index: int) -> int:
    """The steps of environment `index`'s open episode not yet counted."""
    steps = self._lengths[index] - self._counted[index]
    self._counted[index] = self._lengths[index]
    return steps

  def _fail(self, index: int, error: Exception) -> bool:
    """Counts the abandoned episode's steps; False: stop the loop."""
    self._counter.increment(steps=self._uncounted(index))
    if self._on_failure is None:
      raise error
    replacement = self._on_failure(index, error)
    if replacement is None:
      return False
    self._environments[index] = replacement
    self._timesteps[index] = None
    return True

  def _reset(self, index: int) -> bool:
    """Starts a new episode in environment `index`; False: stop the loop."""
    while True:  # Until a reset succeeds or `on_failure` gives up.
      try:
        timestep = self._environments[index].reset()
        break
      except resilience.EnvironmentFailure as error:
        self._lengths[index] = self._counted[index] = 0
        if not self._fail(index, error):
          return False
    self._timesteps[index] = timestep
    self._returns[index], self._lengths[index] = 0.0, 0
    self._counted[index] = 0
    self._actor.observe_first_at(index, timestep)
    return True

  def _end_episode(self, index: int):
    self._counts = self._counter.increment(episodes=1,
                                           steps=self._uncounted(index))
    self._last_episode = (self._lengths[index], self._returns[index])

  def _maybe_log(self):
    now = time.time()
    elapsed = now - self._log_time
    if elapsed >= self._log_every and elapsed > 0 and self._last_episode:
      length, episode_return = self._last_episode
      self._logger.write({
          'episode_length': length,
          'episode_return': episode_return,
          'steps_per_second': self._steps_since_log / elapsed,
          **self._counts,
      })
      self._log_time, self._steps_since_log = now, 0

  def run(self, should_stop: Callable[[], bool] = lambda: False):
    """Acts until `should_stop()` or until `on_failure` gives up; then
    counts the open episodes' steps."""
    self._run(should_stop)
    open_steps = sum(self._uncounted(index)
                     for index in range(len(self._environments)))
    if open_steps:
      self._counts = self._counter.increment(steps=open_steps)

  def _run(self, should_stop: Callable[[], bool]):
    self._log_time = time.time()
    for index in range(len(self._environments)):
      if self._timesteps[index] is None and not self._reset(index):
        return
    while not should_stop():
      observations = np.stack([t.observation for t in self._timesteps])
      actions = self._actor.select_actions(observations)
      for index, environment in enumerate(self._environments):
        try:
          timestep = environment.step(actions[index])
        except resilience.EnvironmentFailure as error:
          if not (self._fail(index, error) and self._reset(index)):
            return
          continue
        self._actor.observe_at(index, actions[index], timestep)
        self._returns[index] += float(timestep.reward)
        self._lengths[index] += 1
        self._steps_since_log += 1
        if timestep.last():
          self._end_episode(index)
          if not self._reset(index):
            return
        else:
          self._timesteps[index] = timestep
      self._maybe_log()
      if self._should_update:
        self._actor.update()


def play_episodes(environments: Sequence[dm_env.Environment],
                  actor,
                  counter: Optional[counting.Counter] = None,
                  logger: Optional[loggers.Logger] = None,
                  on_failure: Optional[FailureHandler] = None,
                  should_stop: Callable[[], bool] = lambda: False,
                  log_fields: Optional[Mapping[str, float]] = None
                  ) -> List[Tuple[float, int]]:
  """One episode in each of K environments, played side by side.

  Every step, one batched `actor.select_actions` chooses the actions of all
  K environments (an environment whose episode has ended passes its last
  observation, and its action is not used), and each environment still
  playing takes its own. The actor's parameters are not pulled meanwhile:
  every episode plays the same policy. This is an evaluator's round: K
  episodes at about the cost per step of one, as for an actor's K
  environments.

  Each finished episode is counted (`episodes`, `steps`) and logged as it
  ends, as `acme.EnvironmentLoop` does: its return and length, the counts,
  and `steps_per_second`, the round's environment steps per second so far,
  with `log_fields` (what names the round) in every row.
  An environment that fails (`resilience.EnvironmentFailure`) loses its
  episode, which is neither counted nor logged. `on_failure(index, error)`
  returns None to end the round, anything else to go on with the other
  environments; the caller keeps whatever replaces the failed one for later
  rounds (without a handler, the error is raised). Returns the finished
  episodes' (return, length), in the order in which they ended.
  """
  counter = counter or counting.Counter()
  logger = logger or loggers.NoOpLogger()
  count = len(environments)
  timesteps: List[Optional[dm_env.TimeStep]] = [None] * count
  playing = [False] * count
  returns, lengths = [0.0] * count, [0] * count
  finished: List[Tuple[float, int]] = []
  start, steps = time.time(), 0

  def fail(index: int, error: Exception) -> bool:
    """Drops environment `index`'s episode; False: end the round."""
    playing[index] = False
    if on_failure is None:
      raise error
    return on_failure(index, error) is not None

  if should_stop():
    return finished
  for index, environment in enumerate(environments):
    try:
      timesteps[index] = environment.reset()
    except resilience.EnvironmentFailure as error:
      if not fail(index, error):
        return finished
      continue
    playing[index] = True
    actor.observe_first_at(index, timesteps[index])
  while any(playing) and not should_stop():
    observations = np.stack([
        timestep.observation if timestep is not None else
        _any_observation(timesteps) for timestep in timesteps])
    actions = actor.select_actions(observations)
    for index, environment in enumerate(environments):
      if not playing[index]:
        continue
      try:
        timestep = environment.step(actions[index])
      except resilience.EnvironmentFailure as error:
        if not fail(index, error):
          return finished
        continue
      actor.observe_at(index, actions[index], timestep)
      timesteps[index] = timestep
      returns[index] += float(timestep.reward or 0.0)
      lengths[index] += 1
      steps += 1
      if timestep.last():
        playing[index] = False
        finished.append((returns[index], lengths[index]))
        counts = counter.increment(episodes=1, steps=lengths[index])
        logger.write({
            'episode_length': lengths[index],
            'episode_return': returns[index],
            'steps_per_second': steps / max(time.time() - start, 1e-9),
            **counts,
            **(log_fields or {}),
        })
  return finished


def _any_observation(timesteps) -> np.ndarray:
  """An observation to fill the row of an environment that has none (its
  reset failed): any other environment's."""
  return next(t.observation for t in timesteps if t is not None)
