"""A3C's returns, loss gradients, policies and shared RMSProp against slow
float64 references written from the paper's formulas (Algorithm S3, Supp.
§7 Eq. S2-S3, Supp. §9) and from scipy's distributions."""

import math

import numpy as np
import pytest
import scipy.stats
import tensorflow as tf

from agents.a3c import losses
from agents.a3c import networks
from agents.a3c import optimizer
from agents.a3c.config import A3CConfig
from agents.envs import suites

GAMMA = 0.99


def reference_returns(rewards, terminal_at, bootstrap_value, gamma=GAMMA):
  """Algorithm S3 read literally: R = 0 if the rollout ended in a terminal
  state, else V(s_t); then R <- r_i + gamma R for i = t - 1 ... t_start.
  `terminal_at` is the index of the step that ended the episode, or None."""
  if terminal_at is not None:
    rewards = rewards[:terminal_at + 1]
  value = 0.0 if terminal_at is not None else bootstrap_value
  returns = []
  for reward in reversed(rewards):
    value = reward + gamma * value
    returns.append(value)
  return np.array(returns[::-1])


def test_n_step_returns_bootstrap_from_the_last_value():
  rewards = np.array([1.0, 0.0, -2.0, 0.5, 3.0])
  discounts = np.full(5, GAMMA)
  returns = losses.n_step_returns(rewards, discounts, 7.0).numpy()
  np.testing.assert_allclose(returns,
                             reference_returns(list(rewards), None, 7.0),
                             rtol=1e-6)
  # By hand, the first: 1 + 0 - 2 g^2 + 0.5 g^3 + 3 g^4 + 7 g^5.
  assert returns[0] == pytest.approx(
      1 - 2 * GAMMA**2 + 0.5 * GAMMA**3 + 3 * GAMMA**4 + 7 * GAMMA**5,
      rel=1e-6)


def test_n_step_returns_stop_at_a_terminal_state():
  # The episode ended with the third step: its return is that step's reward,
  # and the bootstrap value (of a state after the end) counts nowhere.
  rewards = np.array([1.0, 2.0, 4.0])
  discounts = np.array([GAMMA, GAMMA, 0.0])
  returns = losses.n_step_returns(rewards, discounts, 1000.0).numpy()
  np.testing.assert_allclose(returns, reference_returns(list(rewards), 2, 0.0),
                             rtol=1e-6)
  np.testing.assert_allclose(returns, [1 + 2 * GAMMA + 4 * GAMMA**2,
                                       2 + 4 * GAMMA, 4.0], rtol=1e-6)


def test_a_time_limit_keeps_the_bootstrap():
  # dm_env ends a truncated episode with discount 1: the last state's value
  # still stands for the rewards the limit cut off.
  rewards = np.array([1.0, 1.0])
  discounts = np.array([GAMMA, GAMMA])  # gamma * the truncation's discount 1
  returns = losses.n_step_returns(rewards, discounts, 50.0).numpy()
  np.testing.assert_allclose(returns, [1 + GAMMA + 50 * GAMMA**2,
                                       1 + 50 * GAMMA], rtol=1e-6)


def _softmax(logits):
  shifted = logits - logits.max(axis=-1, keepdims=True)
  exp = np.exp(shifted)
  return exp / exp.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize('value_scale, offset', [(1.0, 0.0), (2.5, 0.0),
                                                 (1.0, -0.3)])
