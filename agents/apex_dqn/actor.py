"""The Ape-X DQN actor: epsilon-greedy acting with actor-side priorities."""

from typing import Optional

import dm_env
import numpy as np
import sonnet as snt
import tensorflow as tf
from acme.tf import variable_utils

from agents import actors
from agents import adders as adders_lib


def apex_epsilons(num_actors: int, base: float = 0.4,
                  alpha: float = 7.0) -> np.ndarray:
  """Ape-X §4.1: actor i of N explores with eps_i = base^(1 + alpha i/(N-1)).

  A single actor gets `base`.
  """
  if num_actors < 1:
    raise ValueError(f'num_actors must be >= 1, got {num_actors}.')
  if num_actors == 1:
    return np.array([base])
  exponents = 1.0 + alpha * np.arange(num_actors) / (num_actors - 1)
  return np.power(base, exponents)


class ApeXDQNActor(actors.ApeXActor):
  """An `acme.Actor` choosing epsilon-greedy actions from a Q-network.

  The Q-values computed to choose each action are kept and handed to the
  adder, which uses them for the transitions' initial priorities, so no
  observation goes through the network twice. With no adder (the evaluator),
  the actor only acts.
  """

  def __init__(self,
               network: snt.Module,
               observation_spec,
               epsilon: float,
               adder: Optional[adders_lib.NStepPrioritizedAdder] = None,
               variable_client: Optional[variable_utils.VariableClient] = None,
               seed: Optional[int] = None):
    self._network = network
    self._epsilon = float(epsilon)
    super().__init__(adder, variable_client)
    self._rng = np.random.default_rng(seed)
    self._q_values: Optional[np.ndarray] = None
    self._q_function = tf.function(
        network,
        input_signature=[
            tf.TensorSpec((None, *observation_spec.shape),
                          tf.as_dtype(observation_spec.dtype))
        ])

  def q_values(self, observation: np.ndarray) -> np.ndarray:
    """The network's Q-values for one observation."""
    return self._q_function(observation[None])[0].numpy()

  def select_action(self, observation: np.ndarray) -> np.int32:
    self._q_values = self.q_values(observation)
    if self._rng.random() < self._epsilon:
      return np.int32(self._rng.integers(len(self._q_values)))
    return np.int32(np.argmax(self._q_values))

  def observe(self, action, next_timestep: dm_env.TimeStep):
    if self._adder is None:
      return
    final_values = None
    if next_timestep.last() and next_timestep.discount > 0:
      # A truncated episode bootstraps from its final observation, which no
      # action was chosen from: its Q-values are computed here, once.
      final_values = self.q_values(next_timestep.observation)
    self._adder.add(action, next_timestep, self._q_values, final_values)
