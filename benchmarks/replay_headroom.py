"""Measures the replay server's insert and sample capacity (replay headroom).

The question: how much faster than the default Ape-X DQN program (4 actors, one
learner, batches of 512) could the Reverb replay server on this machine take
in and hand out Atari-sized transitions? The goal is at least 10x.

What runs:

* The replay server, as the program runs it: its own spawned process serving
  the project's Ape-X DQN table for `--env` (from `ApeXDQNBuilder`'s
  `make_replay_tables`: prioritised sampling, FIFO removal, the transition
  signature).
* Real frames: the parent records `--recorded_steps` agent steps of the game
  with random actions before anything is timed, so that the measurement sees
  how real frames compress, but not the emulator.
* Insert capacity: W client processes (`--writers`, e.g. 1 and 2) replay the
  recorded timesteps through the project's actor adder (`make_adder`) with
  made-up Q-values, as fast as they can. The rate is the growth of the
  table's completed-insert count (items the server confirmed) per second.
* Sample capacity: with the table holding at least `--min_table_size` items,
  L learner-like processes (`--samplers`) iterate the learner's own dataset
  (`replay.make_dataset`, the config's batch and prefetch sizes) inside a
  `tf.function`, as the learner does; transitions per second = batches x
  batch size. With `--update_samplers`, the same with a priority update of
  the whole batch (`reverb.TFClient.update_priorities`) after each batch,
  as the learner writes new priorities back; that is the figure the sample
  headroom uses, when measured.

Each figure is the median of `--repeats` windows of `--seconds` each, taken
after `--warmup_seconds` with the same processes running; the server's CPU use
(cores busy) is recorded for every window, with that of the clients and of
the whole machine (more than server + clients: something else ran meanwhile,
and the figures are low). Inserts and samples are measured apart, each with
the whole machine, while the program does both at once and also runs its
actors' and learner's networks.

Usage, from results of other benchmarks when present (flags override):

* inserts/s: `scaling.json`, actor steps per second with `--num_actors`
  actors (one actor step writes one transition);
* samples/s: `program_throughput.json`, the learner's updates per second in
  the program, times the batch size.

Headroom = capacity / usage. Prints a table and writes
`benchmarks/results/replay_headroom.json`.

  .venv/bin/python benchmarks/replay_headroom.py
  .venv/bin/python benchmarks/replay_headroom.py --seconds=10 --repeats=3 \
      --inserts_per_second_used=800 --samples_per_second_used=9000
"""

import multiprocessing
import os
import shutil
import tempfile
import time

from absl import app
from absl import flags
from benchmarks import common
from benchmarks import replay_load

flags.DEFINE_string('env', 'atari:Pong', 'Environment whose frames are stored.')
flags.DEFINE_integer('recorded_steps', 3000,
                     'Agent steps recorded once and replayed by the writers.')
flags.DEFINE_float('seconds', 5.0, 'Length of one measurement window.')
flags.DEFINE_float('warmup_seconds', 2.0,
                   'Running time before the first window of a configuration.')
flags.DEFINE_integer('repeats', 3, 'Windows per configuration (median).')
flags.DEFINE_list('writers', ['1', '2'], 'Writer process counts to measure.')
flags.DEFINE_list('samplers', ['1', '2'],
                  'Sampler process counts to measure (sampling only).')
flags.DEFINE_list('update_samplers', ['1'],
                  'Sampler process counts to measure with priority updates.')
flags.DEFINE_integer('replay_capacity', 200_000, 'Size of the replay table.')
flags.DEFINE_integer('min_table_size', 20_000,
                     'Items the table holds before sampling is measured.')
flags.DEFINE_integer('num_actors', 4,
                     "Actors in the default program (whose usage is compared).")
flags.DEFINE_float('inserts_per_second_used', None,
                   'Transitions/s the actors write in the default program; '
                   'default: from benchmarks/results/scaling.json.')
