"""Builds D4PG's parts: Ape-X DPG's builder (its actors, replay, policy and
evaluation) with a categorical critic, its learner and its priorities."""

import functools

from agents.apex_dpg import builder as dpg_builder
from agents.d4pg import learning
from agents.d4pg import networks
from agents.d4pg import priorities
from agents.d4pg.config import D4PGConfig


class D4PGBuilder(dpg_builder.ApeXDPGBuilder):
  """Makes the parts of D4PG for one environment and config."""

  name = 'd4pg'
  config: D4PGConfig
  learner_class = learning.D4PGLearner

  @functools.cached_property
  def priority_fn(self):
    """The actors' KL priorities, on the atoms of the network factory's
    critic."""
    critic = self.network_factory(self.environment, self.config).critic
    return priorities.make_initial_priorities(critic.atoms.numpy())

  def default_networks(self):
    return networks.make_networks
