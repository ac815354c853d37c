"""What Reverb costs an actor per environment step, apart from everything
else the actor does (the floor under goal 1 of docs/performance.md, actor
efficiency).

One process pinned to the actor CPU writes real Pong frames through the
actor's own `agents.replay.adders._RowWriter` (Reverb 0.7's C++ `TrajectoryWriter`),
one writer per environment as in an actor of K environments, to a replay
server with the program's table in its own process on the other CPU:

  appends only        one row per environment step (frame, action, n-step
                      return, discount): copying and compressing chunks.
  appends and items   the same, plus one prioritised item per step, written
                      in batches of `actor_flush_size` as the adder does:
                      chunks and items go over the writer's gRPC stream,
                      whose threads share the actor's CPU.

The bare actor loop (`bare_loops.py actor`, same K, same CPU, nothing else
running) is measured in the same run, and the table shows the efficiency an
actor would have if Reverb were its only cost: bare step / (bare step +
Reverb's cost per step).

  .venv/bin/python benchmarks/writer_cost.py
"""

import multiprocessing
import os
import subprocess
import time

from absl import app
from absl import flags
import numpy as np

from benchmarks import common

flags.DEFINE_string('env', 'atari:Pong', 'Environment whose frames are written.')
flags.DEFINE_integer('envs', 16, 'Writers (environments of one actor).')
flags.DEFINE_integer('steps', 300, 'Steps per environment in one repeat.')
flags.DEFINE_integer('repeats', 5, 'Repeats per configuration (median).')
flags.DEFINE_float('bare_seconds', 20.0, 'Seconds the bare loop is measured.')
FLAGS = flags.FLAGS

ACTOR_CPU, SERVER_CPU = 0, 1
RECORDED_FRAMES = 400
N_STEP = 3


def _frames(environment, count):
  """Newest frames of real Pong steps under random actions."""
  rng = np.random.default_rng(0)
  num_actions = environment.action_spec().num_values
  timestep, frames = environment.reset(), []
  while len(frames) < count:
    timestep = environment.step(np.int32(rng.integers(num_actions)))
    frames.append(np.ascontiguousarray(timestep.observation[..., -1]))
    if timestep.last():
      timestep = environment.reset()
  return frames


def _seconds_per_step(client, table, frames, stacked_frames, flush_size, items):
  """Wall-clock seconds per environment step of K writers."""
  from agents.replay import adders  # pylint: disable=g-import-not-at-top
  keep_alive = 3 * flush_size + 2 * N_STEP + 16 + 2 * stacked_frames
  writers = [adders._RowWriter(client, keep_alive, stacked_frames)  # pylint: disable=protected-access
             for _ in range(FLAGS.envs)]
  scalars = (np.int32(1), np.float32(0.5), np.float32(0.97))
  pending = [0] * FLAGS.envs
  begin = time.perf_counter()
  for step in range(FLAGS.steps):
    for index, writer in enumerate(writers):
      row = writer.append(frames[(step + 17 * index) % len(frames)], scalars)
      if not items or row < stacked_frames + N_STEP:
        continue
      pending[index] += 1
      if pending[index] == flush_size:  # The adder's flush, in slices.
        pending[index] = 0
        for start in range(0, flush_size, adders.ITEMS_PER_SLICE):
          part = range(start, min(start + adders.ITEMS_PER_SLICE, flush_size))
          writer.wait_for_at_most(adders.MAX_ITEMS_IN_FLIGHT - len(part))
          for back in part:
            observation_row = row - N_STEP - back
            writer.create_item(table, 1.0, observation_row,
                               observation_row + N_STEP,
                               observation_row + N_STEP)
  for writer in writers:
    writer.wait_for_at_most(0)
  seconds = time.perf_counter() - begin
  for writer in writers:
    writer.close()
  return seconds / (FLAGS.steps * FLAGS.envs)


def _bare_seconds_per_step():
  """The bare actor loop on the actor CPU, alone."""
  process = subprocess.Popen(
      [common.PYTHON, os.path.join(common.ROOT, 'benchmarks', 'bare_loops.py'),
       'actor', f'--env={FLAGS.env}', f'--envs={FLAGS.envs}',
       f'--cpus={ACTOR_CPU}'],
      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
      cwd=common.ROOT)
  points = []
  deadline = None
  for line in process.stdout:
    if line.strip() == 'ready':
      deadline = time.time() + 2.0 + FLAGS.bare_seconds
    elif deadline and len(line.split()) == 2:
      walltime, steps = map(float, line.split())
      if walltime > deadline - FLAGS.bare_seconds:
        points.append((walltime, steps))
      if walltime > deadline:
        break
  process.kill()
  process.wait()
  (begin, first), (end, last) = points[0], points[-1]
  return (end - begin) / (last - first)


def main(_):
  import reverb  # pylint: disable=g-import-not-at-top
  from agents.envs import environments  # pylint: disable=g-import-not-at-top
  from agents.replay import tables  # pylint: disable=g-import-not-at-top
  from agents.apex_dqn.config import ApeXDQNConfig  # pylint: disable=g-import-not-at-top
  config = ApeXDQNConfig()
  environment = environments.resolve_discrete(FLAGS.env)
  context = multiprocessing.get_context('spawn')
  port_queue, stop = context.Queue(), context.Event()
  server = context.Process(target=common.serve_replay, daemon=True,
                           args=(FLAGS.env, 200_000, 1000, port_queue, stop))
  server.start()
  try:
    port = port_queue.get(timeout=300)
    common.pin_process(server.pid, [SERVER_CPU])
    common.pin_process(os.getpid(), [ACTOR_CPU])
    client = reverb.Client(f'localhost:{port}')
    frames = _frames(environment.make_environment(seed=0), RECORDED_FRAMES)
    stacked = environment.stacked_frames
    measured = {}
    for label, items in [('appends only', False), ('appends and items', True)]:
      _seconds_per_step(client, tables.TABLE, frames, stacked, config.actor_flush_size,
                        items)  # Warm-up.
      measured[label] = [
          _seconds_per_step(client, tables.TABLE, frames, stacked, config.actor_flush_size,
                            items) for _ in range(FLAGS.repeats)]
  finally:
    stop.set()
    server.join(30)
    if server.is_alive():
      server.kill()
  bare = [_bare_seconds_per_step() for _ in range(3)]
  bare_step = common.median(bare)
  rows, results = [], {}
  for label, values in measured.items():
    cost = common.median(values)
    bound = bare_step / (bare_step + cost)
    results[label] = {'seconds_per_step': values,
                      'median_seconds_per_step': cost,
                      'efficiency_bound': bound}
    rows.append([label, f'{cost * 1e6:.1f}', f'{bare_step * 1e6:.0f}',
                 f'{bound:.3f}'])
  common.print_table(
      f'Reverb writes per environment step, {FLAGS.envs} writers on one CPU '
      f'({FLAGS.env}; medians of {FLAGS.repeats})',
      ['writes', 'us per step', 'bare loop us per step',
       'efficiency if Reverb were the only cost'], rows)
  path = common.write_result('writer_cost', {
      'settings': {'env': FLAGS.env, 'envs': FLAGS.envs,
                   'steps': FLAGS.steps, 'repeats': FLAGS.repeats,
                   'flush_size': config.actor_flush_size},
      'bare_seconds_per_step': bare,
      'median_bare_seconds_per_step': bare_step,
      'writes': results,
  })
  print(f'Wrote {path}')


if __name__ == '__main__':
  app.run(main)
