"""Measures what one replay shard takes per core, and turns it into a plan.

The question (docs/replay.md): how many replay shards, and replay
machines, do 32, 256 and 1,024 actors need? One Reverb table serialises its
inserts, samples and priority updates; a shard is one server with one table,
so a shard's capacity is what one server does on the core it has.

What runs, for each shard count S of `--shards` (e.g. 1 and 2):

* S replay servers, each the program's Ape-X DQN table for `--env` with
  1/S of `--replay_capacity` (`agents.apex.config.shard_config`), each in its own process
  pinned to a core of its own (shard k on core k mod the machine's cores).
* Inserts: `--writers` processes replay recorded Atari frames through the
  actors' adder (`benchmarks/replay_load.py`), writer i into shard i mod S.
* Samples: one learner-like process draws batches of 512 as the learner does
  (from one server, the learner's dataset; from several,
  `agents.replay.shards.ShardedBatches`, exact across shards), once without and once
  with a priority update of every sampled transition.

Each phase is the median of `--repeats` windows of `--seconds`. For every
shard, its server's CPU time per transition gives its cost per insert, per
sample and (sample with updates minus sample) per priority update; one pinned
core's capacity is the inverse. On a 2-core machine the clients need more
CPU than the servers (a writer compresses its frames), so the servers do not
reach a full core: the capacity per core is the measured cost per transition
extrapolated to a whole core, and the highest rate a shard took here is
printed beside it.

The plan (`launch.cloud.capacity.replay_load`, which `--dry_run`
uses with the figures this writes): for N actor cores at K environments each,
the actors' inserts are N x (agent steps/s per actor core at K, from
`program_throughput.json`), the learner's samples are the paper's 19 batches
of 512 per second (§4.1), each sampled transition's priority updated once.
The shards needed keep every shard at `--shard_load` of its core; each
shard's machine holds its part of `--plan_capacity` as a plan asks for it
(`replay_memory_bytes`: the bytes per transition `replay_memory.py`
measured, with headroom).

  .venv/bin/python benchmarks/replay_shards.py
  .venv/bin/python benchmarks/replay_shards.py --shards=1,2 --seconds=10

Prints the tables and writes `benchmarks/results/replay_shards.json`.
"""

import math
import multiprocessing
import os
import shutil
import tempfile
import time

from absl import app
from absl import flags

from launch.cloud import capacity
from benchmarks import common
from benchmarks import replay_load

flags.DEFINE_string('env', 'atari:Pong', 'Environment whose frames are stored.')
flags.DEFINE_list('shards', ['1', '2'], 'Shard counts to measure.')
flags.DEFINE_integer('writers', 2, 'Writer processes, dealt over the shards.')
flags.DEFINE_integer('recorded_steps', 3000,
                     'Agent steps recorded once and replayed by the writers.')
flags.DEFINE_float('seconds', 5.0, 'Length of one measurement window.')
flags.DEFINE_float('warmup_seconds', 3.0,
                   'Running time before the first window of a phase.')
flags.DEFINE_integer('repeats', 3, 'Windows per phase (median).')
flags.DEFINE_integer('replay_capacity', 200_000,
                     'Capacity of all shards together.')
flags.DEFINE_integer('min_table_size', 20_000,
                     'Items all shards together hold before sampling.')
flags.DEFINE_float('shard_load', capacity.SHARD_LOAD,
                   'Share of its core a shard may use in the plan (as '
                   '--dry_run plans it).')
flags.DEFINE_integer('plan_capacity', 2_000_000,
                     'Replay capacity of the planned runs (the paper\'s '
                     'Atari replay, §4.1).')
flags.DEFINE_list('plan_actors', ['32', '256', '1024'],
                  'Actor cores of the planned runs.')
FLAGS = flags.FLAGS

MIN_REPLAY_SIZE = 1000


def _serve_pinned(core, *args):
  """A replay server (`common.serve_replay`) whose every thread runs on
  `core`: pinned before the server makes its threads, which inherit it."""
  os.sched_setaffinity(0, {core})
  common.serve_replay(*args)


def _counts(replay_clients):
  """Every shard's completed inserts and samples, as the servers count."""
  counts = []
  for client in replay_clients:
    stats = replay_load.table_info(client).rate_limiter_info
    counts.append((stats.insert_stats.completed,
                   stats.sample_stats.completed))
  return counts


