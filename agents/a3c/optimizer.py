"""Shared RMSProp (A3C Supp. §7): one set of statistics g for all workers,
updated, like the parameters, as each worker's gradient arrives, with no
lock around an update (Hogwild, Recht et al. 2011)."""

from typing import Sequence

import tensorflow as tf


class SharedRMSProp(tf.Module):
  """Supp. §7, Eq. S2 and S3, for each parameter array:

    g <- decay g + (1 - decay) d^2
    theta <- theta - learning_rate d / sqrt(g + epsilon)

  `apply` may run in several threads at once (the parameter node serves
  each worker's call in a thread of its own): TensorFlow runs the
  operations outside Python's lock, and only each single assignment to one
  array is atomic, so the updates of different workers interleave as in the
  paper's lock-free implementation.
  """

  def __init__(self, variables: Sequence[tf.Variable], decay: float,
               epsilon: float, name: str = 'shared_rmsprop'):
    super().__init__(name=name)
    self._variables = list(variables)
    self._decay = decay
    self._epsilon = epsilon
    self.mean_squares = [
        tf.Variable(tf.zeros_like(variable), trainable=False,
                    name='mean_square') for variable in self._variables]

  @tf.function
  def apply(self, gradients: Sequence[tf.Tensor], learning_rate: tf.Tensor):
    """Applies one worker's gradients (one per variable, in order); returns
    what it did, for the logs: `update_norm`, the global norm of the step
    taken (every variable's change), and `step_size`, the mean over every
    parameter of learning_rate / sqrt(g + epsilon), the factor by which
    this update scaled its gradient (the effective learning rate)."""
    learning_rate = tf.cast(learning_rate, tf.float32)
    squares, scales, count = [], [], 0
    for variable, mean_square, gradient in zip(self._variables,
                                               self.mean_squares, gradients):
      gradient = tf.cast(gradient, variable.dtype)
      mean_square.assign(self._decay * mean_square +
                         (1.0 - self._decay) * tf.square(gradient))
      scale = learning_rate / tf.sqrt(mean_square + self._epsilon)
      step = scale * gradient
      variable.assign_sub(step)
      squares.append(tf.reduce_sum(tf.square(step)))
      scales.append(tf.reduce_sum(scale))
      count += variable.shape.num_elements()
    return {'update_norm': tf.sqrt(tf.add_n(squares)),
            'step_size': tf.add_n(scales) / count}


def annealed_learning_rate(initial: float, steps: int,
                           total_steps) -> float:
  """A3C Supp. §8: the learning rate annealed linearly to 0 over the run;
  constant without a step budget (`total_steps` None)."""
  if not total_steps:
    return initial
  return initial * max(0.0, 1.0 - steps / total_steps)
