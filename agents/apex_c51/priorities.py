"""The distributional Ape-X DQN's initial priorities, computed by actors in
batches (Ape-X §3), as the learner computes them (`losses.priorities`)."""

import tensorflow as tf

from agents.apex import distributional
from agents.apex import priorities
from agents.apex_c51 import losses


def make_initial_priorities(atoms):
  """initial_priorities(values, actions, n_step_returns, discounts,
  bootstrap_values): the KL priority of each transition of a batch, as
  numpy, for distributions on `atoms`.

  `values[i]` are the actor's logits [actions, atoms] at s_t (computed to
  choose a_t), `bootstrap_values[i]` its logits at s_{t+n}. An actor holds
  one network, so its copy selects the bootstrap action (by the means) and
  gives its distribution: the double-Q target with the actor's parameters
  in both roles, as Ape-X DQN's actors."""
  atoms = tf.constant(atoms, tf.float32)

  def batch(values, actions, n_step_returns, discounts, bootstrap_values):
    return losses.priorities(
        values, actions, n_step_returns, discounts,
        distributional.expected_values(bootstrap_values, atoms),
        bootstrap_values, atoms)

  return priorities.batch_priorities(
      batch, values=tf.TensorSpec((None, None, len(atoms)), tf.float32),
      actions=tf.TensorSpec((None,), tf.int32))