def _measure_shards(num_shards, recording_dir, config):
  """The three phases with `num_shards` pinned servers."""
  import reverb  # pylint: disable=g-import-not-at-top
  context = multiprocessing.get_context('spawn')
  cores = os.cpu_count()
  stop = context.Event()
  servers, ports = [], []
  for index in range(num_shards):
    port_queue = context.Queue()
    server = context.Process(
        target=_serve_pinned, daemon=True,
        args=(index % cores, FLAGS.env,
              math.ceil(FLAGS.replay_capacity / num_shards),
              math.ceil(MIN_REPLAY_SIZE / num_shards), port_queue, stop))
    server.start()
    servers.append(server)
    ports.append((port_queue, server))
  clients = None
  results = {}
  try:
    addresses = [f'localhost:{replay_load.server_port(port_queue, server)}'
                 for port_queue, server in ports]
    replay_clients = [reverb.Client(address) for address in addresses]
    num_clients = max(FLAGS.writers, num_shards, 1)
    clients = replay_load.Clients(context, num_clients, FLAGS.env, addresses,
                                  recording_dir)
    server_pids = [server.pid for server in servers]

    def run(phase, job, count, count_fn):
      print(f'{num_shards} shard(s): measuring {phase} with {count} '
            'process(es)...')
      clients.start(job, count)
      before = _counts(replay_clients)
      started = time.monotonic()
      try:
        result = replay_load.measure(count_fn, server_pids, clients, count,
                                     FLAGS.warmup_seconds, FLAGS.repeats,
                                     FLAGS.seconds)
      finally:
        clients.end(count)
      elapsed = time.monotonic() - started
      after = _counts(replay_clients)
      # Each shard's own rate over the whole phase (warm-up included), for
      # its share of the work: the servers' CPU is per shard too.
      kind = 0 if job == 'write' else 1
      result['shard_transitions_per_second'] = [
          (end[kind] - begin[kind]) / elapsed
          for begin, end in zip(before, after)]
      results[phase] = result

    def inserted():
      return sum(count[0] for count in _counts(replay_clients))

    def sampled():
      return clients.batch_count() * config.batch_size

    run('insert', 'write', FLAGS.writers, inserted)
    replay_load.fill(replay_clients, clients,
                     math.ceil(FLAGS.min_table_size / num_shards))
    run('sample', 'sample', 1, sampled)
    run('sample+update', 'sample_and_update', 1, sampled)
    results['table_sizes'] = [replay_load.table_info(client).current_size
                              for client in replay_clients]
  finally:
    if clients is not None:
      clients.close()
    stop.set()
    replay_load.join_all(servers)
  return results


def _shard_rates(result):
  """Each shard's transitions/s in a phase: the phase's median rate split
  in the proportions the servers counted."""
  shares = result['shard_transitions_per_second']
  total = sum(shares) or 1.0
  return [result['median_transitions_per_second'] * share / total
          for share in shares]


def _cost(result):
  """Microseconds of server CPU per transition, per shard."""
  return [cores / rate * 1e6 if rate else float('nan')
          for cores, rate in zip(result['median_server_cpu_cores_each'],
                                 _shard_rates(result))]


def _plan(costs, per_actor):
  """Rows of the plan (`launch.cloud.capacity.replay_load`, with
  the costs just measured): actors, K, inserts/s, samples/s, server cores,
  shards, and the memory of each shard's machine, as a plan asks for it."""
  rows = []
  for actors in [int(value) for value in FLAGS.plan_actors]:
    for k in sorted(per_actor):
      load = capacity.replay_load(actors, k, costs, per_actor,
                                  FLAGS.shard_load)
      memory = capacity.replay_memory_bytes(
          'atari', math.ceil(FLAGS.plan_capacity / load.shards))
      rows.append(dict(actors=actors, envs_per_actor=k,
                       inserts_per_second=load.inserts_per_second,
                       samples_per_second=load.samples_per_second,
                       server_cores=load.server_cores, shards=load.shards,
                       memory_gib_per_shard=memory / 2**30))
  return rows


