"""Pop-Art (van Hasselt et al. 2016, *Learning values across many orders of
magnitude*): the value head learns the return in units that follow the
returns' running mean and deviation, and whenever those statistics move,
its last layer is rescaled so that the values it gives do not (`--popart`).

Why A3C has it (docs/a3c.md, "Why A3C unlearns"): the paper's learning
rates, RMSProp and entropy weight were chosen on Atari's clipped rewards,
where returns stay near 1. Dividing each reward by a running deviation of
the return (`--normalize_rewards`) puts them there, but that deviation
keeps changing as a policy improves (CartPole's episodes grow from 20 to 500
steps), and every change rescales the targets under a value that learned the
old scale. Pop-Art normalises the targets instead of the rewards, and
preserves the value's outputs as the statistics move (Algorithm 1 of the
paper), so no change of scale becomes an error of the value. It puts the
value's errors and the advantages on one scale on every task; it does not
by itself keep what CartPole learns at gamma 0.99 (docs/a3c.md).

The head gives V(s) = sigma n(s) + mu, with n(s) = w h(s) + b its linear
layer; the loss is on the normalised error (R - V(s)) / sigma = (R - mu) /
sigma - n(s) (`PolicyValue.value_scale`), and the policy's advantages are
in the same units, as in PopArt-IMPALA (Hessel et al. 2019, *Multi-task
Deep Reinforcement Learning with PopArt*, §3), so that they are near 1
whatever the task pays. The statistics live with the shared parameters:
the parameter server updates them with each rollout's returns before it
applies that rollout's gradient.
"""

from typing import Sequence, Tuple

import numpy as np
import sonnet as snt
import tensorflow as tf

# Hessel et al. 2019 (Table of hyper-parameters): the statistics' step size
# beta, and the bounds of sigma.
STEP_SIZE = 3e-4
SCALE_BOUNDS = (1e-4, 1e6)


class PopArtValue(snt.Module):
  """A linear value head with Pop-Art's statistics of the returns: `mean`
  (mu) and `second_moment` (nu), not trained by gradients, moved by
  `update`. Called on an embedding [B, H], it gives (V [B], sigma [B])."""

  def __init__(self, name: str = 'popart_value'):
    super().__init__(name=name)
    self._linear = snt.Linear(1, name='normalized_value')
    # mu = 0 and nu = 1 (sigma 1): until the returns move them, the head is
    # a plain linear value.
    self.mean = tf.Variable(0.0, trainable=False, name='mean')
    self.second_moment = tf.Variable(1.0, trainable=False,
                                     name='second_moment')

  def __call__(self, embedding: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
    normalized = tf.squeeze(self._linear(embedding), axis=-1)
    scale = self.scale
    return (scale * normalized + self.mean,
            tf.fill(tf.shape(normalized), scale))

  @property
  def scale(self) -> tf.Tensor:
    """sigma = sqrt(nu - mu^2), inside `SCALE_BOUNDS`."""
    return scale_of(self.mean, self.second_moment)

  def update(self, targets: Sequence[float], step_size: float = STEP_SIZE):
    """Moves the statistics by each of `targets` in turn (the returns of a
    rollout, in the task's units), mu <- (1 - beta) mu + beta R and nu <-
    (1 - beta) nu + beta R^2, then rescales the linear layer so that V(s)
    is what it was for every s (Pop-Art's "preserving outputs precisely"):
    w <- w sigma / sigma', b <- (sigma b + mu - mu') / sigma'."""
    mean, second_moment = float(self.mean.numpy()), float(
        self.second_moment.numpy())
    new_mean, new_second_moment = moved_statistics(
        mean, second_moment, targets, step_size)
    old_scale = float(scale_of(mean, second_moment))
    new_scale = float(scale_of(new_mean, new_second_moment))
    self._linear.w.assign(self._linear.w * (old_scale / new_scale))
    self._linear.b.assign((old_scale * self._linear.b + mean - new_mean) /
                          new_scale)
    self.mean.assign(new_mean)
    self.second_moment.assign(new_second_moment)


def moved_statistics(mean: float, second_moment: float,
                     targets: Sequence[float],
                     step_size: float) -> Tuple[float, float]:
  """(mu, nu) after an exponential moving average's step for each target."""
  for target in np.asarray(targets, np.float64).ravel():
    mean = (1.0 - step_size) * mean + step_size * target
    second_moment = ((1.0 - step_size) * second_moment +
                     step_size * target * target)
  return mean, second_moment


def scale_of(mean, second_moment):
  """sigma from mu and nu, inside `SCALE_BOUNDS` (nu - mu^2 can round below
  0 when the returns hardly vary)."""
  low, high = SCALE_BOUNDS
  variance = tf.maximum(tf.cast(second_moment, tf.float32) -
                        tf.square(tf.cast(mean, tf.float32)), low * low)
  return tf.clip_by_value(tf.sqrt(variance), low, high)
