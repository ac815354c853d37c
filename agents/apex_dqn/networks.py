"""Ape-X DQN networks: a dueling head on a Nature-CNN or MLP torso."""

from typing import Sequence

import sonnet as snt
import tensorflow as tf


class NatureCNN(snt.Module):
  """Mnih et al. 2015's convolutional torso; uint8 pixels are scaled to [0, 1]."""

  def __init__(self, name: str = 'nature_cnn'):
    super().__init__(name=name)
    self._layers = snt.Sequential([
        snt.Conv2D(32, 8, stride=4, padding='VALID'), tf.nn.relu,
        snt.Conv2D(64, 4, stride=2, padding='VALID'), tf.nn.relu,
        snt.Conv2D(64, 3, stride=1, padding='VALID'), tf.nn.relu,
        snt.Flatten(),
    ])

  def __call__(self, observation: tf.Tensor) -> tf.Tensor:
    return self._layers(tf.cast(observation, tf.float32) / 255.0)


class MinAtarCNN(snt.Module):
  """Young & Tian 2019's torso for 10x10 MinAtar images: one 3x3 convolution."""

  def __init__(self, name: str = 'minatar_cnn'):
    super().__init__(name=name)
    self._layers = snt.Sequential([
        snt.Conv2D(16, 3, stride=1, padding='VALID'), tf.nn.relu,
        snt.Flatten(),
    ])

  def __call__(self, observation: tf.Tensor) -> tf.Tensor:
    return self._layers(tf.cast(observation, tf.float32))


class MLPTorso(snt.Module):
  """Fully connected torso for vector observations."""

  def __init__(self, hidden_sizes: Sequence[int], name: str = 'mlp_torso'):
    super().__init__(name=name)
    self._mlp = snt.nets.MLP(list(hidden_sizes), activate_final=True)

  def __call__(self, observation: tf.Tensor) -> tf.Tensor:
    return self._mlp(tf.cast(observation, tf.float32))


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
    return value + advantage - tf.reduce_mean(advantage, axis=-1,
                                              keepdims=True)


def make_q_network(environment_kind: str, num_actions: int,
                   mlp_hidden_sizes: Sequence[int],
                   dueling_hidden_size: int) -> DuelingQNetwork:
  """The Q-network for an environment kind (`atari`, `minatar`, `gym`)."""
  if environment_kind == 'atari':
    torso = NatureCNN()
  elif environment_kind == 'minatar':
    torso = MinAtarCNN()
  else:
    torso = MLPTorso(mlp_hidden_sizes)
  return DuelingQNetwork(torso, num_actions, dueling_hidden_size)
