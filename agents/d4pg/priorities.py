"""D4PG's initial priorities, computed by actors in batches (Ape-X §3), as
the learner computes them (`losses.priorities`)."""

import tensorflow as tf

from agents.apex import priorities
from agents.apex_dpg.priorities import Q_POLICY
from agents.apex_dpg.priorities import Q_TAKEN
from agents.d4pg import losses


def make_initial_priorities(atoms):
  """initial_priorities(values, actions, n_step_returns, discounts,
  bootstrap_values): the KL priority of each transition of a batch, as
  numpy, for a critic on `atoms`.

  `values[i]` holds the critic's logits at (s_t, a_t) and at (s_t,
  pi(s_t)) as the actor computed them when it chose a_t (`ApeXDPGActor`);
  `bootstrap_values[i]` the same at s_{t+n}. The actor's copies of the
  critic and policy stand in for the learner's target networks."""
  atoms = tf.constant(atoms, tf.float32)

  def batch(values, actions, n_step_returns, discounts, bootstrap_values):
    del actions  # The logits at a_t were computed for the action taken.
    return losses.priorities(values[:, Q_TAKEN], n_step_returns, discounts,
                             bootstrap_values[:, Q_POLICY], atoms)

  return priorities.batch_priorities(
      batch, values=tf.TensorSpec((None, 2, len(atoms)), tf.float32),
      actions=tf.TensorSpec((None, None), tf.float32))