flags.DEFINE_float('samples_per_second_used', None,
                   'Transitions/s the learner samples in the default program; '
                   'default: from benchmarks/results/program_throughput.json.')
flags.DEFINE_float('goal', 10.0, 'Headroom the goal asks for.')
FLAGS = flags.FLAGS

MIN_REPLAY_SIZE = 1000


def _usage(batch_size):
  """Transitions/s written and sampled by the default program, with sources;
  None where unknown."""
  inserts, insert_source = FLAGS.inserts_per_second_used, 'flag'
  if inserts is None:
    runs = [run for run in common.read_result('scaling').get('runs', [])
            if run.get('num_actors') == FLAGS.num_actors and
            run.get('actor_steps_per_second') is not None]
    if runs:
      # Several runs with this many actors: the busiest is the usage.
      inserts = max(float(run['actor_steps_per_second']) for run in runs)
      insert_source = (f'scaling.json: actor steps/s with {FLAGS.num_actors} '
                       'actors')
    else:
      insert_source = (f'unknown (no scaling.json run with {FLAGS.num_actors} '
                       'actors)')
  samples, sample_source = FLAGS.samples_per_second_used, 'flag'
  if samples is None:
    learner = common.read_result('program_throughput').get('learner', {})
    updates = learner.get('in_program_updates_per_second')
    if updates is not None:
      samples = float(updates) * batch_size
      sample_source = (f'program_throughput.json: learner updates/s x '
                       f'{batch_size}')
    else:
      sample_source = 'unknown (no program_throughput.json learner figure)'
  return {'inserts_per_second': inserts, 'inserts_source': insert_source,
          'samples_per_second': samples, 'samples_source': sample_source}


def _headroom(capacity, used):
  return capacity / used if used else None


