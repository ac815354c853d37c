"""NStepPrioritizedAdder and initial_priorities against slow references.

Random episodes go through the adder into a real Reverb table (the one
`agents.replay.tables.make_replay_table` builds); every item is then read back and
matched, by the episode id and step index encoded in its observation, to a
transition computed by direct loops over the episode.
"""

import dataclasses
import threading
import time
from typing import Dict, List, Optional, Tuple

import dm_env
import numpy as np
import pytest
import reverb
from acme import specs

from agents.replay import adders
from agents.replay import tables
from agents.apex.config import ApeXConfig
from agents.apex_dqn.priorities import initial_priorities
from replay_items import Item, Reference, check_item
from replay_items import read_all_items, table_size

NUM_ACTIONS = 5
# observation = [episode id, step index, noise...]: unique per step.
OBSERVATION_SIZE = 4
CAPACITY = 20_000  # Larger than anything one test writes: nothing is evicted.

SPEC = specs.EnvironmentSpec(
    observations=specs.Array((OBSERVATION_SIZE,), np.float32),
    actions=specs.DiscreteArray(NUM_ACTIONS),
    rewards=specs.Array((), np.float32),
    discounts=specs.BoundedArray((), np.float32, 0.0, 1.0))


# Reverb: conftest's `server` (for SPEC and CAPACITY) and `client`.


# --------------------------------------------------------------------------
# Random episodes.


@dataclasses.dataclass
class Episode:
  episode_id: int
  observations: np.ndarray  # [T + 1, OBSERVATION_SIZE]
  actions: np.ndarray  # [T] int32
  rewards: np.ndarray  # [T]; rewards[t] is r_{t+1}, received after a_t.
  values: np.ndarray  # [T, NUM_ACTIONS]; Q-values at s_t.
  truncated: bool
  final_values: Optional[np.ndarray]  # Q-values at s_T.

  @property
  def length(self) -> int:
    return len(self.actions)


def make_episode(rng: np.random.Generator, episode_id: int, length: int,
                 truncated: bool) -> Episode:
  observations = rng.normal(size=(length + 1, OBSERVATION_SIZE))
  observations[:, 0] = episode_id
  observations[:, 1] = np.arange(length + 1)
  return Episode(
      episode_id=episode_id,
      observations=observations.astype(np.float32),
      actions=rng.integers(NUM_ACTIONS, size=length).astype(np.int32),
      rewards=(2.0 * rng.normal(size=length)).astype(np.float32),
      values=(3.0 * rng.normal(size=(length, NUM_ACTIONS))).astype(np.float32),
      truncated=truncated,
      final_values=(3.0 * rng.normal(size=NUM_ACTIONS)).astype(np.float32))


def make_episodes(rng: np.random.Generator, n_step: int,
                  first_id: int = 0) -> List[Episode]:
  """Lengths 1, < n, = n, n + 1, long and random; both kinds of endings."""
  lengths = sorted({1, max(1, n_step - 1), n_step, n_step + 1,
                    2 * n_step + 1, 37})
  specs_ = [(length, truncated) for length in lengths
            for truncated in (False, True)]
  specs_ += [(int(rng.integers(1, 60)), bool(rng.integers(2)))
             for _ in range(6)]
  order = rng.permutation(len(specs_))
  return [make_episode(rng, first_id + i, *specs_[j])
          for i, j in enumerate(order)]


def feed(adder: adders.NStepPrioritizedAdder, episode: Episode,
         rng: np.random.Generator):
  """Plays an episode into the adder the way an actor does."""
  adder.add_first(dm_env.restart(episode.observations[0]))
  for t in range(episode.length):
    reward = episode.rewards[t]
    observation = episode.observations[t + 1]
    final_values = None
    if t < episode.length - 1:
      timestep = dm_env.transition(reward, observation)
    elif episode.truncated:
      timestep = dm_env.truncation(reward, observation)
      final_values = episode.final_values
    else:
      timestep = dm_env.termination(reward, observation)
      # final_values are optional on termination and must not matter.
      if rng.integers(2):
        final_values = episode.final_values
    adder.add(episode.actions[t], timestep, episode.values[t],
              final_values=final_values)


# --------------------------------------------------------------------------
# The slow reference.


