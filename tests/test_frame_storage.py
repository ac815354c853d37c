"""Atari replay stores each frame once: checked against whole observations.

Real ALE Pong steps go, side by side, through two adders: one storing each
4-frame observation whole (the layout checked item by item against slow
references in test_adders.py) and one storing each frame once (what Atari
actors use). Both tables are read back; every transition must come out of
the frame table, and of the learner's dataset, exactly as from the other.
"""

import time

import dm_env
import numpy as np
import pytest
import reverb
import tensorflow as tf

from agents.replay import adders
from agents.envs import atari
from agents.envs import environments
from agents.replay import tables
from agents.replay import shards
from agents.apex_dqn.builder import ApeXDQNBuilder
from agents.apex_dqn.config import ApeXDQNConfig
from replay_items import read_all_items, table_size

STEPS = (90, 7, 60)  # Episode lengths: the last ones end by truncation.


@pytest.fixture(scope='module')
def pong():
  return environments.resolve_discrete('atari:Pong')


def make_server(pong, stacked_frames):
  config = ApeXDQNConfig(replay_capacity=10_000, min_replay_size=1)
  return reverb.Server([tables.make_replay_table(
      config, pong.spec, stacked_frames=stacked_frames)])


def run_episodes(pong, adder_list):
  """Random-action Pong episodes of STEPS lengths into every adder."""
  environment = pong.make_environment(seed=3)
  rng = np.random.default_rng(3)
  num_actions = pong.spec.actions.num_values
  for length in STEPS:
    timestep = environment.reset()
    for adder in adder_list:
      adder.add_first(timestep)
    for t in range(length):
      action = np.int32(rng.integers(num_actions))
      timestep = environment.step(action)
      values = rng.normal(size=num_actions).astype(np.float32)
      final_values = None
      if t == length - 1:  # Cut the episode here, as a time limit would.
        timestep = dm_env.truncation(timestep.reward, timestep.observation)
        final_values = rng.normal(size=num_actions).astype(np.float32)
      for adder in adder_list:
        adder.add(action, timestep, values, final_values)
  for adder in adder_list:
    adder.close()


def item_key(observation, action, n_step_return, discount, next_observation,
             priority):
  return (np.asarray(observation).tobytes(), int(action),
          float(n_step_return), float(discount),
          np.asarray(next_observation).tobytes(), round(float(priority), 5))


@pytest.mark.parametrize('flush_size', [5, 50])
def test_frame_items_equal_whole_observation_items(pong, flush_size):
  whole_server = make_server(pong, 0)
  frame_server = make_server(pong, atari.ATARI_FRAME_STACK)
  try:
    whole = reverb.Client(f'localhost:{whole_server.port}')
    frames = reverb.Client(f'localhost:{frame_server.port}')
    builder = ApeXDQNBuilder(ApeXDQNConfig(), pong)
    make = lambda client, stacked: adders.NStepPrioritizedAdder(
        client, tables.TABLE, n_step=3, discount=0.99,
        priority_fn=builder.priority_fn, flush_size=flush_size,
        max_abs_reward=1.0, stacked_frames=stacked)
    run_episodes(pong, [make(whole, 0),
                        make(frames, atari.ATARI_FRAME_STACK)])
    assert table_size(frames) == table_size(whole) == sum(STEPS)

    # The learner's dataset: frames back on the last axis, as actors saw them.
    dataset = tables.make_dataset(
        f'localhost:{frame_server.port}', batch_size=sum(STEPS),
        prefetch_size=1, stacked_frames=atari.ATARI_FRAME_STACK)
    batch = next(iter(dataset))
    assert batch.data[adders.OBSERVATION].shape == (sum(STEPS), 84, 84, 4)
    assert batch.data[adders.OBSERVATION].dtype == tf.uint8

    expected = sorted(item_key(
        item.observation, item.action, item.n_step_return, item.discount,
        item.next_observation, item.priority)
                      for item in read_all_items(whole))
    stored = read_all_items(frames)
    assert stored[0].observation.shape == (4, 84, 84)  # Frames first.
    got = sorted(item_key(
        np.moveaxis(item.observation, 0, -1), item.action, item.n_step_return,
        item.discount, np.moveaxis(item.next_observation, 0, -1),
        item.priority) for item in stored)
    # Mostly distinct observations: a frame off by one would show.
    assert len({key[0] for key in expected}) > sum(STEPS) // 2
    assert got == expected
    # A sampled batch is some of the same transitions.
    data = batch.data
    sampled = {item_key(data[adders.OBSERVATION][i], data[adders.ACTION][i],
                        data[adders.N_STEP_RETURN][i],
                        data[adders.DISCOUNT][i],
                        data[adders.NEXT_OBSERVATION][i],
                        batch.info.priority[i]) for i in range(sum(STEPS))}
    assert sampled <= set(expected)
  finally:
    whole_server.stop()
    frame_server.stop()