def main(_):
  import reverb  # pylint: disable=g-import-not-at-top
  from agents.apex_dqn.config import ApeXDQNConfig  # pylint: disable=g-import-not-at-top
  began = time.monotonic()
  load_average = os.getloadavg()
  config = ApeXDQNConfig()
  writer_counts = [int(count) for count in FLAGS.writers]
  sampler_counts = [int(count) for count in FLAGS.samplers]
  update_counts = [int(count) for count in FLAGS.update_samplers]
  num_clients = max(writer_counts + sampler_counts + update_counts + [1])

  context = multiprocessing.get_context('spawn')
  port_queue, server_stop = context.Queue(), context.Event()
  server = context.Process(
      target=common.serve_replay, daemon=True,
      args=(FLAGS.env, FLAGS.replay_capacity, MIN_REPLAY_SIZE, port_queue,
            server_stop))
  recording_dir = tempfile.mkdtemp(prefix='replay_headroom_')
  clients = None
  try:
    server.start()
    print(f'Recording {FLAGS.recorded_steps} steps of {FLAGS.env}...')
    recording = replay_load.record(FLAGS.env, FLAGS.recorded_steps,
                                   recording_dir)
    address = f'localhost:{replay_load.server_port(port_queue, server)}'
    client = reverb.Client(address)
    print(f'Starting {num_clients} client processes...')
    clients = replay_load.Clients(context, num_clients, FLAGS.env, [address],
                                  recording_dir)

    def inserted():
      return replay_load.table_info(
          client).rate_limiter_info.insert_stats.completed

    def sampled():
      return clients.batch_count() * config.batch_size

    phases = (
        [('insert', 'write', count, inserted) for count in writer_counts] +
        [('sample', 'sample', count, sampled) for count in sampler_counts] +
        [('sample+update', 'sample_and_update', count, sampled)
         for count in update_counts])
    results = {'insert': [], 'sample': [], 'sample+update': []}
    for phase, job, count, count_fn in phases:
      if phase != 'insert':
        replay_load.fill([client], clients, FLAGS.min_table_size)
      print(f'Measuring {phase} with {count} process(es)...')
      clients.start(job, count)
      try:
        result = replay_load.measure(count_fn, [server.pid], clients, count,
                                     FLAGS.warmup_seconds, FLAGS.repeats,
                                     FLAGS.seconds)
      finally:
        clients.end(count)
      result['table_size'] = replay_load.table_info(client).current_size
      results[phase].append(result)
  finally:
    if clients is not None:
      clients.close()
    server_stop.set()
    replay_load.join_all([server])
    shutil.rmtree(recording_dir, ignore_errors=True)

  def best(phase):
    rates = [r['median_transitions_per_second'] for r in results[phase]]
    return max(rates) if rates else None

  capacity = {
      'inserts_per_second': best('insert'),
      'samples_per_second': best('sample'),
      'samples_with_updates_per_second': best('sample+update'),
  }
  # The learner samples and updates priorities: that is the capacity to use
  # when it was measured.
  sample_capacity = (capacity['samples_with_updates_per_second'] or
                     capacity['samples_per_second'])
  usage = _usage(config.batch_size)
  headroom = {
      'inserts': _headroom(capacity['inserts_per_second'],
                           usage['inserts_per_second']),
      'samples': _headroom(sample_capacity, usage['samples_per_second']),
  }
  known = [value for value in headroom.values() if value is not None]
  goal_met = (all(value >= FLAGS.goal for value in known)
              if len(known) == len(headroom) else None)

  rows = []
  for phase, phase_results in results.items():
    for result in phase_results:
      rates = [w['transitions_per_second'] for w in result['windows']]
      rows.append([phase, result['processes'],
                   result['median_transitions_per_second'], min(rates),
                   max(rates), result['median_server_cpu_cores'],
                   result['median_clients_cpu_cores'],
                   result['median_machine_cpu_cores']])
  common.print_table(
      f'Replay capacity, {FLAGS.env} transitions ({os.cpu_count()} cores; '
      f'median of {FLAGS.repeats} x {FLAGS.seconds:g} s)',
      ['phase', 'processes', 'transitions/s', 'min', 'max', 'server cores',
       'client cores', 'machine cores'], rows)

  def figure(value):
    return 'n/a' if value is None else float(value)

  common.print_table(
      f'Replay headroom (goal >= {FLAGS.goal:g}x)',
      ['', 'capacity/s', 'used/s', 'headroom', 'usage from'],
      [['inserts', figure(capacity['inserts_per_second']),
        figure(usage['inserts_per_second']), figure(headroom['inserts']),
        usage['inserts_source']],
       ['samples', figure(sample_capacity),
        figure(usage['samples_per_second']), figure(headroom['samples']),
        usage['samples_source']]])
  elapsed = time.monotonic() - began
  print(f'\nGoal met: {"n/a" if goal_met is None else goal_met}; '
        f'{elapsed:.0f} s in all.')

  path = common.write_result('replay_headroom', {
      'settings': {
          'env': FLAGS.env,
          'recording': recording,
          'seconds': FLAGS.seconds,
          'warmup_seconds': FLAGS.warmup_seconds,
          'repeats': FLAGS.repeats,
          'replay_capacity': FLAGS.replay_capacity,
          'min_replay_size': MIN_REPLAY_SIZE,
          'min_table_size': FLAGS.min_table_size,
          'batch_size': config.batch_size,
          'prefetch_size': config.prefetch_size,
          'actor_flush_size': config.actor_flush_size,
          'n_step': config.n_step,
          'num_actors': FLAGS.num_actors,
      },
      'load_average_at_start': load_average,
      'results': results,
      'capacity': capacity,
      'sample_capacity_for_headroom': sample_capacity,
      'usage': usage,
      'headroom': headroom,
      'goal': FLAGS.goal,
      'goal_met': goal_met,
      'elapsed_seconds': elapsed,
  })
  print(f'Wrote {path}')


if __name__ == '__main__':
  app.run(main)
