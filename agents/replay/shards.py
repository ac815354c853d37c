"""Replay past one server: the learner's side of several replay shards.

Each shard is a Reverb server with a prioritised table of its own (an equal
part of the capacity: `agents.apex.config.shard_config`); each actor writes to one
(`distributed.program`). The learner samples them as one table:
`ShardedBatches` gives batches in which a transition's probability is
p^alpha over the sum of p^alpha over every shard, with that probability in
its `info.probability` (for the importance weights), and sends each new
priority back to the shard that holds the transition.

How. Reverb reports, with every sampled item, its priority p and its
probability within its table, p^alpha / mass, so each sample tells its
shard's mass (the sum of p^alpha over the shard) at the time it was drawn.
For a batch of B, the learner draws how many transitions come from each shard,
(c_1..c_N) ~ Multinomial(B, mass_k / sum of masses), and takes the next c_k
samples that shard k has streamed. A transition of shard k is then drawn with
probability (mass_k / sum) (p^alpha / mass_k) = p^alpha / sum over all
shards: one table's probability, whenever the masses known are the current
ones. Each transition's `info.probability` is computed with the masses its
batch was drawn by, so importance weights are right for how it was drawn.

How current the masses are: each shard's is that told by the newest sample
the learner has received from it, so it lags the shard by the samples it
streams ahead (a few batches' worth), as the probabilities Reverb reports lag
the priorities written since. The tests (`tests/test_replay_shards.py`) check
the distribution against one table on fixed tables.

Faults: each shard streams to the learner from a thread of its own. When a
shard has not given the samples a batch needs for `PROBE_SECONDS`, it is
asked for its status; it is left out if it does not answer (killed, frozen,
its machine gone), or if it answers but has taken no insert since the last
such call (its actors died or gave up: with `--samples_per_insert` its rate
limiter then never lets the learner's samples through). A shard left out is
not drawn from: batches are drawn over the others, in proportion to their
masses, until it streams again (its node restarts it from its checkpoint
under local_mp; its actors' writes let its samples through). A shard that
answers and takes inserts is only held back by its rate limiter, and is
waited for: leaving it out would bias the sample. New priorities go to each
shard from a thread of its own, so that a shard that is down holds up
neither the learner nor the other shards; updates for a shard that is down
are dropped (its items come back from its checkpoint with the priorities
they had).
"""

import collections
import math
import os
import queue
import threading
import time
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import reverb
import tensorflow as tf
from absl import logging

from agents.replay import tables

# How long a batch waits for a shard's samples before the shard is asked
# for its status, and how long that status call may take. This variable, in
# the environment a program is launched from (local_mp's nodes inherit it),
# sets it otherwise: longer for a machine so loaded that a shard's actors
# can write nothing for that long while they are only slow. Each shard left
# out skews the sample until it streams again; a longer wait holds the
# learner that much longer on a shard whose actors have stopped.
PROBE_VARIABLE = 'APEX_SHARD_PROBE_SECONDS'
PROBE_SECONDS = float(os.environ.get(PROBE_VARIABLE, 5.0))
# Chunks a shard's stream keeps ready (each about B / N samples).
CHUNKS_AHEAD = 3


