"""Ape-X DQN networks: a dueling head on the torso of the environment's suite
(a Nature CNN for Atari, Young & Tian's for MinAtar, an MLP for vectors:
agents/networks/torsos.py)."""

from typing import Sequence

import sonnet as snt
import tensorflow as tf

from agents.networks import precision
from agents.networks.torsos import make_torso


class DuelingQNetwork(snt.Module):
  """Wang et al. 2016: Q(s, a) = V(s) + A(s, a) - mean_a' A(s, a')."""

  def __init__(self, torso: snt.Module, num_actions: int, hidden_size: int,
               name: str = 'dueling_q_network'):
    super().__init__(name=name)
    self._torso = torso
    self._value = snt.nets.MLP([hidden_size, 1], name='value')
    self._advantage = snt.nets.MLP([hidden_size, num_actions],
                                   name='advantage')

  def __call__(self, observation: tf.Tensor) -> tf.Tensor:
    embedding = self._torso(observation)
    value = self._value(embedding)
    advantage = self._advantage(embedding)
    return precision.to_float32(
        value + advantage - tf.reduce_mean(advantage, axis=-1, keepdims=True))


def make_q_network(suite, num_actions: int,
                   mlp_hidden_sizes: Sequence[int],
                   dueling_hidden_size: int) -> DuelingQNetwork:
  """The Q-network for the observations of `suite` (an
  `agents.envs.suites.Suite`): its torso of kind 'features' (an MLP of
  `mlp_hidden_sizes` where it names none), then the dueling head."""
  return DuelingQNetwork(make_torso(suite, 'features', mlp_hidden_sizes),
                         num_actions, dueling_hidden_size)


def make_networks(environment, config) -> DuelingQNetwork:
  """Ape-X DQN's network factory: the Q-network of `config` (an
  `ApeXDQNConfig`) for `environment` (an `EnvironmentSpec`), its variables
  not yet created."""
  from agents.config import parse_layer_sizes  # pylint: disable=g-import-not-at-top
  return make_q_network(environment.suite,
                        environment.spec.actions.num_values,
                        parse_layer_sizes(config.mlp_hidden_sizes),
                        config.dueling_hidden_size)
