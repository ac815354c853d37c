"""Builds Ape-X DPG's parts (networks, learner, actors) from its config."""

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
from agents.apex_dpg import actor as actor_lib
from agents.apex_dpg import learning
from agents.apex_dpg import networks
from agents.apex_dpg import priorities
from agents.apex_dpg.config import ApeXDPGConfig


class ApeXDPGBuilder(apex_builder.ApeXBuilder):
  """Makes the parts of Ape-X DPG for one environment and config."""

  name = 'apex_dpg'
  config: ApeXDPGConfig
  # The learner's class: its critic's loss and the policy's value
  # (`ApeXDPGLearner`'s hooks) are the agent's.
  learner_class = learning.ApeXDPGLearner

  @property
  def priority_fn(self):
    return priorities.initial_priorities

  def default_networks(self):
    return networks.make_networks

  def make_policy(self) -> snt.Module:
    """The policy network (of the network factory) with its variables
    created."""
    policy = self.network_factory(self.environment, self.config).policy
    tf2_utils.create_variables(policy, [self.environment.spec.observations])
    return policy

  def make_critic(self) -> snt.Module:
    """The critic network (of the network factory) with its variables
    created."""
    spec = self.environment.spec
    critic = self.network_factory(self.environment, self.config).critic
    tf2_utils.create_variables(critic, [spec.observations, spec.actions])
    return critic

  def make_learner(self,
                   replay_client: reverb.Client,
                   counter: Optional[counting.Counter] = None,
                   logger: Optional[loggers.Logger] = None,
                   log_every: float = 0.0) -> learning.ApeXDPGLearner:
    """The learner, sampling from the replay server behind `replay_client`."""
    policy, critic = self.make_policy(), self.make_critic()
    return self.learner_class(
        policy=policy,
        critic=critic,
        target_policy=copy.deepcopy(policy),
        target_critic=copy.deepcopy(critic),
        policy_optimizer=snt.optimizers.Adam(self.config.policy_learning_rate),
        critic_optimizer=snt.optimizers.Adam(self.config.critic_learning_rate),
        target_update_period=self.config.target_update_period,
        dqda_clip=self.config.dqda_clip,
        **self.replay_learner_arguments(replay_client, counter, logger,
                                        log_every))

  def actor_networks(self):
    return [self.make_policy(), self.make_critic()]

  def make_actor(self,
                 variable_source: acme.VariableSource,
                 exploration: Union[float, Sequence[float]],
                 replay_client: Optional[reverb.Client] = None,
                 seed: Optional[int] = None) -> actor_lib.ApeXDPGActor:
    """An actor with noise std `exploration` (one per environment for an
    actor of several); with `replay_client` it also pulls the critic and
    writes prioritised transitions, through one adder per environment."""
    policy = self.make_policy()
    priority_fn, priority_variables = self.actor_priorities(
        writes=replay_client is not None)
    variables = {'policy': policy.trainable_variables, **priority_variables}
    critic = None
    if replay_client is not None:
      critic = self.make_critic()
      variables['critic'] = critic.trainable_variables
    variable_client = variables_lib.NewestVariableClient(
        variable_source, variables, update_period=self.variable_update_period)
    variable_client.update_and_wait()
    spec = self.environment.spec
    return actor_lib.ApeXDPGActor(
        policy, critic, spec.observations, spec.actions, exploration,
        self.make_adders(replay_client, exploration, priority_fn),
        variable_client, seed)

  def actor_exploration(self, actor_id: int, num_actors: int,
                        envs_per_actor: int = 1) -> np.ndarray:
    """Ape-X App. D: every environment explores with the same sigma."""
    del actor_id, num_actors
    return np.full(envs_per_actor, self.config.sigma)

  def policy_state(self):
    """The part of a learner's state that its policy needs, newly built
    (to restore from a learner checkpoint, then `policy_snapshot`)."""
    return {'policy': self.make_policy()}

  def policy_snapshot(self, learner_state) -> snapshots.PolicySnapshot:
    """The noiseless policy of a learner's (or checkpoint's) policy
    network."""
    return snapshots.PolicySnapshot(learner_state['policy'],
                                    self.environment, self.name,
                                    q_network=False)

  @property
  def evaluation_exploration(self) -> float:
    """The evaluator runs the noiseless policy."""
    return 0.0
