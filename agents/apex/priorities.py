"""What a priority is, in one place for the learner and the actors.

An Ape-X agent's transition has the absolute value of its n-step TD error
as its priority (Ape-X §3, the proportional variant of Schaul et al. 2016);
a distributional agent's its loss's own measure of the target's distance
(D4PG: `agents.d4pg.losses.priorities`). The learner takes it from its loss
on each batch (an `ApeXLearner._update` returns it); the actors compute the
initial priorities of their transitions in batches (§3), from the values
they computed while acting, so that no state goes through a network a
second time. Both go through the same function: each agent defines it once,
in its `losses.py`, and its `priorities.py` says which of the actor's
values stand for which of the learner's.
"""

from typing import Callable

import numpy as np
import tensorflow as tf

_BATCH = tf.TensorSpec((None,), tf.float32)


def from_td_errors(td_errors: tf.Tensor) -> tf.Tensor:
  """Ape-X §3: a transition's priority is its |TD error|."""
  return tf.abs(td_errors)


def actor_priorities(td_errors: Callable[..., tf.Tensor],
                     values: tf.TensorSpec, actions: tf.TensorSpec
                     ) -> Callable[..., np.ndarray]:
  """An adder's priority function (`agents.replay.adders`): the batch's
  |TD errors|, from `td_errors(values, actions, n_step_returns, discounts,
  bootstrap_values)` (the agent's loss's TD function, given the actor's
  values); see `batch_priorities`."""
  return batch_priorities(lambda *batch: from_td_errors(td_errors(*batch)),
                          values, actions)


def batch_priorities(priorities: Callable[..., tf.Tensor],
                     values: tf.TensorSpec, actions: tf.TensorSpec
                     ) -> Callable[..., np.ndarray]:
  """An adder's priority function (`agents.replay.adders`): `priorities(
  values, actions, n_step_returns, discounts, bootstrap_values)` (the
  agent's loss's priorities, given the actor's values), compiled once for
  any batch size. `values` and `actions` are the specs of one batch of them
  (the leading axis None); the actor's values at s_{t+n} have the spec of
  `values`."""
  compiled = tf.function(
      priorities, input_signature=[values, actions, _BATCH, _BATCH, values])
  dtypes = [spec.dtype.as_numpy_dtype for spec in compiled.input_signature]

  def initial_priorities(values, actions, n_step_returns, discounts,
                         bootstrap_values) -> np.ndarray:
    batch = (values, actions, n_step_returns, discounts, bootstrap_values)
    return compiled(*[np.asarray(part, dtype)
                      for part, dtype in zip(batch, dtypes)]).numpy()

  return initial_priorities
