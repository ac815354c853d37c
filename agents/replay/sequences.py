"""Experience as sequences: an actor's steps written to replay as overlapping
sequences of fixed length, each with the recurrent state its actor had at
its first step, for a learner that unrolls a recurrent network over them
(R2D2: Kapturowski et al. 2019, §2.3 "stored state").

Each environment's steps go into one Reverb stream (`adders.Stream`), one
row per step:

  observation o_t, action a_t, reward r_{t+1}, discount d_{t+1}, mask 1,
  and at the first step of a sequence the actor's state before o_t.

At an episode's end a row holds its final observation o_T (action, reward
and discount zero, mask 0: no step starts there), which the step before
bootstraps from. A sequence is `length` consecutive rows of one episode;
sequences start every `period` rows of an episode (R2D2: 80 and 40, so
that consecutive ones overlap by half), and one that the episode's end
cuts short is filled with rows of zeros (mask 0). Overlapping sequences
reference the same rows: a step is compressed, sent and stored once.

An item of the table (`sequence_signature`):

  observation [L, ...], action [L, ...], reward [L], discount [L],
  mask [L] (1 where a step starts: an action was taken and its next
  observation is the next row), start_state (the state's nest, as the
  actor's core gives it for one environment), and with `state_row` k,
  state_at_row: the actor's state before row k, where a step starts there
  (mask[k] 1; elsewhere the start state stands in). R2D2's learner
  compares it with the state its burn-in recomputes (its §3's Q-value
  discrepancy: how stale the stored states are).

The learner's TD errors of a sequence are those of its rows t < L - 1 with
mask 1 (row t + 1 holds the next observation); the last row only
bootstraps. Rewards and discounts are the environment's: the learner
applies its own discount factor.

The adder gives each sequence its initial priority as the n-step adder
does (Ape-X §3): from the values the actor computed while acting, in
batches of `flush_size` sequences, with the agent's `priority_fn`.
"""

import dataclasses
import threading
from typing import Any, Callable, Dict, List, Optional

import dm_env
import numpy as np
import reverb
import tree

from agents.replay import adders

OBSERVATION = adders.OBSERVATION
ACTION = adders.ACTION
REWARD = 'reward'
DISCOUNT = adders.DISCOUNT
MASK = 'mask'
START_STATE = 'start_state'
STATE_AT_ROW = 'state_at_row'
STEP_COLUMNS = (OBSERVATION, ACTION, REWARD, DISCOUNT, MASK)

# priority_fn(values [B, L, ...], actions [B, L, ...], rewards [B, L],
# discounts [B, L], masks [B, L]) -> B priorities; `values` are the actor's
# at each row's observation (zeros where it had none: padding, and a
# terminal observation).
SequencePriorityFn = Callable[..., np.ndarray]


