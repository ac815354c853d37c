"""Ape-X DPG's initial priorities, computed by actors in batches (§3.2)."""

import tensorflow as tf

from agents.apex import priorities
from agents.apex_dpg import losses

# What an Ape-X DPG actor keeps of each acting step (the adder's `values`):
# the critic at the action taken and at the noiseless policy's action.
Q_TAKEN = 0
Q_POLICY = 1


def _td_errors(values, actions, n_step_returns, discounts, bootstrap_values):
  """The loss's n-step TD error, R + Gamma q(s_{t+n}, pi(s_{t+n})) -
  q(s_t, a_t), from the values computed while acting: `values[i]` holds
  q(s_t, a_t) and q(s_t, pi(s_t)) as the actor computed them when it chose
  a_t; `bootstrap_values[i]` the same at s_{t+n}. The actor's copies of the
  critic and policy stand in for the learner's target networks."""
  del actions  # q(s_t, a_t) was computed for the action taken.
  return losses.n_step_td_error(values[:, Q_TAKEN], n_step_returns,
                                discounts, bootstrap_values[:, Q_POLICY])


# initial_priorities(values, actions, n_step_returns, discounts,
# bootstrap_values): |n-step TD error| of a batch, as numpy.
initial_priorities = priorities.actor_priorities(
    _td_errors, values=tf.TensorSpec((None, 2), tf.float32),
    actions=tf.TensorSpec((None, None), tf.float32))