def reference_priority(values: np.ndarray, action: int, n_step_return: float,
                       discount: float, bootstrap_values: np.ndarray) -> float:
  """|R + Gamma Q_boot[argmax Q_boot] - Q_t[a_t]| by an explicit loop."""
  best = 0
  for a in range(len(bootstrap_values)):
    if bootstrap_values[a] > bootstrap_values[best]:
      best = a
  target = float(n_step_return) + float(discount) * float(
      bootstrap_values[best])
  return abs(target - float(values[action]))


def reference_transitions(
    episodes: List[Episode], n_step: int, gamma: float,
    max_abs_reward: Optional[float]) -> Dict[Tuple[int, int], Reference]:
  result = {}
  for episode in episodes:
    length = episode.length
    for t in range(length):
      m = min(n_step, length - t)
      n_step_return = 0.0
      for k in range(m):
        reward = float(episode.rewards[t + k])  # r_{t+k+1}
        if max_abs_reward is not None:
          reward = min(max(reward, -max_abs_reward), max_abs_reward)
        n_step_return += gamma**k * reward
      reaches_termination = t + m == length and not episode.truncated
      discount = 0.0 if reaches_termination else gamma**m
      if t + m < length:
        bootstrap_values = episode.values[t + m]
      else:
        bootstrap_values = episode.final_values
      result[(episode.episode_id, t)] = Reference(
          observation=episode.observations[t],
          action=int(episode.actions[t]),
          n_step_return=n_step_return,
          discount=discount,
          next_observation=episode.observations[t + m],
          priority=reference_priority(episode.values[t],
                                      int(episode.actions[t]), n_step_return,
                                      discount, bootstrap_values))
  return result


def check_items(items: List[Item], expected: Dict[Tuple[int, int], Reference]):
  """Each item matches its reference transition; each transition is there."""
  assert len(items) == len(expected)
  seen = set()
  for item in items:
    key = (int(item.observation[0]), int(item.observation[1]))
    assert key in expected, key
    assert key not in seen, key
    seen.add(key)
    check_item(item, expected[key], key)
  assert seen == set(expected)
  # Real TD errors, not a constant (or max-so-far) initial priority.
  priorities = np.array([item.priority for item in items])
  assert len(np.unique(priorities)) > len(priorities) // 2
  assert priorities.std() > 0.1
  assert np.all(priorities >= 0)


# --------------------------------------------------------------------------
# Tests.


CASES = [
    # n_step, gamma, flush_size, max_abs_reward
    (1, 0.99, 1, None),
    (1, 0.9, 10, 1.0),
    (2, 0.9, 4, None),
    (3, 0.99, 7, None),
    (3, 0.99, 3, 1.0),
    (5, 0.5, 50, None),
    (5, 0.97, 6, 0.5),
    (10, 0.95, 16, None),
]


@pytest.mark.parametrize('n_step,gamma,flush_size,max_abs_reward', CASES)
def test_transitions_and_priorities_match_reference(client, n_step, gamma,
                                                    flush_size,
                                                    max_abs_reward):
  seed = 1000 * n_step + flush_size
  rng = np.random.default_rng(seed)
  episodes = make_episodes(rng, n_step)
  adder = adders.NStepPrioritizedAdder(
      client, tables.TABLE, n_step=n_step, discount=gamma,
      priority_fn=initial_priorities, flush_size=flush_size,
      max_abs_reward=max_abs_reward)
  for episode in episodes:
    feed(adder, episode, rng)
  expected = reference_transitions(episodes, n_step, gamma, max_abs_reward)

  # Everything completed is either in the table or pending, never both.
  adder.wait_until_written()
  assert table_size(client) + len(adder.pending) == len(expected)
  assert len(adder.pending) < flush_size
  adder.close()
  assert not adder.pending
  assert table_size(client) == len(expected)

  check_items(read_all_items(client), expected)


@pytest.mark.parametrize('n_step,flush_size,pending', [
    (3, 4, 0), (3, 9, 0), (2, 5, 0), (1, 8, 4), (3, 10, 6)])
