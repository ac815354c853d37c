"""Ape-X DPG's replay eviction (App. D): victims sampled in proportion to
priority^-0.4, built on what Reverb 0.7 offers.

The paper keeps its DPG replay at a fixed capacity by periodically evicting
transitions "using proportional prioritized sampling, with priority exponent
-0.4" (App. D): low-priority data leaves first, but at random. Reverb cannot
do this by itself:

* its `Prioritized` selector refuses a negative exponent (the server dies
  with `Check failed: priority_exponent_ >= 0`), and a table has one priority
  per item, from which the learner's sampling needs p^0.6 and eviction
  p^-0.4: exponents of opposite signs;
* a second table over the same transitions could be sampled for victims,
  but the victim must then be deleted from the main table by *its* key, and
  Reverb gives an item's key only to whoever samples it from that table (the
  writers' `create_item` returns nothing): the low-priority victims are the
  items the main table's sampler almost never reveals.

What reveals every item's key and current priority at once is the table's
own checkpoint (`reverb.Client.checkpoint`): its `tables.tfrecord` lists
every item of the table, in insertion order, with its key and priority, as
of one moment. So an eviction round here is:

  1. take a Reverb checkpoint (a snapshot of the table; it is also the
     replay's newest checkpoint, so a restarted replay loses less);
  2. read the items' keys and priorities from it;
  3. draw `size - capacity` victims without replacement, each draw with
     probability proportional to (p + EPSILON)^exponent among the items not
     yet drawn (successive sampling), by exponential races
     (Efraimidis and Spirakis 2006): each item gets E_i / w_i with E_i ~
     Exp(1), and the k smallest are the victims; this is exactly k
     successive proportional draws;
  4. delete them from the table (`mutate_priorities(deletes=...)`).

This is exact for the table as of the snapshot: the paper's eviction is
periodic too, and priorities the learner writes during a round count from
the next one. Transitions inserted during a round wait for the next.
Rounds run whenever the table holds `slack` items (5%) over its capacity
(the paper's capacity is soft in the same way), checked four times a second
by the replay node. Reverb's table gets a hard limit of `capacity +
backstop` items with a FIFO remover, which acts only if rounds fall behind
the actors (logged when it has).

Cost: each round writes the whole table to disk: about 1 ms of the replay
node's CPU per evicted item (`benchmarks/results/eviction_cost.json`, from
`benchmarks/eviction_cost.py`), so one replay core keeps up with about
1,000 inserts a second. Enough for small runs of
the state-based control tasks Ape-X DPG learns; not for Atari frames or
hundreds of actors.
"""

import os
import struct
import tempfile
from typing import Optional, Tuple

import numpy as np
import reverb
from absl import logging
from reverb.cc.checkpointing import checkpoint_pb2

# Added to priorities before the negative exponent, so that an item of
# priority 0 (a TD error of exactly 0) has a finite weight: the largest of
# any item's, (1e-6)^-0.4 = 251 times that of an item of priority 1.
EPSILON = 1e-6

TABLES_FILE = 'tables.tfrecord'


def eviction_weights(priorities: np.ndarray, exponent: float) -> np.ndarray:
  """(p + EPSILON)^exponent: an item's weight in a victim draw."""
  return np.power(np.asarray(priorities, np.float64) + EPSILON, exponent)


def draw_victims(weights: np.ndarray, count: int,
                 rng: np.random.Generator) -> np.ndarray:
  """Indices of `count` items drawn without replacement, each draw in
  proportion to the weights of the items not yet drawn: the `count`
  smallest exponential races E_i / w_i (Efraimidis and Spirakis 2006)."""
  weights = np.asarray(weights, np.float64)
  count = min(int(count), weights.size)
  if count <= 0:
    return np.zeros((0,), np.int64)
  races = rng.exponential(size=weights.size) / weights
  victims = np.argpartition(races, count - 1)[:count]
  return victims[np.argsort(races[victims])]