def test_shards_give_the_frames_back_as_actors_saw_them(pong):
  # Two shards of frame items, the second written by a second (identical)
  # actor: the learner's batches across them hold whole observations,
  # frames on the last axis, each one of the transitions written.
  whole_server = make_server(pong, 0)
  shard_servers = [make_server(pong, atari.ATARI_FRAME_STACK)
                   for _ in range(2)]
  batches = None
  try:
    builder = ApeXDQNBuilder(ApeXDQNConfig(), pong)
    make = lambda server, stacked: adders.NStepPrioritizedAdder(
        reverb.Client(f'localhost:{server.port}'), tables.TABLE, n_step=3,
        discount=0.99, priority_fn=builder.priority_fn, flush_size=50,
        max_abs_reward=1.0, stacked_frames=stacked)
    run_episodes(pong, [make(whole_server, 0)] + [
        make(server, atari.ATARI_FRAME_STACK)
        for server in shard_servers])
    written = {item_key(item.observation, item.action, item.n_step_return,
                        item.discount, item.next_observation, item.priority)
               for item in read_all_items(
                   reverb.Client(f'localhost:{whole_server.port}'))}
    batches = shards.ShardedBatches(
        [f'localhost:{server.port}' for server in shard_servers],
        batch_size=64, priority_exponent=0.6,
        stacked_frames=atari.ATARI_FRAME_STACK, seed=0)
    deadline = time.time() + 120
    while True:
      try:
        batch, shard_of = next(batches)
        break
      except tf.errors.OutOfRangeError:  # Not streaming yet.
        assert time.time() < deadline, 'no batch from the shards in 120 s'
    data = batch.data
    assert data[adders.OBSERVATION].shape == (64, 84, 84, 4)
    assert data[adders.OBSERVATION].dtype == np.uint8
    assert set(shard_of) <= {0, 1}
    sampled = {item_key(data[adders.OBSERVATION][i], data[adders.ACTION][i],
                        data[adders.N_STEP_RETURN][i],
                        data[adders.DISCOUNT][i],
                        data[adders.NEXT_OBSERVATION][i],
                        batch.info.priority[i]) for i in range(64)}
    assert sampled <= written
  finally:
    if batches is not None:
      batches.close()
    for server in [whole_server, *shard_servers]:
      server.stop()


def test_observations_that_are_not_frame_stacks_are_refused(pong):
  server = make_server(pong, atari.ATARI_FRAME_STACK)
  try:
    client = reverb.Client(f'localhost:{server.port}')
    adder = adders.NStepPrioritizedAdder(
        client, tables.TABLE, n_step=3, discount=0.99,
        priority_fn=lambda **kw: np.ones(len(kw['actions'])),
        stacked_frames=4)
    frames = np.random.default_rng(0).integers(0, 255, (84, 84, 5), np.uint8)
    with pytest.raises(ValueError, match='last axis must hold the frames'):
      adder.add_first(dm_env.restart(frames[..., :3]))
    adder.add_first(dm_env.restart(frames[..., :4]))
    # The next observation must be the same frames moved by one.
    with pytest.raises(ValueError, match='not a stack of the last 4 frames'):
      adder.add(np.int32(0), dm_env.transition(0.0, frames[..., :4]),
                np.zeros(6, np.float32))
    adder.close()
  finally:
    server.stop()


def test_stacked_frames_of_one_is_refused():
  with pytest.raises(ValueError, match='stacked_frames must be 0'):
    adders.NStepPrioritizedAdder(None, tables.TABLE, n_step=3, discount=0.99,
                                 priority_fn=None, stacked_frames=1)