class _Shard:
  """One shard's stream: a thread that iterates the shard's Reverb dataset in
  chunks into a bounded queue, remaking the dataset when it ends (a
  rate-limiter timeout) or fails (the server is down); the samples received
  and not yet taken; the shard's mass as its newest sample tells it."""

  def __init__(self, index: int, address: str, table: str, chunk_size: int,
               stacked_frames: int, priority_exponent: float,
               stopping: threading.Event):
    self.index = index
    self.address = address
    self._table = table
    self._chunk_size = chunk_size
    self._stacked_frames = stacked_frames
    self._priority_exponent = priority_exponent
    self._stopping = stopping
    self._queue = queue.Queue(maxsize=CHUNKS_AHEAD)
    self._chunks = collections.deque()  # Received, not yet (all) taken.
    self._offset = 0  # Taken from the first chunk.
    self.mass: Optional[float] = None  # Unknown before its first sample.
    self.size = 0
    self.live = True
    # A wait for its samples: in vain since, and the inserts the shard had
    # taken at the last status call (`ShardedBatches._wait_for`).
    self.silent_since: Optional[float] = None
    self.probed_inserts: Optional[int] = None
    self.error: Optional[str] = None
    self._thread = threading.Thread(target=self._stream, daemon=True,
                                    name=f'replay-shard-{index}')
    self._thread.start()

  def _put(self, chunk) -> bool:
    while not self._stopping.is_set():
      try:
        self._queue.put(chunk, timeout=0.5)
        return True
      except queue.Full:
        continue
    return False

  def _stream(self):
    while not self._stopping.is_set():
      try:
        # Chunks kept ready in the queue, not by the dataset.
        for chunk in tables.make_dataset(
            self.address, self._chunk_size, prefetch_size=0,
            table=self._table, stacked_frames=self._stacked_frames,
            signature_timeout_secs=int(PROBE_SECONDS)):
          self.error = None
          # As numpy here, off the learner's thread: its batches are cut
          # and joined from these, and numpy slices them without the
          # per-op overhead of eager TensorFlow.
          if not self._put(tf.nest.map_structure(lambda x: x.numpy(),
                                                 chunk)):
            return
      except tf.errors.OutOfRangeError:
        continue  # Rate-limited for a while: a new dataset, at once.
      except Exception as error:  # pylint: disable=broad-except
        # The server is down, or restarting (gRPC errors, or Reverb's
        # DeadlineExceededError for the signature): try again shortly.
        self.error = str(error).splitlines()[0] if str(error) else repr(error)
        self._stopping.wait(1.0)

  @property
  def available(self) -> int:
    """Samples received and not yet taken."""
    return len(self._chunks) * self._chunk_size - self._offset

  def receive(self, timeout: float = 0.0,
              keep: Optional[int] = None) -> bool:
    """Moves the chunks the stream has ready to the samples received
    (waiting up to `timeout` for one), up to `keep` chunks held in all if
    given; True if any came. Chunks are taken only as the batches need them
    (and `keep` ahead): each sample a shard streams counts against its rate
    limiter, so samples taken in and never used would let its actors run
    ahead of what the learner learns from, and would pile up here."""
    received = False
    while keep is None or len(self._chunks) < keep:
      try:
        chunk = self._queue.get(timeout=timeout)
      except queue.Empty:
        return received
      received = True
      timeout = 0.0  # Then only what is ready already.
      self._chunks.append(chunk)
      info = chunk.info
      with np.errstate(all='ignore'):
        mass = float(info.priority[-1]) ** self._priority_exponent / float(
            info.probability[-1])
      if math.isfinite(mass) and mass > 0:
        self.mass = mass
      self.size = int(info.table_size[-1])
    return received

  def take(self, count: int) -> List[reverb.ReplaySample]:
    """The next `count` samples received (at least `count` available), as
    pieces of chunks."""
    pieces = []
    while count:
      chunk = self._chunks[0]
      end = min(self._offset + count, self._chunk_size)
      pieces.append(tf.nest.map_structure(
          lambda x, begin=self._offset, end=end: x[begin:end], chunk))
      count -= end - self._offset
      if end == self._chunk_size:
        self._chunks.popleft()
        self._offset = 0
      else:
        self._offset = end
    return pieces

  def end_wait(self):
    """Forgets the wait for its samples (they came, or it is left out)."""
    self.silent_since = self.probed_inserts = None

  def inserts(self) -> Optional[int]:
    """The inserts the shard's table has taken since its server started (as
    its rate limiter counts them), or None if the server does not answer a
    status call in time."""
    try:
      info = reverb.Client(self.address).server_info(
          timeout=int(PROBE_SECONDS))[self._table]
      return int(info.rate_limiter_info.insert_stats.completed)
    except Exception:  # pylint: disable=broad-except
      return None


# Batches of priority updates a shard's writer holds while the shard is slow
# to take them; past this, the newest are dropped (the shard is down).
PENDING_UPDATES = 64