def test_discrete_loss_and_gradients_against_the_analytic_ones(value_scale,
                                                               offset):
  # value_scale: Pop-Art's sigma (agents/a3c/popart.py), by which the value's
  # errors and the advantages are divided; offset: what the policy term
  # subtracts from the advantages (--center_advantages); 1 and 0 are
  # Algorithm S3's loss.
  rng = np.random.default_rng(0)
  steps, num_actions, beta, value_cost = 5, 4, 0.01, 0.5
  logits = rng.normal(size=(steps, num_actions))
  values = rng.normal(size=steps)
  actions = rng.integers(num_actions, size=steps)
  returns = rng.normal(size=steps) * 3

  logits_var = tf.Variable(logits, dtype=tf.float32)
  values_var = tf.Variable(values, dtype=tf.float32)
  with tf.GradientTape() as tape:
    outputs = networks.PolicyValue(networks.Categorical(logits_var),
                                   values_var,
                                   tf.fill([steps], float(value_scale)))
    loss, extras = losses.a3c_loss(outputs, tf.constant(actions),
                                   tf.constant(returns, tf.float32), beta,
                                   value_cost, advantage_offset=offset)
  d_logits, d_values = tape.gradient(loss, [logits_var, values_var])

  # Reference (float64): pi, H, the loss, and its gradients by hand:
  # d(-log pi(a) A)/dz = (pi - onehot(a)) A; d(-beta H)/dz_j =
  # beta pi_j (log pi_j + H); d(c ((R - V) / s)^2)/dV = -2 c (R - V) / s^2,
  # with A = (R - V) / s.
  pi = _softmax(logits)
  log_pi = np.log(pi)
  entropy = -(pi * log_pi).sum(axis=-1)
  advantages = (returns - values) / value_scale
  onehot = np.eye(num_actions)[actions]
  centred = advantages - offset
  expected_loss = (-(log_pi[np.arange(steps), actions] * centred).sum()
                   - beta * entropy.sum()
                   + value_cost * (advantages**2).sum())
  expected_d_logits = ((pi - onehot) * centred[:, None]
                       + beta * pi * (log_pi + entropy[:, None]))
  expected_d_values = -2 * value_cost * advantages / value_scale
  assert float(loss) == pytest.approx(expected_loss, rel=1e-5, abs=1e-5)
  np.testing.assert_allclose(d_logits.numpy(), expected_d_logits, rtol=1e-4,
                             atol=1e-6)
  np.testing.assert_allclose(d_values.numpy(), expected_d_values, rtol=1e-5,
                             atol=1e-6)
  assert float(extras['entropy']) == pytest.approx(entropy.mean(), rel=1e-5)


def test_the_advantage_does_not_train_the_value_through_the_policy_loss():
  # With beta = 0 and value_cost = 0 the values get no gradient at all: the
  # advantage multiplies log pi as a constant (Algorithm S3's dtheta).
  values = tf.Variable([0.3, -0.2])
  with tf.GradientTape() as tape:
    outputs = networks.PolicyValue(
        networks.Categorical(tf.constant([[0.1, 0.5], [1.0, -1.0]])), values,
        tf.ones([2]))
    loss, _ = losses.a3c_loss(outputs, tf.constant([0, 1]),
                              tf.constant([1.0, 2.0]), 0.0, 0.0)
  gradient = tape.gradient(loss, values)
  assert gradient is None or np.all(gradient.numpy() == 0)


def test_gaussian_policy_against_scipy_and_its_analytic_gradients():
  rng = np.random.default_rng(1)
  steps, dims, beta = 4, 3, 1e-4
  mean = rng.normal(size=(steps, dims))
  variance = rng.uniform(0.2, 2.0, size=steps)
  actions = mean + rng.normal(size=(steps, dims))
  returns = rng.normal(size=steps)
  values = rng.normal(size=steps)

  policy = networks.SphericalGaussian(tf.constant(mean, tf.float32),
                                      tf.constant(variance, tf.float32))
  log_probs = policy.log_prob(tf.constant(actions, tf.float32)).numpy()
  entropies = policy.entropy().numpy()
  for i in range(steps):
    reference = scipy.stats.multivariate_normal(mean[i],
                                                variance[i] * np.eye(dims))
    assert log_probs[i] == pytest.approx(reference.logpdf(actions[i]),
                                         rel=1e-5)
    assert entropies[i] == pytest.approx(reference.entropy(), rel=1e-5)
    # Supp. §9: each dimension's differential entropy (log(2 pi s2) + 1) / 2.
    assert entropies[i] == pytest.approx(
        dims * 0.5 * (math.log(2 * math.pi * variance[i]) + 1), rel=1e-5)

  mean_var = tf.Variable(mean, dtype=tf.float32)
  variance_var = tf.Variable(variance, dtype=tf.float32)
  with tf.GradientTape() as tape:
    outputs = networks.PolicyValue(
        networks.SphericalGaussian(mean_var, variance_var),
        tf.constant(values, tf.float32), tf.ones([steps]))
    loss, _ = losses.a3c_loss(outputs, tf.constant(actions, tf.float32),
                              tf.constant(returns, tf.float32), beta, 1.0)
  d_mean, d_variance = tape.gradient(loss, [mean_var, variance_var])
  advantages = (returns - values)[:, None]
  squared = ((actions - mean)**2).sum(axis=-1)
  np.testing.assert_allclose(
      d_mean.numpy(), -advantages * (actions - mean) / variance[:, None],
      rtol=1e-4, atol=1e-6)
  expected_d_variance = (
      -advantages[:, 0] * (0.5 * squared / variance**2 - dims / (2 * variance))
      - beta * dims / (2 * variance))
  np.testing.assert_allclose(d_variance.numpy(), expected_d_variance,
                             rtol=1e-4, atol=1e-6)


