"""Builds the distributional Ape-X DQN's parts: Ape-X DQN's builder (its
actors' epsilons, replay, reward clip, optimiser, evaluation) with a
categorical network, its learner, actor and priorities."""

import functools

from agents.apex_c51 import actor as actor_lib
from agents.apex_c51 import learning
from agents.apex_c51 import networks
from agents.apex_c51 import priorities
from agents.apex_c51.config import ApeXC51Config
from agents.apex_dqn import builder as dqn_builder


class ApeXC51Builder(dqn_builder.ApeXDQNBuilder):
  """Makes the parts of the distributional Ape-X DQN for one environment
  and config."""

  name = 'apex_c51'
  config: ApeXC51Config
  learner_class = learning.ApeXC51Learner
  actor_class = actor_lib.ApeXC51Actor

  @functools.cached_property
  def priority_fn(self):
    """The actors' KL priorities, on the atoms of the network factory's
    network."""
    network = self.network_factory(self.environment, self.config)
    return priorities.make_initial_priorities(network.atoms.numpy())

  def default_networks(self):
    return networks.make_networks