class _PriorityWriter:
  """Sends new priorities to one shard from a thread of its own, in order;
  drops those the shard cannot take (it is down)."""

  def __init__(self, index: int, address: str, table: str):
    self._index = index
    self._client = reverb.Client(address)
    self._table = table
    self._queue = queue.Queue(maxsize=PENDING_UPDATES)
    self.dropped = 0
    threading.Thread(target=self._write, daemon=True,
                     name=f'replay-shard-{index}-priorities').start()

  def put(self, keys: np.ndarray, priorities: np.ndarray):
    try:
      self._queue.put_nowait((keys, priorities))
    except queue.Full:
      self.dropped += len(keys)
      logging.log_every_n_seconds(
          logging.WARNING, 'Replay shard %d is not taking priority updates; '
          '%d dropped so far.', 30, self._index, self.dropped)

  def _write(self):
    while True:
      keys, priorities = self._queue.get()
      if keys is None:
        return
      try:
        self._client.mutate_priorities(
            self._table, updates=dict(zip(keys.tolist(), priorities.tolist())))
      except Exception as error:  # pylint: disable=broad-except
        self.dropped += len(keys)
        logging.log_every_n_seconds(
            logging.WARNING, 'Replay shard %d took no priority updates (%s); '
            '%d dropped so far.', 30, self._index, error, self.dropped)

  def close(self):
    try:
      self._queue.put_nowait((None, None))
    except queue.Full:
      pass  # Stuck on a shard that is down: a daemon thread, left to exit.


