"""Replay removers: Ape-X DPG's eviction by inverse priority (App. D),
checked against exact probabilities of successive proportional sampling;
Reverb's MinHeap remover; the removed 'prioritized' remover refused.

The reference for k victims drawn without replacement, each draw in
proportion to w = (p + 1e-6)^-0.4 among the items not yet drawn, is
enumerated by hand: P(i then j) = w_i / W * w_j / (W - w_i).
"""

import itertools
import os

import numpy as np
import pytest
import reverb
from scipy import stats

import helpers
from agents.replay import eviction
from agents.replay import tables
from agents.apex_dpg.builder import ApeXDPGBuilder
from agents.apex_dpg.config import ApeXDPGConfig
from agents.apex.config import ApeXConfig
from agents.envs.environments import resolve_continuous

PRIORITIES = np.array([0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0])
EXPONENT = -0.4


def _pair_probabilities(weights):
  """{frozenset((i, j)): probability} of two successive proportional draws
  without replacement."""
  total = weights.sum()
  probabilities = {}
  for i, j in itertools.permutations(range(weights.size), 2):
    pair = frozenset((i, j))
    probabilities[pair] = probabilities.get(pair, 0.0) + (
        weights[i] / total * weights[j] / (total - weights[i]))
  return probabilities


def _chi_square_p_value(observed_pairs, probabilities):
  pairs = sorted(probabilities, key=sorted)
  observed = np.array([observed_pairs.get(pair, 0) for pair in pairs])
  expected = np.array([probabilities[pair] for pair in pairs]) * observed.sum()
  assert expected.min() >= 5, expected.min()  # Where chi-square holds.
  return stats.chisquare(observed, expected).pvalue


def test_weights_follow_the_papers_exponent():
  weights = eviction.eviction_weights(PRIORITIES, EXPONENT)
  np.testing.assert_allclose(weights, (PRIORITIES + 1e-6) ** -0.4)
  # Lower priority, more likely to leave; priority 0 has a finite weight.
  assert np.all(np.diff(weights) < 0)
  assert np.isfinite(eviction.eviction_weights(np.zeros(1), EXPONENT)).all()


def test_drawn_victims_match_successive_proportional_sampling():
  weights = eviction.eviction_weights(PRIORITIES, EXPONENT)
  rng = np.random.default_rng(0)
  observed = {}
  for _ in range(40_000):
    pair = frozenset(eviction.draw_victims(weights, 2, rng).tolist())
    observed[pair] = observed.get(pair, 0) + 1
  assert _chi_square_p_value(observed, _pair_probabilities(weights)) > 1e-3
  # One victim: its frequencies are the weights normalised.
  first = np.bincount([eviction.draw_victims(weights, 1, rng)[0]
                       for _ in range(40_000)], minlength=weights.size)
  expected = weights / weights.sum() * first.sum()
  assert stats.chisquare(first, expected).pvalue > 1e-3


def test_drawing_every_item_or_none():
  rng = np.random.default_rng(1)
  weights = np.ones(5)
  assert sorted(eviction.draw_victims(weights, 5, rng).tolist()) == list(
      range(5))
  assert eviction.draw_victims(weights, 0, rng).size == 0
  assert sorted(eviction.draw_victims(weights, 9, rng).tolist()) == list(
      range(5))


def _server(tmp_path, table, max_size):
  return reverb.Server(
      [reverb.Table(table, reverb.selectors.Prioritized(0.6),
                    reverb.selectors.Fifo(), max_size,
                    reverb.rate_limiters.MinSize(1))],
      checkpointer=reverb.checkpointers.DefaultCheckpointer(str(tmp_path)))


@pytest.mark.slow
def test_rounds_on_a_real_table_evict_by_inverse_priority(tmp_path):
  """Each trial fills a real Reverb table with one item per priority, two
  over capacity; a round must delete two items drawn as the reference
  says, and leave the others with their priorities."""
  table = 'replay'
  server = _server(tmp_path, table, max_size=100)
  client = server.localhost_client()
  capacity = PRIORITIES.size - 2
  rounds = eviction.InversePriorityEviction(table, capacity, EXPONENT, seed=0)
  weights = eviction.eviction_weights(PRIORITIES, EXPONENT)
  observed = {}
  try:
    for _ in range(2000):
      client.reset(table)
      with client.writer(max_sequence_length=1) as writer:
        for index, priority in enumerate(PRIORITIES):
          writer.append(np.int32(index))
          writer.create_item(table, 1, float(priority))
      assert rounds.due(client)
      assert rounds.evict(client) == 2
      assert not rounds.due(client)
      path = client.checkpoint()
      keys, left = eviction.read_table_items(path, table)
      assert keys.size == capacity
      gone = frozenset(index for index, priority in enumerate(PRIORITIES)
                       if priority not in left)
      assert len(gone) == 2, left
      observed[gone] = observed.get(gone, 0) + 1
  finally:
    server.stop()
  assert rounds.evicted == 4000 and rounds.rounds == 2000
  assert _chi_square_p_value(observed, _pair_probabilities(weights)) > 1e-3


