"""What a sequence's priority is, in one place for the learner and the
actors (R2D2 §2.3).

The learner takes it from its TD errors on each batch (`R2D2Learner`);
the actors compute the initial priorities of their sequences in batches,
from the Q-values they computed while acting (`initial_priorities`), with
the same TD errors (`losses.td_errors`, their own values selecting and
evaluating the bootstrap action) over the same learnt rows
(`losses.learnt_rows`) and this same mix.
"""

import numpy as np
import tensorflow as tf

from agents.r2d2 import losses

# The actor's values at each row of a sequence (`SequenceAdder`'s
# `values`): its Q-values there, and 1 at its episode's first row.
Q_VALUES = 'q_values'
EPISODE_START = 'episode_start'


def sequence_priorities(errors, rows, eta: float):
  """R2D2 §2.3: p = eta max_i |delta_i| + (1 - eta) mean_i |delta_i| over
  the TD errors of a sequence's learnt `rows` ([B, T] both); [B]. A
  sequence with no learnt row gets 0: it is never sampled."""
  magnitudes = tf.abs(errors) * rows
  mean = (tf.reduce_sum(magnitudes, axis=-1) /
          tf.maximum(tf.reduce_sum(rows, axis=-1), 1.0))
  return eta * tf.reduce_max(magnitudes, axis=-1) + (1.0 - eta) * mean


def initial_priorities_fn(config, num_actions: int):
  """The actors' adders' priority function (`SequencePriorityFn`) for an
  `R2D2Config`: each sequence's priority from the actor's values, compiled
  once for any batch of sequences."""
  length = config.sequence_length
  batch = lambda *shape: (None, length, *shape)

  @tf.function(input_signature=[
      tf.TensorSpec(batch(num_actions), tf.float32),
      tf.TensorSpec(batch(), tf.float32), tf.TensorSpec(batch(), tf.int32),
      tf.TensorSpec(batch(), tf.float32), tf.TensorSpec(batch(), tf.float32),
      tf.TensorSpec(batch(), tf.float32)])
  def compiled(q_values, episode_start, actions, rewards, discounts, masks):
    errors = losses.td_errors(
        q_values, q_values, q_values, actions, rewards, discounts, masks,
        config.n_step, config.discount, config.value_rescaling_epsilon)
    rows = losses.learnt_rows(masks, episode_start[:, 0],
                              config.burn_in_length)
    return sequence_priorities(errors, rows, config.priority_eta)

  def initial_priorities(values, actions, rewards, discounts,
                         masks) -> np.ndarray:
    return compiled(
        np.asarray(values[Q_VALUES], np.float32),
        np.asarray(values[EPISODE_START], np.float32),
        np.asarray(actions, np.int32), np.asarray(rewards, np.float32),
        np.asarray(discounts, np.float32),
        np.asarray(masks, np.float32)).numpy()

  return initial_priorities
