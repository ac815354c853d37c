"""Ape-X DQN's initial priorities, computed by actors in batches (§3.1)."""

import numpy as np


def initial_priorities(values: np.ndarray, actions: np.ndarray,
                       n_step_returns: np.ndarray, discounts: np.ndarray,
                       bootstrap_values: np.ndarray) -> np.ndarray:
  """|n-step double-Q TD error| from the Q-values computed while acting.

  `values[i]` are the actor's Q-values at s_t (computed to choose a_t) and
  `bootstrap_values[i]` its Q-values at s_{t+n} (computed to choose a_{t+n}).
  An actor holds one network, so its copy selects and evaluates the bootstrap
  action: the double-Q target with the actor's parameters in both roles.
  No state is passed through the network a second time.
  """
  batch = np.arange(len(actions))
  best_actions = np.argmax(bootstrap_values, axis=-1)
  targets = n_step_returns + discounts * bootstrap_values[batch, best_actions]
  return np.abs(targets - values[batch, actions.astype(np.int64)])
