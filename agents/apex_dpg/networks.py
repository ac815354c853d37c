"""Ape-X DPG's networks (App. D): a critic q(s, a) and a deterministic policy.

Critic: [s, a] -> 400 -> tanh -> 300 -> ReLU -> 1. Policy: s -> 300 -> tanh
-> 200 -> ReLU -> |A| -> tanh, rescaled into the action bounds. The paper gives
the layer sizes and the first tanh; the later ReLU and the small uniform
initialisation of the output layers (as in DDPG, Lillicrap et al. 2016) are
this implementation's choices.
"""

from typing import NamedTuple, Sequence

import numpy as np
import sonnet as snt
import tensorflow as tf

from agents.networks import precision

FINAL_INIT_SCALE = 3e-3


def mlp_layers(hidden_sizes: Sequence[int]) -> list:
  """The hidden layers of App. D's networks: the first followed by tanh,
  the others by ReLU."""
  layers = []
  for index, size in enumerate(hidden_sizes):
    layers.append(snt.Linear(size))
    layers.append(tf.tanh if index == 0 else tf.nn.relu)
  return layers


def final_linear(size: int) -> snt.Linear:
  """An output layer initialised small and uniform (as DDPG's)."""
  scale = FINAL_INIT_SCALE
  return snt.Linear(size,
                    w_init=snt.initializers.RandomUniform(-scale, scale),
                    b_init=snt.initializers.RandomUniform(-scale, scale))


class Critic(snt.Module):
  """q(s, a): one value per (observation, action) pair."""

  def __init__(self, hidden_sizes: Sequence[int] = (400, 300),
               name: str = 'critic'):
    super().__init__(name=name)
    self._network = snt.Sequential(
        mlp_layers(hidden_sizes) + [final_linear(1)])

  def __call__(self, observations: tf.Tensor,
               actions: tf.Tensor) -> tf.Tensor:
    inputs = tf.concat([precision.cast_input(observations),
                        precision.cast_input(actions)], axis=-1)
    return precision.to_float32(tf.squeeze(self._network(inputs), axis=-1))


class Policy(snt.Module):
  """pi(s): a deterministic action inside [minimum, maximum]."""

  def __init__(self, minimum: np.ndarray, maximum: np.ndarray,
               hidden_sizes: Sequence[int] = (300, 200),
               name: str = 'policy'):
    super().__init__(name=name)
    minimum = np.asarray(minimum, np.float32)
    maximum = np.asarray(maximum, np.float32)
    self._network = snt.Sequential(
        mlp_layers(hidden_sizes) + [final_linear(minimum.shape[-1]), tf.tanh])
    self._center = tf.constant((maximum + minimum) / 2)
    self._half_range = tf.constant((maximum - minimum) / 2)

  def __call__(self, observations: tf.Tensor) -> tf.Tensor:
    squashed = precision.to_float32(
        self._network(precision.cast_input(observations)))
    return self._center + self._half_range * squashed


class DPGNetworks(NamedTuple):
  """Ape-X DPG's networks."""
  policy: snt.Module
  critic: snt.Module


def make_networks(environment, config) -> DPGNetworks:
  """Ape-X DPG's network factory: the policy and critic of `config` (an
  `ApeXDPGConfig`) for `environment` (an `EnvironmentSpec`), their
  variables not yet created."""
  from agents.config import parse_layer_sizes  # pylint: disable=g-import-not-at-top
  actions = environment.spec.actions
  return DPGNetworks(
      policy=Policy(actions.minimum, actions.maximum,
                    parse_layer_sizes(config.policy_hidden_sizes)),
      critic=Critic(parse_layer_sizes(config.critic_hidden_sizes)))