def test_flush_sizes_dividing_or_not_the_number_of_transitions(
    client, n_step, flush_size, pending):
  """One truncated episode of 36 transitions, written by size-triggered
  flushes only. Steps n..34 each complete one transition and the last step
  completes n + 1, so what is left pending is, by hand,
  (35 - n) % F + n + 1, or 0 if that reaches F and triggers a flush."""
  rng = np.random.default_rng(10 * n_step + flush_size)
  episodes = [make_episode(rng, 0, 36, truncated=True)]
  adder = adders.NStepPrioritizedAdder(
      client, tables.TABLE, n_step=n_step, discount=0.9,
      priority_fn=initial_priorities, flush_size=flush_size)
  feed(adder, episodes[0], rng)
  assert len(adder.pending) == pending
  adder.wait_until_written()
  assert table_size(client) == 36 - pending
  adder.close()
  assert table_size(client) == 36
  expected = reference_transitions(episodes, n_step, 0.9, None)
  check_items(read_all_items(client), expected)


def test_explicit_flushes_between_and_within_episodes(client):
  rng = np.random.default_rng(7)
  n_step, gamma = 3, 0.9
  episodes = make_episodes(rng, n_step)
  adder = adders.NStepPrioritizedAdder(
      client, tables.TABLE, n_step=n_step, discount=gamma,
      priority_fn=initial_priorities, flush_size=1000)
  for episode in episodes:
    adder.add_first(dm_env.restart(episode.observations[0]))
    for t in range(episode.length):
      last = t == episode.length - 1
      if not last:
        timestep = dm_env.transition(episode.rewards[t],
                                     episode.observations[t + 1])
      elif episode.truncated:
        timestep = dm_env.truncation(episode.rewards[t],
                                     episode.observations[t + 1])
      else:
        timestep = dm_env.termination(episode.rewards[t],
                                      episode.observations[t + 1])
      adder.add(episode.actions[t], timestep, episode.values[t],
                final_values=episode.final_values if last else None)
      if rng.random() < 0.2:
        adder.flush()
    adder.flush()
    assert not adder.pending
  adder.wait_until_written()
  expected = reference_transitions(episodes, n_step, gamma, None)
  assert table_size(client) == len(expected)
  adder.close()
  check_items(read_all_items(client), expected)


def test_reward_clipping_changes_returns(client):
  """Large rewards are clipped to +-max_abs_reward before discounting."""
  n_step, gamma = 2, 0.5
  adder = adders.NStepPrioritizedAdder(
      client, tables.TABLE, n_step=n_step, discount=gamma,
      priority_fn=initial_priorities, flush_size=100, max_abs_reward=1.0)
  q = np.zeros(NUM_ACTIONS, np.float32)
  observation = lambda t: np.array([0, t, 0, 0], np.float32)
  adder.add_first(dm_env.restart(observation(0)))
  adder.add(np.int32(0), dm_env.transition(10.0, observation(1)), q)
  adder.add(np.int32(0), dm_env.transition(-0.25, observation(2)), q)
  adder.add(np.int32(0), dm_env.termination(-7.0, observation(3)), q)
  adder.close()
  items = {int(item.observation[1]): item for item in read_all_items(client)}
  # t=0: 1 + 0.5 * -0.25; t=1: -0.25 + 0.5 * -1 (terminal); t=2: -1.
  np.testing.assert_allclose(items[0].n_step_return, 0.875)
  np.testing.assert_allclose(items[1].n_step_return, -0.75)
  np.testing.assert_allclose(items[2].n_step_return, -1.0)
  np.testing.assert_allclose([items[t].discount for t in range(3)],
                             [0.25, 0.0, 0.0])
  # Q is zero everywhere: priority = |R|.
  np.testing.assert_allclose([items[t].priority for t in range(3)],
                             [0.875, 0.75, 1.0])


def test_a_write_held_back_by_the_rate_limiter_stops_waiting_when_told():
  # An actor asked to stop must not wait for replay to take its writes: the
  # learner that would let them through may itself wait, with replay in
  # shards, for a shard whose actors have already stopped.
  config = ApeXConfig(replay_capacity=CAPACITY, min_replay_size=10,
                      samples_per_insert=1.0, batch_size=1)
  server = reverb.Server([tables.make_replay_table(config, SPEC)])
  try:
    client = reverb.Client(f'localhost:{server.port}')
    adder = adders.NStepPrioritizedAdder(
        client, tables.TABLE, n_step=1, discount=0.9,
        priority_fn=initial_priorities, flush_size=8)
    rng = np.random.default_rng(0)
    episode = make_episode(rng, 0, length=1000, truncated=False)
    written = threading.Event()

    def write():
      feed(adder, episode, rng)
      written.set()

    thread = threading.Thread(target=write, daemon=True)
    thread.start()

    # Nothing samples: the limiter lets about min size + buffer (110) items
    # in, and at most MAX_ITEMS_IN_FLIGHT more are in flight, so the 1,000
    # can't all be written until something samples: the writer waits.
    deadline = time.monotonic() + 60
    while table_size(client) < config.min_replay_size:
      assert time.monotonic() < deadline, 'nothing was inserted'
      time.sleep(0.05)
    adder.stop_waiting()
    thread.join(60)
    assert written.is_set()
    # The write ended with most of its items held back, not let through.
    assert table_size(client) < episode.length // 2
  finally:
    server.stop()


