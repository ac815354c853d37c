"""Replay over several Reverb servers (`--replay_shards`), sampled as one
table: real Reverb servers, each with the project's replay table, against a
reference computed by hand (a transition's probability is p^alpha over the
sum over every shard) and against one table holding every transition.

The distribution test draws from fixed tables: it checks that the learner's
dataset samples shards in proportion to their priority mass, and says with
each transition the probability it was drawn with.
"""

import os
import signal
import threading
import time

import numpy as np
import pytest
import reverb
import tensorflow as tf
from scipy import stats

from agents.apex.config import shard_config
from agents.replay import adders
from agents.replay import tables
from agents.replay import shards as shards_lib
from agents.apex_dqn.builder import ApeXDQNBuilder
from agents.apex_dqn.config import ApeXDQNConfig
from agents.envs.environments import resolve_discrete
import helpers
import replay_items

ALPHA = 0.6
BETA = 0.4
BATCH = 64
# Three shards of unequal mass: a shard picked uniformly, not by mass, is
# far off (checked below, so that the test can tell).
SHARD_SIZES = (5, 9, 14)


def _config(**overrides) -> ApeXDQNConfig:
  values = dict(batch_size=BATCH, min_replay_size=BATCH, replay_capacity=300,
                priority_exponent=ALPHA, importance_sampling_exponent=BETA,
                prefetch_size=1, replay_shards=len(SHARD_SIZES))
  values.update(overrides)
  return ApeXDQNConfig(**values)


def _append(writer, item_id: int, priority: float):
  """Appends a transition whose n-step return is `item_id` and makes it an
  item of the replay table, through the trajectory writer, as the actors'
  adder does."""
  writer.append({
      adders.OBSERVATION: np.zeros(4, np.float32),
      adders.ACTION: np.int32(0),
      adders.N_STEP_RETURN: np.float32(item_id),
      adders.DISCOUNT: np.float32(1.0),
      adders.NEXT_OBSERVATION: np.zeros(4, np.float32),
  })
  writer.create_item(tables.TABLE, priority, {
      name: column[-1] for name, column in writer.history.items()})


# How long a test's writer waits for its table's signature (Reverb's 3 s
# default once ran out in a full suite).
SIGNATURE_TIMEOUT_MS = 60_000


def _write(client: reverb.Client, items):
  """Writes (id, priority) items (`_append`)."""
  with client.trajectory_writer(
      num_keep_alive_refs=1,
      get_signature_timeout_ms=SIGNATURE_TIMEOUT_MS) as writer:
    for item_id, priority in items:
      _append(writer, item_id, priority)
    writer.flush()


@pytest.fixture(scope='module')
def shards():
  """Servers of the shards (ids 0..27 dealt out by SHARD_SIZES, random
  priorities) and one server holding them all: (shard servers, single
  server, {id: priority}, {id: shard})."""
  spec = resolve_discrete('gym:CartPole-v1').spec
  # Tables that let sampling start at once (the learner's batch is not
  # theirs to check).
  config = _config(min_replay_size=len(SHARD_SIZES))
  rng = np.random.default_rng(0)
  priorities, homes, servers = {}, {}, []
  item_id = 0
  for shard, size in enumerate(SHARD_SIZES):
    server = reverb.Server(
        [tables.make_replay_table(shard_config(config), spec)],
        port=None)
    items = []
    for _ in range(size):
      priorities[item_id] = float(rng.uniform(0.05, 3.0))
      homes[item_id] = shard
      items.append((item_id, priorities[item_id]))
      item_id += 1
    _write(reverb.Client(f'localhost:{server.port}'), items)
    servers.append(server)
  single = reverb.Server(
      [tables.make_replay_table(_config(replay_shards=1, min_replay_size=1),
                                spec)], port=None)
  _write(reverb.Client(f'localhost:{single.port}'), priorities.items())
  yield servers, single, priorities, homes
  for server in [*servers, single]:
    server.stop()


