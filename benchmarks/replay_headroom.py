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

import functools
import multiprocessing
import os
import queue
import shutil
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app  # pylint: disable=g-import-not-at-top,wrong-import-position
from absl import flags  # pylint: disable=wrong-import-position
import numpy as np  # pylint: disable=wrong-import-position
import psutil  # pylint: disable=wrong-import-position

from benchmarks import common  # pylint: disable=wrong-import-position

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
STARTUP_TIMEOUT = 300.0  # Seconds a child may take to import and set up.
FILL_TIMEOUT = 300.0


# --------------------------------------------------------------------------
# Child processes.


def _load_recording(directory):
  """The recorded timesteps, as `dm_env.TimeStep`s."""
  import dm_env  # pylint: disable=g-import-not-at-top
  arrays = {name: np.load(os.path.join(directory, f'{name}.npy'))
            for name in ('step_types', 'rewards', 'discounts', 'actions',
                         'observations')}
  timesteps = [
      dm_env.TimeStep(dm_env.StepType(int(step_type)), np.float32(reward),
                      np.float32(discount), observation)
      for step_type, reward, discount, observation in zip(
          arrays['step_types'], arrays['rewards'], arrays['discounts'],
          arrays['observations'])
  ]
  return timesteps, arrays['actions']


def _write(builder, client, timesteps, actions, stop):
  """Replays the recording through the actor's adder until `stop` is set."""
  rng = np.random.default_rng(os.getpid())
  num_actions = builder.environment.spec.actions.num_values
  values = rng.standard_normal((len(timesteps), num_actions)).astype(np.float32)
  adder = builder.make_adder(client)
  while not stop.is_set():
    for index, timestep in enumerate(timesteps):
      if stop.is_set():
        break
      if timestep.first():
        adder.add_first(timestep)
        continue
      truncated = timestep.last() and timestep.discount > 0
      adder.add(actions[index], timestep, values[index - 1],
                final_values=values[index] if truncated else None)
  adder.close()


def _sample(builder, address, with_updates, batches, stop, ready):
  """Iterates the learner's dataset until `stop` is set, counting batches;
  with `with_updates`, also writes new priorities for every batch."""
  import reverb  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from agents import replay  # pylint: disable=g-import-not-at-top
  config = builder.config
  tf_client = reverb.TFClient(address)

  @tf.function
  def step(iterator):
    sample = next(iterator)
    keys = sample.info.key
    if with_updates:
      priorities = tf.random.uniform(tf.shape(keys), 0.1, 10.0,
                                     dtype=tf.float64)
      tf_client.update_priorities(replay.TABLE, keys=keys,
                                  priorities=priorities)
    return tf.size(keys)

  def new_iterator():
    return iter(replay.make_dataset(address, config.batch_size,
                                    config.prefetch_size))

  iterator = new_iterator()
  step(iterator)  # Traces the step and fills the prefetch buffer.
  ready()
  while not stop.is_set():
    try:
      step(iterator)
    except tf.errors.OutOfRangeError:  # Replay let nothing through for 1 s.
      iterator = new_iterator()
      continue
    with batches.get_lock():
      batches.value += 1


def _client(index, env_name, address, recording_dir, jobs, reports, stop,
            batches):
  """A writer or learner-like process: runs the jobs it is sent.

  Jobs: 'write', 'sample', 'sample_and_update' (each until `stop` is set) and
  'exit'. Reports ('ready', index) once a job runs at full speed,
  ('done', index) when it has ended and ('error', text) on failure.
  """
  try:
    import reverb  # pylint: disable=g-import-not-at-top
    from agents import environments  # pylint: disable=g-import-not-at-top
    from agents.apex_dqn import ApeXDQNBuilder, ApeXDQNConfig  # pylint: disable=g-import-not-at-top
    builder = ApeXDQNBuilder(ApeXDQNConfig(),
                             environments.resolve_discrete(env_name))
    client = reverb.Client(address)
    timesteps, actions = _load_recording(recording_dir)
    ready = functools.partial(reports.put, ('ready', index))
    reports.put(('started', index))
    while True:
      job = jobs.get()
      if job == 'exit':
        return
      if job == 'write':
        ready()
        _write(builder, client, timesteps, actions, stop)
      else:
        _sample(builder, address, job == 'sample_and_update', batches, stop,
                ready)
      reports.put(('done', index))
  except Exception:  # pylint: disable=broad-except
    reports.put(('error', f'client {index}:\n{traceback.format_exc()}'))