def test_a_writer_made_while_replay_does_not_answer_waits_for_it(
    monkeypatch, caplog):
  # An actor started while its replay node comes back (each started again
  # by its keeper after a fault) makes its writer before the server
  # answers: it waits for the server, then writes every transition to it.
  monkeypatch.setattr(adders, 'SIGNATURE_TIMEOUT_MS', 200)
  config = ApeXConfig(replay_capacity=CAPACITY, min_replay_size=1,
                      batch_size=1)
  table = lambda: [tables.make_replay_table(config, SPEC)]
  server = reverb.Server(table())
  port = server.port
  server.stop()  # Down, as a replay node between its fault and its return.
  client = reverb.Client(f'localhost:{port}')
  adder = adders.NStepPrioritizedAdder(
      client, tables.TABLE, n_step=3, discount=0.9,
      priority_fn=initial_priorities, flush_size=4)
  rng = np.random.default_rng(5)
  episodes = [make_episode(rng, 0, 12, truncated=False)]
  written = threading.Event()
  errors = []

  def write():
    try:
      feed(adder, episodes[0], rng)
      adder.close()
    except Exception as error:  # pylint: disable=broad-except
      errors.append(error)
    written.set()

  thread = threading.Thread(target=write, daemon=True)
  caplog.set_level('WARNING')
  thread.start()
  deadline = time.monotonic() + 60
  while not any('did not answer' in record.getMessage()
                for record in caplog.records):
    assert not written.is_set(), errors
    assert time.monotonic() < deadline, 'the writer never waited'
    time.sleep(0.05)
  assert not written.is_set()
  server = reverb.Server(table(), port=port)  # Back, on the same address.
  try:
    assert written.wait(60), 'the writer did not write once replay answered'
    assert not errors, errors
    expected = reference_transitions(episodes, 3, 0.9, None)
    assert table_size(client) == len(expected) == 12
    check_items(read_all_items(client), expected)
  finally:
    server.stop()


def test_adder_is_reusable_after_close(client):
  rng = np.random.default_rng(3)
  n_step, gamma = 3, 0.9
  episodes = make_episodes(rng, n_step)
  adder = adders.NStepPrioritizedAdder(
      client, tables.TABLE, n_step=n_step, discount=gamma,
      priority_fn=initial_priorities, flush_size=8)
  half = len(episodes) // 2
  for episode in episodes[:half]:
    feed(adder, episode, rng)
  adder.close()
  for episode in episodes[half:]:
    feed(adder, episode, rng)
  adder.close()
  check_items(read_all_items(client),
              reference_transitions(episodes, n_step, gamma, None))


def test_actor_feeds_adder_with_its_q_values(client):
  """ApeXDQNActor passes the Q-values it acted on (and, on truncation, those
  of the final observation) to the adder: the priorities are the TD errors
  of the actor's own network."""
  import sonnet as snt
  import tensorflow as tf
  from agents.apex_dqn.actor import ApeXDQNActor

  tf.random.set_seed(0)
  network = snt.nets.MLP([8, NUM_ACTIONS])
  network(tf.zeros((1, OBSERVATION_SIZE)))
  n_step, gamma = 2, 0.9
  adder = adders.NStepPrioritizedAdder(
      client, tables.TABLE, n_step=n_step, discount=gamma,
      priority_fn=initial_priorities, flush_size=3)
  actor = ApeXDQNActor(network, SPEC.observations, epsilon=0.5, adders=[adder],
                       seed=0)
  rng = np.random.default_rng(11)
  q = lambda obs: network(obs[None]).numpy()[0]
  episodes = []
  for episode_id, (length, truncated) in enumerate([(5, True), (4, False),
                                                     (1, True)]):
    episode = make_episode(rng, episode_id, length, truncated)
    actor.observe_first(dm_env.restart(episode.observations[0]))
    for t in range(length):
      episode.actions[t] = actor.select_action(episode.observations[t])
      episode.values[t] = q(episode.observations[t])
      observation = episode.observations[t + 1]
      if t < length - 1:
        timestep = dm_env.transition(episode.rewards[t], observation)
      elif truncated:
        timestep = dm_env.truncation(episode.rewards[t], observation)
      else:
        timestep = dm_env.termination(episode.rewards[t], observation)
      actor.observe(episode.actions[t], timestep)
    episode.final_values = q(episode.observations[-1])
    episodes.append(episode)
  adder.close()
  check_items(read_all_items(client),
              reference_transitions(episodes, n_step, gamma, None))