def _reference(priorities):
  """{id: p^alpha / sum over all ids}: one table's probabilities."""
  weights = {i: p ** ALPHA for i, p in priorities.items()}
  total = sum(weights.values())
  return {i: w / total for i, w in weights.items()}


def _is_weights(probabilities, table_size: int) -> np.ndarray:
  """Schaul et al.: (N P(i))^-beta over the batch's largest."""
  weights = (table_size * np.asarray(probabilities)) ** -BETA
  return weights / weights.max()


def _draw_until(batches, condition, what: str):
  """(sample, shards) batches of `batches` until `condition(drawn)`, or
  fails after 600 s, whether batches come or not."""
  drawn = []
  deadline = time.time() + 600
  while not condition(drawn):
    assert time.time() < deadline, (
        f'{what}: {len(drawn)} batches in 600 s; shards live '
        f'{batches.live}')
    try:
      drawn.append(next(batches))
    except tf.errors.OutOfRangeError:  # Not streaming yet: again.
      continue
  return drawn


def _sharded_batches(servers, num_batches: int):
  batches = shards_lib.ShardedBatches(
      [f'localhost:{server.port}' for server in servers], BATCH, ALPHA,
      seed=0)
  drawn = _draw_until(batches, lambda drawn: len(drawn) == num_batches,
                      f'{num_batches} batches')
  batches.close()
  return batches, drawn


def test_the_shard_config_splits_capacity_and_minimum_size():
  config = _config(replay_capacity=1001, min_replay_size=100,
                   samples_per_insert=8.0)
  shard = shard_config(config)
  assert (shard.replay_capacity, shard.min_replay_size) == (334, 34)
  assert shard.samples_per_insert == 8.0 and shard.replay_shards == 1
  assert shard_config(_config(replay_shards=1)) == _config(
      replay_shards=1)


def test_the_single_table_reference_is_reverbs_own(shards):
  # The hand-computed reference is what one table holding every transition
  # reports for each sample.
  _, single, priorities, _ = shards
  reference = _reference(priorities)
  client = reverb.Client(f'localhost:{single.port}')
  for sample in client.sample(tables.TABLE, num_samples=200,
                              emit_timesteps=False,
                              unpack_as_table_signature=True):
    item_id = int(sample.data[adders.N_STEP_RETURN])
    np.testing.assert_allclose(sample.info.probability, reference[item_id],
                               rtol=1e-9)


def test_shards_are_sampled_as_one_table(shards):
  servers, _, priorities, homes = shards
  reference = _reference(priorities)
  batches, drawn = _sharded_batches(servers, 320)
  # Until every shard's mass is known (from its first sample), unknown
  # shards count as the mean of the known; those first batches come with
  # the probabilities they were drawn by, not yet the single table's.
  warm_up = 1
  counts = np.zeros(len(priorities))
  for index, (batch, shard_of) in enumerate(drawn):
    ids = batch.data[adders.N_STEP_RETURN].astype(int)
    # Every transition comes with the shard that holds it.
    assert all(homes[i] == s for i, s in zip(ids, shard_of))
    if index < warm_up:
      continue
    np.add.at(counts, ids, 1)
    # The probability each was drawn with is the single table's.
    np.testing.assert_allclose(batch.info.probability,
                               [reference[i] for i in ids], rtol=1e-9)
    # So are the importance weights (normalised by the batch's largest).
    total = sum(SHARD_SIZES)
    assert set(batch.info.table_size) == {total}
    np.testing.assert_allclose(
        tables.importance_sampling_weights(
            batch.info.probability, batch.info.table_size, BETA).numpy(),
        _is_weights([reference[i] for i in ids], total), rtol=1e-6)
  # The masses learnt are the shards' sums of p^alpha.
  expected = [sum(p ** ALPHA for i, p in priorities.items() if homes[i] == k)
              for k in range(len(SHARD_SIZES))]
  np.testing.assert_allclose(batches.masses, expected, rtol=1e-9)

  # The frequencies: chi-square against the single table's probabilities.
  drawn_count = counts.sum()
  expected_counts = np.array(
      [reference[i] for i in range(len(counts))]) * drawn_count
  _, p_value = stats.chisquare(counts, expected_counts)
  assert p_value > 1e-4, (p_value, counts, expected_counts)
  # The test can tell a wrong sampler: shards picked uniformly (each item
  # then has probability q_i / 3) would be rejected by these counts.
  total_mass = sum(expected)
  uniform = np.array([
      reference[i] * total_mass / expected[homes[i]] / len(SHARD_SIZES)
      for i in range(len(counts))]) * drawn_count
  assert stats.chisquare(counts, uniform)[1] < 1e-12


