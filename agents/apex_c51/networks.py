"""The distributional Ape-X DQN's network: Ape-X DQN's torso and dueling
streams, each stream giving logits over the atoms (Rainbow, Hessel et al.
2018, §2: the dueling network with distributional outputs).

For each action a, logits(s, a) = v(s) + adv(s, a) - mean_a' adv(s, a'),
one vector of `num_atoms` a stream; softmax over the atoms gives the return
distribution Z(s, a). Called, the network gives Q(s, a) = E[Z(s, a)], so
that acting, evaluation and snapshots treat it as Ape-X DQN's Q-network;
`logits` gives the distributions, for the loss and the priorities.
"""

import numpy as np
import sonnet as snt
import tensorflow as tf

from agents.apex import distributional
from agents.networks import precision
from agents.networks.torsos import make_torso


class DuelingCategoricalNetwork(snt.Module):
  """Z(s, .) over `atoms` for every action, on a dueling head."""

  def __init__(self, torso: snt.Module, num_actions: int, hidden_size: int,
               atoms: np.ndarray, name: str = 'dueling_categorical_network'):
    super().__init__(name=name)
    self._torso = torso
    self._num_actions = num_actions
    self.atoms = tf.constant(np.asarray(atoms, np.float32))
    self._value = snt.nets.MLP([hidden_size, len(atoms)], name='value')
    self._advantage = snt.nets.MLP([hidden_size, num_actions * len(atoms)],
                                   name='advantage')

  def logits(self, observation: tf.Tensor) -> tf.Tensor:
    """[batch, actions, atoms]: each action's return distribution."""
    embedding = self._torso(observation)
    atoms = self.atoms.shape[0]
    value = tf.reshape(self._value(embedding), [-1, 1, atoms])
    advantage = tf.reshape(self._advantage(embedding),
                           [-1, self._num_actions, atoms])
    return precision.to_float32(
        value + advantage - tf.reduce_mean(advantage, axis=1, keepdims=True))

  def __call__(self, observation: tf.Tensor) -> tf.Tensor:
    """[batch, actions]: Q(s, a) = E[Z(s, a)]."""
    return distributional.expected_values(self.logits(observation),
                                          self.atoms)


def make_networks(environment, config) -> DuelingCategoricalNetwork:
  """The network factory: the network of `config` (an `ApeXC51Config`)
  for `environment` (an `EnvironmentSpec`), its variables not yet created;
  the torso is the suite's, as Ape-X DQN's."""
  from agents.config import parse_layer_sizes  # pylint: disable=g-import-not-at-top
  return DuelingCategoricalNetwork(
      make_torso(environment.suite, 'features',
                 parse_layer_sizes(config.mlp_hidden_sizes)),
      environment.spec.actions.num_values, config.dueling_hidden_size,
      np.linspace(config.v_min, config.v_max, config.num_atoms))