class ShardedBatches:
  """Batches of `reverb.ReplaySample` drawn from several replay shards as from
  one table, and the way back for their new priorities; see the module
  docstring. An iterator: `next` gives (sample, shards), the sample's arrays
  numpy ones (the learner's update takes them as tensors), `shards` the
  shard of each transition; it raises `tf.errors.OutOfRangeError` when no shard
  can give samples (none is live), as a Reverb dataset does when replay
  lets nothing through."""

  def __init__(self, addresses: Sequence[str], batch_size: int,
               priority_exponent: float, table: str = tables.TABLE,
               stacked_frames: int = 0, seed: Optional[int] = None):
    self._batch_size = batch_size
    self._stopping = threading.Event()
    # Every shard's server up before the learner (whose parameters the
    # actors wait for) starts: as a Reverb dataset of one server does, so
    # that no actor writes to a shard that is not there yet.
    for address in addresses:
      reverb.Client(address).server_info()
    chunk_size = max(1, math.ceil(batch_size / len(addresses)))
    self._shards = [
        _Shard(index, address, table, chunk_size, stacked_frames,
               priority_exponent, self._stopping)
        for index, address in enumerate(addresses)]
    self._writers = [_PriorityWriter(index, address, table)
                     for index, address in enumerate(addresses)]
    self._rng = np.random.default_rng(seed)
    logging.info('Batches from %d replay shards; a shard that gives none of '
                 'its samples for %.0f s is asked for its status (%s).',
                 len(addresses), PROBE_SECONDS, PROBE_VARIABLE)
    # (shards, counts, shares) of the batch being gathered.
    self._draw: Optional[Tuple[List[int], np.ndarray, Dict[int, float]]] = None

  def __iter__(self):
    return self

  @property
  def masses(self) -> List[Optional[float]]:
    """Each shard's mass as last told (None: not yet)."""
    return [shard.mass for shard in self._shards]

  @property
  def live(self) -> List[bool]:
    """Which shards the batches are drawn from."""
    return [shard.live for shard in self._shards]

  def _shares(self) -> Dict[int, float]:
    """{shard: probability that a transition comes from it} over the live
    shards; a shard whose mass is not known yet counts as the mean of the
    known (as equal to all when none is)."""
    live = [shard for shard in self._shards if shard.live]
    known = [shard.mass for shard in live if shard.mass is not None]
    default = float(np.mean(known)) if known else 1.0
    masses = np.array([shard.mass if shard.mass is not None else default
                       for shard in live])
    return {shard.index: mass for shard, mass in
            zip(live, masses / masses.sum())}

  def _readmit(self):
    """Shards left out that stream again come back."""
    for shard in self._shards:
      if not shard.live and shard.receive():
        shard.live = True
        logging.info('Replay shard %d streams again; batches are drawn from '
                      'it again.', shard.index)

  def _wait_for(self, shard: _Shard, count: int) -> bool:
    """Waits until `shard` has `count` samples received. Returns False if
    it has not after `tables.RATE_LIMITER_TIMEOUT_MS` (so that the learner
    can check for a stop in between), or has given none for
    `PROBE_SECONDS` and does not answer, or has given none for twice that
    and took no insert in between: it is then left out."""
    deadline = time.monotonic() + tables.RATE_LIMITER_TIMEOUT_MS / 1e3
    while shard.available < count:
      if shard.receive(timeout=0.1):
        shard.end_wait()
        continue
      now = time.monotonic()
      if shard.silent_since is None:
        shard.silent_since = now
      elif now - shard.silent_since >= PROBE_SECONDS:
        inserts = shard.inserts()
        if inserts is None:
          reason = 'does not answer' + (
              f' ({shard.error})' if shard.error else '')
        elif inserts == shard.probed_inserts:
          reason = (f'took no insert in {now - shard.silent_since:.0f} s '
                    '(its actors write nothing)')
        else:  # Rate-limited, and its actors write: waited for.
          shard.silent_since, shard.probed_inserts = now, inserts
          reason = None
        if reason:
          shard.live = False
          shard.end_wait()
          logging.warning(
              'Replay shard %d (%s) gave no samples and %s; batches are '
              'drawn from the other shards until it streams again.',
              shard.index, shard.address, reason)
          return False
      if now >= deadline:
        return False
    shard.end_wait()
    return True

  def __next__(self) -> Tuple[reverb.ReplaySample, np.ndarray]:
    if self._draw is None or not all(
        self._shards[index].live for index in self._draw[0]):
      # A new draw: the first, after a batch, or after a shard in the
      # pending one was left out (a draw is kept while its shards are only
      # slow, since drawing again because of them would favour the others).
      self._readmit()
      for shard in self._shards:
        if shard.live:  # Its newest mass, from at most CHUNKS_AHEAD ahead.
          shard.receive(keep=CHUNKS_AHEAD)
      shares = self._shares()
      if not shares:
        # Nothing to draw from: end this call, as a Reverb dataset ends when
        # replay lets nothing through; the learner checks for a stop and
        # calls again.
        self._stopping.wait(tables.RATE_LIMITER_TIMEOUT_MS / 1e3)
        self._readmit()
        raise tf.errors.OutOfRangeError(None, None,
                                        'No replay shard gives samples.')
      indices = list(shares)
      counts = self._rng.multinomial(self._batch_size,
                                     [shares[i] for i in indices])
      self._draw = (indices, counts, shares)
    indices, counts, shares = self._draw
    for index, count in zip(indices, counts):
      if count and not self._wait_for(self._shards[index], count):
        raise tf.errors.OutOfRangeError(
            None, None, f'Replay shard {index} has not given its samples yet.')
    self._draw = None
    pieces, shard_of, shard_share = [], [], []
    for index, count in zip(indices, counts):
      if count:
        pieces += self._shards[index].take(count)
        shard_of.append(np.full(count, index, np.int32))
        shard_share.append(np.full(count, shares[index]))
    sample = tf.nest.map_structure(lambda *parts: np.concatenate(parts),
                                   *pieces)
    total_size = sum(shard.size for shard in self._shards if shard.live)
    info = sample.info._replace(
        probability=np.concatenate(shard_share) * sample.info.probability,
        table_size=np.full(self._batch_size, total_size, np.int64))
    return sample._replace(info=info), np.concatenate(shard_of)

  def update_priorities(self, keys: np.ndarray, priorities: np.ndarray,
                        shards: np.ndarray):
    """Sends each new priority to the shard its transition came from."""
    for index, writer in enumerate(self._writers):
      served = shards == index
      if served.any():
        writer.put(keys[served], priorities[served])

  def close(self):
    self._stopping.set()
    for writer in self._writers:
      writer.close()