def test_a_learner_writes_each_priority_back_to_its_shard():
  env_spec = resolve_discrete('gym:CartPole-v1')
  config = ApeXDQNConfig(batch_size=8, min_replay_size=8, replay_capacity=200,
                         mlp_hidden_sizes='16', dueling_hidden_size=16,
                         actor_flush_size=8, prefetch_size=1,
                         learning_rate=1e-3, replay_shards=2)
  config.validate()
  tf.random.set_seed(0)
  builder = ApeXDQNBuilder(config, env_spec)
  written = [replay_items.write_random_steps(
      builder, env_spec, lambda rng: np.int32(rng.integers(2)),
      num_steps=30 + 10 * shard) for shard in range(2)]
  try:
    clients = [client for _, client in written]
    sizes = [replay_items.table_size(client) for client in clients]
    initial = [replay_items.sample_priorities(
        client, lambda seen, size=size: len(seen) == size)
               for client, size in zip(clients, sizes)]
    learner = builder.make_learner(clients)
    latest = [{}, {}]
    for _ in range(6):
      learner.step()
      update = learner.last_update
      for key, priority in zip(update['keys'], update['priorities']):
        key = int(key)
        homes = [k for k in range(2) if key in initial[k]]
        assert len(homes) == 1, key  # Keys are unique across shards.
        latest[homes[0]][key] = float(priority)
    assert all(latest), latest  # Both shards were sampled.
    for client, shard_latest, shard_initial in zip(clients, latest, initial):
      # Written from a thread per shard, after the update: waited for.
      deadline = time.time() + 60
      while time.time() < deadline:
        stored = replay_items.sample_priorities(
            client, lambda seen, keys=set(shard_latest): keys <= set(seen))
        if all(stored.get(key) == pytest.approx(priority, rel=1e-6)
               for key, priority in shard_latest.items()):
          break
        time.sleep(0.2)
      replay_items.check_priorities_written_back(client, shard_latest,
                                                 shard_initial)
  finally:
    for server, _ in written:
      server.stop()


def _write_until(client: reverb.Client, stop, first_id: int):
  """Writes transitions of priority 1 to `client` until `stop` is set, as an
  actor does: held back by the table's rate limiter while it is ahead."""
  item_id = first_id
  with client.trajectory_writer(
      num_keep_alive_refs=1,
      get_signature_timeout_ms=SIGNATURE_TIMEOUT_MS) as writer:
    while not stop.is_set():
      _append(writer, item_id, 1.0)
      item_id += 1
      while not stop.is_set():
        try:
          writer.flush(timeout_ms=200)
          break
        except reverb.errors.DeadlineExceededError:
          continue  # Held back by the rate limiter: again.