def _shared_by_policy_and_value(network, policy_output):
  """The network's outputs for a batch of ones, and the names of the
  variables that both the value and `policy_output(policy)` depend on."""
  observation = tf.constant(np.ones((3, 5), np.float32))
  with tf.GradientTape(persistent=True) as tape:
    outputs = network(observation)
    value = tf.reduce_sum(outputs.value)
    policy = tf.reduce_sum(policy_output(outputs.policy))
  value_grads = tape.gradient(value, network.trainable_variables)
  policy_grads = tape.gradient(policy, network.trainable_variables)
  return outputs, [
      variable.name for variable, value_grad, policy_grad in
      zip(network.trainable_variables, value_grads, policy_grads)
      if value_grad is not None and policy_grad is not None]


def test_gaussian_network_shares_nothing_between_policy_and_value():
  network = networks.GaussianPolicyValueNetwork([8], action_dims=2)
  outputs, both = _shared_by_policy_and_value(network,
                                              lambda policy: policy.mean)
  assert not both, both
  assert np.all(outputs.policy.variance.numpy() > 0)
  assert outputs.policy.mean.shape == (3, 2)


@pytest.mark.parametrize('shared_torso', [True, False])
def test_a_discrete_networks_value_shares_the_torso_only_when_asked(
    shared_torso):
  spec = type('Spec', (), {'dtype': np.int64, 'num_values': 3})()
  network = networks.make_network(suites.get('gym'), spec, [8],
                                  shared_torso=shared_torso)
  _, both = _shared_by_policy_and_value(network, lambda policy: policy.logits)
  # Shared: the torso's weights and biases (one layer of 8) feed both heads.
  assert len(both) == (2 if shared_torso else 0), both
  # A torso of its own: one more layer's weights and biases.
  assert len(network.trainable_variables) == (6 if shared_torso else 8)


def reference_rmsprop(theta, g, gradients, learning_rate, decay, epsilon):
  """Eq. S2-S3, one element at a time in float64."""
  theta, g = theta.astype(np.float64).ravel(), g.astype(np.float64).ravel()
  for i, d in enumerate(np.asarray(gradients, np.float64).ravel()):
    g[i] = decay * g[i] + (1 - decay) * d * d
    theta[i] = theta[i] - learning_rate * d / math.sqrt(g[i] + epsilon)
  return theta, g


def test_shared_rmsprop_against_the_paper_equations():
  rng = np.random.default_rng(2)
  shapes = [(3, 4), (4,)]
  initial = [rng.normal(size=s).astype(np.float32) for s in shapes]
  variables = [tf.Variable(value) for value in initial]
  config = A3CConfig()
  rmsprop = optimizer.SharedRMSProp(variables, config.rmsprop_decay,
                                    config.rmsprop_epsilon)
  expected = [(value, np.zeros_like(value)) for value in initial]
  for update, learning_rate in enumerate([7e-4, 5e-4, 1e-2]):
    gradients = [rng.normal(size=s).astype(np.float32) * (update + 1)
                 for s in shapes]
    rmsprop.apply(gradients, learning_rate)
    expected = [reference_rmsprop(theta, g, d, learning_rate,
                                  config.rmsprop_decay, config.rmsprop_epsilon)
                for (theta, g), d in zip(expected, gradients)]
    for (theta, g), variable, mean_square in zip(expected, variables,
                                                 rmsprop.mean_squares):
      np.testing.assert_allclose(variable.numpy().ravel(), theta, rtol=1e-5,
                                 atol=1e-7)
      np.testing.assert_allclose(mean_square.numpy().ravel(), g, rtol=1e-5,
                                 atol=1e-9)


