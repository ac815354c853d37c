"""The shared prioritised replay: its Reverb table and the learner's dataset.

Replay may be split over several Reverb servers ("shards", `--replay_shards`),
each with a table of its own, for more inserts and samples than one server's
lock lets through (a Reverb table serialises them). The learner still
samples them as one table (`agents.replay.shards`).
"""

from typing import Dict, Optional

import reverb
import tensorflow as tf
from acme import specs

from agents.replay import adders
from agents.replay import eviction
from agents.apex.config import ApeXConfig

TABLE = 'priority_table'


def transition_signature(spec: specs.EnvironmentSpec,
                         stacked_frames: int = 0) -> Dict[str, tf.TensorSpec]:
  """The structure of one stored n-step transition. Observations that are
  stacks of frames (on their last axis) are stored frames first."""
  shape = tuple(spec.observations.shape)
  if stacked_frames:
    shape = (shape[-1], *shape[:-1])
  observation = tf.TensorSpec(shape, tf.as_dtype(spec.observations.dtype))
  return {
      adders.OBSERVATION: observation,
      adders.ACTION: tf.TensorSpec(spec.actions.shape,
                                   tf.as_dtype(spec.actions.dtype)),
      adders.N_STEP_RETURN: tf.TensorSpec((), tf.float32),
      adders.DISCOUNT: tf.TensorSpec((), tf.float32),
      adders.NEXT_OBSERVATION: observation,
  }


def make_rate_limiter(config: ApeXConfig) -> reverb.rate_limiters.RateLimiter:
  """MinSize (the paper: actors never wait) or a samples-per-insert ratio."""
  if config.samples_per_insert is None:
    return reverb.rate_limiters.MinSize(config.min_replay_size)
  # The buffer must let a whole actor flush and a whole learner batch through,
  # otherwise actors and learner could wait on each other forever.
  error_buffer = max(
      0.1 * config.samples_per_insert * config.min_replay_size,
      2.0 * config.samples_per_insert * config.actor_flush_size,
      2.0 * config.batch_size)
  return reverb.rate_limiters.SampleToInsertRatio(
      samples_per_insert=config.samples_per_insert,
      min_size_to_sample=config.min_replay_size,
      error_buffer=error_buffer)


def make_replay_table(config: ApeXConfig, spec: specs.EnvironmentSpec,
                      name: str = TABLE, stacked_frames: int = 0,
                      signature=None) -> reverb.Table:
  """Ape-X replay: proportional prioritised sampling; removal of the oldest
  items, of the lowest priorities, or (App. D) in rounds of victims sampled
  by inverse priority (`config.replay_remover`, `agents.replay.eviction`), for
  which the table may hold a backstop of items over its capacity between
  rounds. Its items are n-step transitions (`transition_signature`), or
  what `signature` says (sequences: `agents.replay.sequences`)."""
  max_size = config.replay_capacity
  if config.replay_remover == 'min_heap':
    remover = reverb.selectors.MinHeap()
  else:
    remover = reverb.selectors.Fifo()
    if config.replay_remover == 'inverse_priority':
      max_size += eviction.backstop(config.replay_capacity)
  return reverb.Table(
      name=name,
      sampler=reverb.selectors.Prioritized(config.priority_exponent),
      remover=remover,
      max_size=max_size,
      rate_limiter=make_rate_limiter(config),
      signature=signature or transition_signature(spec, stacked_frames))


def make_eviction(config: ApeXConfig, seed: Optional[int] = None,
                  table: str = TABLE
                  ) -> Optional[eviction.InversePriorityEviction]:
  """The rounds of eviction the replay node runs, if the table needs them
  (`--replay_remover=inverse_priority`)."""
  if config.replay_remover != 'inverse_priority':
    return None
  return eviction.InversePriorityEviction(
      table, config.replay_capacity, config.eviction_priority_exponent, seed)


# How long one sample request may wait on the rate limiter before the dataset
# ends (the learner then makes a new one); bounds how long a stopping learner
# can stay blocked inside Reverb.
RATE_LIMITER_TIMEOUT_MS = 1000


def make_dataset(server_address: str, batch_size: int, prefetch_size: int,
                 table: str = TABLE, stacked_frames: int = 0,
                 signature_timeout_secs: Optional[int] = None
                 ) -> tf.data.Dataset:
  """Batches of `reverb.ReplaySample`, prefetched so the learner never waits
  on the network while replay holds data (`prefetch_size` 0: not prefetched
  here, for a caller that keeps its own). Stacked frames (stored frames
  first) come out on the observations' last axis, as actors saw them.

  The dataset ends (`tf.errors.OutOfRangeError`) when replay has let no sample
  through for `RATE_LIMITER_TIMEOUT_MS`; callers make a new one and go on.
  Making it waits for the server's table signature: for ever, or at most
  `signature_timeout_secs` (then Reverb's DeadlineExceededError).
  """
  dataset = reverb.TrajectoryDataset.from_table_signature(
      server_address=server_address,
      table=table,
      max_in_flight_samples_per_worker=2 * batch_size,
      rate_limiter_timeout_ms=RATE_LIMITER_TIMEOUT_MS,
      get_signature_timeout_secs=signature_timeout_secs)
  dataset = dataset.batch(batch_size, drop_remainder=True)
  if stacked_frames:
    dataset = dataset.map(_frames_last,
                          num_parallel_calls=tf.data.AUTOTUNE)
  return dataset.prefetch(prefetch_size) if prefetch_size else dataset


def _frames_last(sample: reverb.ReplaySample) -> reverb.ReplaySample:
  """[B, F, H, W] stacks of frames to [B, H, W, F]."""
  data = dict(sample.data)
  for key in (adders.OBSERVATION, adders.NEXT_OBSERVATION):
    data[key] = _move_frames_last(data[key])
  return sample._replace(data=data)


# Compiled with XLA: TensorFlow's own transpose of a batch of 512 Pong
# observations ([512, 4, 84, 84] uint8) took 19-30 ms on this project's
# machines, XLA's 6-7 ms; the learner's dataset makes two per batch, on the
# learner's CPU (`benchmarks/program_throughput.py`, goal 3).
@tf.function(jit_compile=True)
def _move_frames_last(frames: tf.Tensor) -> tf.Tensor:
  rank = frames.shape.rank
  return tf.transpose(frames, [0, *range(2, rank), 1])


def importance_sampling_weights(probabilities: tf.Tensor, table_size: tf.Tensor,
                                exponent: float) -> tf.Tensor:
  """Schaul et al. 2016: w_i = (N P(i))^-beta, normalised by the batch max."""
  probabilities = tf.cast(probabilities, tf.float32)
  table_size = tf.cast(table_size, tf.float32)
  weights = tf.pow(table_size * probabilities, -exponent)
  return weights / tf.reduce_max(weights)
