"""The distributional Ape-X DQN's actor: Ape-X DQN's epsilon-greedy actor,
acting on the means and keeping the distributions for the priorities."""

import numpy as np
import tensorflow as tf

from agents import actor_loop
from agents.apex import distributional
from agents.apex_dqn import actor as dqn_actor


class ApeXC51Actor(dqn_actor.ApeXDQNActor):
  """Epsilon-greedy on Q(s, a) = E[Z(s, a)]; the logits [actions, atoms]
  computed to choose each action are what the adder keeps for the
  transition's initial priority (`priorities.py`), from the same forward
  pass."""

  def __init__(self, network, observation_spec, *args, **kwargs):
    super().__init__(network, observation_spec, *args, **kwargs)

    def logits_and_means(observations):
      logits = network.logits(observations)
      return logits, distributional.expected_values(logits, network.atoms)

    self._act_function = tf.function(
        logits_and_means,
        input_signature=[tf.TensorSpec((None, *observation_spec.shape),
                                       tf.as_dtype(observation_spec.dtype))])

  def _act(self, observations: np.ndarray):
    logits, q_values = self._act_function(observations)
    return (actor_loop.epsilon_greedy(self._rng, q_values.numpy(),
                                  self._epsilons), logits.numpy())

  def _final_values(self, observation: np.ndarray) -> np.ndarray:
    return self._act_function(observation[None])[0][0].numpy()
