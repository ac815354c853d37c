"""The Ape-X DQN actor: epsilon-greedy acting with actor-side priorities."""

from typing import Optional, Sequence, Union

import numpy as np
import sonnet as snt
import tensorflow as tf
from acme.tf import variable_utils

from agents import actor_loop
from agents.apex import actors
from agents.replay import adders as adders_lib


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
  """Epsilon-greedy actions from a Q-network, for one or K environments.

  `epsilon` is one float, or one per environment. The Q-values computed to
  choose each action are kept and handed to the environment's adder, which
  uses them for the transitions' initial priorities, so no observation goes
  through the network twice. Without adders (the evaluator), the actor only
  acts.
  """

  def __init__(self,
               network: snt.Module,
               observation_spec,
               epsilon: Union[float, Sequence[float]],
               adders: Sequence[adders_lib.NStepPrioritizedAdder] = (),
               variable_client: Optional[variable_utils.VariableClient] = None,
               seed: Optional[int] = None):
    self._epsilons = actor_loop.per_environment(epsilon, 'epsilon')
    super().__init__(len(self._epsilons), adders, variable_client)
    self._network = network
    self._rng = np.random.default_rng(seed)
    self._q_function = tf.function(
        network,
        input_signature=[
            tf.TensorSpec((None, *observation_spec.shape),
                          tf.as_dtype(observation_spec.dtype))
        ])

  def q_values(self, observation: np.ndarray) -> np.ndarray:
    """The network's Q-values for one observation."""
    return self._q_function(observation[None])[0].numpy()

  def _act(self, observations: np.ndarray):
    q_values = self._q_function(observations).numpy()
    return actor_loop.epsilon_greedy(self._rng, q_values, self._epsilons), q_values

  def _final_values(self, observation: np.ndarray) -> np.ndarray:
    return self.q_values(observation)
