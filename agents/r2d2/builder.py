"""Builds R2D2's parts (network, learner, actors, replay of sequences)
from its config: the Ape-X builder (`agents.apex.builder.ApeXBuilder`)
with sequences for items (`agents.replay.sequences`)."""

import copy
from typing import Optional

import numpy as np
import sonnet as snt
import tensorflow as tf

from agents import snapshots
from agents import variables as variables_lib
from agents.apex import builder as apex_builder
from agents.apex_dqn.actor import apex_epsilons
from agents.r2d2 import actor as actor_lib
from agents.r2d2 import learning
from agents.r2d2 import networks
from agents.r2d2 import priorities
from agents.r2d2.config import R2D2Config
from agents.replay import sequences
from agents.replay import tables


class R2D2Builder(apex_builder.ApeXBuilder):
  """Makes the parts of R2D2 for one environment and config."""

  name = 'r2d2'
  config: R2D2Config

  def default_networks(self):
    return networks.make_networks

  def make_network(self) -> networks.R2D2Network:
    """A network (of the network factory) with its variables made."""
    network = self.network_factory(self.environment, self.config)
    observations = tf.zeros((1, *self.environment.spec.observations.shape),
                            self.environment.spec.observations.dtype)
    network(observations, network.initial_state(1))
    return network

  def replay_signature(self):
    """Sequences of `config.sequence_length` rows with their start states
    (`networks.stored_state`) and, with a burn-in, the actor's state where
    the burn-in ends (for the learner's Q-value discrepancy)."""
    spec = self.environment.spec
    core = tf.nest.map_structure(
        lambda x: tf.TensorSpec(x.shape[1:], x.dtype),
        self.make_network().initial_state(1))
    return sequences.sequence_signature(
        spec.observations, spec.actions,
        networks.stored_state(core, tf.TensorSpec((), tf.float32)),
        self.config.sequence_length, state_at_row=self._burn_in_row is not None)

  @property
  def _burn_in_row(self):
    """The row where the burn-in ends, if there is a burn-in and a row
    after it."""
    burn_in = self.config.burn_in_length
    return burn_in if 0 < burn_in < self.config.sequence_length else None

  @property
  def stored_frames(self) -> int:
    """0: a sequence's rows hold whole observations (stacked frames stay on
    their last axis), from one server or from shards alike."""
    return 0

  @property
  def priority_fn(self):
    return priorities.initial_priorities_fn(
        self.config, self.environment.spec.actions.num_values)

  def make_adder(self, replay_client, priority_fn=None):
    """An actor's writer of sequences (R2D2 §2.3), their rewards not
    clipped (the value rescaling stands in for it)."""
    return sequences.SequenceAdder(
        replay_client, tables.TABLE, self.config.sequence_length,
        self.config.sequence_period, priority_fn or self.priority_fn,
        flush_size=self.config.actor_flush_size, state_row=self._burn_in_row)

  def make_learner(self, replay_client, counter=None, logger=None,
                   log_every: float = 0.0) -> learning.R2D2Learner:
    network = self.make_network()
    return learning.R2D2Learner(
        network, copy.deepcopy(network),
        snt.optimizers.Adam(self.config.learning_rate,
                            epsilon=self.config.adam_epsilon),
        n_step=self.config.n_step, discount=self.config.discount,
        value_rescaling_epsilon=self.config.value_rescaling_epsilon,
        burn_in=self.config.burn_in_length, eta=self.config.priority_eta,
        target_update_period=self.config.target_update_period,
        **self.replay_learner_arguments(replay_client, counter, logger,
                                        log_every))

  def actor_networks(self):
    return [self.make_network()]

  def make_actor(self, variable_source, exploration, replay_client=None,
                 seed: Optional[int] = None) -> actor_lib.R2D2Actor:
    """An actor with epsilon = `exploration` (one per environment); with
    `replay_client` it writes sequences, one adder per environment."""
    network = self.make_network()
    variable_client = variables_lib.NewestVariableClient(
        variable_source, {'network': network.trainable_variables},
        update_period=self.variable_update_period)
    variable_client.update_and_wait()
    return actor_lib.R2D2Actor(network, exploration,
                               self.make_adders(replay_client, exploration),
                               variable_client, seed)

  def actor_exploration(self, actor_id: int, num_actors: int,
                        envs_per_actor: int = 1) -> np.ndarray:
    """R2D2 §2.3, as Ape-X §4.1: the epsilons of actor `actor_id`'s
    environments, each environment one of the paper's actors."""
    epsilons = apex_epsilons(num_actors * envs_per_actor,
                             self.config.epsilon_base,
                             self.config.epsilon_alpha)
    return epsilons[actor_id * envs_per_actor:(actor_id + 1) * envs_per_actor]

  def policy_state(self):
    return {'network': self.make_network()}

  def policy_snapshot(self, learner_state) -> snapshots.PolicySnapshot:
    """The greedy policy of the learner's network, carrying its state."""
    return snapshots.PolicySnapshot(learner_state['network'],
                                    self.environment, self.name,
                                    q_network=True, recurrent=True)

  @property
  def evaluation_exploration(self) -> float:
    return self.config.evaluation_epsilon