def test_a_rate_limited_shard_whose_actors_stopped_is_left_out(monkeypatch):
  """With --samples_per_insert, a shard nobody writes to any more (its only
  actors died or gave up) answers but never lets the learner's samples
  through: the learner leaves it out and goes on with the other shard, and
  takes it back once it is written to again."""
  monkeypatch.setattr(shards_lib, 'PROBE_SECONDS', 1.0)
  spec = resolve_discrete('gym:CartPole-v1').spec
  config = _config(min_replay_size=2 * BATCH, samples_per_insert=2.0,
                   replay_shards=2, replay_capacity=4000)
  servers = [reverb.Server([tables.make_replay_table(
      shard_config(config), spec)], port=None) for _ in range(2)]
  clients = [reverb.Client(f'localhost:{server.port}') for server in servers]
  # Both shards past their minimum size; then only shard 1 is written to.
  for shard, client in enumerate(clients):
    _write(client, [(shard * 1_000_000 + i, 1.0) for i in range(2 * BATCH)])
  stops = [threading.Event(), threading.Event()]
  writers = [threading.Thread(target=_write_until, daemon=True,
                              args=(clients[1], stops[1], 1_000_000 + 2 * BATCH))]
  writers[0].start()
  batches = shards_lib.ShardedBatches(
      [f'localhost:{server.port}' for server in servers], BATCH, ALPHA,
      seed=0)

  try:
    # Shard 0's limiter lets through 2 samples per insert (and its error
    # buffer): about 4 batches' worth, the last of them shared with shard 1.
    # Then the learner must leave it out and go on with shard 1 alone.
    _draw_until(batches, lambda drawn: not batches.live[0],
                'shard 0 left out')
    after = _draw_until(batches, lambda drawn: len(drawn) == 20,
                        'batches after shard 0 was left out')
    assert all((shard_of == 1).all() for _, shard_of in after)
    assert batches.live == [False, True]
    # Written to again, it streams, and is drawn from again.
    writers.append(threading.Thread(target=_write_until, daemon=True,
                                    args=(clients[0], stops[0], 2 * BATCH)))
    writers[-1].start()
    _draw_until(batches, lambda drawn: drawn and (drawn[-1][1] == 0).any(),
                'shard 0 back')
    assert batches.live == [True, True]
  finally:
    for stop in stops:
      stop.set()
    batches.close()
    for writer in writers:
      writer.join(timeout=30)
    for server in servers:
      server.stop()


# A real local_mp program of two shards; each of its two actors writes to one.
PROGRAM_FLAGS = [
    '--preset=cartpole_smoke', '--replay_shards=2', '--samples_per_insert=4',
    # No evaluator: nothing here reads it (a process less to start).
    '--num_evaluators=0', '--replay_checkpoint_every=2',
    # Longer than the freeze below lasts: a shard's node whose server is
    # frozen for longer than this would stop the program (as any node's).
    '--heartbeat_timeout=600',
    # The killed actor below stays dead (no keeper starts it again:
    # tests/test_healing.py), so that its shard takes no insert.
    '--max_node_restarts=0',
]
def _learner_rows(workdir):
  return helpers.rows(workdir, 'learner')


def _goes_on_without_shard_1(program, workdir, after_step: int, what: str):
  """Waits for a learner log row after `after_step` with shard 1 left out
  (one live shard), then for 100 more updates; none of the rows with shard
  1 left out has samples from it."""
  left_at = program.wait_until(
      lambda: next((int(row['learner_steps'])
                    for row in _learner_rows(workdir)
                    if int(row['learner_steps']) > after_step and
                    int(row['live_shards']) == 1), None),
      helpers.START_TIMEOUT, f'shard 1 to be left out ({what})')
  program.wait_until(
      lambda: helpers.last(workdir, 'learner', 'learner_steps') >
      left_at + 100, helpers.START_TIMEOUT,
      f'100 updates from shard 0 alone ({what})')
  alone = [row for row in _learner_rows(workdir)
           if int(row['learner_steps']) > after_step and
           int(row['live_shards']) == 1]
  assert all(int(row['shard_1_samples']) == 0 for row in alone), alone


def _learned_from(workdir, shard: int, after_step: int) -> bool:
  """A learner log row after `after_step` with samples from `shard` and
  both shards live."""
  return any(int(row['learner_steps']) > after_step and
             int(row['live_shards']) == 2 and
             int(row[f'shard_{shard}_samples']) > 0
             for row in _learner_rows(workdir))


