"""D4PGLearner: one SGD step of its critic (importance-weighted cross-entropy
to the projected n-step target of the target networks) and of its policy
(the clipped action gradient of the critic's mean), and the KL priorities
it gives the batch.

Every expectation is computed in numpy float64 from the networks' weights:
numpy twins of the networks, the reference projection of
tests/test_distributional.py (C51's Algorithm 1), and gradients by central
finite differences of numpy losses. No TensorFlow gradient is a reference.
"""

import numpy as np
import sonnet as snt
import tensorflow as tf

from agents.d4pg import networks
from agents.d4pg.learning import D4PGLearner
from agents.replay import adders
import replay_items
from test_distributional import reference_projection
from test_distributional import reference_td
from test_dpg_learner import ACTION_DIM
from test_dpg_learner import CRITIC_HIDDEN
from test_dpg_learner import DISCOUNT_3
from test_dpg_learner import MAXIMUM
from test_dpg_learner import MINIMUM
from test_dpg_learner import Nets
from test_dpg_learner import OBS_DIM
from test_dpg_learner import TABLE_SIZE
from test_dpg_learner import _randomise
from test_dpg_learner import flat
from test_dpg_learner import is_weights_np
from test_dpg_learner import numerical_gradient
from test_dpg_learner import params_of
from test_dpg_learner import policy_np
from test_dpg_learner import unflat

ATOMS = np.linspace(-2.0, 6.0, 9)  # Spacing 1; the returns fall beyond.
BATCH = 6


def make_critic(seed: int) -> networks.CategoricalCritic:
  critic = networks.CategoricalCritic(ATOMS, CRITIC_HIDDEN)
  critic(tf.zeros([1, OBS_DIM]), tf.zeros([1, ACTION_DIM]))
  _randomise(critic, seed, 0.7)
  return critic


def logits_np(p, observations, actions) -> np.ndarray:
  """[s, a] -> tanh -> ReLU -> linear: one logit an atom."""
  x = np.concatenate([np.asarray(observations, np.float64),
                      np.asarray(actions, np.float64)], axis=-1)
  h = np.tanh(x @ p[0] + p[1])
  h = np.maximum(h @ p[2] + p[3], 0.0)
  return h @ p[4] + p[5]


def mean_np(p, observations, actions) -> np.ndarray:
  logits = logits_np(p, observations, actions)
  probabilities = np.exp(logits - logits.max(-1, keepdims=True))
  probabilities /= probabilities.sum(-1, keepdims=True)
  return probabilities @ ATOMS


def reference(params, sample, beta: float, dqda_clip: float) -> dict:
  """The expected update, in numpy float64."""
  data = {k: v.numpy().astype(np.float64) for k, v in sample.data.items()}
  o_tm1, o_t = data[adders.OBSERVATION], data[adders.NEXT_OBSERVATION]
  actions = data[adders.ACTION]
  returns, discounts = data[adders.N_STEP_RETURN], data[adders.DISCOUNT]
  weights = is_weights_np(sample.info.probability.numpy(),
                          sample.info.table_size.numpy(), beta)
  logits_t = logits_np(params['target_critic'], o_t,
                       policy_np(params['target_policy'], o_t))
  cross_entropy, divergence = reference_td(
      logits_np(params['critic'], o_tm1, actions), returns, discounts,
      logits_t, ATOMS)
  probabilities_t = np.exp(logits_t - logits_t.max(-1, keepdims=True))
  probabilities_t /= probabilities_t.sum(-1, keepdims=True)
  targets = reference_projection(
      returns[:, None] + discounts[:, None] * ATOMS[None], probabilities_t,
      ATOMS)

  def critic_loss(vector):
    logits = logits_np(unflat(vector, params['critic']), o_tm1, actions)
    log_p = logits - logits.max(-1, keepdims=True)
    log_p -= np.log(np.exp(log_p).sum(-1, keepdims=True))
    return np.mean(weights * -(targets * log_p).sum(-1))  # Targets fixed.

  policy_actions = policy_np(params['policy'], o_tm1)
  dqda = np.zeros_like(policy_actions)
  for j in range(ACTION_DIM):
    up, down = policy_actions.copy(), policy_actions.copy()
    up[:, j] += 1e-6
    down[:, j] -= 1e-6
    dqda[:, j] = (mean_np(params['critic'], o_tm1, up) -
                  mean_np(params['critic'], o_tm1, down)) / 2e-6
  dqda = np.clip(dqda, -dqda_clip, dqda_clip)

  def chained(vector):
    moved = policy_np(unflat(vector, params['policy']), o_tm1)
    return np.mean(np.sum(dqda * moved, axis=-1))

  return {
      'loss': np.mean(weights * cross_entropy),
      'priorities': divergence,
      'critic_gradient': numerical_gradient(critic_loss,
                                            flat(params['critic'])),
      'policy_gradient': -numerical_gradient(chained, flat(params['policy'])),
      'mean_q': np.mean(mean_np(params['critic'], o_tm1, policy_actions)),
  }


def make_sample(seed: int):
  return replay_items.hand_made_batch(
      seed, BATCH, OBS_DIM, TABLE_SIZE, DISCOUNT_3,
      actions=lambda rng, size: rng.uniform(
          MINIMUM, MAXIMUM, size=(size, ACTION_DIM)).astype(np.float32))


def test_one_update_against_numpy():
  beta, critic_lr, policy_lr, dqda_clip = 0.4, 0.5, 0.5, 0.05
  sample = make_sample(seed=21)
  nets = Nets(critic=make_critic)
  before = nets.snapshot()
  expected = reference(before, sample, beta, dqda_clip)
  learner = D4PGLearner(
      policy=nets.policy, critic=nets.critic,
      target_policy=nets.target_policy, target_critic=nets.target_critic,
      iterator=replay_items.iterator_over([sample]), replay_client=None,
      policy_optimizer=snt.optimizers.SGD(learning_rate=policy_lr),
      critic_optimizer=snt.optimizers.SGD(learning_rate=critic_lr),
      importance_sampling_exponent=beta, target_update_period=1000,
      dqda_clip=dqda_clip)
  learner.step()
  update = learner.last_update
  np.testing.assert_allclose(update['loss'], expected['loss'], rtol=1e-4)
  np.testing.assert_allclose(update['mean_q'], expected['mean_q'], rtol=1e-4)
  # The new priorities: the KL divergence, a transition at a time.
  np.testing.assert_allclose(update['priorities'], expected['priorities'],
                             rtol=1e-3, atol=1e-5)
  assert np.std(expected['priorities']) > 1e-2
  critic_step = flat(params_of(nets.critic)) - flat(before['critic'])
  assert np.linalg.norm(critic_step) > 1e-2
  np.testing.assert_allclose(critic_step,
                             -critic_lr * expected['critic_gradient'],
                             rtol=1e-3, atol=1e-6)
  policy_step = flat(params_of(nets.policy)) - flat(before['policy'])
  assert np.linalg.norm(policy_step) > 1e-3
  np.testing.assert_allclose(policy_step,
                             -policy_lr * expected['policy_gradient'],
                             rtol=1e-3, atol=1e-6)
  for name in ('target_policy', 'target_critic'):
    np.testing.assert_array_equal(flat(nets.snapshot()[name]),
                                  flat(before[name]))
