"""examples/single_process.py with agent='apex_dpg': Ape-X DPG in one
acme.EnvironmentLoop with an in-process Reverb server, on
control:cartpole:balance (every episode is 1,000 steps, ended by the time
limit).

The expectations are computed here: the learner's step count from Acme's
Agent schedule, the table's size from the episode lengths, the n-step
discounts from gamma and the time limit, and the priorities from the initial
ones the actor computed (recorded by wrapping the priority function) and the
ones the learner wrote (recorded after each learner step).
"""

import acme
import numpy as np
import pytest
import tree
from acme.agents import agent as agent_lib

from agents.replay import adders
from agents.apex import learning
from agents.replay import tables
from agents.apex_dpg import priorities
from examples import single_process

ENV = 'control:cartpole:balance'
EPISODE_LENGTH = 1000  # dm_control's time limit.
NUM_STEPS = 3000
NUM_SAMPLES = 3000


def _transition_id(action, n_step_return, discount):
  """What identifies a transition both in the priority function's inputs and
  in the table (the noisy action and the 3-step return)."""
  return (np.asarray(action, np.float32).tobytes(),
          np.float32(n_step_return).tobytes(),
          np.float32(discount).tobytes())


@pytest.fixture(scope='module')
def result():
  initial = []  # One dict per transition given to the priority function.
  written = {}  # key -> the last priority the learner wrote for it.
  original_priorities = priorities.initial_priorities
  original_step = learning.ApeXLearner.step

  def recording_priorities(**kwargs):
    values = original_priorities(**kwargs)
    for i, priority in enumerate(np.asarray(values, np.float64)):
      initial.append({name: tree.map_structure(lambda leaf: leaf[i], batch)
                      for name, batch in kwargs.items()})
      initial[-1]['priority'] = float(priority)
    return values

  def recording_step(self):
    original_step(self)
    last = self.last_update
    written.update(zip(last['keys'].tolist(),
                       np.asarray(last['priorities'], np.float64).tolist()))

  with pytest.MonkeyPatch.context() as patch:
    patch.setattr(priorities, 'initial_priorities', recording_priorities)
    patch.setattr(learning.ApeXLearner, 'step', recording_step)
    out = single_process.run(ENV, NUM_STEPS, seed=0, agent='apex_dpg')
  out['initial'] = initial
  out['written'] = written
  signature = tables.transition_signature(out['environment'].spec)
  out['samples'] = [
      (int(sample.info.key), float(sample.info.priority),
       tree.unflatten_as(signature, sample.data))
      for sample in out['client'].sample(
          tables.TABLE, num_samples=NUM_SAMPLES, emit_timesteps=False)]
  yield out
  out['server'].stop()


def _num_observations(result) -> int:
  return sum(result['episode_lengths'])


def test_uses_the_dpg_parts(result):
  assert result['agent'] == 'apex_dpg'
  assert result['exploration'] == 0.3  # The actor's noise sigma.
  np.testing.assert_array_equal(result['actor']._sigmas, [0.3])  # pylint: disable=protected-access
  assert result['environment'].name == ENV


def test_runs_whole_episodes(result):
  # Episodes end only by the time limit, so the loop stops after exactly
  # NUM_STEPS / 1000 of them.
  assert result['episode_lengths'] == [EPISODE_LENGTH] * 3
  assert len(result['episode_returns']) == 3
  # cartpole:balance pays a reward in [0, 1] per step.
  assert all(0 < ret <= EPISODE_LENGTH for ret in result['episode_returns'])


def test_learner_steps_follow_the_agent_schedule(result):
  # Agent.update runs after observation k = 1..N; with an integer ratio
  # p > 1 it takes one learner step when k >= m and (k - m) % p == 0.
  n, m = _num_observations(result), result['min_observations']
  p = result['observations_per_step']
  config = result['config']
  assert m == (config.min_replay_size + config.actor_flush_size +
               config.n_step + adders.CHUNK_LENGTH)
  expected = sum(1 for k in range(1, n + 1) if k >= m and (k - m) % p == 0)
  assert expected == (3000 - 561) // 4 + 1 == 610
  assert result['learner_steps'] == expected
  assert result['learner'].num_steps == expected


def test_table_holds_one_item_per_step(result):
  # Every step starts one n-step transition; a truncated episode completes
  # them all at its end, and 3 x 1,000 is a multiple of the flush size, so
  # none is left in the actor's buffer. Nothing is evicted (capacity).
  n, config = _num_observations(result), result['config']
  assert n < config.replay_capacity
  assert result['table_size'] == n == 3000
  assert len(result['initial']) == n
  assert not result['actor']._adders[0].pending  # pylint: disable=protected-access
  info = result['client'].server_info()[tables.TABLE]
  assert info.current_size == n