# --------------------------------------------------------------------------
# The parent.


def _record(env_name, num_steps, directory):
  """Records `num_steps` agent steps with random actions as .npy files; the
  last step is marked as the end of a truncated episode, so the recording
  consists of whole episodes."""
  import dm_env  # pylint: disable=g-import-not-at-top
  from agents import environments  # pylint: disable=g-import-not-at-top
  spec = environments.resolve_discrete(env_name)
  environment = spec.make_environment(seed=0)
  rng = np.random.default_rng(0)
  num_actions = spec.spec.actions.num_values
  step_types, rewards, discounts, actions, observations = [], [], [], [], []

  def record(timestep, action):
    step_types.append(int(timestep.step_type))
    rewards.append(timestep.reward or 0.0)
    discounts.append(1.0 if timestep.discount is None else timestep.discount)
    actions.append(action)
    observations.append(timestep.observation)

  timestep = environment.reset()
  record(timestep, 0)
  while len(step_types) < num_steps:
    action = np.int32(rng.integers(num_actions))
    timestep = environment.step(action)
    record(timestep, action)
    if timestep.last() and len(step_types) < num_steps:
      timestep = environment.reset()
      record(timestep, 0)
  environment.close()
  if step_types[-1] != int(dm_env.StepType.LAST):
    step_types[-1], discounts[-1] = int(dm_env.StepType.LAST), 1.0
  for name, values, dtype in (
      ('step_types', step_types, np.int8), ('rewards', rewards, np.float32),
      ('discounts', discounts, np.float32), ('actions', actions, np.int32),
      ('observations', observations, spec.spec.observations.dtype)):
    np.save(os.path.join(directory, f'{name}.npy'), np.asarray(values, dtype))
  return {
      'steps': len(step_types),
      'episodes': step_types.count(int(dm_env.StepType.FIRST)),
      'observation_shape': list(spec.spec.observations.shape),
      'observation_bytes': int(np.asarray(observations[0]).nbytes),
  }


class _Clients:
  """The client processes and the messages to and from them."""

  def __init__(self, context, count, env_name, address, recording_dir):
    self.reports = context.Queue()
    self.stop = context.Event()
    self.batches = [context.Value('q', 0) for _ in range(count)]
    self.jobs = [context.Queue() for _ in range(count)]
    self.processes = [
        context.Process(
            target=_client, daemon=True,
            args=(index, env_name, address, recording_dir, self.jobs[index],
                  self.reports, self.stop, self.batches[index]))
        for index in range(count)
    ]
    for process in self.processes:
      process.start()
    self.wait_for('started', count)

  def wait_for(self, kind, count, timeout=STARTUP_TIMEOUT):
    """Waits for `count` reports of `kind`; raises if a client failed."""
    deadline = time.monotonic() + timeout
    received = 0
    while received < count:
      try:
        report, detail = self.reports.get(timeout=1.0)
      except queue.Empty:
        dead = [p.pid for p in self.processes if not p.is_alive()]
        if dead:
          raise RuntimeError(f'Client processes {dead} died.') from None
        if time.monotonic() > deadline:
          raise TimeoutError(f'No {count} {kind!r} reports in {timeout} s.')
        continue
      if report == 'error':
        raise RuntimeError(detail)
      if report == kind:
        received += 1

  def start(self, job, count):
    """Starts `job` on the first `count` clients; returns once it runs."""
    self.stop.clear()
    for batches in self.batches:
      with batches.get_lock():
        batches.value = 0
    for jobs in self.jobs[:count]:
      jobs.put(job)
    self.wait_for('ready', count)

  def end(self, count):
    self.stop.set()
    self.wait_for('done', count)

  def cpu_seconds(self, count):
    return sum(_cpu_seconds(process.pid) for process in self.processes[:count])

  def batch_count(self):
    return sum(batches.value for batches in self.batches)

  def close(self):
    self.stop.set()
    for jobs in self.jobs:
      jobs.put('exit')
    _join_all(self.processes)


