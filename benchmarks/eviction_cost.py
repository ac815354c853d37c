"""What a round of Ape-X DPG's eviction by inverse priority costs
(`--replay_remover=inverse_priority`, `agents/replay/eviction.py`).

Fills a real Reverb server (the program's DPG table, a checkpointer on local
disk) with transitions of the environment's shapes through the actors' own
adder (random observations and values), then times rounds of eviction: the
table's snapshot (Reverb's checkpoint), reading its items, drawing the 5%
excess and deleting it. Each round starts with the table 5% over capacity
(topped up by the adder, not timed). Prints the median and every repeat per
table size, with the snapshot's bytes, and writes
benchmarks/results/eviction_cost.json.

  .venv/bin/python benchmarks/eviction_cost.py            # about 5 minutes
  .venv/bin/python benchmarks/eviction_cost.py --sizes=10000,100000
"""

import os
import tempfile
import time

from absl import app
from absl import flags
import numpy as np

from benchmarks import common

flags.DEFINE_string('env', 'control:manipulator:bring_ball',
                    'Environment whose transitions fill the table (the '
                    "paper's Ape-X DPG task by default).")
flags.DEFINE_list('sizes', ['10000', '100000', '1000000'],
                  'Replay capacities to measure (the paper: 1,000,000).')
flags.DEFINE_integer('repeats', 3, 'Rounds timed per size.')
FLAGS = flags.FLAGS


def _fill(adder, spec, count: int, rng: np.random.Generator):
  """`count` transitions through the adder: one episode of random steps."""
  import dm_env  # pylint: disable=g-import-not-at-top
  observation = lambda: rng.normal(size=spec.observations.shape).astype(
      spec.observations.dtype)
  action = np.zeros(spec.actions.shape, spec.actions.dtype)
  adder.add_first(dm_env.restart(observation()))
  for _ in range(count):
    adder.add(action, dm_env.transition(np.float32(rng.uniform()),
                                        observation()),
              rng.normal(size=2).astype(np.float32))
  adder.flush()


def _directory_bytes(path: str) -> int:
  return sum(os.path.getsize(os.path.join(path, name))
             for name in os.listdir(path))


def _measure(builder, size: int, rng: np.random.Generator):
  import reverb  # pylint: disable=g-import-not-at-top
  from agents.replay import eviction  # pylint: disable=g-import-not-at-top
  from agents.replay import tables  # pylint: disable=g-import-not-at-top
  directory = tempfile.mkdtemp(prefix='eviction_cost_')
  server = reverb.Server(
      builder.make_replay_tables(),
      checkpointer=reverb.checkpointers.DefaultCheckpointer(directory))
  client = reverb.Client(f'localhost:{server.port}')
  rounds = builder.make_eviction(seed=0)
  adder = builder.make_adder(client)
  spec = builder.environment.spec
  table_size = lambda: client.server_info()[tables.TABLE].current_size
  seconds, snapshot_bytes = [], 0
  try:
    started = time.time()
    _fill(adder, spec, size, rng)
    fill_seconds = time.time() - started
    for _ in range(FLAGS.repeats):
      _fill(adder, spec, size + eviction.slack(size) - table_size(), rng)
      # The adder holds back an episode's last n - 1 steps and the items of
      # a chunk not yet full: a few steps more until a round is due.
      while not rounds.due(client):
        _fill(adder, spec, 8, rng)
        time.sleep(0.05)
      started = time.time()
      evicted = rounds.evict(client)
      seconds.append(time.time() - started)
      assert evicted >= eviction.slack(size) and table_size() == size
      (newest,) = os.listdir(directory)
      snapshot_bytes = _directory_bytes(os.path.join(directory, newest))
  finally:
    adder.close()
    server.stop()
  return {'size': size, 'fill_seconds': fill_seconds, 'round_seconds': seconds,
          'median_round_seconds': common.median(seconds),
          'evicted_per_round': eviction.slack(size),
          'snapshot_bytes': snapshot_bytes}


def main(_):
  from agents.envs import environments  # pylint: disable=g-import-not-at-top
  from agents.apex_dpg.builder import ApeXDPGBuilder  # pylint: disable=g-import-not-at-top
  from agents.apex_dpg.config import ApeXDPGConfig  # pylint: disable=g-import-not-at-top
  environment = environments.resolve_continuous(FLAGS.env)
  rng = np.random.default_rng(0)
  results = []
  for size in (int(size) for size in FLAGS.sizes):
    config = ApeXDPGConfig(replay_remover='inverse_priority',
                           replay_capacity=size,
                           min_replay_size=min(size, 1000),
                           batch_size=min(size, 256))
    results.append(_measure(ApeXDPGBuilder(config, environment), size, rng))
    row = results[-1]
    print(f'{size:>9,} items: rounds of {row["evicted_per_round"]:,} '
          f'victims took {[round(s, 3) for s in row["round_seconds"]]} s '
          f'(snapshot {row["snapshot_bytes"] / 2**20:.1f} MiB)', flush=True)
  common.print_table(
      f'A round of eviction by inverse priority ({FLAGS.env}): snapshot, '
      'read, draw, delete', ['capacity', 'median s', 'victims', 'MiB',
                             's per 1,000 victims'],
      [[f'{row["size"]:,}', row['median_round_seconds'],
        row['evicted_per_round'], row['snapshot_bytes'] / 2**20,
        row['median_round_seconds'] / row['evicted_per_round'] * 1000]
       for row in results])
  print(common.write_result('eviction_cost', {
      'env': FLAGS.env, 'repeats': FLAGS.repeats, 'results': results}))


if __name__ == '__main__':
  app.run(main)
