"""What every Ape-X actor shares: batched acting over K environments, one
adder per environment (the builder's: n-step transitions, or sequences), and
parameter pulls.

An Ape-X actor is an `acme.Actor` (one environment, driven by
`acme.EnvironmentLoop`) and also acts for K environments at once
(`select_actions`, `observe_first_at`, `observe_at`, driven by
`agents.actor_loop.VectorEnvironmentLoop`): one batched forward pass chooses
the K actions, while exploration, n-step windows and initial priorities stay
per environment.
"""

import abc
from typing import Any, Optional, Sequence, Tuple

import acme
import dm_env
import numpy as np
from acme.tf import variable_utils

from agents.replay import adders as adders_lib


class ApeXActor(acme.Actor, abc.ABC):
  """Base of the agents' actors.

  Subclasses implement `_act` (batched: K observations in, K actions and the
  values the adder needs out) and `_final_values` (the values at a last
  observation, from which no action is chosen).

  With adders (one per environment), the actor writes prioritised n-step
  transitions; without (the evaluator) it only acts. An actor whose policy
  carries a state (a recurrent one) keeps it per environment, begins it
  again in `observe_first_at`, and hands it to its adders in `observe_at`.
  """

  def __init__(self,
               num_environments: int,
               adders: Sequence[adders_lib.NStepPrioritizedAdder] = (),
               variable_client: Optional[variable_utils.VariableClient] = None):
    if adders and len(adders) != num_environments:
      raise ValueError(f'{len(adders)} adders for {num_environments} '
                       'environments: give one adder per environment.')
    self._num_environments = num_environments
    self._adders = list(adders)
    self._variable_client = variable_client
    self._values: Optional[np.ndarray] = None

  @property
  def num_environments(self) -> int:
    return self._num_environments

  @abc.abstractmethod
  def _act(self, observations: np.ndarray) -> Tuple[np.ndarray, Any]:
    """Actions for a batch of observations (row i from environment i) and
    what the adder needs of them (a leading axis of the same size)."""

  @abc.abstractmethod
  def _final_values(self, observation: np.ndarray) -> np.ndarray:
    """The values at the final observation of a truncated episode."""

  # Batched acting, for K environments.

  def select_actions(self, observations: np.ndarray) -> np.ndarray:
    """One action per environment, from one batched forward pass."""
    actions, self._values = self._act(observations)
    return actions

  def observe_first_at(self, index: int, timestep: dm_env.TimeStep):
    """Environment `index` starts an episode."""
    if self._adders:
      self._adders[index].add_first(timestep)

  def observe_at(self, index: int, action, next_timestep: dm_env.TimeStep):
    """Environment `index` took `action` (from the last `select_actions`)."""
    if not self._adders:
      return
    final_values = None
    if next_timestep.last() and next_timestep.discount > 0:
      # A truncated episode bootstraps from its final observation, which no
      # action was chosen from: its values are computed here, once.
      final_values = self._final_values(next_timestep.observation)
    self._adders[index].add(action, next_timestep, self._values[index],
                            final_values)

  # acme.Actor, for one environment (the first).

  def select_action(self, observation: np.ndarray):
    return self.select_actions(observation[None])[0]

  def observe_first(self, timestep: dm_env.TimeStep):
    self.observe_first_at(0, timestep)

  def observe(self, action, next_timestep: dm_env.TimeStep):
    self.observe_at(0, action, next_timestep)

  @property
  def parameters_version(self):
    """The version (the learner's step) of the parameters acted with; None
    before the first copy, or without a versioned source."""
    return getattr(self._variable_client, 'version', None)

  def update(self, wait: bool = False):
    """Pulls the learner's parameters every `update_period` calls; with
    `wait`, pulls them now and blocks until they are copied."""
    if self._variable_client is None:
      return
    if wait:
      self._variable_client.update_and_wait()
    else:
      self._variable_client.update()

  def wait_until_written(self):
    """Blocks until replay has confirmed every transition written so far
    (writes travel in the background; pending transitions stay pending)."""
    for adder in self._adders:
      adder.wait_until_written()

  def stop_waiting_for_replay(self):
    """From any thread: the actor's writes stop waiting for replay to take
    them (`NStepPrioritizedAdder.stop_waiting`), so that an actor asked to
    stop is not held by the rate limiter."""
    for adder in self._adders:
      adder.stop_waiting()

  def close(self):
    """Writes what the adders hold and closes their Reverb writers."""
    for adder in self._adders:
      adder.close()
