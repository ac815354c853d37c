"""Builds Ape-X DQN's parts (networks, learner, actors) from its config."""

import copy
from typing import Optional, Sequence, Union

import acme
import numpy as np
import reverb
import sonnet as snt
from acme.tf import utils as tf2_utils
from acme.utils import counting
from acme.utils import loggers

from agents.apex import builder as apex_builder
from agents import snapshots
from agents import variables as variables_lib
from agents.apex_dqn import actor as actor_lib
from agents.apex_dqn import learning
from agents.apex_dqn import networks
from agents.apex_dqn import priorities
from agents.apex_dqn.config import ApeXDQNConfig


class ApeXDQNBuilder(apex_builder.ApeXBuilder):
  """Makes the parts of Ape-X DQN for one environment and config."""

  name = 'apex_dqn'
  config: ApeXDQNConfig
  # The learner's and the actors' classes: the loss (`ApeXDQNLearner._loss`)
  # and what an actor keeps of its network's output for the priorities
  # are the agent's.
  learner_class = learning.ApeXDQNLearner
  actor_class = actor_lib.ApeXDQNActor

  @property
  def max_abs_reward(self) -> Optional[float]:
    if self.config.max_abs_reward is not None:
      return self.config.max_abs_reward
    return self.environment.suite.reward_clip  # Atari's: [-1, 1] (DQN's).

  @property
  def priority_fn(self):
    return priorities.initial_priorities

  def default_networks(self):
    return networks.make_networks

  def make_network(self) -> snt.Module:
    """A Q-network (of the network factory) with its variables created."""
    network = self.network_factory(self.environment, self.config)
    tf2_utils.create_variables(network, [self.environment.spec.observations])
    return network

  def make_learner(self,
                   replay_client: reverb.Client,
                   counter: Optional[counting.Counter] = None,
                   logger: Optional[loggers.Logger] = None,
                   log_every: float = 0.0) -> learning.ApeXDQNLearner:
    """The learner, sampling from the replay server behind `replay_client`."""
    network = self.make_network()
    target_network = copy.deepcopy(network)
    optimizer = snt.optimizers.RMSProp(
        learning_rate=self.config.learning_rate,
        decay=self.config.rmsprop_decay,
        momentum=0.0,
        epsilon=self.config.rmsprop_epsilon,
        centered=True)  # Ape-X App. C: centered RMSProp, no momentum.
    return self.learner_class(
        network=network,
        target_network=target_network,
        optimizer=optimizer,
        target_update_period=self.config.target_update_period,
        max_gradient_norm=self.config.max_gradient_norm,
        **self.replay_learner_arguments(replay_client, counter, logger,
                                        log_every))

  def actor_networks(self):
    return [self.make_network()]

  def make_actor(self,
                 variable_source: acme.VariableSource,
                 exploration: Union[float, Sequence[float]],
                 replay_client: Optional[reverb.Client] = None,
                 seed: Optional[int] = None) -> actor_lib.ApeXDQNActor:
    """An actor with epsilon = `exploration` (one per environment for an
    actor of several); with `replay_client` it writes prioritised
    transitions, through one adder per environment."""
    network = self.make_network()
    priority_fn, priority_variables = self.actor_priorities(
        writes=replay_client is not None)
    variable_client = variables_lib.NewestVariableClient(
        variable_source,
        {'network': network.trainable_variables, **priority_variables},
        update_period=self.variable_update_period)
    variable_client.update_and_wait()
    return self.actor_class(
        network, self.environment.spec.observations, exploration,
        self.make_adders(replay_client, exploration, priority_fn),
        variable_client, seed)

  def actor_exploration(self, actor_id: int, num_actors: int,
                        envs_per_actor: int = 1) -> np.ndarray:
    """Ape-X §4.1: the epsilons of actor `actor_id`'s environments.

    Every environment of the program is one of the paper's actors: with N
    actors of K environments each, environment k of actor i gets the
    schedule's epsilon number i K + k of N K.
    """
    epsilons = actor_lib.apex_epsilons(num_actors * envs_per_actor,
                                       self.config.epsilon_base,
                                       self.config.epsilon_alpha)
    return epsilons[actor_id * envs_per_actor:(actor_id + 1) * envs_per_actor]

  def policy_state(self):
    """The part of a learner's state that its policy needs, newly built
    (to restore from a learner checkpoint, then `policy_snapshot`)."""
    return {'network': self.make_network()}

  def policy_snapshot(self, learner_state) -> snapshots.PolicySnapshot:
    """The greedy policy of a learner's (or checkpoint's) Q-network."""
    return snapshots.PolicySnapshot(learner_state['network'],
                                    self.environment, self.name,
                                    q_network=True)

  @property
  def evaluation_exploration(self) -> float:
    return self.config.evaluation_epsilon
