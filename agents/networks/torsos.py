"""The torsos the agents share: observation -> embedding.

An environment's suite names its torsos (`agents.envs.suites.Suite.torsos`,
by kind: 'features' or 'dense'); `make_torso` builds the one an agent asks
for, or an MLP where the suite names none (vector observations)."""

from typing import Sequence

import sonnet as snt
import tensorflow as tf

from agents.networks import precision
from agents.config import MLP_ACTIVATIONS


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
    return self._layers(precision.cast_input(observation) / 255.0)


class MinAtarCNN(snt.Module):
  """Young & Tian 2019's torso for 10x10 MinAtar images: one 3x3 convolution."""

  def __init__(self, name: str = 'minatar_cnn'):
    super().__init__(name=name)
    self._layers = snt.Sequential([
        snt.Conv2D(16, 3, stride=1, padding='VALID'), tf.nn.relu,
        snt.Flatten(),
    ])

  def __call__(self, observation: tf.Tensor) -> tf.Tensor:
    return self._layers(precision.cast_input(observation))


ACTIVATIONS = {'relu': tf.nn.relu, 'tanh': tf.tanh}
assert tuple(ACTIVATIONS) == MLP_ACTIVATIONS


class MLPTorso(snt.Module):
  """Fully connected torso for vector observations; `activation` names one
  of ACTIVATIONS."""

  def __init__(self, hidden_sizes: Sequence[int], name: str = 'mlp_torso',
               activation: str = 'relu'):
    super().__init__(name=name)
    self._mlp = snt.nets.MLP(list(hidden_sizes), activate_final=True,
                             activation=ACTIVATIONS[activation])

  def __call__(self, observation: tf.Tensor) -> tf.Tensor:
    return self._mlp(precision.cast_input(observation))


class SmallAtariCNN(snt.Module):
  """Mnih et al. 2013's torso, A3C's on Atari (A3C Supp. §8): 16 8x8 filters
  of stride 4, 32 4x4 of stride 2, 256 units, each followed by a ReLU; uint8
  pixels are scaled to [0, 1]."""

  def __init__(self, name: str = 'small_atari_cnn'):
    super().__init__(name=name)
    self._layers = snt.Sequential([
        snt.Conv2D(16, 8, stride=4, padding='VALID'), tf.nn.relu,
        snt.Conv2D(32, 4, stride=2, padding='VALID'), tf.nn.relu,
        snt.Flatten(), snt.Linear(256), tf.nn.relu,
    ])

  def __call__(self, observation: tf.Tensor) -> tf.Tensor:
    return self._layers(precision.cast_input(observation) / 255.0)


# Young & Tian (2019): their MinAtar networks (DQN's and the actor-critic's)
# have one fully connected layer of 128 units after the convolution.
MINATAR_HIDDEN_SIZE = 128


def minatar_dense() -> snt.Module:
  """Young & Tian's MinAtar torso with their 128-unit layer: MinAtar's
  torso of kind 'dense' (A3C's)."""
  return snt.Sequential([MinAtarCNN(), MLPTorso([MINATAR_HIDDEN_SIZE])])


def make_torso(suite, kind: str, mlp_hidden_sizes: Sequence[int],
               mlp_activation: str = 'relu') -> snt.Module:
  """The torso of `kind` ('features' or 'dense') for the observations of
  `suite` (an `agents.envs.suites.Suite`): the one it names, else an MLP of
  `mlp_hidden_sizes` and `mlp_activation` (the suites' own torsos keep
  their ReLUs)."""
  factory = suite.torso(kind)
  if factory is None:
    return MLPTorso(mlp_hidden_sizes, activation=mlp_activation)
  return factory()
