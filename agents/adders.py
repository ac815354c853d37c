"""The Ape-X actor's local buffer: n-step transitions with initial priorities.

Ape-X §3 / Algorithm 1: each actor accumulates transitions in a local buffer
and, when it holds B of them, computes their initial priorities in one batch
from the values it already computed while acting, then writes the batch to the
shared replay. New data never enters with a constant or "max so far" priority.

Storage layout in Reverb (one `TrajectoryWriter` per environment). Every
environment step appends one row: its observation and, in the same row, the
action, n-step return and n-step discount of the transition that this step
completed (none during an episode's first n steps; at an episode's end the
remaining transitions take extra rows). An item references the rows of `s_t`,
of its scalars and of `s_{t+n}`, so an n-step transition costs no copy of its
observations, consecutive (stacked Atari) frames sit in the same compressed
chunk, and each step costs one append (Reverb's per-append cost is most of an
actor's overhead).

n-step targets (Ape-X §3.1, n = 3):
  R_t = sum_{k=0}^{m-1} (prod_{j=1}^{k} gamma d_{t+j}) r_{t+k+1}
  Gamma_t = prod_{j=1}^{m} gamma d_{t+j},   m = min(n, T - t)
where d is the environment's per-step discount: 0 on termination (no
bootstrap), 1 on a time-limit truncation (bootstrap from s_T).
"""

import collections
import dataclasses
from typing import Any, Callable, Deque, List, Optional

import dm_env
import numpy as np
import reverb
import tree

# Keys of a stored transition, in the learner's dataset.
OBSERVATION = 'observation'
ACTION = 'action'
N_STEP_RETURN = 'n_step_return'
DISCOUNT = 'discount'
NEXT_OBSERVATION = 'next_observation'

PriorityFn = Callable[..., np.ndarray]

FLUSH_TIMEOUT_MS = 1000
# Reverb's writer warns about (and may run out of memory with) many unconfirmed
# items; a larger local buffer is sent in slices of this many.
MAX_ITEMS_PER_FLUSH = 32


@dataclasses.dataclass
class PendingTransition:
  """A completed n-step transition waiting for its batched priority."""
  observation_row: int
  next_observation_row: int
  action: Any
  n_step_return: float
  discount: float
  values: Any  # What the actor computed at s_t while acting.
  bootstrap_values: Any  # What the actor computed at s_{t+n}.
  scalars_row: int = -1  # The row holding action, return and discount.


@dataclasses.dataclass
class _Step:
  observation_row: int
  action: Any
  values: Any
  reward: float = 0.0
  discount: float = 1.0