def _cpu_seconds(pid):
  try:
    times = psutil.Process(pid).cpu_times()
  except psutil.Error:
    return 0.0
  return times.user + times.system


def _machine_busy_seconds():
  times = psutil.cpu_times()
  return sum(times) - times.idle - getattr(times, 'iowait', 0.0)


def _server_port(port_queue, server):
  """The port the server reports; raises if it dies first."""
  deadline = time.monotonic() + STARTUP_TIMEOUT
  while True:
    try:
      return port_queue.get(timeout=1.0)
    except queue.Empty:
      if not server.is_alive():
        raise RuntimeError('The replay server process died.') from None
      if time.monotonic() > deadline:
        raise TimeoutError('The replay server did not start.') from None


def _join_all(processes, timeout=15.0):
  deadline = time.monotonic() + timeout
  for process in processes:
    process.join(max(0.1, deadline - time.monotonic()))
  for process in processes:
    if process.is_alive():
      process.terminate()
      process.join(5.0)
    if process.is_alive():
      process.kill()
      process.join()


def _measure(count_fn, server_pid, clients, num_clients):
  """`--repeats` windows of `--seconds`: rate of `count_fn` and CPU use."""
  time.sleep(FLAGS.warmup_seconds)
  windows = []
  for _ in range(FLAGS.repeats):
    start = (time.monotonic(), count_fn(), _cpu_seconds(server_pid),
             clients.cpu_seconds(num_clients), _machine_busy_seconds())
    time.sleep(FLAGS.seconds)
    end = (time.monotonic(), count_fn(), _cpu_seconds(server_pid),
           clients.cpu_seconds(num_clients), _machine_busy_seconds())
    elapsed = end[0] - start[0]
    windows.append({
        'seconds': elapsed,
        'transitions': end[1] - start[1],
        'transitions_per_second': (end[1] - start[1]) / elapsed,
        'server_cpu_cores': (end[2] - start[2]) / elapsed,
        'clients_cpu_cores': (end[3] - start[3]) / elapsed,
        # All processes of the machine: more than server + clients means
        # something else ran meanwhile.
        'machine_cpu_cores': (end[4] - start[4]) / elapsed,
    })
  return {
      'processes': num_clients,
      'windows': windows,
      **{f'median_{key}': common.median(window[key] for window in windows)
         for key in ('transitions_per_second', 'server_cpu_cores',
                     'clients_cpu_cores', 'machine_cpu_cores')},
  }


def _table_info(client):
  from agents import replay  # pylint: disable=g-import-not-at-top
  return client.server_info()[replay.TABLE]


def _fill(client, clients, min_size):
  """Lets one writer run until the table holds `min_size` items."""
  if _table_info(client).current_size >= min_size:
    return
  clients.start('write', 1)
  deadline = time.monotonic() + FILL_TIMEOUT
  try:
    while _table_info(client).current_size < min_size:
      if time.monotonic() > deadline:
        raise TimeoutError(f'The table did not reach {min_size} items.')
      time.sleep(0.5)
  finally:
    clients.end(1)


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
  from agents.apex_dqn import ApeXDQNConfig  # pylint: disable=g-import-not-at-top
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
    recording = _record(FLAGS.env, FLAGS.recorded_steps, recording_dir)
    address = f'localhost:{_server_port(port_queue, server)}'
    client = reverb.Client(address)
    print(f'Starting {num_clients} client processes...')
    clients = _Clients(context, num_clients, FLAGS.env, address, recording_dir)

    def inserted():
      return _table_info(client).rate_limiter_info.insert_stats.completed

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
        _fill(client, clients, FLAGS.min_table_size)
      print(f'Measuring {phase} with {count} process(es)...')
      clients.start(job, count)
      try:
        result = _measure(count_fn, server.pid, clients, count)
      finally:
        clients.end(count)
      result['table_size'] = _table_info(client).current_size
      results[phase].append(result)
  finally:
    if clients is not None:
      clients.close()
    server_stop.set()
    _join_all([server])
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
