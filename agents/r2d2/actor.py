"""The R2D2 actor: epsilon-greedy acting with a recurrent Q-network whose
state it carries per environment, writing sequences with their start
states and initial priorities (§2.3)."""

from typing import Optional

import numpy as np
import tensorflow as tf

from agents import actor_loop
from agents.apex import actors
from agents.r2d2 import networks
from agents.r2d2 import priorities


def _numpy(state):
  return tf.nest.map_structure(np.array, state)


def _row(state, index: int):
  return tf.nest.map_structure(lambda x: x[index], state)


class R2D2Actor(actors.ApeXActor):
  """Epsilon-greedy over K environments (one epsilon each), each with its
  own LSTM state, begun again at its episode's start. With adders, each
  step goes to its environment's adder with the Q-values it was chosen
  from, whether it began the episode, and the state before it (which the
  adder stores at a sequence's first step). The Ape-X actor's batching,
  parameter pulls and adders' life, with a state."""

  def __init__(self, network: networks.R2D2Network, epsilons, adders=(),
               variable_client=None, seed: Optional[int] = None):
    self._epsilons = actor_loop.per_environment(epsilons, 'epsilon')
    super().__init__(len(self._epsilons), adders, variable_client)
    self._rng = np.random.default_rng(seed)
    self._step = tf.function(network)
    self._first = _numpy(network.initial_state(1))
    self._state = _numpy(network.initial_state(len(self._epsilons)))
    self._before = self._state  # The state each last action came from.
    self._episode_steps = np.zeros(len(self._epsilons), np.int64)

  def _act(self, observations):
    self._before = self._state
    q_values, state = self._step(observations, self._state)
    self._state = _numpy(state)
    q_values = q_values.numpy()
    return (actor_loop.epsilon_greedy(self._rng, q_values, self._epsilons),
            q_values)

  def _final_values(self, observation):
    raise NotImplementedError('R2D2Actor.observe_at computes them from the '
                              "environment's state.")

  def observe_first_at(self, index: int, timestep):
    actor_loop.begin_again(self._state, self._first, index)
    self._episode_steps[index] = 0
    super().observe_first_at(index, timestep)

  def observe_at(self, index: int, action, next_timestep):
    if not self._adders:
      return
    episode_start = np.float32(self._episode_steps[index] == 0)
    self._episode_steps[index] += 1
    final_values = None
    if next_timestep.last() and next_timestep.discount > 0:
      # A truncated episode bootstraps from its final observation.
      q_values, _ = self._step(next_timestep.observation[None],
                               _numpy(tf.nest.map_structure(
                                   lambda x: x[index:index + 1],
                                   self._state)))
      final_values = {priorities.Q_VALUES: q_values.numpy()[0],
                      priorities.EPISODE_START: np.float32(0.0)}
    self._adders[index].add(
        action, next_timestep,
        {priorities.Q_VALUES: self._values[index],
         priorities.EPISODE_START: episode_start},
        networks.stored_state(_row(self._before, index), episode_start),
        final_values)
