"""Measures the replay server's memory per stored Atari transition.

Starts a Reverb server in a child process, lets one actor's adder write
n-step transitions of real ALE frames (random actions) into it, and reads the
server's resident memory before and after. Prints bytes per transition and the
capacity that fits a memory budget.

  .venv/bin/python benchmarks/replay_memory.py --env=atari:Pong --transitions=50000
"""

import json
import multiprocessing
import os
import time

from absl import app
from absl import flags
import numpy as np
import psutil

from benchmarks import common

flags.DEFINE_string('env', 'atari:Pong', 'Environment.')
flags.DEFINE_integer('transitions', 50_000, 'Transitions to insert.')
flags.DEFINE_float('budget_gib', 12.0, 'Memory budget for the replay server.')
FLAGS = flags.FLAGS


def main(_):
  import reverb  # pylint: disable=g-import-not-at-top
  from agents.envs import environments  # pylint: disable=g-import-not-at-top
  from agents.apex_dqn.builder import ApeXDQNBuilder  # pylint: disable=g-import-not-at-top
  from agents.apex_dqn.config import ApeXDQNConfig  # pylint: disable=g-import-not-at-top
  context = multiprocessing.get_context('spawn')
  port_queue, stop_event = context.Queue(), context.Event()
  server = context.Process(target=common.serve_replay,
                           args=(FLAGS.env, FLAGS.transitions, 512, port_queue,
                                 stop_event))
  server.start()
  port = port_queue.get()
  time.sleep(1.0)
  server_process = psutil.Process(server.pid)
  rss_before = server_process.memory_info().rss

  environment_spec = environments.resolve_discrete(FLAGS.env)
  builder = ApeXDQNBuilder(ApeXDQNConfig(), environment_spec)
  adder = builder.make_adder(reverb.Client(f'localhost:{port}'))
  environment = environment_spec.make_environment(seed=0)
  rng = np.random.default_rng(0)
  num_actions = environment_spec.spec.actions.num_values
  timestep = environment.reset()
  adder.add_first(timestep)
  start, written = time.time(), 0
  while written < FLAGS.transitions:
    action = np.int32(rng.integers(num_actions))
    values = rng.standard_normal(num_actions).astype(np.float32)
    timestep = environment.step(action)
    adder.add(action, timestep, values,
              final_values=values if timestep.last() else None)
    written += 1
    if timestep.last():
      timestep = environment.reset()
      adder.add_first(timestep)
  adder.close()
  elapsed = time.time() - start
  time.sleep(2.0)
  rss_after = server_process.memory_info().rss
  per_transition = (rss_after - rss_before) / FLAGS.transitions
  capacity = int(FLAGS.budget_gib * 2**30 / per_transition)
  result = {
      'env': FLAGS.env,
      'transitions': FLAGS.transitions,
      'server_rss_before_mib': rss_before / 2**20,
      'server_rss_after_mib': rss_after / 2**20,
      'bytes_per_transition': per_transition,
      'naive_bytes_per_transition': 2 * int(np.prod(
          environment_spec.spec.observations.shape)),
      'capacity_for_budget': capacity,
      'budget_gib': FLAGS.budget_gib,
      'insert_seconds': elapsed,
  }
  print(json.dumps(result, indent=2))
  os.makedirs(os.path.join(os.path.dirname(__file__), 'results'), exist_ok=True)
  with open(os.path.join(os.path.dirname(__file__), 'results',
                         'replay_memory.json'), 'w') as f:
    json.dump(result, f, indent=2)
  stop_event.set()
  server.join()


if __name__ == '__main__':
  app.run(main)