def main(_):
  from agents.apex_dqn.config import ApeXDQNConfig  # pylint: disable=g-import-not-at-top
  began = time.monotonic()
  load_average = os.getloadavg()
  config = ApeXDQNConfig()
  shard_counts = [int(count) for count in FLAGS.shards]
  if min(shard_counts) < 1 or FLAGS.writers < 1:
    raise app.UsageError('--shards and --writers must be at least 1.')
  recording_dir = tempfile.mkdtemp(prefix='replay_shards_')
  try:
    print(f'Recording {FLAGS.recorded_steps} steps of {FLAGS.env}...')
    recording = replay_load.record(FLAGS.env, FLAGS.recorded_steps,
                                   recording_dir)
    results = {count: _measure_shards(count, recording_dir, config)
               for count in shard_counts}
  finally:
    shutil.rmtree(recording_dir, ignore_errors=True)

  rows, costs_by_count = [], {}
  for count, result in results.items():
    insert, sample, update = (_cost(result[phase]) for phase in
                              ('insert', 'sample', 'sample+update'))
    costs_by_count[count] = {
        'insert': common.median(insert), 'sample': common.median(sample),
        'update': common.median(u - s for u, s in zip(update, sample))}
    for phase in ('insert', 'sample', 'sample+update'):
      phase_result = result[phase]
      rows.append([count, phase,
                   phase_result['median_transitions_per_second'],
                   ' '.join(f'{cores:.2f}' for cores in
                            phase_result['median_server_cpu_cores_each']),
                   ' '.join(f'{cost:.1f}' for cost in _cost(phase_result)),
                   phase_result['median_clients_cpu_cores'],
                   phase_result['median_machine_cpu_cores']])
  common.print_table(
      f'Replay shards, {FLAGS.env} transitions ({os.cpu_count()} cores, each '
      f'shard pinned to one; median of {FLAGS.repeats} x {FLAGS.seconds:g} s)',
      ['shards', 'phase', 'transitions/s', 'server cores (each)',
       'server us/transition (each)', 'client cores', 'machine cores'], rows)

  capacity_rows = []
  for count, costs in costs_by_count.items():
    highest = max(_shard_rates(results[count]['insert']))
    capacity_rows.append([
        count, costs['insert'], costs['sample'], costs['update'],
        1e6 / costs['insert'], 1e6 / (costs['sample'] + costs['update']),
        highest])
  common.print_table(
      'One shard per pinned core (the cost per transition extrapolated to a '
      'whole core)',
      ['shards', 'insert us', 'sample us', 'update us', 'inserts/s per core',
       'samples+updates/s per core', 'highest inserts/s of a shard here'],
      capacity_rows)

  # The plan, from the most shards measured (what a sharded run pays).
  costs = costs_by_count[max(shard_counts)]
  throughput = common.read_result('program_throughput').get('actors', [])
  per_actor = {run['envs_per_actor']: run['median_program_steps_per_second']
               for run in throughput}
  plan = []
  if per_actor:
    plan = _plan(costs, per_actor)
    common.print_table(
        f'Plan: shards at <= {FLAGS.shard_load:g} of a core each, a learner '
        f'sampling {plan[0]["samples_per_second"]:,.0f}/s (paper §4.1), '
        f'{FLAGS.plan_capacity:,} transitions in all',
        ['actors', 'K', 'inserts/s', 'samples/s', 'server cores', 'shards',
         'GiB per shard'],
        [[row['actors'], row['envs_per_actor'], row['inserts_per_second'],
          row['samples_per_second'], row['server_cores'], row['shards'],
          row['memory_gib_per_shard']] for row in plan])
  else:
    print('\nNo plan: run benchmarks/program_throughput.py first (the '
          'actors\' steps per second).')
  elapsed = time.monotonic() - began
  print(f'\n{elapsed:.0f} s in all.')
  path = common.write_result('replay_shards', {
      'settings': {
          'env': FLAGS.env, 'recording': recording, 'shards': shard_counts,
          'writers': FLAGS.writers, 'seconds': FLAGS.seconds,
          'warmup_seconds': FLAGS.warmup_seconds, 'repeats': FLAGS.repeats,
          'replay_capacity': FLAGS.replay_capacity,
          'min_table_size': FLAGS.min_table_size,
          'batch_size': config.batch_size, 'shard_load': FLAGS.shard_load,
          'plan_capacity': FLAGS.plan_capacity,
          'actor_steps_per_second': per_actor,
      },
      'load_average_at_start': load_average,
      'results': {str(count): result for count, result in results.items()},
      'server_us_per_transition': {str(count): costs for count, costs in
                                   costs_by_count.items()},
      'plan': plan,
      'elapsed_seconds': elapsed,
  })
  print(f'Wrote {path}')


if __name__ == '__main__':
  app.run(main)
