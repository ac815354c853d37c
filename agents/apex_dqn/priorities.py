"""Ape-X DQN's initial priorities, computed by actors in batches (§3.1)."""

import tensorflow as tf

from agents.apex import priorities
from agents.apex_dqn import losses


def _td_errors(values, actions, n_step_returns, discounts, bootstrap_values):
  """The loss's n-step double-Q TD error from the Q-values computed while
  acting: `values[i]` are the actor's Q-values at s_t (computed to choose
  a_t) and `bootstrap_values[i]` its Q-values at s_{t+n} (computed to choose
  a_{t+n}). An actor holds one network, so its copy selects and evaluates
  the bootstrap action: the double-Q target with the actor's parameters in
  both roles."""
  return losses.n_step_double_q_td_error(
      values, actions, n_step_returns, discounts,
      q_t_selector=bootstrap_values, q_t_evaluator=bootstrap_values)


# initial_priorities(values, actions, n_step_returns, discounts,
# bootstrap_values): |n-step double-Q TD error| of a batch, as numpy.
initial_priorities = priorities.actor_priorities(
    _td_errors, values=tf.TensorSpec((None, None), tf.float32),
    actions=tf.TensorSpec((None,), tf.int32))
