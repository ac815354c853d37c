"""The replay's memory and load, from the benchmarks' measurements.

The figures come from `benchmarks/replay_memory.py`,
`benchmarks/replay_shards.py` and `benchmarks/program_throughput.py`, run
on 2 CPU cores (their results in `benchmarks/results/`; docs/replay.md):
the memory a replay machine needs for its capacity, and the load a plan's
actors and learner put on the replay, with the shard count that carries it.
"""

import dataclasses
import math
from typing import Dict

GIB = 2**30

# Replay's bytes per stored transition, by environment kind: the replay
# server's resident-memory growth per transition
# (`benchmarks/replay_memory.py`; Atari's in
# `benchmarks/results/replay_memory.json`, docs/replay.md). Atari frames are
# stored once per step and compressed; the small observations of MinAtar and
# vector environments are dominated by Reverb's per-item cost.
REPLAY_BYTES_PER_TRANSITION = {
    'atari': 2_390,    # Pong, 20,000 transitions
    'minatar': 1_960,  # breakout, 50,000 transitions
    'gym': 1_920,      # CartPole-v1, 50,000 transitions
    'control': 1_920,  # vector observations, as gym
}
# Replay's machine holds its items with this headroom, plus the process
# itself (Python, TensorFlow, Reverb: ~0.4 GB before any item,
# `benchmarks/results/replay_memory.json`) and a checkpoint's buffers.
REPLAY_HEADROOM = 1.5
REPLAY_BASE_GIB = 2.0

# The replay's load, for the shard count a plan proposes (docs/replay.md),
# from `benchmarks/replay_shards.py` with Atari (Pong) transitions
# (`benchmarks/results/replay_shards.json`, server_us_per_transition): a
# shard's server CPU per transition, microseconds, for an insert, a sample
# and a priority update, with 2 shards each pinned to a core (both cores
# busy: dearer than one shard's 24.5/16.6/2.5, so the plan errs on the side
# of more shards).
REPLAY_SHARD_MICROSECONDS = dict(insert=37.27, sample=13.25, update=2.69)
# Agent steps (one transition each) per second of one actor core with K
# environments, in the program (`benchmarks/results/program_throughput.json`,
# Pong).
ACTOR_STEPS_PER_SECOND = {1: 220.31, 16: 731.66}
# The learner's draw: the paper's 19 batches of 512 per second (§4.1), each
# transition's priority updated once.
LEARNER_SAMPLES_PER_SECOND = 19 * 512
# The share of its core a shard is planned to use: room for checkpoints and
# bursts, and for the table's lock, which a cost per transition does not
# see.
SHARD_LOAD = 0.5


def replay_memory_bytes(env_kind: str, capacity: int) -> int:
  """The memory the replay's machine needs for `capacity` transitions of an
  environment of kind `env_kind`."""
  per_transition = REPLAY_BYTES_PER_TRANSITION.get(
      env_kind, max(REPLAY_BYTES_PER_TRANSITION.values()))
  return int(capacity * per_transition * REPLAY_HEADROOM +
             REPLAY_BASE_GIB * GIB)


def actor_steps_per_second(envs_per_actor: int,
                           measured: Dict[int, float] = None) -> float:
  """One actor core's agent steps per second with `envs_per_actor`
  environments, from `measured` (K: steps/s; default
  `ACTOR_STEPS_PER_SECOND`): linear between the two K measured, and no
  more than the larger K's beyond it (the emulators then take the core)."""
  (k_low, low), (k_high, high) = sorted(
      (measured or ACTOR_STEPS_PER_SECOND).items())
  k = min(max(envs_per_actor, k_low), k_high)
  return low + (high - low) * (k - k_low) / (k_high - k_low)


@dataclasses.dataclass(frozen=True)
class ReplayLoad:
  """The replay's expected load and the shards it needs."""
  inserts_per_second: float
  samples_per_second: float
  server_cores: float
  shards: int


def replay_load(num_actors: int, envs_per_actor: int,
                microseconds: Dict[str, float] = None,
                steps_per_second: Dict[int, float] = None,
                shard_load: float = SHARD_LOAD) -> ReplayLoad:
  """`num_actors` actor cores of `envs_per_actor` Atari environments each
  and a learner as the paper's: the transitions the shards take in and give
  out per second, the server cores that costs (`microseconds` of a server's
  CPU per insert, sample and update; default `REPLAY_SHARD_MICROSECONDS`),
  and the shards that keep each at `shard_load` of a core."""
  cost = microseconds or REPLAY_SHARD_MICROSECONDS
  inserts = num_actors * actor_steps_per_second(envs_per_actor,
                                                steps_per_second)
  samples = LEARNER_SAMPLES_PER_SECOND
  cores = (inserts * cost['insert'] +
           samples * (cost['sample'] + cost['update'])) / 1e6
  return ReplayLoad(inserts, samples, cores,
                    max(1, math.ceil(cores / shard_load)))


def replay_advice(env_kind: str, num_actors: int, envs_per_actor: int,
                  replay_shards: int) -> str:
  """What a plan says of the replay's load: the shards it proposes, and
  whether --replay_shards gives them."""
  if env_kind != 'atari':
    return (f'Replay load: not estimated for {env_kind} environments (the '
            'figures are measured with Atari frames: docs/replay.md).')
  load = replay_load(num_actors, envs_per_actor)
  text = (
      f'Replay load (an estimate from this project\'s measurements, '
      f'docs/replay.md): {num_actors} actors x {envs_per_actor} '
      f'environments write about {load.inserts_per_second:,.0f} '
      'transitions/s; a learner as the paper\'s (19 batches of 512/s) '
      f'samples and updates {load.samples_per_second:,.0f}/s: '
      f'{load.server_cores:.2f} cores of replay servers. '
      f'--replay_shards={load.shards} keeps each shard at '
      f'{SHARD_LOAD:g} of a core or less')
  if replay_shards < load.shards:
    return (f'{text}; with --replay_shards={replay_shards} each would need '
            f'{load.server_cores / replay_shards:.2f}: raise '
            f'--replay_shards to {load.shards}.')
  return f'{text}; --replay_shards={replay_shards} does.'
