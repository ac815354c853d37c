"""The replay's memory and load, from the benchmarks' measurements.

The figures come from `benchmarks/replay_memory.py`,
`benchmarks/replay_shards.py` and `benchmarks/program_throughput.py`, run
on 2 CPU cores (their results in `benchmarks/results/`; docs/replay.md):
the memory a replay machine needs for its capacity, and the load a plan's
actors and learner put on the replay, with the shard count that carries it.
"""

import dataclasses
import math
from typing import Dict, Optional, Tuple

GIB = 2**30

# Replay's bytes per stored transition are each environment suite's own
# measurement (`agents.envs.suites.Suite.replay_bytes_per_transition`: the
# replay server's resident-memory growth per transition,
# `benchmarks/replay_memory.py`, docs/replay.md).
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


def replay_memory_bytes(env_kind: str, capacity: int,
                        item_bytes: Optional[int] = None) -> int:
  """The memory the replay's machine needs for `capacity` items of
  `item_bytes` each (the agent's config's `replay_item_bytes`); by default
  transitions of an environment of the suite `env_kind`: its measured
  bytes per transition, or the largest any suite measured."""
  if item_bytes is None:
    from agents.envs import suites  # pylint: disable=g-import-not-at-top
    item_bytes = (suites.get(env_kind).replay_bytes_per_transition or
                  suites.largest_replay_bytes())
  return int(capacity * item_bytes * REPLAY_HEADROOM +
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
  from agents.envs import suites  # pylint: disable=g-import-not-at-top
  if not suites.get(env_kind).replay_load_measured:
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


# The network: parameters for many actors (docs/google_cloud.md,
# "Parameters for many actors"). Google caps each machine's egress by its
# machine type (EGRESS_SOURCE: "an n1-standard-8 VM ... is limited to 16
# Gbps total egress bandwidth"): N1 machines get 2 Gbps per vCPU, at most
# 32 Gbps. A plan keeps every machine that sends parameters at half its cap
# or less (EGRESS_SHARE): the cap is a maximum that Google says is reached
# "only in specific situations", and the same machine sends its other
# traffic (the learner's priority updates, replay's batches) too. A2
# machines (an A100 learner) are counted by the N1 rule: their caps are
# higher, so the estimate errs on the side of more cachers.
EGRESS_SOURCE = 'https://cloud.google.com/compute/docs/network-bandwidth'
EGRESS_GBPS_PER_VCPU = 2.0
EGRESS_MAX_GBPS = 32.0
EGRESS_SHARE = 0.5
# The learner's updates per second as the paper's (§4.1): a puller copies
# the parameters at most once per update (`agents.variables`).
LEARNER_UPDATES_PER_SECOND = 19.0


def egress_cap_gbps(vcpus: int) -> float:
  """A machine's network egress cap, Gbps, by its vCPUs (the N1 rule)."""
  return min(EGRESS_GBPS_PER_VCPU * vcpus, EGRESS_MAX_GBPS)


def gbps(bytes_per_second: float) -> float:
  return bytes_per_second * 8 / 1e9


def actor_pulls_per_second(envs_per_actor: int, update_period: int,
                           steps_per_second: Dict[int, float] = None
                           ) -> float:
  """An actor's parameter pulls per second: one per `update_period` of its
  loop's iterations (a step of each of its `envs_per_actor`
  environments), at one actor core's measured steps per second
  (`actor_steps_per_second`)."""
  steps = actor_steps_per_second(envs_per_actor, steps_per_second)
  return steps / envs_per_actor / update_period


@dataclasses.dataclass(frozen=True)
class ParameterEgress:
  """What sending the parameters costs each sender: bytes per second of
  the learner, and of each variable cacher (0 without)."""
  parameter_bytes: int
  actors: int
  cachers: int
  actor_pulls_per_second: float
  copies_per_actor: float  # Pulls that copy: at most one per update.
  copies_per_cacher: float
  actors_per_cacher: int
  learner_bytes_per_second: float
  cacher_bytes_per_second: float

  def fits(self, learner_cap_gbps: float, cacher_cap_gbps: float,
           share: float = EGRESS_SHARE) -> bool:
    """Whether the learner and every cacher stay within `share` of their
    caps."""
    return (gbps(self.learner_bytes_per_second) <= share * learner_cap_gbps
            and gbps(self.cacher_bytes_per_second) <=
            share * cacher_cap_gbps)


def parameter_egress(parameter_bytes: int, num_actors: int,
                     envs_per_actor: int, update_period: int, cachers: int,
                     cacher_period: float = 0.5,
                     learner_updates: float = LEARNER_UPDATES_PER_SECOND,
                     steps_per_second: Dict[int, float] = None
                     ) -> ParameterEgress:
  """The parameters' egress of the learner and of each of `cachers`
  cachers (each pulling every `cacher_period` seconds, and serving
  ceil(num_actors / cachers) actors), for actors pulling
  `parameter_bytes` every `update_period` iterations of their loop."""
  pulls = actor_pulls_per_second(envs_per_actor, update_period,
                                 steps_per_second)
  per_actor = min(pulls, learner_updates)
  per_cacher = min(1.0 / cacher_period, learner_updates)
  if not cachers:
    return ParameterEgress(parameter_bytes, num_actors, 0, pulls, per_actor,
                           0.0, 0, num_actors * parameter_bytes * per_actor,
                           0.0)
  share = math.ceil(num_actors / cachers)
  return ParameterEgress(
      parameter_bytes, num_actors, cachers, pulls, per_actor, per_cacher,
      share, cachers * parameter_bytes * per_cacher,
      share * parameter_bytes * per_actor)


def fewest_cachers(parameter_bytes: int, num_actors: int,
                   envs_per_actor: int, update_period: int,
                   learner_cap_gbps: float, cacher_cap_gbps: float,
                   **rates) -> Optional[int]:
  """The fewest cachers (0 to one per actor) with which the learner and
  every cacher stay within half their caps (`ParameterEgress.fits`); None
  if no number does (the learner's copies to the cachers alone pass its
  half before the cachers' own egress falls under theirs). `rates`: as
  `parameter_egress`'s."""
  for cachers in range(num_actors + 1):
    egress = parameter_egress(parameter_bytes, num_actors, envs_per_actor,
                              update_period, cachers, **rates)
    if egress.fits(learner_cap_gbps, cacher_cap_gbps):
      return cachers
  return None


def _sent(bytes_per_second: float, cap_gbps: float) -> str:
  return (f'{bytes_per_second / 1e6:,.0f} MB/s ({gbps(bytes_per_second):.2f} '
          f'Gbps, {100 * gbps(bytes_per_second) / cap_gbps:.0f}% of its '
          f'{cap_gbps:g} Gbps cap)')


def parameter_advice(parameter_bytes: int, num_actors: int,
                     envs_per_actor: int, update_period: int,
                     learner_machine: Tuple[str, int],
                     cacher_machine: Tuple[str, int],
                     given: Optional[int], cacher_period: float
                     ) -> Tuple[int, str]:
  """(the cachers the launch runs with, what the plan says of the
  parameters' egress). `learner_machine`, `cacher_machine`: (machine type,
  vCPUs); `given`: --variable_cachers if given, else None (the plan then
  chooses the fewest that keep every sender within half its cap);
  `cacher_period`: seconds between a cacher's pulls."""
  learner_cap = egress_cap_gbps(learner_machine[1])
  cacher_cap = egress_cap_gbps(cacher_machine[1])
  needed = fewest_cachers(parameter_bytes, num_actors, envs_per_actor,
                          update_period, learner_cap, cacher_cap,
                          cacher_period=cacher_period)
  cachers = given if given is not None else (
      needed if needed is not None else num_actors)
  alone = parameter_egress(parameter_bytes, num_actors, envs_per_actor,
                           update_period, 0, cacher_period)
  egress = parameter_egress(parameter_bytes, num_actors, envs_per_actor,
                            update_period, cachers,
                            cacher_period=cacher_period)
  lines = [
      f'Parameters (an estimate, docs/google_cloud.md): each pull copies '
      f'{parameter_bytes / 1e6:.1f} MB; an actor of {envs_per_actor} '
      f'environment(s) at ~{actor_steps_per_second(envs_per_actor):.0f} '
      f'steps/s pulls every {update_period} steps of each: '
      f'{alone.actor_pulls_per_second:.2f} pulls/s, '
      f'{alone.copies_per_actor:.2f} of them copies (at most one per '
      f'update of a learner of {LEARNER_UPDATES_PER_SECOND:g}/s).',
      f'  From the learner alone, {num_actors} actors would take '
      + _sent(alone.learner_bytes_per_second, learner_cap) +
      f' of the {learner_machine[0]}.']
  if cachers:
    lines.append(
        f'  With --variable_cachers={cachers} (each on a '
        f'{cacher_machine[0]}, pulling every {cacher_period:g} s): the '
        'learner sends ' + _sent(egress.learner_bytes_per_second,
                                 learner_cap) +
        f'; each cacher serves up to {egress.actors_per_cacher} actors and '
        'sends ' + _sent(egress.cacher_bytes_per_second, cacher_cap) + '.')
    lines.append(
        f'  A cacher adds up to {cacher_period:g} s to the age of the '
        'parameters its actors act with (about '
        f'{cacher_period * LEARNER_UPDATES_PER_SECOND:.0f} learner updates '
        f'at {LEARNER_UPDATES_PER_SECOND:g}/s), on top of an actor\'s own '
        f'{1 / alone.actor_pulls_per_second:.2f} s between pulls.')
  if needed is None:
    lines.append(
        f'  Warning: no number of cachers keeps the learner and every cacher '
        f'within {EGRESS_SHARE:.0%} of their egress caps; raise '
        '--variable_update_period, give the learner a machine with more '
        'vCPUs, or give the cachers more with --small_node_cpus.')
  elif given is None:
    lines.append(
        f'  --variable_cachers={cachers}: the fewest that keep the learner '
        f'and every cacher within {EGRESS_SHARE:.0%} of their egress caps '
        '(chosen by the plan, as --variable_cachers was not given).')
  elif given < needed:
    lines.append(
        f'  Warning: --variable_cachers={given} is too few: '
        f'{"the learner" if not given else "each cacher"} would pass '
        f'{EGRESS_SHARE:.0%} of its egress cap; --variable_cachers={needed} '
        'does not.')
  else:
    lines.append(f'  --variable_cachers={given} keeps the learner and every '
                 f'cacher within {EGRESS_SHARE:.0%} of their egress caps.')
  lines.append(f'  Egress caps: {EGRESS_GBPS_PER_VCPU:g} Gbps per vCPU, at '
               f'most {EGRESS_MAX_GBPS:g} Gbps ({EGRESS_SOURCE}).')
  return cachers, '\n'.join(lines)
