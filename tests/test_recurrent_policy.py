"""A policy that carries a state: a recurrent core saved as a policy snapshot
(`agents.snapshots`), read back as a `launch.offline.restore.Policy` and played by
the evaluation's actor, which begins each environment's state again as its
episode begins. The actions are checked against the core run by hand, one
environment at a time, from the first step of each episode; and
programs/evaluate.py plays such a policy, greedy over its Q-values, at an
epsilon (R2D2's final policies on MinAtar, results/r2d2_minatar.py)."""

import json
import subprocess

import dm_env
import numpy as np
import sonnet as snt
import tensorflow as tf

from agents import snapshots
from launch.offline import evaluation
from agents import registry
from launch.offline import restore
from tests import helpers

ENVIRONMENTS = 3
# Any environment will do: the policy's program is only a name here.
ENV = 'gym:CartPole-v1'


def core_and_policy(tmp_path):
  environment = registry.get('apex_dqn').resolve_environment(ENV)
  tf.random.set_seed(0)
  core = snt.DeepRNN([snt.Linear(16), tf.nn.tanh, snt.LSTM(8),
                      snt.Linear(2)])
  core(tf.zeros((1, 4)), core.initial_state(1))
  snapshot = snapshots.PolicySnapshot(core, environment, 'apex_dqn',
                                      q_network=True, recurrent=True)
  path = snapshot.export(str(tmp_path), learner_steps=7)
  return core, restore.from_snapshot(path), environment


def by_hand(core, observations):
  """The greedy actions of an episode's observations, state carried from
  the episode's first."""
  state = core.initial_state(1)
  actions = []
  for observation in observations:
    q, state = core(observation[None], state)
    actions.append(int(tf.argmax(q[0])))
  return actions


def test_a_recurrent_snapshot_carries_its_state_per_environment(tmp_path):
  core, policy, environment = core_and_policy(tmp_path)
  _, metadata = snapshots.load(policy.source)
  assert metadata['recurrent'] and policy.recurrent and policy.act is None
  assert policy.learner_steps == 7
  environments = [environment.make_environment(seed=i)
                  for i in range(ENVIRONMENTS)]
  actor = evaluation.PolicyActor(policy, environments, epsilon=0.0,
                                 rng=np.random.default_rng(0))
  rng = np.random.default_rng(1)
  # Environment i's episode begins again at the steps in `restarts[i]`.
  restarts = [{0, 5}, {0, 2, 3, 7}, {0}]
  episodes = [[] for _ in range(ENVIRONMENTS)]  # Each: [observations].
  chosen = [[] for _ in range(ENVIRONMENTS)]
  for step in range(10):
    observations = rng.normal(size=(ENVIRONMENTS, 4)).astype(np.float32)
    for index in range(ENVIRONMENTS):
      if step in restarts[index]:
        actor.observe_first_at(index, dm_env.restart(observations[index]))
        episodes[index].append([])
        chosen[index].append([])
      episodes[index][-1].append(observations[index])
    actions = actor.select_actions(observations)
    for index in range(ENVIRONMENTS):
      chosen[index][-1].append(int(actions[index]))
  for index in range(ENVIRONMENTS):
    for observations, actions in zip(episodes[index], chosen[index]):
      assert actions == by_hand(core, observations), index
  # The check has power: the actions of a state carried on over an
  # episode's start (not begun again) differ from those checked above.
  carried_on = [by_hand(core, earlier + later)[len(earlier):]
                for index in range(ENVIRONMENTS)
                for earlier, later in zip(episodes[index], episodes[index][1:])]
  begun_again = [actions for index in range(ENVIRONMENTS)
                 for actions in chosen[index][1:]]
  assert carried_on != begun_again


def test_a_recurrent_policy_is_evaluated_episode_by_episode(tmp_path):
  """`evaluation.evaluate` plays the restored policy: each episode's
  return and length are what the core, run by hand from the episode's
  first state, makes in a copy of that episode's environment (episodes of
  different lengths, played side by side)."""
  core, policy, environment = core_and_policy(tmp_path)
  returns, lengths, _, _ = evaluation.evaluate(policy, episodes=6, seed=3)
  expected = []
  for index in range(6):
    replay = environment.make_environment(
        seed=3 * evaluation.SEED_STRIDE + index, evaluation=True)
    timestep, state, total = replay.reset(), core.initial_state(1), 0.0
    length = 0
    while not timestep.last():
      q, state = core(timestep.observation[None], state)
      timestep = replay.step(int(tf.argmax(q[0])))
      total += float(timestep.reward)
      length += 1
    expected.append((total, length))
  assert len(set(expected)) > 1  # Episodes of different lengths.
  # Returned in the order the episodes ended.
  assert sorted(zip(returns, lengths)) == sorted(expected)


def _played_by_hand(core, environment, epsilon: float, seed: int):
  """(return, length, actions) of the first episode that `evaluate` plays
  with `seed`, worked out step by step: the core's greedy action from the
  episode's first state, replaced with probability `epsilon` by a random
  one (a uniform number from the seed's generator, then the action)."""
  rng = np.random.default_rng(seed)
  replay = environment.make_environment(
      seed=seed * evaluation.SEED_STRIDE, evaluation=True)
  timestep, state = replay.reset(), core.initial_state(1)
  total, actions = 0.0, []
  while not timestep.last():
    q, state = core(timestep.observation[None], state)
    action = int(tf.argmax(q[0]))
    if epsilon and rng.random() < epsilon:
      action = int(rng.integers(2))
    timestep = replay.step(action)
    total += float(timestep.reward)
    actions.append(action)
  return total, len(actions), actions


def test_a_recurrent_greedy_policy_is_evaluated_at_an_epsilon(tmp_path):
  """A recurrent policy has no `q_values` (they need its state), yet it is
  greedy over Q-values: programs/evaluate.py takes its `--epsilon`, and
  plays the episode worked out by hand."""
  core, policy, environment = core_and_policy(tmp_path)
  assert policy.greedy and policy.q_values is None
  epsilon, seed = 0.5, 3
  output = tmp_path / 'evaluation.json'
  result = helpers.run_script(
      'evaluate', f'--checkpoint={policy.source}', '--episodes=1',
      f'--epsilon={epsilon}', f'--seed={seed}', f'--output={output}',
      timeout=300, stderr=subprocess.PIPE)
  assert result.returncode == 0, result.stderr[-3000:]
  with open(output) as f:
    evaluated = json.load(f)
  total, length, actions = _played_by_hand(core, environment, epsilon, seed)
  assert (evaluated['returns'], evaluated['lengths']) == ([total], [length])
  assert evaluated['epsilon'] == epsilon
  # The check has power: epsilon changed some of the episode's actions.
  greedy = _played_by_hand(core, environment, 0.0, seed)[2]
  assert actions[:len(greedy)] != greedy[:len(actions)]


def test_a_recurrent_policy_not_over_q_values_takes_no_epsilon(tmp_path):
  environment = registry.get('apex_dqn').resolve_environment(ENV)
  core = snt.DeepRNN([snt.LSTM(8), snt.Linear(2)])
  core(tf.zeros((1, 4)), core.initial_state(1))
  path = snapshots.PolicySnapshot(
      core, environment, 'apex_dqn', q_network=False, recurrent=True,
      policy='mode').export(str(tmp_path), learner_steps=1)
  assert not restore.from_snapshot(path).greedy
  result = helpers.run_script('evaluate', f'--checkpoint={path}',
                              '--epsilon=0.1', timeout=300,
                              stderr=subprocess.PIPE)
  assert result.returncode == 2
  assert 'greedy over Q-values' in result.stderr