class NStepPrioritizedAdder:
  """Builds n-step transitions and writes them with actor-side priorities.

  The actor calls `add_first` with the first timestep of each episode and then
  `add(action, next_timestep, values)` for every step, where `values` is what
  its policy computed for the current observation while choosing `action`
  (Q-values for Ape-X DQN). A transition starting at s_t is complete once the
  values at s_{t+n} are known, i.e. one step after s_{t+n} is observed, or at
  the end of the episode. At the end of an episode that was truncated (not
  terminated), the actor passes `final_values`, its values at the last
  observation, which the bootstrap needs and which no action was chosen from.

  `priority_fn(values, actions, n_step_returns, discounts, bootstrap_values)`
  receives batched numpy arrays (a leading axis of size B on every leaf) and
  returns B non-negative priorities.
  """

  def __init__(self,
               client: reverb.Client,
               table: str,
               n_step: int,
               discount: float,
               priority_fn: PriorityFn,
               flush_size: int = 50,
               max_abs_reward: Optional[float] = None):
    if n_step < 1:
      raise ValueError(f'n_step must be >= 1, got {n_step}.')
    if flush_size < 1:
      raise ValueError(f'flush_size must be >= 1, got {flush_size}.')
    self._client = client
    self._table = table
    self._n_step = n_step
    self._discount = float(discount)
    self._priority_fn = priority_fn
    self._flush_size = flush_size
    self._max_abs_reward = max_abs_reward
    # Rows that a pending item may still reference: those of the pending
    # transitions and of the open n-step window, and at most n extra rows per
    # episode ending among them.
    self._keep_alive = 3 * flush_size + 2 * n_step + 16
    self._writer = None
    self._num_rows = 0
    self._window: Deque[_Step] = collections.deque()
    self._pending: List[PendingTransition] = []
    self._last_observation_row: Optional[int] = None

  @property
  def pending(self) -> List[PendingTransition]:
    """Completed transitions not yet written (for inspection and tests)."""
    return list(self._pending)

  def _append(self, row) -> int:
    if self._writer is None:
      self._writer = self._client.trajectory_writer(
          num_keep_alive_refs=self._keep_alive)
    self._writer.append(row)
    self._num_rows += 1
    return self._num_rows - 1

  def _append_rows(self, observation, completed: List[PendingTransition]
                   ) -> int:
    """Appends `observation` with the scalars of the first transition of
    `completed` in one row, and the others' scalars in rows of their own;
    returns the observation's row."""
    scalars = lambda t: {ACTION: t.action,
                         N_STEP_RETURN: np.float32(t.n_step_return),
                         DISCOUNT: np.float32(t.discount)}
    row = {OBSERVATION: observation}
    if completed:
      row.update(scalars(completed[0]))
    observation_row = self._append(row)
    if completed:
      completed[0].scalars_row = observation_row
    for transition in completed[1:]:
      transition.scalars_row = self._append(scalars(transition))
    self._pending.extend(completed)
    return observation_row

  def add_first(self, timestep: dm_env.TimeStep):
    """Starts an episode at `timestep.observation`."""
    if not timestep.first():
      raise ValueError('add_first needs the first timestep of an episode.')
    self._window.clear()
    self._last_observation_row = self._append_rows(timestep.observation, [])

  def add(self,
          action,
          next_timestep: dm_env.TimeStep,
          values,
          final_values=None):
    """Records one step: `action` taken at the last observation.

    Args:
      action: the action taken.
      next_timestep: what the environment returned.
      values: what the policy computed at the observation `action` was chosen
        from; becomes the bootstrap values of the transition ending here and
        the start values of the transition starting here.
      final_values: values at `next_timestep.observation`, needed when it is
        the last step of an episode with a non-zero discount (truncation).
    """
    if self._last_observation_row is None:
      raise ValueError('add called before add_first.')
    completed = []
    # Values at s_k complete the transition that started n steps earlier.
    if len(self._window) == self._n_step:
      completed.append(self._complete(self._window.popleft(),
                                      self._last_observation_row, values))
    reward = float(next_timestep.reward)
    if self._max_abs_reward is not None:
      reward = float(np.clip(reward, -self._max_abs_reward,
                             self._max_abs_reward))
    self._window.append(
        _Step(observation_row=self._last_observation_row, action=action,
              values=values, reward=reward,
              discount=float(next_timestep.discount)))

    if next_timestep.last():
      if final_values is None:
        if next_timestep.discount > 0:
          raise ValueError(
              'The episode ended by truncation (discount > 0): pass the '
              'values at the final observation as final_values.')
        final_values = tree.map_structure(np.zeros_like, values)
      final_row = self._num_rows  # Where the final observation goes.
      while self._window:
        completed.append(self._complete(self._window.popleft(), final_row,
                                        final_values))
      self._append_rows(next_timestep.observation, completed)
      self._last_observation_row = None
    else:
      self._last_observation_row = self._append_rows(
          next_timestep.observation, completed)
    if len(self._pending) >= self._flush_size:
      self.flush()

  def _complete(self, first: _Step, next_observation_row: int,
                bootstrap_values) -> PendingTransition:
    """Closes the transition starting at `first` over the whole window."""
    n_step_return, discount = 0.0, 1.0
    for step in [first, *self._window]:
      n_step_return += discount * step.reward
      discount *= self._discount * step.discount
      if step.discount == 0.0:
        break
    return PendingTransition(
        observation_row=first.observation_row,
        next_observation_row=next_observation_row,
        action=first.action,
        n_step_return=n_step_return,
        discount=discount,
        values=first.values,
        bootstrap_values=bootstrap_values)

  def flush(self):
    """Computes the pending transitions' priorities in one batch and writes
    them; returns once replay has confirmed them."""
    if not self._pending:
      return
    batch = self._pending
    self._pending = []
    stack = lambda *leaves: np.stack(leaves)
    priorities = self._priority_fn(
        values=tree.map_structure(stack, *[t.values for t in batch]),
        actions=np.stack([t.action for t in batch]),
        n_step_returns=np.array([t.n_step_return for t in batch], np.float32),
        discounts=np.array([t.discount for t in batch], np.float32),
        bootstrap_values=tree.map_structure(
            stack, *[t.bootstrap_values for t in batch]))
    priorities = np.asarray(priorities, np.float64)
    history = self._writer.history
    for index, (transition, priority) in enumerate(zip(batch, priorities)):
      if index and index % MAX_ITEMS_PER_FLUSH == 0:
        self._flush_writer()
      row = transition.scalars_row
      self._writer.create_item(
          self._table, float(priority), {
              OBSERVATION: history[OBSERVATION][transition.observation_row],
              ACTION: history[ACTION][row],
              N_STEP_RETURN: history[N_STEP_RETURN][row],
              DISCOUNT: history[DISCOUNT][row],
              NEXT_OBSERVATION:
                  history[OBSERVATION][transition.next_observation_row],
          })
    self._flush_writer()

  def _flush_writer(self):
    # Waits in short slices, so that a stop request (delivered to this thread
    # between two slices) is not stuck behind a rate-limited insert.
    while True:
      try:
        self._writer.flush(timeout_ms=FLUSH_TIMEOUT_MS)
        return
      except reverb.errors.DeadlineExceededError:
        continue

  def close(self):
    """Writes what is pending and closes the Reverb writer."""
    if self._writer is not None:
      self.flush()
      self._writer.close()
      self._writer = None
    # A new writer starts a new history: forget rows of the closed one.
    self._num_rows = 0
    self._window.clear()
    self._last_observation_row = None
