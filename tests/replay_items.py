"""Replay items in tests: a table read back, item by item, for tests that
check what was written to a real Reverb server; and hand-made prioritised
batches, as a learner's dataset yields them, for tests of the learners."""

import dataclasses
from typing import Callable, Dict, List, Sequence

import numpy as np
import pytest
import reverb
import tensorflow as tf

from agents.replay import adders
from agents.replay import tables


def table_size(client: reverb.Client) -> int:
  return client.server_info()[tables.TABLE].current_size


@dataclasses.dataclass
class Item:
  key: int
  priority: float
  observation: np.ndarray
  action: np.ndarray
  n_step_return: np.ndarray
  discount: np.ndarray
  next_observation: np.ndarray


@dataclasses.dataclass
class Reference:
  """A transition of discrete actions as a test's slow reference computes
  it, to match an item against (`check_item`)."""
  observation: np.ndarray
  action: int
  n_step_return: float
  discount: float
  next_observation: np.ndarray
  priority: float


def check_item(item: Item, reference: Reference, key):
  """The item read back is the reference transition `key` names."""
  np.testing.assert_array_equal(item.observation, reference.observation)
  np.testing.assert_array_equal(item.next_observation,
                                reference.next_observation)
  assert item.action.dtype == np.int32 and item.action.shape == ()
  assert int(item.action) == reference.action, key
  assert item.n_step_return.shape == () and item.discount.shape == ()
  np.testing.assert_allclose(item.n_step_return, reference.n_step_return,
                             rtol=1e-5, atol=1e-5, err_msg=str(key))
  np.testing.assert_allclose(item.discount, reference.discount,
                             rtol=1e-6, atol=1e-7, err_msg=str(key))
  np.testing.assert_allclose(item.priority, reference.priority,
                             rtol=1e-4, atol=1e-4, err_msg=str(key))


def sample_priorities(client: reverb.Client, done, max_rounds: int = 100):
  """{key: priority} read back by sampling the table until `done(seen)`."""
  seen = {}
  for _ in range(max_rounds):
    for sample in client.sample(tables.TABLE, num_samples=200,
                                emit_timesteps=False):
      seen[int(sample.info.key)] = float(sample.info.priority)
    if done(seen):
      break
  return seen


def check_priorities_written_back(client: reverb.Client,
                                  latest: Dict[int, float],
                                  initial: Dict[int, float]):
  """The table holds `latest`, the newest priorities a learner wrote
  ({key: priority}), which differ from the items' `initial` ones; the items
  the learner did not sample keep their initial priorities."""
  stored = sample_priorities(client, lambda seen: set(latest) <= set(seen))
  assert set(latest) <= set(stored)
  for key, priority in latest.items():
    assert stored[key] == pytest.approx(priority, rel=1e-6), key
    assert stored[key] != pytest.approx(initial[key], rel=1e-4), key
  # Transitions the learner did not sample keep their actor priorities.
  for key, priority in stored.items():
    if key not in latest:
      assert priority == pytest.approx(initial[key], rel=1e-9), key


def read_all_items(client: reverb.Client) -> List[Item]:
  """Every item of the table, exactly once: sample one, delete it, repeat.

  Deleting each sampled item makes the enumeration complete and free of
  repeats whatever the (prioritised, random) sampler picks.
  """
  items = []
  for _ in range(table_size(client)):
    sample = next(client.sample(tables.TABLE, 1, emit_timesteps=False,
                                unpack_as_table_signature=True))
    key = int(sample.info.key)
    data = sample.data
    items.append(Item(
        key=key,
        priority=float(sample.info.priority),
        observation=np.asarray(data[adders.OBSERVATION]),
        action=np.asarray(data[adders.ACTION]),
        n_step_return=np.asarray(data[adders.N_STEP_RETURN]),
        discount=np.asarray(data[adders.DISCOUNT]),
        next_observation=np.asarray(data[adders.NEXT_OBSERVATION])))
    client.mutate_priorities(tables.TABLE, deletes=[key])
  assert table_size(client) == 0
  assert len({item.key for item in items}) == len(items)
  return items


def write_random_steps(builder, environment_spec, random_action,
                       num_steps: int = 40):
  """Acts `num_steps` random actions (`random_action(rng)`) in the
  environment and writes them through the builder's adder to a client of a
  new server with the builder's table, as an actor would (values for the
  priorities are random); returns (server, client), the adder closed."""
  server = reverb.Server(builder.make_replay_tables(), port=None)
  client = reverb.Client(f'localhost:{server.port}')
  adder = builder.make_adder(client)
  environment = environment_spec.make_environment(seed=0)
  rng = np.random.default_rng(0)
  adder.add_first(environment.reset())
  for _ in range(num_steps):
    action = random_action(rng)
    timestep = environment.step(action)
    # The actor's two values per step (e.g. DPG: q(s, a), q(s, pi(s))).
    adder.add(action, timestep, rng.normal(size=2).astype(np.float32))
    if timestep.last():
      adder.add_first(environment.reset())
  adder.close()
  return server, client


def hand_made_batch(seed: int, batch: int, observation_size: int,
                    table_size: int, discount: float,
                    actions: Callable[[np.random.Generator, int], np.ndarray]
                    ) -> reverb.ReplaySample:
  """A prioritised batch of random transitions, as `tables.make_dataset`
  yields it: every third one terminated within its n steps (discount 0, no
  bootstrap), the others with discount `discount`; `actions(rng, batch)`
  draws the actions."""
  rng = np.random.default_rng(seed)
  probabilities = rng.uniform(0.005, 0.06, size=batch)
  discounts = np.full(batch, discount, np.float32)
  discounts[1::3] = 0.0  # Terminated within n steps: no bootstrap.
  info = reverb.SampleInfo(
      key=tf.constant(rng.integers(1, 2**62, size=batch, dtype=np.uint64)),
      probability=tf.constant(probabilities, tf.float64),
      table_size=tf.constant(np.full(batch, table_size, np.int64)),
      priority=tf.constant(probabilities * 100.0, tf.float64))
  data = {
      adders.OBSERVATION: tf.constant(
          rng.normal(size=(batch, observation_size)).astype(np.float32)),
      adders.ACTION: tf.constant(actions(rng, batch)),
      adders.N_STEP_RETURN:
          tf.constant(rng.normal(size=batch).astype(np.float32)),
      adders.DISCOUNT: tf.constant(discounts),
      adders.NEXT_OBSERVATION: tf.constant(
          rng.normal(size=(batch, observation_size)).astype(np.float32)),
  }
  return reverb.ReplaySample(info=info, data=data)


def iterator_over(samples: Sequence[reverb.ReplaySample]):
  """A tf.data iterator (a Python iterator would be frozen into the
  learner's tf.function at trace time and replay its first batch)."""
  dataset = tf.data.Dataset.from_tensors(samples[0])
  for sample in samples[1:]:
    dataset = dataset.concatenate(tf.data.Dataset.from_tensors(sample))
  return iter(dataset)
