"""Load on replay servers, as the programs' actors and learner make it: the
machinery of the replay benchmarks (`replay_headroom.py`, `replay_shards.py`).

* `record`: agent steps of a game, recorded once with random actions, so
  that the writers send real frames without running the emulator.
* `Clients`: writer and learner-like processes. A writer replays the
  recording through the actors' adder (`make_adder`) into one server (of
  several replay shards, dealt by its index); a learner-like process draws
  batches as the learner does (the learner's dataset from one server,
  `agents.replay.shards.ShardedBatches` from several), with or without writing new
  priorities back.
* `measure`: rates over repeated windows with every process's CPU use.
"""

import functools
import os
import queue
import time
import traceback

import numpy as np
import psutil

from benchmarks import common

STARTUP_TIMEOUT = 300.0  # Seconds a child may take to import and set up.
FILL_TIMEOUT = 300.0


# --------------------------------------------------------------------------
# Client processes.


def load_recording(directory):
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


def write(builder, client, timesteps, actions, stop):
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


def sample(builder, addresses, with_updates, batches, stop, ready):
  """Draws batches as the learner does until `stop` is set, counting them:
  from one server, the learner's dataset in a `tf.function`; from several
  (replay shards), `agents.replay.shards.ShardedBatches`. With `with_updates`, also
  writes new priorities for every batch, as the learner writes them back."""
  if len(addresses) > 1:
    _sample_shards(builder, addresses, with_updates, batches, stop, ready)
    return
  import reverb  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from agents.replay import tables  # pylint: disable=g-import-not-at-top
  config = builder.config
  address, = addresses
  tf_client = reverb.TFClient(address)

  @tf.function
  def step(iterator):
    sample = next(iterator)
    keys = sample.info.key
    if with_updates:
      priorities = tf.random.uniform(tf.shape(keys), 0.1, 10.0,
                                     dtype=tf.float64)
      tf_client.update_priorities(tables.TABLE, keys=keys,
                                  priorities=priorities)
    return tf.size(keys)

  def new_iterator():
    return iter(tables.make_dataset(address, config.batch_size,
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


def _sample_shards(builder, addresses, with_updates, batches, stop, ready):
  """`sample` from several replay shards, as the sharded learner draws."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from agents.replay import shards  # pylint: disable=g-import-not-at-top
  config = builder.config
  iterator = shards.ShardedBatches(
      addresses, config.batch_size, config.priority_exponent,
      stacked_frames=builder.environment.stacked_frames, seed=os.getpid())
  rng = np.random.default_rng(os.getpid())
  first = True
  try:
    while not stop.is_set():
      try:
        sample, served_by = next(iterator)
      except tf.errors.OutOfRangeError:  # Replay let nothing through.
        continue
      if with_updates:
        iterator.update_priorities(
            sample.info.key, rng.uniform(0.1, 10.0, len(served_by)),
            served_by)
      if first:  # Streams running, as the dataset's prefetch is filled.
        ready()
        first = False
        continue
      with batches.get_lock():
        batches.value += 1
  finally:
    iterator.close()


def client_process(index, env_name, addresses, recording_dir, jobs, reports,
                   stop, batches):
  """A writer or learner-like process: runs the jobs it is sent. A writer
  writes to one of `addresses` (the replay shards), dealt by `index`; a
  learner-like process samples all of them.

  Jobs: 'write', 'sample', 'sample_and_update' (each until `stop` is set) and
  'exit'. Reports ('ready', index) once a job runs at full speed,
  ('done', index) when it has ended and ('error', text) on failure.
  """
  try:
    import reverb  # pylint: disable=g-import-not-at-top
    from agents.envs import environments  # pylint: disable=g-import-not-at-top
    from agents.apex_dqn.builder import ApeXDQNBuilder  # pylint: disable=g-import-not-at-top
    from agents.apex_dqn.config import ApeXDQNConfig  # pylint: disable=g-import-not-at-top
    builder = ApeXDQNBuilder(ApeXDQNConfig(),
                             environments.resolve_discrete(env_name))
    client = reverb.Client(addresses[index % len(addresses)])
    timesteps, actions = load_recording(recording_dir)
    ready = functools.partial(reports.put, ('ready', index))
    reports.put(('started', index))
    while True:
      job = jobs.get()
      if job == 'exit':
        return
      if job == 'write':
        ready()
        write(builder, client, timesteps, actions, stop)
      else:
        sample(builder, addresses, job == 'sample_and_update', batches, stop,
               ready)
      reports.put(('done', index))
  except Exception:  # pylint: disable=broad-except
    reports.put(('error', f'client {index}:\n{traceback.format_exc()}'))


# --------------------------------------------------------------------------
# The benchmark's process.


def record(env_name, num_steps, directory):
  """Records `num_steps` agent steps with random actions as .npy files; the
  last step is marked as the end of a truncated episode, so the recording
  consists of whole episodes."""
  import dm_env  # pylint: disable=g-import-not-at-top
  from agents.envs import environments  # pylint: disable=g-import-not-at-top
  spec = environments.resolve_discrete(env_name)
  environment = spec.make_environment(seed=0)
  rng = np.random.default_rng(0)
  num_actions = spec.spec.actions.num_values
  step_types, rewards, discounts, actions, observations = [], [], [], [], []

  def keep(timestep, action):
    step_types.append(int(timestep.step_type))
    rewards.append(timestep.reward or 0.0)
    discounts.append(1.0 if timestep.discount is None else timestep.discount)
    actions.append(action)
    observations.append(timestep.observation)

  timestep = environment.reset()
  keep(timestep, 0)
  while len(step_types) < num_steps:
    action = np.int32(rng.integers(num_actions))
    timestep = environment.step(action)
    keep(timestep, action)
    if timestep.last() and len(step_types) < num_steps:
      timestep = environment.reset()
      keep(timestep, 0)
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


class Clients:
  """The client processes and the messages to and from them."""

  def __init__(self, context, count, env_name, addresses, recording_dir):
    self.reports = context.Queue()
    self.stop = context.Event()
    self.batches = [context.Value('q', 0) for _ in range(count)]
    self.jobs = [context.Queue() for _ in range(count)]
    self.processes = [
        context.Process(
            target=client_process, daemon=True,
            args=(index, env_name, addresses, recording_dir, self.jobs[index],
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
    return sum(cpu_seconds(process.pid) for process in self.processes[:count])

  def batch_count(self):
    return sum(batches.value for batches in self.batches)

  def close(self):
    self.stop.set()
    for jobs in self.jobs:
      jobs.put('exit')
    join_all(self.processes)


def cpu_seconds(pid):
  try:
    times = psutil.Process(pid).cpu_times()
  except psutil.Error:
    return 0.0
  return times.user + times.system


def machine_busy_seconds():
  times = psutil.cpu_times()
  return sum(times) - times.idle - getattr(times, 'iowait', 0.0)


def server_port(port_queue, server):
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


def join_all(processes, timeout=15.0):
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


def measure(count_fn, server_pids, clients, num_clients, warmup_seconds,
            repeats, seconds):
  """`repeats` windows of `seconds` after `warmup_seconds`: the rate of
  `count_fn`, and the CPU use of the servers (`server_pids`: their sum, and
  each one's), of the first `num_clients` clients and of the machine."""
  time.sleep(warmup_seconds)

  def now():
    return (time.monotonic(), count_fn(),
            [cpu_seconds(pid) for pid in server_pids],
            clients.cpu_seconds(num_clients), machine_busy_seconds())

  windows = []
  for _ in range(repeats):
    start = now()
    time.sleep(seconds)
    end = now()
    elapsed = end[0] - start[0]
    each = [(after - before) / elapsed
            for before, after in zip(start[2], end[2])]
    windows.append({
        'seconds': elapsed,
        'transitions': end[1] - start[1],
        'transitions_per_second': (end[1] - start[1]) / elapsed,
        'server_cpu_cores': sum(each),
        'server_cpu_cores_each': each,
        'clients_cpu_cores': (end[3] - start[3]) / elapsed,
        # All processes of the machine: more than servers + clients means
        # something else ran meanwhile.
        'machine_cpu_cores': (end[4] - start[4]) / elapsed,
    })
  return {
      'processes': num_clients,
      'windows': windows,
      **{f'median_{key}': common.median(window[key] for window in windows)
         for key in ('transitions_per_second', 'server_cpu_cores',
                     'clients_cpu_cores', 'machine_cpu_cores')},
      'median_server_cpu_cores_each': [
          common.median(window['server_cpu_cores_each'][index]
                        for window in windows)
          for index in range(len(server_pids))],
  }


def table_info(client):
  from agents.replay import tables  # pylint: disable=g-import-not-at-top
  return client.server_info()[tables.TABLE]


def fill(replay_clients, clients, min_size):
  """Lets one writer per server (`replay_clients`, one per replay shard) run
  until every table holds `min_size` items."""
  def short():
    return any(table_info(client).current_size < min_size
               for client in replay_clients)
  if not short():
    return
  clients.start('write', len(replay_clients))
  deadline = time.monotonic() + FILL_TIMEOUT
  try:
    while short():
      if time.monotonic() > deadline:
        raise TimeoutError(f'The tables did not reach {min_size} items.')
      time.sleep(0.5)
  finally:
    clients.end(len(replay_clients))
