"""Ape-X DPG's initial priorities, computed by actors in batches (§3.2)."""

import numpy as np

# What an Ape-X DPG actor keeps of each acting step (the adder's `values`):
# the critic at the action taken and at the noiseless policy's action.
Q_TAKEN = 0
Q_POLICY = 1


def initial_priorities(values: np.ndarray, actions: np.ndarray,
                       n_step_returns: np.ndarray, discounts: np.ndarray,
                       bootstrap_values: np.ndarray) -> np.ndarray:
  """|R + Gamma q(s_{t+n}, pi(s_{t+n})) - q(s_t, a_t)| from acting values.

  `values[i]` holds q(s_t, a_t) and q(s_t, pi(s_t)) as the actor computed
  them when it chose a_t; `bootstrap_values[i]` the same at s_{t+n}. The
  actor's copies of the critic and policy stand in for the learner's target
  networks. Nothing is passed through a network a second time.
  """
  del actions  # q(s_t, a_t) was computed for the action taken.
  targets = n_step_returns + discounts * bootstrap_values[:, Q_POLICY]
  return np.abs(targets - values[:, Q_TAKEN])