def sequence_signature(observation_spec, action_spec, state_spec,
                       length: int,
                       state_at_row: bool = False) -> Dict[str, Any]:
  """The table signature of sequences of `length` steps: `observation_spec`
  and `action_spec` as the environment's, `state_spec` a nest of
  `tf.TensorSpec` of one environment's state (no batch axis); with
  `state_at_row`, items hold a second state (`SequenceAdder`'s
  `state_row`)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  def steps(shape, dtype):
    return tf.TensorSpec((length, *shape), tf.as_dtype(dtype))

  signature = {
      OBSERVATION: steps(observation_spec.shape, observation_spec.dtype),
      ACTION: steps(action_spec.shape, action_spec.dtype),
      REWARD: steps((), np.float32),
      DISCOUNT: steps((), np.float32),
      MASK: steps((), np.float32),
      START_STATE: state_spec,
  }
  if state_at_row:
    signature[STATE_AT_ROW] = state_spec
  return signature


@dataclasses.dataclass
class _Sequence:
  first_row: int  # In the stream.
  # The stream's row holding the state before its row `state_row`, once
  # written (None: none, the start state stands in).
  state_row: Optional[int] = None
  # Each of its rows as it comes: (action, reward, discount, mask, the
  # actor's values at the row's observation).
  rows: List[tuple] = dataclasses.field(default_factory=list)


class SequenceAdder:
  """Writes one environment's steps as overlapping sequences with their
  start states and initial priorities; see the module docstring.

  The actor calls `add_first(timestep)` at each episode's start, then
  `add(action, next_timestep, values, state)` for every step: `values` is
  what it computed at the observation `action` was chosen from (its
  Q-values), `state` its recurrent state before that observation (a nest of
  arrays without a batch axis). At the end of a truncated episode it passes
  `final_values`, its values at the final observation. With `state_row`
  k (0 < k < length), each item also holds the state before its row k
  (`STATE_AT_ROW`; the table's signature must have it).
  """

  def __init__(self,
               client: reverb.Client,
               table: str,
               length: int,
               period: int,
               priority_fn: SequencePriorityFn,
               flush_size: int = 8,
               max_abs_reward: Optional[float] = None,
               state_row: Optional[int] = None):
    if length < 2:
      raise ValueError(f'length must be >= 2 (a TD error needs a next '
                       f'step), got {length}.')
    if not 1 <= period <= length:
      raise ValueError(f'period must be in [1, length={length}] (sequences '
                       f'that leave no step out), got {period}.')
    if flush_size < 1:
      raise ValueError(f'flush_size must be >= 1, got {flush_size}.')
    if state_row is not None and not 0 < state_row < length:
      raise ValueError(f'state_row must be in [1, length - 1 = {length - 1}] '
                       f'(row 0\'s state is the start state), got '
                       f'{state_row}.')
    self._state_row = state_row
    self._client = client
    self._table = table
    self._length = length
    self._period = period
    self._priority_fn = priority_fn
    self._flush_size = flush_size
    self._max_abs_reward = max_abs_reward
    # Rows a pending sequence may still reference: `flush_size` sequences
    # and the open ones, each of at most `length` rows of its own and an
    # episode's final row.
    self._keep_alive = (flush_size + 1) * (length + 1) + 2 * length
    self._stop_waiting = threading.Event()
    self._stream: Optional[adders.Stream] = None
    self._observation = None  # The last observation, with no row yet.
    self._episode_rows = 0  # Rows written of the open episode.
    self._open: List[_Sequence] = []  # Begun, not yet `length` rows long.
    self._pending: List[_Sequence] = []  # Complete, waiting for priorities.
    self._state_leaves = 0
    self._zeros = None  # A padding row's observation, action and values.

  @property
  def pending(self) -> List[_Sequence]:
    """Complete sequences not yet written (for inspection and tests)."""
    return list(self._pending)

  def _writer(self) -> adders.Stream:
    if self._stream is None:
      self._stream = adders.Stream(self._client, self._keep_alive,
                                   chunk_length=self._period,
                                   stop_waiting=self._stop_waiting)
    return self._stream

  def add_first(self, timestep: dm_env.TimeStep):
    """Starts an episode at `timestep.observation`."""
    if not timestep.first():
      raise ValueError('add_first needs the first timestep of an episode.')
    self._observation = timestep.observation
    self._episode_rows = 0
    self._open = []

  def _append(self, observation, action, reward: float, discount: float,
              mask: float, values, state=None):
    """A row of the open episode; begins a sequence at every `period`-th
    row where a step starts (with `state`); ends the sequences it
    completes."""
    begins = mask and self._episode_rows % self._period == 0
    # The open sequences this row is row `state_row` of (rows so far).
    reach = [s for s in self._open
             if mask and self._state_row is not None
             and len(s.rows) == self._state_row]
    leaves = (tree.flatten(state) if begins or reach
              else [None] * self._state_leaves)
    row = self._writer().append([
        observation, action, np.float32(reward), np.float32(discount),
        np.float32(mask), *leaves])
    for sequence in reach:
      sequence.state_row = row
    if begins:
      self._open.append(_Sequence(first_row=row))
    self._episode_rows += 1
    for sequence in self._open:
      sequence.rows.append((action, reward, discount, mask, values))
    self._pending.extend(s for s in self._open
                         if len(s.rows) == self._length)
    self._open = [s for s in self._open if len(s.rows) < self._length]

  def add(self, action, next_timestep: dm_env.TimeStep, values, state,
          final_values=None):
    """Records one step: `action` taken at the last observation, with
    `values` computed there from `state`."""
    if self._observation is None:
      raise ValueError('add called before add_first.')
    if (next_timestep.last() and next_timestep.discount > 0 and
        final_values is None):
      raise ValueError(
          'The episode ended by truncation (discount > 0): pass the values '
          'at the final observation as final_values.')
    if self._zeros is None:
      self._state_leaves = len(tree.flatten(state))
      self._zeros = (np.zeros_like(self._observation), np.zeros_like(action),
                     tree.map_structure(np.zeros_like, values))
    reward = float(next_timestep.reward)
    if self._max_abs_reward is not None:
      reward = min(max(reward, -self._max_abs_reward), self._max_abs_reward)
    self._append(self._observation, action, reward,
                 float(next_timestep.discount), 1.0, values, state)
    if next_timestep.last():
      if final_values is None:  # Terminated: no bootstrap from it.
        final_values = self._zeros[2]
      self._append(next_timestep.observation, self._zeros[1], 0.0, 0.0, 0.0,
                   final_values)
      while self._open:  # Cut short by the episode's end: padded.
        self._append(self._zeros[0], self._zeros[1], 0.0, 0.0, 0.0,
                     self._zeros[2])
      self._observation = None
    else:
      self._observation = next_timestep.observation
    if len(self._pending) >= self._flush_size:
      self.flush()

  def flush(self):
    """Computes the pending sequences' priorities in one batch and writes
    them; replay confirms them in the background. Waits only while
    `adders.MAX_ITEMS_IN_FLIGHT` items are unconfirmed."""
    if not self._pending:
      return
    batch, self._pending = self._pending, []
    stack = lambda *leaves: np.stack(leaves)
    columns = [np.stack([np.stack([row[index] for row in sequence.rows])
                         for sequence in batch]) for index in range(4)]
    values = tree.map_structure(
        stack, *[tree.map_structure(stack, *[row[4] for row in s.rows])
                 for s in batch])
    priorities = np.asarray(self._priority_fn(
        values=values, actions=columns[0],
        rewards=columns[1].astype(np.float32),
        discounts=columns[2].astype(np.float32),
        masks=columns[3].astype(np.float32)), np.float64)
    for start in range(0, len(batch), adders.ITEMS_PER_SLICE):
      part = batch[start:start + adders.ITEMS_PER_SLICE]
      self._stream.wait_for_at_most(adders.MAX_ITEMS_IN_FLIGHT - len(part))
      for sequence, priority in zip(part, priorities[start:]):
        self._create_item(sequence, float(priority))

  def _create_item(self, sequence: _Sequence, priority: float):
    """The item of `sequence`: its rows' step columns, its first row's
    state, and the state before row `state_row` (columns in the order of
    the signature's flattening: sorted keys)."""
    stream = self._stream
    rows = range(sequence.first_row, sequence.first_row + self._length)

    def state_at(row):
      return [[stream.reference(row, len(STEP_COLUMNS) + leaf)]
              for leaf in range(self._state_leaves)]

    columns = {name: [[stream.reference(row, STEP_COLUMNS.index(name))
                       for row in rows]] for name in STEP_COLUMNS}
    columns[START_STATE] = state_at(sequence.first_row)
    if self._state_row is not None:
      columns[STATE_AT_ROW] = state_at(
          sequence.first_row if sequence.state_row is None
          else sequence.state_row)
    references, squeeze = [], []
    for name in sorted(columns):
      references += columns[name]
      squeeze += [name in (START_STATE, STATE_AT_ROW)] * len(columns[name])
    stream.create_item(self._table, priority, references, squeeze)

  def wait_until_written(self):
    """Blocks until replay has confirmed every item written so far."""
    if self._stream is not None:
      self._stream.wait_for_at_most(0)

  def stop_waiting(self):
    """From any thread: no call of this adder waits for replay from now on
    (`adders.NStepPrioritizedAdder.stop_waiting`)."""
    self._stop_waiting.set()

  def close(self):
    """Writes what is pending and closes the Reverb stream."""
    if self._stream is not None:
      self.flush()
      self.wait_until_written()
      self._stream.close()
      self._stream = None
    self._observation = None
    self._open = []
