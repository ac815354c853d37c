"""agents.replay.sequences: an actor's steps written as overlapping
sequences with their start states, read back from a real Reverb server and
matched against a slow reference built from the module's definition."""

import dm_env
import numpy as np
import pytest
import reverb
import tensorflow as tf
from acme import specs

from agents.apex.config import ApeXConfig
from agents.replay import sequences
from agents.replay import tables

OBSERVATION = specs.Array((3,), np.float32)
ACTIONS = specs.DiscreteArray(4, dtype=np.int32)
SPEC = specs.EnvironmentSpec(
    observations=OBSERVATION, actions=ACTIONS,
    rewards=specs.Array((), np.float32),
    discounts=specs.BoundedArray((), np.float32, 0.0, 1.0))
# A recurrent state of two parts, as an LSTM's (hidden, cell).
STATE = (tf.TensorSpec((2,), tf.float32), tf.TensorSpec((5,), tf.float32))


def table(length: int, state_at_row: bool = False) -> reverb.Table:
  config = ApeXConfig(replay_capacity=10_000, min_replay_size=1, batch_size=1)
  return tables.make_replay_table(
      config, SPEC, signature=sequences.sequence_signature(
          OBSERVATION, ACTIONS, STATE, length, state_at_row))


def probe_priorities(values, actions, rewards, discounts, masks):
  """A priority that depends on every array the adder passes, row by
  row (not R2D2's: what is tested is what the adder hands over)."""
  rows = np.arange(1, values.shape[1] + 1)
  return (1.0 + np.abs(values[..., 0] * rows * masks).sum(-1) +
          np.abs(values[..., 3] * rows).sum(-1) +
          (rewards * rows).sum(-1) + 0.1 * (actions * rows).sum(-1) +
          (discounts * rows).sum(-1) + 0.01 * (masks * rows).sum(-1))


def make_episode(rng, steps: int, truncated: bool):
  """Random observations, actions, rewards, values and states of an
  episode of `steps` actions, ended by termination or truncation."""
  return dict(
      observations=rng.normal(size=(steps + 1, 3)).astype(np.float32),
      actions=rng.integers(4, size=steps).astype(np.int32),
      rewards=rng.normal(size=steps).astype(np.float32),
      values=rng.normal(size=(steps, 4)).astype(np.float32),
      final_values=(rng.normal(size=4).astype(np.float32) if truncated
                    else None),
      states=[(rng.normal(size=2).astype(np.float32),
               rng.normal(size=5).astype(np.float32)) for _ in range(steps)],
      truncated=truncated)


def feed(adder: sequences.SequenceAdder, episode):
  observations = episode['observations']
  adder.add_first(dm_env.restart(observations[0]))
  steps = len(episode['actions'])
  for t in range(steps):
    reward = episode['rewards'][t]
    if t < steps - 1:
      timestep = dm_env.transition(reward, observations[t + 1], 1.0)
    elif episode['truncated']:
      timestep = dm_env.truncation(reward, observations[t + 1], 1.0)
    else:
      timestep = dm_env.termination(reward, observations[t + 1])
    adder.add(episode['actions'][t], timestep, episode['values'][t],
              episode['states'][t],
              final_values=episode['final_values'] if t == steps - 1 else
              None)


def reference_sequences(episode, length: int, period: int,
                        state_row=None):
  """The sequences the module docstring defines: rows o_t, a_t, r_{t+1},
  d_{t+1}, mask 1; a final row (o_T, zeros, mask 0); sequences of `length`
  rows starting every `period` rows where a step starts, padded with zero
  rows; each with the state at its first row and the actor's values, and
  with `state_row` k the state before its row k where a step starts there
  (its first row's elsewhere)."""
  steps = len(episode['actions'])
  discounts = [1.0] * (steps - 1) + [1.0 if episode['truncated'] else 0.0]
  final = episode['final_values']
  rows = [dict(observation=episode['observations'][t],
               action=episode['actions'][t], reward=episode['rewards'][t],
               discount=discounts[t], mask=1.0, values=episode['values'][t])
          for t in range(steps)]
  rows.append(dict(observation=episode['observations'][steps], action=0,
                   reward=0.0, discount=0.0, mask=0.0,
                   values=np.zeros(4) if final is None else final))
  padding = dict(observation=np.zeros(3), action=0, reward=0.0,
                 discount=0.0, mask=0.0, values=np.zeros(4))
  result = []
  for start in range(0, steps, period):
    part = rows[start:start + length]
    part = part + [padding] * (length - len(part))
    column = lambda name: np.array([row[name] for row in part])
    result.append(dict(
        observation=column('observation').astype(np.float32),
        action=column('action').astype(np.int32),
        reward=column('reward').astype(np.float32),
        discount=column('discount').astype(np.float32),
        mask=column('mask').astype(np.float32),
        start_state=episode['states'][start],
        state_at_row=(None if state_row is None else
                      episode['states'][start + state_row]
                      if start + state_row < steps else
                      episode['states'][start]),
        priority=float(probe_priorities(
            column('values')[None], column('action')[None],
            column('reward')[None], column('discount')[None],
            column('mask')[None])[0])))
  return result


