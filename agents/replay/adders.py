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
observations, consecutive steps share a compressed chunk (`CHUNK_LENGTH`
rows), and each step costs one append (Reverb's per-call cost is most of an
actor's overhead).

Stacked frames (Atari: each observation is the last 4 frames, on its last
axis): a row holds only the step's newest frame, and an episode's first
observation takes one row per frame. An item's observation references the
rows of its 4 frames and comes out of replay as [4, H, W];
`agents.replay.tables.make_dataset` puts the frames back on the last axis. Each frame
is compressed, sent and stored once instead of 4 times.

n-step targets (Ape-X §3.1, n = 3):
  R_t = sum_{k=0}^{m-1} (prod_{j=1}^{k} gamma d_{t+j}) r_{t+k+1}
  Gamma_t = prod_{j=1}^{m} gamma d_{t+j},   m = min(n, T - t)
where d is the environment's per-step discount: 0 on termination (no
bootstrap), 1 on a time-limit truncation (bootstrap from s_T).
"""

import collections
import dataclasses
import threading
from typing import Any, Callable, Deque, List, Optional

import dm_env
import numpy as np
import reverb
import tree
from absl import logging

# Keys of a stored transition, in the learner's dataset.
OBSERVATION = 'observation'
ACTION = 'action'
N_STEP_RETURN = 'n_step_return'
DISCOUNT = 'discount'
NEXT_OBSERVATION = 'next_observation'

PriorityFn = Callable[..., np.ndarray]

FLUSH_TIMEOUT_MS = 1000
# Items written but not yet confirmed by replay, per writer: the actor goes on
# acting while they travel, and waits only when this many are still in flight
# (Reverb warns from 50 on). A larger local buffer goes out in slices.
MAX_ITEMS_IN_FLIGHT = 48
ITEMS_PER_SLICE = MAX_ITEMS_IN_FLIGHT // 2
# Rows per compressed chunk: a chunk is compressed and sent once it is full,
# so items go out at most this many steps after they are written, without a
# round trip to replay on the actor's time. Sampling an item decompresses
# whole chunks: an Atari transition needs 7 consecutive frames, which 8-row
# chunks hold in 1-2 chunks (16-row chunks: 16-32 frames decompressed). On
# Pong, 8 rows against 16: samples ~30% cheaper for the learner, ~6% more
# replay memory, the same cost for the actor (`benchmarks/writer_cost.py`).
CHUNK_LENGTH = 8
# How long the writer waits for the table's signature (to check items).
SIGNATURE_TIMEOUT_MS = 3000


class Stream:
  """One Reverb stream of rows, any column of which may be absent from a
  row, and of items referencing them: Reverb's C++ `TrajectoryWriter`,
  driven directly.

  `reverb.TrajectoryWriter` (the Python wrapper) flattens every row and
  item with `tree` and keeps a Python history of references, Python work on
  every append and every item, and an actor makes one of each per
  environment step. What this writer costs an actor per step:
  `benchmarks/results/writer_cost.json` (docs/performance.md). Written for
  the bindings of Reverb 0.7 (`reverb.pybind`), which the project pins.

  The `keep_alive` newest rows can be referenced by items; rows are
  compressed in chunks of `chunk_length`.
  """

  def __init__(self, client: reverb.Client, keep_alive: int,
               chunk_length: int = CHUNK_LENGTH,
               stop_waiting: Optional[threading.Event] = None):
    # Once set, waits for replay end at their next slice (`wait_for_at_most`).
    self._stop_waiting = stop_waiting or threading.Event()
    options = reverb.pybind.ConstantChunkerOptions(
        max_chunk_length=min(chunk_length, keep_alive),
        num_keep_alive_refs=keep_alive)
    self._writer = self._new_writer(client, options)
    self._refs = collections.deque(maxlen=keep_alive)
    self.num_rows = 0

  def _new_writer(self, client: reverb.Client, options):
    """Reverb's trajectory writer, once replay answers. A replay node
    coming back after a fault (its keeper starts it again,
    docs/checkpoints.md) answers nothing for a while; a writer made then
    (an actor started again itself, or just started) waits for it, as the
    calls of the writers already open do, instead of failing and costing
    its actor a restart. It gives up only once told to stop waiting."""
    tries = 0
    while True:
      try:
        writer = client._client.NewTrajectoryWriter(  # pylint: disable=protected-access
            options, SIGNATURE_TIMEOUT_MS)
      except RuntimeError as error:
        if ('Deadline Exceeded' not in str(error) or
            self._stop_waiting.is_set()):
          raise
        tries += 1
        if tries == 1:
          logging.warning(
              'Replay at %s did not answer within %.0f s; waiting for it.',
              client.server_address, SIGNATURE_TIMEOUT_MS / 1000)
        continue
      if tries:
        logging.info('Replay at %s answers again, after %d tries.',
                     client.server_address, tries + 1)
      return writer

  def append(self, columns) -> int:
    """Appends a row (a list of columns, None where absent); returns its
    index."""
    self._refs.append(self._writer.Append(list(columns)))
    self.num_rows += 1
    return self.num_rows - 1

  def reference(self, row: int, column: int):
    """The reference to `column` of `row`, one of the `keep_alive` newest."""
    return self._refs[row - (self.num_rows - len(self._refs))][column]

  def create_item(self, table: str, priority: float, columns, squeeze):
    """An item: for each of its columns (in the order of the table
    signature's flattening), the list of references it holds, squeezed
    (one row, without a leading axis) or not."""
    self._writer.CreateItem(table, priority, columns, squeeze)

  def wait_for_at_most(self, num_items: int):
    """Blocks until at most `num_items` items are unconfirmed, or until
    waiting is given up (`stop_waiting` set: the items stay in flight)."""
    # In short slices, so that a stop request (an exception delivered to
    # this thread between two slices, or `stop_waiting`) is not stuck behind
    # a rate-limited insert.
    while not self._stop_waiting.is_set():
      try:
        self._writer.Flush(num_items, FLUSH_TIMEOUT_MS)
        return
      except RuntimeError as error:
        if 'Timeout exceeded' not in str(error):
          raise

  def close(self):
    """Stops the stream; what replay has not confirmed is dropped."""
    writer = getattr(self, '_writer', None)  # None: it was never made.
    if writer is not None:
      writer.Close()

  def __del__(self):
    # As `reverb.TrajectoryWriter` does: otherwise the C++ writer's destructor
    # waits, without a time limit, for replay to confirm every item.
    self.close()


class _RowWriter(Stream):
  """The n-step adder's stream: rows of (observation, action, n-step
  return, discount; any may be absent) and items of n-step transitions
  referencing them."""

  # An item's columns in the order of the table signature's flattening
  # (sorted keys), each as (column of the row, which rows: 0 the
  # observation's, 1 the scalars', 2 the next observation's). A row's
  # columns: observation (or frame), action, n-step return, discount.
  ITEM = tuple(column for _, column in sorted({
      ACTION: (1, 1), DISCOUNT: (3, 1), N_STEP_RETURN: (2, 1),
      NEXT_OBSERVATION: (0, 2), OBSERVATION: (0, 0)}.items()))

  def __init__(self, client: reverb.Client, keep_alive: int,
               stacked_frames: int = 0,
               stop_waiting: Optional[threading.Event] = None):
    super().__init__(client, keep_alive, CHUNK_LENGTH, stop_waiting)
    # With stacked frames F, an observation's frames are in its row and the
    # F - 1 rows before it, and its item columns are not squeezed.
    self._span = max(stacked_frames, 1)
    self._squeeze = [not (stacked_frames and column == 0)
                     for column, _ in self.ITEM]

  def append(self, observation, scalars=(None, None, None)) -> int:
    """Appends a row; returns its index. (The base's body, inlined: an
    actor's every step calls it.)"""
    self._refs.append(self._writer.Append([observation, *scalars]))
    self.num_rows += 1
    return self.num_rows - 1

  def create_item(self, table: str, priority: float,  # pylint: disable=arguments-renamed
                  observation_row: int,
                  scalars_row: int, next_observation_row: int):
    """An item of the transition whose observations (or newest frames) are
    in the given rows."""
    first = self.num_rows - len(self._refs)
    span = self._span
    rows = [range(observation_row - first - span + 1,
                  observation_row - first + 1),
            [scalars_row - first],
            range(next_observation_row - first - span + 1,
                  next_observation_row - first + 1)]
    self._writer.CreateItem(
        table, priority,
        [[self._refs[row][column] for row in rows[which]]
         for column, which in self.ITEM],
        self._squeeze)


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
               max_abs_reward: Optional[float] = None,
               stacked_frames: int = 0):
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
    if stacked_frames < 0 or stacked_frames == 1:
      raise ValueError('stacked_frames must be 0 (observations are not '
                       f'stacks of frames) or >= 2, got {stacked_frames}.')
    self._stacked_frames = stacked_frames
    # Rows that a pending item may still reference: those of the pending
    # transitions and of the open n-step window, at most n extra rows per
    # episode ending among them, and the earlier frames of a stack.
    self._keep_alive = 3 * flush_size + 2 * n_step + 16 + 2 * stacked_frames
    self._episode_start = None  # With stacked frames: the first observation.
    self._writer: Optional[_RowWriter] = None
    self._stop_waiting = threading.Event()
    self._window: Deque[_Step] = collections.deque()
    self._pending: List[PendingTransition] = []
    self._last_observation_row: Optional[int] = None

  @property
  def pending(self) -> List[PendingTransition]:
    """Completed transitions not yet written (for inspection and tests)."""
    return list(self._pending)

  def _row_writer(self) -> _RowWriter:
    if self._writer is None:
      self._writer = _RowWriter(self._client, self._keep_alive,
                                self._stacked_frames, self._stop_waiting)
    return self._writer

  def _append_rows(self, observation, completed: List[PendingTransition]
                   ) -> int:
    """Appends `observation` with the scalars of the first transition of
    `completed` in one row, and the others' scalars in rows of their own;
    returns the observation's row."""
    scalars = lambda t: (t.action, np.float32(t.n_step_return),
                         np.float32(t.discount))
    if self._stacked_frames:
      observation = np.ascontiguousarray(observation[..., -1])
    if completed:
      observation_row = self._row_writer().append(observation,
                                            scalars(completed[0]))
      completed[0].scalars_row = observation_row
    else:
      observation_row = self._row_writer().append(observation)
    for transition in completed[1:]:
      transition.scalars_row = self._writer.append(None, scalars(transition))
    self._pending.extend(completed)
    return observation_row

  def add_first(self, timestep: dm_env.TimeStep):
    """Starts an episode at `timestep.observation`."""
    if not timestep.first():
      raise ValueError('add_first needs the first timestep of an episode.')
    self._window.clear()
    if self._stacked_frames:
      self._check_stack(timestep.observation)
      for frame in range(self._stacked_frames - 1):  # All but the newest.
        self._row_writer().append(
            np.ascontiguousarray(timestep.observation[..., frame]))
      self._episode_start = timestep.observation
    self._last_observation_row = self._append_rows(timestep.observation, [])

  def _check_stack(self, observation, previous=None):
    """Stacked frames: `observation` has them on its last axis and, after
    `previous`, holds the same frames moved by one."""
    if (np.ndim(observation) < 1 or
        np.shape(observation)[-1] != self._stacked_frames):
      raise ValueError(
          f'stacked_frames={self._stacked_frames} but the observation has '
          f'shape {np.shape(observation)}; its last axis must hold the '
          'frames. Pass stacked_frames=0 for observations that are not '
          'stacks of frames.')
    if previous is not None and not np.array_equal(observation[..., :-1],
                                                   previous[..., 1:]):
      raise ValueError(
          'The observations are not a stack of the last '
          f'{self._stacked_frames} frames moving by one frame per step, as '
          'stacked_frames needs. Pass stacked_frames=0 to store whole '
          'observations.')

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
    if self._episode_start is not None:  # An episode's first step.
      self._check_stack(next_timestep.observation, self._episode_start)
      self._episode_start = None
    completed = []
    # Values at s_k complete the transition that started n steps earlier.
    if len(self._window) == self._n_step:
      completed.append(self._complete(self._window.popleft(),
                                      self._last_observation_row, values))
    reward = float(next_timestep.reward)
    if self._max_abs_reward is not None:
      reward = min(max(reward, -self._max_abs_reward), self._max_abs_reward)
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
      final_row = self._writer.num_rows  # Where the final observation goes.
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
    them. Replay confirms them in the background (`wait_until_written`
    waits for that); this waits only while `MAX_ITEMS_IN_FLIGHT` items are
    unconfirmed, e.g. while the table's rate limiter holds inserts back."""
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
    for start in range(0, len(batch), ITEMS_PER_SLICE):
      part = batch[start:start + ITEMS_PER_SLICE]
      # Room for this slice; the earlier ones are usually confirmed by now.
      self._writer.wait_for_at_most(MAX_ITEMS_IN_FLIGHT - len(part))
      for transition, priority in zip(part, priorities[start:]):
        self._writer.create_item(self._table, float(priority),
                                 transition.observation_row,
                                 transition.scalars_row,
                                 transition.next_observation_row)

  def wait_until_written(self):
    """Blocks until replay has confirmed every item written so far
    (transitions still pending stay pending)."""
    if self._writer is not None:
      self._writer.wait_for_at_most(0)

  def stop_waiting(self):
    """From any thread: from now on, no call of this adder waits for
    replay to take its items (they stay in flight, and are lost if the
    process ends before replay takes them). For an actor asked to stop:
    its inserts may be held back by the rate limiter for as long as the
    learner does not sample, which, with replay in shards, it may not do
    while it waits for a shard whose own actors have already stopped."""
    self._stop_waiting.set()

  def close(self):
    """Writes what is pending and closes the Reverb writer."""
    if self._writer is not None:
      self.flush()
      self.wait_until_written()
      self._writer.close()
      self._writer = None
    # A new writer starts a new history: forget rows of the closed one.
    self._window.clear()
    self._episode_start = None
    self._last_observation_row = None