# --------------------------------------------------------------------------
# Errors.


def make_adder(client, **kwargs):
  kwargs = {'n_step': 3, 'discount': 0.99, 'flush_size': 4, **kwargs}
  return adders.NStepPrioritizedAdder(client, tables.TABLE,
                                      priority_fn=initial_priorities, **kwargs)


def test_add_before_add_first_raises(client):
  adder = make_adder(client)
  q = np.zeros(NUM_ACTIONS, np.float32)
  with pytest.raises(ValueError, match='add_first'):
    adder.add(np.int32(0), dm_env.transition(1.0, np.zeros(4, np.float32)), q)


def test_add_after_episode_end_without_add_first_raises(client):
  adder = make_adder(client)
  q = np.zeros(NUM_ACTIONS, np.float32)
  adder.add_first(dm_env.restart(np.zeros(4, np.float32)))
  adder.add(np.int32(0), dm_env.termination(1.0, np.ones(4, np.float32)), q)
  with pytest.raises(ValueError, match='add_first'):
    adder.add(np.int32(0), dm_env.transition(1.0, np.zeros(4, np.float32)), q)


def test_add_first_with_a_mid_episode_timestep_raises(client):
  adder = make_adder(client)
  with pytest.raises(ValueError):
    adder.add_first(dm_env.transition(1.0, np.zeros(4, np.float32)))


def test_truncation_without_final_values_raises(client):
  adder = make_adder(client)
  q = np.zeros(NUM_ACTIONS, np.float32)
  adder.add_first(dm_env.restart(np.zeros(4, np.float32)))
  adder.add(np.int32(0), dm_env.transition(1.0, np.ones(4, np.float32)), q)
  with pytest.raises(ValueError, match='final_values'):
    adder.add(np.int32(1), dm_env.truncation(1.0, np.ones(4, np.float32)), q)


@pytest.mark.parametrize('kwargs', [{'n_step': 0}, {'flush_size': 0}])
def test_bad_constructor_arguments_raise(client, kwargs):
  with pytest.raises(ValueError):
    make_adder(client, **kwargs)


# --------------------------------------------------------------------------
# initial_priorities on its own.


@pytest.mark.parametrize('seed', [0, 1, 2])
def test_initial_priorities_matches_loop_reference(seed):
  rng = np.random.default_rng(seed)
  batch, num_actions = 64, 6
  values = rng.normal(size=(batch, num_actions)).astype(np.float32)
  bootstrap_values = rng.normal(size=(batch, num_actions)).astype(np.float32)
  # Some ties in the bootstrap values: any argmax gives the same max.
  bootstrap_values[::7, :2] = bootstrap_values[::7, 2:3].max() + 1.0
  actions = rng.integers(num_actions, size=batch).astype(np.int32)
  n_step_returns = rng.normal(size=batch).astype(np.float32)
  discounts = np.where(rng.random(batch) < 0.3, 0.0,
                       rng.uniform(0.5, 1.0, batch)).astype(np.float32)
  got = initial_priorities(values=values, actions=actions,
                           n_step_returns=n_step_returns, discounts=discounts,
                           bootstrap_values=bootstrap_values)
  assert got.shape == (batch,)
  for i in range(batch):
    want = reference_priority(values[i], int(actions[i]), n_step_returns[i],
                              discounts[i], bootstrap_values[i])
    np.testing.assert_allclose(got[i], want, rtol=1e-5, atol=1e-6)
