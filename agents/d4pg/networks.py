"""D4PG's networks: Ape-X DPG's policy, and a critic whose head gives a
categorical distribution over returns instead of one value (D4PG §3).

Critic: [s, a] -> 400 -> tanh -> 300 -> ReLU -> `num_atoms` logits, the
atoms evenly spaced on [v_min, v_max]. The torso is Ape-X DPG's (App. D),
so that the critic's head is the one difference between the two agents'
networks. D4PG's control-suite networks are 400-300 too (D4PG §5).
"""

import numpy as np
import sonnet as snt
import tensorflow as tf

from agents.apex_dpg import networks as dpg_networks
from agents.apex import distributional
from agents.networks import precision


class CategoricalCritic(snt.Module):
  """Z(s, a): the logits of a distribution over the returns `atoms`, one
  row per (observation, action) pair."""

  def __init__(self, atoms: np.ndarray, hidden_sizes=(400, 300),
               name: str = 'critic'):
    super().__init__(name=name)
    self.atoms = tf.constant(np.asarray(atoms, np.float32))
    self._network = snt.Sequential(
        dpg_networks.mlp_layers(hidden_sizes) +
        [dpg_networks.final_linear(len(atoms))])

  def __call__(self, observations: tf.Tensor,
               actions: tf.Tensor) -> tf.Tensor:
    inputs = tf.concat([precision.cast_input(observations),
                        precision.cast_input(actions)], axis=-1)
    return precision.to_float32(self._network(inputs))

  def mean(self, logits: tf.Tensor) -> tf.Tensor:
    """The expected return of each row of `logits`: Q(s, a) = E[Z(s, a)]."""
    return distributional.expected_values(logits, self.atoms)


def make_networks(environment, config) -> dpg_networks.DPGNetworks:
  """D4PG's network factory: Ape-X DPG's policy and a categorical critic
  of `config` (a `D4PGConfig`) for `environment` (an `EnvironmentSpec`),
  their variables not yet created."""
  # pylint: disable=g-import-not-at-top
  from agents.config import parse_layer_sizes
  from agents.d4pg.config import value_bounds
  # pylint: enable=g-import-not-at-top
  v_min, v_max = value_bounds(config, environment)
  actions = environment.spec.actions
  return dpg_networks.DPGNetworks(
      policy=dpg_networks.Policy(
          actions.minimum, actions.maximum,
          parse_layer_sizes(config.policy_hidden_sizes)),
      critic=CategoricalCritic(
          np.linspace(v_min, v_max, config.num_atoms),
          parse_layer_sizes(config.critic_hidden_sizes)))
