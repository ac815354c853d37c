"""examples/single_process.py: Ape-X DQN in one acme.EnvironmentLoop with an
in-process Reverb server.

The expectations are computed here from the episode lengths the loop logged:
the learner's step count from Acme's Agent schedule, the table's size from the
n-step adder's write-in-batches behaviour, and the priorities from the initial
ones the actor computed (recorded by wrapping the priority function).
"""

import acme
import numpy as np
import pytest

from agents.replay import adders
from agents.replay import tables
from agents.apex_dqn import priorities
from examples import single_process

NUM_STEPS = 2000
NUM_SAMPLES = 500


@pytest.fixture(scope='module')
def result():
  initial = []
  original = priorities.initial_priorities

  def recording_priorities(**kwargs):
    values = original(**kwargs)
    initial.extend(np.asarray(values, np.float64).tolist())
    return values

  with pytest.MonkeyPatch.context() as patch:
    patch.setattr(priorities, 'initial_priorities', recording_priorities)
    out = single_process.run('gym:CartPole-v1', NUM_STEPS, seed=0)
  out['initial_priorities'] = initial
  out['samples'] = list(out['client'].sample(
      tables.TABLE, num_samples=NUM_SAMPLES, emit_timesteps=False))
  yield out
  out['server'].stop()


def _num_observations(result) -> int:
  return sum(result['episode_lengths'])


def test_runs_whole_episodes_for_at_least_num_steps(result):
  lengths = result['episode_lengths']
  assert len(lengths) == len(result['episode_returns']) > 1
  assert _num_observations(result) >= NUM_STEPS
  # The loop stops after the episode that reaches NUM_STEPS.
  assert _num_observations(result) - lengths[-1] < NUM_STEPS


def test_learner_steps_follow_the_agent_schedule(result):
  # Agent.update runs after observation k = 1..N; with an integer ratio
  # p > 1 it takes one learner step when k >= m and (k - m) % p == 0.
  n, m = _num_observations(result), result['min_observations']
  p = result['observations_per_step']
  config = result['config']
  assert m == (config.min_replay_size + config.actor_flush_size +
               config.n_step + adders.CHUNK_LENGTH)
  expected = (n - m) // p + 1 if n >= m else 0
  assert expected > 100
  assert result['learner_steps'] == expected
  assert result['learner'].num_steps == expected


def test_table_holds_every_transition_but_the_unflushed_ones(result):
  # Every step starts one n-step transition; the loop ends with an episode's
  # end, which completes them all. At most actor_flush_size - 1 of them can
  # still wait in the actor's local buffer; nothing is evicted (capacity).
  n, config = _num_observations(result), result['config']
  assert n < config.replay_capacity
  size = result['table_size']
  assert n - (config.actor_flush_size - 1) <= size <= n
  assert len(result['initial_priorities']) == size
  pending = result['actor']._adders[0].pending  # pylint: disable=protected-access
  assert size == n - len(pending)


def test_priorities_differ_and_learning_changed_them(result):
  sampled = np.array([sample.info.priority for sample in result['samples']])
  assert len(sampled) == NUM_SAMPLES
  assert np.all(sampled >= 0)
  assert len(np.unique(sampled)) > 10
  initial = set(result['initial_priorities'])
  changed = [p for p in sampled if p not in initial]
  assert changed, 'no sampled priority differs from the initial ones'


def test_last_update_priorities_are_in_the_table(result):
  last = result['learner'].last_update
  new = dict(zip(last['keys'].tolist(),
                 np.asarray(last['priorities'], np.float64).tolist()))
  seen = {int(s.info.key): float(s.info.priority) for s in result['samples']}
  common = set(new) & set(seen)
  # ~500 prioritised draws from ~2000 items meet some of the 32 last keys.
  assert common
  for key in common:
    assert seen[key] == pytest.approx(new[key], rel=1e-6)


def test_parts_are_acme_components(result):
  assert isinstance(result['actor'], acme.Actor)
  assert isinstance(result['learner'], acme.Learner)
  assert isinstance(result['learner'], acme.VariableSource)
