"""D4PG's actor-side initial priorities against a slow reference.

The builder's actor (Ape-X DPG's, with D4PG's categorical critic) acts in
a real environment and writes to a real Reverb table; every item read
back must carry, as its priority, the KL divergence from its projected
n-step target to the critic's distribution, recomputed one transition at a
time in numpy float64 from the actor's own networks
(tests/test_distributional.py's reference projection: C51's Algorithm 1).
"""

from typing import List

import acme
import numpy as np
import pytest
import tensorflow as tf
from acme.utils import loggers

from agents.d4pg.builder import D4PGBuilder
from agents.d4pg.config import D4PGConfig
from agents.envs.environments import resolve_continuous
from replay_items import read_all_items
from test_distributional import reference_td
from test_dpg_priorities import Episode
from test_dpg_priorities import NumpyNets
from test_dpg_priorities import Recorder
from test_dpg_priorities import _torso_np
from test_dpg_priorities import randomise
from test_dpg_priorities import server  # pylint: disable=unused-import  # A fixture.
from test_dpg_priorities import snapshot

N_STEP = 3
GAMMA = 0.97
NUM_ATOMS = 11
# Pendulum pays -16.3 to 0 a step: a support narrower than its returns
# (about -540 to 0 at this discount), so that targets are clipped too.
V_MIN, V_MAX = -60.0, 10.0


class CategoricalNets(NumpyNets):
  """float64 twins whose critic gives logits over the atoms."""

  def logits(self, observation: np.ndarray, action: np.ndarray):
    return _torso_np(self.critic_params, np.concatenate(
        [observation.astype(np.float64), action.astype(np.float64)]))


def reference_priorities(episodes: List[Episode], nets: CategoricalNets,
                         atoms: np.ndarray):
  """{s_t bytes: (priority, priority with a wrong bootstrap)}, a
  transition at a time: KL(projected target || Z(s_t, a_t)) with the
  target from Z(s_{t+n}, pi(s_{t+n})); the wrong one bootstraps from
  Z(s_{t+n}, a_{t+n}) instead."""
  result = {}
  for episode in episodes:
    length = episode.length
    for t in range(length):
      m = min(N_STEP, length - t)
      n_step_return, discount = 0.0, 1.0
      for k in range(m):
        n_step_return += discount * episode.rewards[t + k]
        discount *= GAMMA * episode.discounts[t + k]
      s_t, s_tn = episode.observations[t], episode.observations[t + m]
      logits_tm1 = nets.logits(s_t, episode.actions[t])[None]
      wrong_action = (episode.actions[t + m] if t + m < length
                      else -nets.pi(s_tn))
      priorities = [
          reference_td(logits_tm1, np.array([n_step_return]),
                       np.array([discount]),
                       nets.logits(s_tn, action)[None], atoms)[1][0]
          for action in (nets.pi(s_tn), wrong_action)]
      result[s_t.tobytes()] = priorities
  return result


def test_actor_writes_kl_priorities_of_its_own_critic(server):
  pendulum = resolve_continuous('gym:Pendulum-v1')
  config = D4PGConfig(n_step=N_STEP, discount=GAMMA, sigma=0.3,
                      num_atoms=NUM_ATOMS, v_min=V_MIN, v_max=V_MAX,
                      replay_capacity=10_000, min_replay_size=1,
                      batch_size=1, prefetch_size=1, actor_flush_size=8,
                      critic_hidden_sizes='16,8', policy_hidden_sizes='16,8')
  config.validate()
  builder = D4PGBuilder(config, pendulum)
  client = server(builder)
  tf.random.set_seed(3)
  learner = builder.make_learner(client)
  randomise(learner.state['policy'], 3, final_scale=0.3)
  randomise(learner.state['critic'], 4, final_scale=1.5)
  actor = builder.make_actor(learner, builder.actor_exploration(0, 1),
                             replay_client=client, seed=7)
  # pylint: disable=protected-access
  policy, critic = actor._policy, actor._critic
  np.testing.assert_array_equal(snapshot(critic),
                                snapshot(learner.state['critic']))
  environment = Recorder(pendulum.make_environment(seed=5))
  acme.EnvironmentLoop(environment, actor, logger=loggers.NoOpLogger(),
                       should_update=True).run(num_episodes=1)
  actor._adders[0].close()
  # pylint: enable=protected-access

  atoms = np.linspace(V_MIN, V_MAX, NUM_ATOMS)
  spec = pendulum.spec.actions
  nets = CategoricalNets(policy, critic, spec.minimum, spec.maximum)
  expected = reference_priorities(environment.episodes, nets, atoms)
  items = read_all_items(client)
  assert len(items) == len(expected) == 200
  priorities, wrong = [], []
  for item in items:
    want, want_wrong = expected[item.observation.tobytes()]
    priorities.append(item.priority)
    wrong.append(want_wrong)
    assert item.priority == pytest.approx(want, rel=1e-3, abs=1e-4)
  priorities = np.array(priorities)
  # The comparison can tell: the priorities vary, and a bootstrap from the
  # action taken at s_{t+n} would have given others.
  assert priorities.std() > 0.05
  assert np.mean(np.abs(np.array(wrong) - priorities) > 1e-3) > 0.8


def test_support_bounds_from_the_suite_or_refused():
  cheetah = resolve_continuous('control:cheetah:run:repeat=4')
  builder = D4PGBuilder(D4PGConfig(discount=0.99), cheetah)
  atoms = builder.make_critic().atoms.numpy()
  # dm_control pays [0, 1] a simulator step; 4 a step at a repeat of 4.
  np.testing.assert_allclose(atoms[[0, -1]], [0.0, 400.0], rtol=1e-5)
  assert len(atoms) == 51
  config = D4PGConfig(v_min=-5.0, v_max=5.0, num_atoms=21)
  np.testing.assert_allclose(
      D4PGBuilder(config, cheetah).make_critic().atoms.numpy(),
      np.linspace(-5, 5, 21), rtol=1e-6)
  pendulum = resolve_continuous('gym:Pendulum-v1')
  with pytest.raises(ValueError, match='--v_min and --v_max'):
    D4PGConfig().check_environment(pendulum)
  D4PGConfig(v_min=-600.0, v_max=0.0).check_environment(pendulum)