def test_the_first_step_is_bounded_by_epsilon():
  # g = 0.01 d^2 after one update: with epsilon 0.1 the step is
  # lr d / sqrt(0.01 d^2 + 0.1), below lr |d| / sqrt(0.1).
  variable = tf.Variable(np.zeros(3, np.float32))
  rmsprop = optimizer.SharedRMSProp([variable], 0.99, 0.1)
  d = np.array([1e-3, 1.0, 100.0], np.float32)
  rmsprop.apply([d], 1.0)
  step = -variable.numpy()
  np.testing.assert_allclose(step, d / np.sqrt(0.01 * d**2 + 0.1), rtol=1e-5)
  assert np.all(step <= np.abs(d) / math.sqrt(0.1) + 1e-6)


def test_updates_from_many_threads_at_once_all_land():
  # Hogwild: no lock around an update. With the same gradient from 8
  # threads x 25 updates each, every parameter must still end where 200
  # sequential updates put it when lost updates cannot change it: a
  # gradient of 0 in one array leaves it exactly as it was, and the
  # statistics of a constant gradient converge to d^2 whatever the order.
  import threading  # pylint: disable=g-import-not-at-top
  variables = [tf.Variable(np.ones(1000, np.float32)),
               tf.Variable(np.full(10, 5.0, np.float32))]
  rmsprop = optimizer.SharedRMSProp(variables, 0.5, 0.1)
  gradients = [np.full(1000, 2.0, np.float32), np.zeros(10, np.float32)]

  def work():
    for _ in range(25):
      rmsprop.apply(gradients, 1e-3)

  threads = [threading.Thread(target=work) for _ in range(8)]
  for thread in threads:
    thread.start()
  for thread in threads:
    thread.join()
  np.testing.assert_array_equal(variables[1].numpy(), 5.0)
  np.testing.assert_allclose(rmsprop.mean_squares[0].numpy(), 4.0, rtol=1e-5)
  # Each update moved the first array down by 1e-3 * 2 / sqrt(g + 0.1) with
  # g in [2, 4]: at least 200 such steps unless updates were lost.
  moved = 1.0 - variables[0].numpy()
  assert np.all(moved >= 200 * 2e-3 / math.sqrt(4.1) * 0.5)
  assert np.all(moved <= 200 * 2e-3 / math.sqrt(2.1) + 1e-4)


def test_the_learning_rate_anneals_linearly_to_zero():
  assert optimizer.annealed_learning_rate(1e-3, 0, 1000) == 1e-3
  assert optimizer.annealed_learning_rate(1e-3, 250, 1000) == pytest.approx(
      7.5e-4)
  assert optimizer.annealed_learning_rate(1e-3, 1000, 1000) == 0.0
  assert optimizer.annealed_learning_rate(1e-3, 5000, 1000) == 0.0
  assert optimizer.annealed_learning_rate(1e-3, 5000, None) == 1e-3


def test_the_config_names_bad_values():
  with pytest.raises(ValueError, match='--t_max=0'):
    A3CConfig(t_max=0).validate()
  with pytest.raises(ValueError, match='--rmsprop_epsilon'):
    A3CConfig(rmsprop_epsilon=0.0).validate()
  with pytest.raises(ValueError, match='--mlp_hidden_sizes'):
    A3CConfig(mlp_hidden_sizes='200,x').validate()
  assert A3CConfig().entropy_weight(continuous=False) == 0.01
  assert A3CConfig().entropy_weight(continuous=True) == 1e-4
  assert A3CConfig(entropy_cost=0.05).entropy_weight(continuous=True) == 0.05