@pytest.mark.slow
def test_a_frozen_or_killed_shard_is_left_out_then_comes_back(tmp_path,
                                                              launch):
  workdir = tmp_path / 'run'
  program = launch('output', helpers.program_command(
      'apex_dqn', f'--workdir={workdir}', *PROGRAM_FLAGS))
  program.wait_until(lambda: _learned_from(workdir, 1, 100),
                     helpers.START_TIMEOUT, 'updates from both shards')
  server = helpers.pid(workdir, 'replay_1_server')
  program.note_processes()
  assert server in program.seen, 'replay_1_server.pid is not of the run'

  # Frozen (the process is there, and answers nothing): left out, and the
  # learner goes on with the other shard alone.
  frozen_at = helpers.last(workdir, 'learner', 'learner_steps')
  os.kill(server, signal.SIGSTOP)
  try:
    _goes_on_without_shard_1(program, workdir, frozen_at, 'its server frozen')
  finally:
    os.kill(server, signal.SIGCONT)
  # Back: drawn from again.
  thawed_at = helpers.last(workdir, 'learner', 'learner_steps')
  program.wait_until(lambda: _learned_from(workdir, 1, thawed_at),
                     helpers.START_TIMEOUT, 'updates from shard 1 again')

  # Killed: its node restarts it from the shard's own checkpoint, and it is
  # drawn from again.
  program.wait_until(lambda: helpers.replay_checkpoints(workdir, 'replay_1'),
                     helpers.START_TIMEOUT, 'a checkpoint of shard 1')
  os.kill(server, signal.SIGKILL)
  program.wait_until(
      lambda: len(helpers.SHARD_STARTS.findall(program.logs())) >= 3,
      helpers.START_TIMEOUT, 'shard 1 to restart')
  restarted_at = helpers.last(workdir, 'learner', 'learner_steps')
  program.wait_until(lambda: _learned_from(workdir, 1, restarted_at),
                     helpers.START_TIMEOUT, 'updates from shard 1 after '
                     'its restart')
  output = program.interrupt()
  assert f'The replay_1 server (pid {server}) died' in output, output[-5000:]
  logs = program.logs()
  assert 'Replay shard 1 streams again' in logs
  starts = [(int(shard), int(size))
            for shard, size in helpers.SHARD_STARTS.findall(logs)]
  # Both started empty; only shard 1 restarted, from its checkpoint.
  assert sorted(starts[:2]) == [(0, 0), (1, 0)], starts
  assert len(starts) == 3 and starts[2][0] == 1 and starts[2][1] > 0, starts

  # Relaunched: every shard comes back from its own final checkpoint, and
  # the learner goes on from both.
  stopped_at = helpers.last(workdir, 'learner', 'learner_steps')
  relaunched = launch('relaunched', helpers.program_command(
      'apex_dqn', f'--workdir={workdir}', *PROGRAM_FLAGS))
  relaunched.wait_until(
      lambda: _learned_from(workdir, 0, stopped_at) and _learned_from(
          workdir, 1, stopped_at), helpers.START_TIMEOUT,
      'updates from both shards after the relaunch')
  sizes = dict((int(shard), int(size))
               for shard, size in
               helpers.SHARD_STARTS.findall(relaunched.logs()))
  assert sizes[0] > 0 and sizes[1] > 0, sizes

  # Shard 1's only actor killed: the shard still answers, but its rate
  # limiter (--samples_per_insert) lets no sample through with nobody
  # writing to it. It is left out, and the learner goes on with shard 0.
  actor = helpers.pid(workdir, 'actor_1')
  relaunched.note_processes()
  assert actor in relaunched.seen, 'actor_1.pid is not of the relaunch'
  killed_at = helpers.last(workdir, 'learner', 'learner_steps')
  os.kill(actor, signal.SIGKILL)
  _goes_on_without_shard_1(relaunched, workdir, killed_at, 'its actor killed')
  output = relaunched.interrupt()
  assert 'Replay shard 1 (' in output and 'took no insert' in output, (
      output[-5000:])
