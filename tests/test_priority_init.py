"""How new transitions enter replay: the actors' own |TD| (Ape-X §3) or the
largest priority the learner has written so far (`--initial_priority=max`,
Schaul et al.'s prioritised replay, the paper's point of comparison).

A real Reverb server, learner and actor in one process, on CartPole.
"""

import dataclasses
import os
import subprocess

import acme
import numpy as np
import pytest
import reverb

from agents.envs import environments
from agents.apex import learning
from agents.replay import tables
from agents.apex_dqn.builder import ApeXDQNBuilder
from agents.apex_dqn.config import ApeXDQNConfig
import helpers
import replay_items


def _parts(initial_priority):
  config = ApeXDQNConfig(
      batch_size=32, min_replay_size=100, replay_capacity=10_000,
      actor_flush_size=10, mlp_hidden_sizes='32', dueling_hidden_size=32,
      initial_priority=initial_priority)
  config.validate()
  builder = ApeXDQNBuilder(config,
                           environments.resolve_discrete('gym:CartPole-v1'))
  # Learning could start at once (the learner samples only when told to
  # here); a minimum size of 1 lets the test read the table back item by
  # item (replay_items.read_all_items) without blocking.
  server = reverb.Server([tables.make_replay_table(
      dataclasses.replace(config, min_replay_size=1), builder.environment.spec,
      stacked_frames=builder.environment.stacked_frames)])
  client = reverb.Client(f'localhost:{server.port}')
  learner = builder.make_learner(client)
  actor = builder.make_actor(learner, exploration=0.5, replay_client=client,
                             seed=0)
  loop = acme.EnvironmentLoop(builder.environment.make_environment(seed=0),
                              actor, should_update=False)
  return server, client, learner, actor, loop


def _act(loop, actor, steps):
  loop.run(num_steps=steps)
  actor.wait_until_written()


def _served_max(learner) -> float:
  return float(learner.get_variables([learning.MAX_PRIORITY])[0][0])


def test_max_so_far_gives_new_transitions_the_learners_max():
  server, client, learner, actor, loop = _parts('max')
  try:
    # Before any update the maximum is Schaul et al.'s initial 1.
    _act(loop, actor, 300)
    items = replay_items.read_all_items(client)
    assert len(items) > 100
    assert {item.priority for item in items} == {1.0}
    # Updates raise it to the largest |TD| they wrote.
    _act(loop, actor, 300)
    written = [1.0]
    for _ in range(5):
      learner.step()
      written.append(float(np.max(learner.last_update['priorities'])))
    assert _served_max(learner) == pytest.approx(max(written), rel=1e-6)
    assert _served_max(learner) > 1.0  # Random Q-values: some |TD| > 1.
    # The actor pulls it; everything written from then on enters with it.
    actor.update(wait=True)
    replay_items.read_all_items(client)  # Empties the table.
    _act(loop, actor, 200)
    items = replay_items.read_all_items(client)
    assert len(items) > 100
    assert {item.priority for item in items} == {_served_max(learner)}
  finally:
    server.stop()


def test_actor_priorities_are_the_actors_own_td_errors():
  server, client, learner, actor, loop = _parts('actor')
  try:
    _act(loop, actor, 300)
    items = replay_items.read_all_items(client)
    priorities = np.array([item.priority for item in items])
    assert len(items) > 100 and not np.all(priorities == 1.0)
    # |R + Gamma Q(s', argmax Q(s')) - Q(s, a)| with the actor's network,
    # which has not changed since it acted.
    for item in items:
      q = actor.q_values(item.observation)
      q_next = actor.q_values(item.next_observation)
      expected = abs(item.n_step_return + item.discount *
                     q_next[np.argmax(q_next)] - q[int(item.action)])
      assert item.priority == pytest.approx(expected, rel=1e-4, abs=1e-5)
    assert _served_max(learner) == 1.0  # No update yet.
  finally:
    server.stop()


@pytest.mark.parametrize('flag, message', [
    ('--initial_priority=bogus', "--initial_priority='bogus'"),
    ('--max_seconds=0', '--max_seconds=0'),
    ('--max_seconds=-5', '--max_seconds=-5'),
])
def test_bad_flags_are_refused_before_launch(tmp_path, flag, message):
  result = helpers.run_program('apex_dqn', f'--workdir={tmp_path}',
                               '--env=gym:CartPole-v1', flag, timeout=120,
                               stderr=subprocess.PIPE)
  assert result.returncode == 2
  assert message in result.stderr and 'out of range' in result.stderr
  assert not os.path.exists(tmp_path / 'logs')  # Nothing was launched.