def read_table_items(checkpoint_path: str,
                     table: str) -> Tuple[np.ndarray, np.ndarray]:
  """(keys, priorities) of every item of `table` in a Reverb checkpoint
  directory, in insertion order."""
  path = os.path.join(checkpoint_path, TABLES_FILE)
  for record in _records(path):
    checkpoint = checkpoint_pb2.PriorityTableCheckpoint.FromString(record)
    if checkpoint.table_name != table:
      continue
    keys = np.fromiter((item.key for item in checkpoint.items), np.uint64,
                       len(checkpoint.items))
    priorities = np.fromiter((item.priority for item in checkpoint.items),
                             np.float64, len(checkpoint.items))
    return keys, priorities
  raise ValueError(f'No table {table!r} in the replay checkpoint {path}.')


def _records(path: str):
  """The records of an uncompressed TFRecord file (each: its length as a
  little-endian uint64, that length's masked CRC, the data, the data's
  masked CRC). Read here rather than through tf.data, which took about
  50 ms to set up for each file; Reverb writes a checkpoint's DONE marker
  only after the whole file, so a listed checkpoint is complete."""
  with open(path, 'rb') as file:
    while True:
      header = file.read(12)
      if not header:
        return
      if len(header) < 12:
        raise ValueError(f'{path} ends inside a record header.')
      (length,) = struct.unpack('<Q', header[:8])
      record = file.read(length)
      if len(record) < length or len(file.read(4)) < 4:
        raise ValueError(f'{path} ends inside a record.')
      yield record


# A round snapshots the whole table, 33-54 us per item for tables of 10K to
# 1M items (benchmarks/results/eviction_cost.json), so its cost per evicted
# item is that over the fraction evicted per round: 0.65-1.1 ms at 5%. The
# paper's Atari replay is soft-limited too (Horgan et al. 2018, §4.1: a
# capacity of 2M, a median size of 2,035,050, 1.75% over).
SLACK_FRACTION = 0.05


def slack(capacity: int) -> int:
  """Items over capacity that start a round: 5% of it, at least one."""
  return max(int(capacity * SLACK_FRACTION), 1)


def backstop(capacity: int) -> int:
  """Items a table evicted in rounds may hold over its capacity before
  Reverb's own FIFO remover acts: five rounds' worth, at least 10,000."""
  return max(5 * slack(capacity), 10_000)


class InversePriorityEviction:
  """Evicts a Reverb table's items down to `capacity`, victims sampled in
  proportion to (priority + EPSILON)^exponent (Ape-X App. D: exponent
  -0.4); see the module docstring. Runs in the replay node's process, next
  to its server."""

  def __init__(self, table: str, capacity: int, exponent: float,
               seed: Optional[int] = None):
    if exponent >= 0:
      raise ValueError(f'The eviction exponent must be negative (the paper: '
                       f'-0.4), not {exponent}.')
    self.table = table
    self.capacity = capacity
    self.exponent = exponent
    self._rng = np.random.default_rng(seed)
    self.evicted = 0
    self.rounds = 0

  def due(self, client: reverb.Client) -> bool:
    """Whether the table holds `slack` items or more over its capacity."""
    size = client.server_info()[self.table].current_size
    return size >= self.capacity + slack(self.capacity)

  def evict(self, client: reverb.Client) -> int:
    """One round: a snapshot of the table, its excess drawn and deleted.
    Returns how many items were evicted. The client's server must have a
    checkpointer (see `checkpoint_directory`)."""
    path = client.checkpoint()
    keys, priorities = read_table_items(path, self.table)
    excess = keys.size - self.capacity
    if excess <= 0:
      return 0
    if keys.size >= self.capacity + backstop(self.capacity):
      logging.warning(
          'Replay reached its hard limit (%d items): rounds of eviction fell '
          'behind the actors, and Reverb removed the oldest items meanwhile.',
          keys.size)
    victims = draw_victims(eviction_weights(priorities, self.exponent),
                           excess, self._rng)
    client.mutate_priorities(self.table, deletes=keys[victims].tolist())
    self.evicted += victims.size
    self.rounds += 1
    return victims.size


def checkpoint_directory(directory: Optional[str]) -> str:
  """Where the replay server checkpoints: its run's replay checkpoints, or
  (replay checkpoints off) a directory of this process's own, which rounds
  of eviction need to read the table from."""
  return directory or tempfile.mkdtemp(prefix='replay_eviction_')