def test_n_step_discounts_bootstrap_through_the_time_limit(result):
  gamma = result['config'].discount
  discounts = np.array([t['discounts'] for t in result['initial']])
  # Within an episode Gamma = gamma^3; the last two transitions of each
  # episode are cut by the time limit (gamma^2, gamma^1) but still bootstrap;
  # none has Gamma = 0 (that would be a termination).
  expected = {3: 3 * (EPISODE_LENGTH - 2), 2: 3, 1: 3}
  for power, count in expected.items():
    matches = np.isclose(discounts, gamma**power, rtol=1e-6, atol=0)
    assert matches.sum() == count, power
  assert sum(expected.values()) == len(discounts)
  sampled = {np.float32(data[adders.DISCOUNT]).item()
             for _, _, data in result['samples']}
  allowed = {np.float32(gamma**power).item() for power in (1, 2, 3)}
  assert sampled <= allowed


def test_truncated_episodes_bootstrap_from_the_final_observation(result):
  gamma = result['config'].discount
  ends = [t for t in result['initial']
          if np.isclose(t['discounts'], gamma**2, rtol=1e-6, atol=0)
          or np.isclose(t['discounts'], gamma, rtol=1e-6, atol=0)]
  assert len(ends) == 6
  # The two last transitions of an episode both end at s_T and bootstrap
  # from q(s_T, pi(s_T)), a critic value (not the zeros of a termination).
  for second_last, last in zip(ends[0::2], ends[1::2]):
    assert second_last['discounts'] == pytest.approx(gamma**2, rel=1e-6)
    assert last['discounts'] == pytest.approx(gamma, rel=1e-6)
    np.testing.assert_array_equal(second_last['bootstrap_values'],
                                  last['bootstrap_values'])
    assert last['bootstrap_values'][priorities.Q_POLICY] != 0.0


def _initial_priorities_by_transition(result):
  """{transition id: the initial priorities recorded for it}."""
  by_transition = {}
  for transition in result['initial']:
    by_transition.setdefault(
        _transition_id(transition['actions'], transition['n_step_returns'],
                       transition['discounts']),
        set()).add(transition['priority'])
  return by_transition


def test_never_updated_items_keep_their_initial_priority(result):
  by_transition = _initial_priorities_by_transition(result)
  # Actions carry Gaussian noise: the id singles out almost every transition.
  assert len(by_transition) > 0.99 * len(result['initial'])

  written = result['written']
  never_updated = 0
  for key, priority, data in result['samples']:
    initial = by_transition[_transition_id(
        data[adders.ACTION], data[adders.N_STEP_RETURN],
        data[adders.DISCOUNT])]
    if key not in written:
      never_updated += 1
      assert priority in initial, (key, priority, initial)
  # Items written after the learner's last batches were never sampled by it.
  assert never_updated > 10


def test_learner_updated_priorities_differ_and_are_in_the_table(result):
  by_transition = _initial_priorities_by_transition(result)
  written = result['written']
  updated = 0
  for key, priority, data in result['samples']:
    if key not in written:
      continue
    updated += 1
    # The table holds the priority of the learner's most recent update...
    assert priority == pytest.approx(written[key], rel=1e-6)
    # ... which is not the item's initial priority.
    initial = by_transition[_transition_id(
        data[adders.ACTION], data[adders.N_STEP_RETURN],
        data[adders.DISCOUNT])]
    assert priority not in initial
  # 610 batches of 64 from <= 3,000 items touched most of them.
  assert updated > NUM_SAMPLES // 2
  sampled = np.array([priority for _, priority, _ in result['samples']])
  assert np.all(sampled >= 0)
  assert len(np.unique(sampled)) > 100


def test_parts_are_acme_components_in_one_environment_loop(result):
  actor, learner, loop = result['actor'], result['learner'], result['loop']
  assert isinstance(actor, acme.Actor)
  assert isinstance(learner, acme.Learner)
  assert isinstance(learner, acme.VariableSource)
  assert isinstance(loop, acme.EnvironmentLoop)
  # pylint: disable=protected-access
  agent = loop._actor
  assert isinstance(agent, agent_lib.Agent)
  assert agent._actor is actor
  assert agent._learner is learner
  assert agent._num_observations == _num_observations(result)


def test_actor_actions_stay_in_bounds(result):
  actions = np.array([t['actions'] for t in result['initial']])
  spec = result['environment'].spec.actions
  assert actions.shape == (3000, 1)
  assert actions.dtype == np.float32
  assert np.all(actions >= spec.minimum) and np.all(actions <= spec.maximum)
  # sigma = 0.3 around the policy: the actions spread.
  assert actions.std() > 0.1