def read_all(client: reverb.Client):
  """Every item exactly once (sampled, then deleted)."""
  items = []
  for _ in range(client.server_info()[tables.TABLE].current_size):
    sample = next(client.sample(tables.TABLE, 1, emit_timesteps=False,
                                unpack_as_table_signature=True))
    data = tf.nest.map_structure(np.asarray, sample.data)
    items.append(dict(data, priority=float(sample.info.priority)))
    client.mutate_priorities(tables.TABLE, deletes=[int(sample.info.key)])
  return items


@pytest.mark.parametrize('length, period, flush_size, state_row', [
    (4, 2, 1, None), (4, 2, 3, None), (5, 5, 2, None), (3, 1, 4, None),
    (6, 4, 100, None), (4, 2, 3, 2), (6, 4, 2, 3), (5, 1, 2, 4),
    (3, 3, 1, 1)])
def test_sequences_match_the_reference(length, period, flush_size,
                                       state_row):
  # With `state_row` (R2D2's burn-in): at the period (where the next
  # sequence starts, so the state is stored once), off it, and at the
  # last row.
  rng = np.random.default_rng(length * 100 + period * 10 + flush_size)
  episodes = [make_episode(rng, steps, truncated)
              for steps, truncated in [(5, False), (1, True), (9, False),
                                       (2, False), (7, True), (3, True)]]
  server = reverb.Server([table(length, state_row is not None)], port=None)
  try:
    client = reverb.Client(f'localhost:{server.port}')
    adder = sequences.SequenceAdder(client, tables.TABLE, length, period,
                                    probe_priorities, flush_size=flush_size,
                                    state_row=state_row)
    for episode in episodes:
      feed(adder, episode)
    adder.close()
    items = read_all(client)
  finally:
    server.stop()
  expected = [sequence for episode in episodes
              for sequence in reference_sequences(episode, length, period,
                                                  state_row)]
  assert len(items) == len(expected)
  by_state = {tuple(np.concatenate(e['start_state'])): e for e in expected}
  assert len(by_state) == len(expected)
  for item in items:
    reference = by_state.pop(tuple(np.concatenate(item['start_state'])))
    for name in ('observation', 'action', 'reward', 'discount', 'mask'):
      assert item[name].dtype == reference[name].dtype, name
      np.testing.assert_allclose(item[name], reference[name], rtol=1e-6,
                                 err_msg=name)
    assert item['priority'] == pytest.approx(reference['priority'],
                                             rel=1e-5)
    if state_row is None:
      assert sequences.STATE_AT_ROW not in item
    else:
      for got, want in zip(item[sequences.STATE_AT_ROW],
                           reference['state_at_row']):
        np.testing.assert_array_equal(got, want)
  assert not by_state


def test_nothing_is_written_before_a_flush_and_close_writes_the_rest():
  rng = np.random.default_rng(3)
  server = reverb.Server([table(4)], port=None)
  try:
    client = reverb.Client(f'localhost:{server.port}')
    adder = sequences.SequenceAdder(client, tables.TABLE, 4, 2,
                                    probe_priorities, flush_size=50)
    feed(adder, make_episode(rng, 6, False))  # Sequences at 0, 2 and 4.
    assert len(adder.pending) == 3
    adder.wait_until_written()
    assert client.server_info()[tables.TABLE].current_size == 0
    adder.close()
    assert client.server_info()[tables.TABLE].current_size == 3
  finally:
    server.stop()


@pytest.mark.parametrize('kwargs, says', [
    (dict(length=1, period=1), 'length must be >= 2'),
    (dict(length=4, period=5), 'period must be in [1, length=4]'),
    (dict(length=4, period=0), 'period must be in [1, length=4]'),
    (dict(length=4, period=2, flush_size=0), 'flush_size must be >= 1'),
    (dict(length=4, period=2, state_row=4), 'state_row must be in [1, '
     'length - 1 = 3]'),
    (dict(length=4, period=2, state_row=0), 'state_row must be in [1, '
     'length - 1 = 3]'),
])
def test_bad_arguments_are_refused(kwargs, says):
  with pytest.raises(ValueError, match=says.replace('[', r'\[').replace(
      ']', r'\]')):
    sequences.SequenceAdder(None, tables.TABLE, priority_fn=probe_priorities,
                            **kwargs)


def test_steps_out_of_order_are_refused_before_anything_is_written():
  adder = sequences.SequenceAdder(None, tables.TABLE, 4, 2, probe_priorities,
                                  flush_size=100)
  state = (np.zeros(2, np.float32), np.zeros(5, np.float32))
  with pytest.raises(ValueError, match='add called before add_first'):
    adder.add(0, dm_env.transition(0.0, np.zeros(3, np.float32)),
              np.zeros(4), state)
  with pytest.raises(ValueError, match='add_first needs the first timestep'):
    adder.add_first(dm_env.transition(0.0, np.zeros(3, np.float32)))
  adder.add_first(dm_env.restart(np.zeros(3, np.float32)))
  # No client: a row written would fail; the refusal comes first.
  with pytest.raises(ValueError, match='truncation .* final_values'):
    adder.add(0, dm_env.truncation(0.0, np.zeros(3, np.float32)),
              np.zeros(4), state)