def test_a_round_reads_every_item_and_its_current_priority(tmp_path):
  table = 'replay'
  server = _server(tmp_path, table, max_size=1000)
  client = server.localhost_client()
  try:
    for index in range(300):
      client.insert(np.int32(index), {table: 1.0 + index})
    # The learner's writes count: one key set to a new priority.
    sample = next(iter(client.sample(table, num_samples=1)))[0]
    client.mutate_priorities(table, updates={int(sample.info.key): 0.125})
    keys, priorities = eviction.read_table_items(client.checkpoint(), table)
    assert keys.size == 300 and len(set(keys.tolist())) == 300
    assert priorities[keys == sample.info.key].tolist() == [0.125]
    assert sorted(priorities[keys != sample.info.key].tolist()) == sorted(
        set(1.0 + np.arange(300)) - {float(sample.info.priority)})
    # Below capacity + slack nothing is due; above, the excess goes.
    rounds = eviction.InversePriorityEviction(table, 299, EXPONENT)
    assert not rounds.due(client)
    rounds = eviction.InversePriorityEviction(table, 250, EXPONENT)
    assert rounds.due(client) and rounds.evict(client) == 50
    assert client.server_info()[table].current_size == 250
  finally:
    server.stop()


def _dpg_builder(**config):
  return ApeXDPGBuilder(ApeXDPGConfig(**config),
                        resolve_continuous('control:cartpole:balance'))


def test_min_heap_removes_the_lowest_priority_first():
  builder = _dpg_builder(replay_remover='min_heap', replay_capacity=5,
                         min_replay_size=2, batch_size=2)
  (table,) = builder.make_replay_tables()
  assert builder.make_eviction() is None
  server = reverb.Server([table])
  client = server.localhost_client()
  spec = tables.transition_signature(builder.environment.spec)
  try:
    for priority in (3.0, 1.0, 4.0, 1.5, 9.0, 2.0, 6.0):
      data = {name: np.zeros(s.shape, s.dtype.as_numpy_dtype)
              for name, s in spec.items()}
      client.insert(data, {tables.TABLE: priority})
    kept = {float(sample[0].info.priority) for sample in
            client.sample(tables.TABLE, num_samples=200)}
  finally:
    server.stop()
  # 1.0 and then 1.5 were the lowest when the sixth and seventh came.
  assert kept == {3.0, 4.0, 9.0, 2.0, 6.0}


def test_inverse_priority_tables_have_a_backstop_and_rounds():
  builder = _dpg_builder(replay_remover='inverse_priority',
                         replay_capacity=1000, min_replay_size=100)
  (table,) = builder.make_replay_tables()
  assert table.info.max_size == 1000 + eviction.backstop(1000)
  rounds = builder.make_eviction(seed=3)
  assert (rounds.capacity, rounds.exponent) == (1000, -0.4)
  fifo = _dpg_builder(replay_capacity=1000, min_replay_size=100)
  assert fifo.make_replay_tables()[0].info.max_size == 1000
  assert fifo.make_eviction() is None


@pytest.mark.parametrize('remover, message', [
    ('prioritized', 'was removed: it evicted items sampled in proportion to '
                    'priority^0.6, the highest priorities first'),
    ('lifo', "--replay_remover='lifo' is out of range"),
])
def test_removers_that_do_not_exist_are_refused(remover, message):
  with pytest.raises(ValueError, match=message.replace('^', r'\^')):
    ApeXConfig(replay_remover=remover).validate()
  with pytest.raises(ValueError, match='eviction_priority_exponent'):
    ApeXConfig(eviction_priority_exponent=0.4).validate()


@pytest.mark.slow
def test_a_program_keeps_its_replay_at_capacity_by_eviction(tmp_path):
  """Ape-X DPG under local_mp with App. D's eviction and a replay of 500:
  the replay node runs rounds, and the table stays near its capacity
  while the actors insert thousands of transitions (with FIFO removal
  postponed to its backstop, 10,000 items, nothing else removes any)."""
  capacity, limit = 500, 3000
  result = helpers.run_program(
      'apex_dpg', '--preset=cartpole_smoke', f'--workdir={tmp_path}',
      '--replay_remover=inverse_priority', f'--replay_capacity={capacity}',
      f'--max_actor_steps={limit}', '--num_evaluators=0', timeout=600)
  assert result.returncode == 0, result.stdout[-5000:]
  logs = helpers.node_logs(tmp_path)
  assert 'Replay eviction: ' in logs, logs[-5000:]
  directory = os.path.join(tmp_path, 'checkpoints', 'replay')
  (newest,) = os.listdir(directory)  # Reverb keeps the newest only.
  keys, priorities = eviction.read_table_items(
      os.path.join(directory, newest), tables.TABLE)
  # At least limit - 2 * n_step transitions were inserted (each actor's
  # last n steps may wait for their episode's end).
  assert capacity <= keys.size < limit // 2, keys.size
  assert np.all(priorities >= 0)
