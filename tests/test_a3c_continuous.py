"""A3C on a bounded 1-D Box action space: gym:Pendulum-v1 (torque in
[-2, 2]), resolved by `environments.resolve_any` as the A3C program does,
with the builder's network, parameter server, worker and evaluator.

Checked against a float64 numpy forward and backward pass written from A3C
Supp. §9 and Algorithm S3: the policy is a spherical Gaussian (mean a linear
layer, variance a SoftPlus of one, the value a separate network) whose
outputs on real Pendulum observations match the numpy ones; a worker's
actions, redrawn from its seed and the parameters of each rollout, are the
Gaussian's samples clipped to [-2, 2] (the policy is made wide enough that
clipping happens); the loss, its parts and the gradient each rollout sends,
and the shared RMSProp step the server takes with it, match the numpy ones
computed from the unclipped samples; the evaluator acts with the mean,
clipped to the bounds.
"""

import math
from typing import Dict, List

import acme
import dm_env
import numpy as np
import pytest
import tensorflow as tf

from agents.envs import environments
from agents.a3c import networks
from agents.a3c.builder import A3CBuilder
from agents.a3c.config import A3CConfig
from agents.a3c.presets import PAPER
from agents.a3c.learning import POLICY
from test_a3c_worker import Recording  # The server, its calls recorded.

ENV = 'gym:Pendulum-v1'
EPISODE_LENGTH = 200  # Pendulum-v1's time limit.
T_MAX = 5
BETA = 1e-4  # Supp. §9's entropy weight for continuous actions.


def make_builder() -> A3CBuilder:
  config = paper_config(t_max=T_MAX, learning_rate=0.01, mlp_hidden_sizes='6')
  config.validate()
  return A3CBuilder(config, environments.resolve_any(ENV))


def paper_config(**values) -> A3CConfig:
  """The paper's algorithm (`--preset=paper`), whose networks `forward`
  computes, with `values` changed."""
  return A3CConfig(**{**PAPER, **values})


def by_name(network, values) -> Dict[str, np.ndarray]:
  """{'mean/w', 'policy_torso/mlp/linear_0/b', ...}: each value by the
  name of its variable in `network`, in float64."""
  return {variable.name.split(':')[0].split('/', 1)[1]:
          np.asarray(value, np.float64)
          for variable, value in zip(network.trainable_variables, values)}


def softplus(z):
  return np.logaddexp(0.0, z)


def forward(p: Dict[str, np.ndarray], x: np.ndarray) -> Dict[str, np.ndarray]:
  """Supp. §9's networks, in numpy: a policy torso, mean and variance heads;
  a value torso and head, sharing nothing with the policy."""
  pre = x @ p['policy_torso/mlp/linear_0/w'] + p['policy_torso/mlp/linear_0/b']
  hidden = np.maximum(pre, 0.0)
  z = (hidden @ p['variance/w'] + p['variance/b'])[:, 0]
  value_pre = (x @ p['value_torso/mlp/linear_0/w'] +
               p['value_torso/mlp/linear_0/b'])
  value_hidden = np.maximum(value_pre, 0.0)
  return dict(
      x=x, pre=pre, hidden=hidden, z=z, value_pre=value_pre,
      value_hidden=value_hidden,
      mean=hidden @ p['mean/w'] + p['mean/b'],
      variance=softplus(z),
      value=(value_hidden @ p['value/w'] + p['value/b'])[:, 0])


def reference_update(p, observations, samples, rewards, discounts,
                     value_cost=1.0, max_norm=40.0):
  """(loss parts, clipped gradient by name) of one rollout: T steps from
  observations[:T], bootstrapped from V(observations[T])."""
  f = forward(p, observations)
  steps = len(samples)
  returns = np.zeros(steps)
  following = f['value'][steps]
  for i in reversed(range(steps)):
    following = rewards[i] + discounts[i] * following
    returns[i] = following
  mean, variance = f['mean'][:steps], f['variance'][:steps]
  value = f['value'][:steps]
  advantage = returns - value
  squared = ((samples - mean)**2).sum(axis=-1)
  dims = samples.shape[-1]
  log_prob = -0.5 * (squared / variance + dims * np.log(2 * math.pi * variance))
  entropy = 0.5 * dims * (np.log(2 * math.pi * variance) + 1)
  parts = dict(policy_loss=-(log_prob * advantage).sum(),
               value_loss=(advantage**2).sum(), entropy=entropy.mean(),
               advantage=advantage.mean())
  parts['loss'] = (parts['policy_loss'] - BETA * entropy.sum() +
                   value_cost * parts['value_loss'])

  # Backward, the advantage a constant in the policy's part.
  d_mean = -advantage[:, None] * (samples - mean) / variance[:, None]
  d_variance = (-advantage * (0.5 * squared / variance**2 - dims /
                              (2 * variance)) - BETA * dims / (2 * variance))
  d_z = d_variance / (1 + np.exp(-f['z'][:steps]))  # softplus' = sigmoid.
  d_value = -2 * value_cost * advantage
  hidden, value_hidden = f['hidden'][:steps], f['value_hidden'][:steps]
  d_hidden = d_mean @ p['mean/w'].T + d_z[:, None] @ p['variance/w'].T
  d_pre = d_hidden * (f['pre'][:steps] > 0)
  d_value_hidden = d_value[:, None] @ p['value/w'].T
  d_value_pre = d_value_hidden * (f['value_pre'][:steps] > 0)
  x = observations[:steps]
  gradients = {
      'policy_torso/mlp/linear_0/w': x.T @ d_pre,
      'policy_torso/mlp/linear_0/b': d_pre.sum(axis=0),
      'mean/w': hidden.T @ d_mean, 'mean/b': d_mean.sum(axis=0),
      'variance/w': hidden.T @ d_z[:, None], 'variance/b': np.array([d_z.sum()]),
      'value_torso/mlp/linear_0/w': x.T @ d_value_pre,
      'value_torso/mlp/linear_0/b': d_value_pre.sum(axis=0),
      'value/w': value_hidden.T @ d_value[:, None],
      'value/b': np.array([d_value.sum()]),
  }
  norm = math.sqrt(sum((g**2).sum() for g in gradients.values()))
  parts['gradient_norm'] = norm
  scale = min(1.0, max_norm / norm)
  return parts, {name: g * scale for name, g in gradients.items()}


class Recorded(dm_env.Environment):
  """A real environment, with every observation, action and timestep it
  gave or took recorded."""

  def __init__(self, environment: dm_env.Environment):
    self._environment = environment
    self.observations: List[np.ndarray] = []
    self.actions: List[np.ndarray] = []
    self.rewards: List[float] = []
    self.discounts: List[float] = []

  def reset(self):
    timestep = self._environment.reset()
    self.observations.append(timestep.observation)
    return timestep

  def step(self, action):
    self.actions.append(np.array(action, copy=True))
    timestep = self._environment.step(action)
    self.observations.append(timestep.observation)
    self.rewards.append(float(timestep.reward))
    self.discounts.append(float(timestep.discount))
    return timestep

  def observation_spec(self):
    return self._environment.observation_spec()

  def action_spec(self):
    return self._environment.action_spec()

  def close(self):
    self._environment.close()


class Quiet(acme.utils.loggers.Logger):

  def write(self, data):
    del data

  def close(self):
    pass


def pendulum_observations(count: int) -> np.ndarray:
  environment = make_builder().environment.make_environment(seed=4)
  rng = np.random.default_rng(4)
  observations = [environment.reset().observation]
  while len(observations) < count:
    action = rng.uniform(-2, 2, size=1).astype(np.float32)
    observations.append(environment.step(action).observation)
  environment.close()
  return np.stack(observations)


def test_pendulum_gets_a_spherical_gaussian_over_one_bounded_dimension():
  builder = make_builder()
  assert builder.environment.kind == 'gym' and builder.continuous
  actions = builder.environment.spec.actions
  assert actions.shape == (1,) and actions.dtype == np.float32
  assert (actions.minimum, actions.maximum) == (-2.0, 2.0)
  tf.random.set_seed(0)
  network = builder.make_network()
  assert isinstance(network, networks.GaussianPolicyValueNetwork)
  observations = pendulum_observations(12)
  outputs = network(observations)
  assert isinstance(outputs.policy, networks.SphericalGaussian)
  assert outputs.policy.mean.shape == (12, 1)
  assert outputs.policy.variance.shape == (12,)
  assert outputs.value.shape == (12,)
  expected = forward(by_name(network, [v.numpy() for v in
                                       network.trainable_variables]),
                     observations.astype(np.float64))
  np.testing.assert_allclose(outputs.policy.mean.numpy(), expected['mean'],
                             rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(outputs.policy.variance.numpy(),
                             expected['variance'], rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(outputs.value.numpy(), expected['value'],
                             rtol=1e-5, atol=1e-6)
  assert np.all(expected['variance'] > 0)


def test_a_bounded_mean_is_the_linear_mean_mapped_by_tanh_onto_the_bounds():
  config = paper_config(t_max=T_MAX, mlp_hidden_sizes='6', bounded_mean=True)
  config.validate()
  builder = A3CBuilder(config, environments.resolve_any(ENV))
  tf.random.set_seed(0)
  network = builder.make_network()
  observations = pendulum_observations(12)
  network(observations)  # Creates the variables.
  # Mean weights large enough that the linear mean leaves [-2, 2] far.
  for variable in network.trainable_variables:
    if variable.name.split('/')[1] == 'mean':
      variable.assign(variable * 50.0)
  outputs = network(observations)
  expected = forward(by_name(network, [v.numpy() for v in
                                       network.trainable_variables]),
                     observations.astype(np.float64))
  assert np.abs(expected['mean']).max() > 2.0  # The linear mean leaves.
  # Supp. §9's linear mean, then tanh onto [-2, 2]: 0 + 2 tanh(mean).
  np.testing.assert_allclose(outputs.policy.mean.numpy(),
                             2.0 * np.tanh(expected['mean']), rtol=1e-5,
                             atol=1e-6)
  assert np.abs(outputs.policy.mean.numpy()).max() <= 2.0
  np.testing.assert_allclose(outputs.policy.variance.numpy(),
                             expected['variance'], rtol=1e-5, atol=1e-6)


def test_a_state_independent_variance_is_one_parameter_from_half_the_range():
  config = paper_config(t_max=T_MAX, mlp_hidden_sizes='6',
                     state_independent_variance=True)
  config.validate()
  builder = A3CBuilder(config, environments.resolve_any(ENV))
  tf.random.set_seed(0)
  network = builder.make_network()
  observations = pendulum_observations(12)
  outputs = network(observations)
  # Pendulum's torques lie in [-2, 2]: sigma starts at 2, in every state.
  np.testing.assert_allclose(outputs.policy.variance.numpy(),
                             np.full(12, 4.0), rtol=1e-6)
  names = [variable.name for variable in network.trainable_variables]
  assert not any('/variance/' in name for name in names), names
  (log_stddev,) = [variable for variable in network.trainable_variables
                   if 'log_stddev' in variable.name]
  log_stddev.assign(math.log(0.5))
  np.testing.assert_allclose(network(observations).policy.variance.numpy(),
                             np.full(12, 0.25), rtol=1e-6)
  # The log-probability of an action reaches the parameter: d/d(log sigma)
  # of log N(a; mu, sigma^2) = (a - mu)^2 / sigma^2 - 1, summed.
  actions = tf.zeros((12, 1))
  with tf.GradientTape() as tape:
    policy = network(observations).policy
    log_probs = tf.reduce_sum(policy.log_prob(actions))
  gradient = tape.gradient(log_probs, log_stddev).numpy()
  means = policy.mean.numpy()[:, 0].astype(np.float64)
  expected = np.sum(means**2 / 0.25 - 1.0)
  assert gradient == pytest.approx(expected, rel=1e-4)
  # `--initial_stddev_scale`: a fraction of the half range, 2 * 0.3.
  config = paper_config(t_max=T_MAX, mlp_hidden_sizes='6',
                        state_independent_variance=True,
                        initial_stddev_scale=0.3)
  network = A3CBuilder(config, environments.resolve_any(ENV)).make_network()
  np.testing.assert_allclose(network(observations).policy.variance.numpy(),
                             np.full(12, 0.36), rtol=1e-5)


def test_a_pendulum_worker_acts_in_bounds_and_sends_the_numpy_gradient():
  builder = make_builder()
  config = builder.config
  tf.random.set_seed(1)
  server = builder.make_learner()
  # A wide policy (variance about softplus(3) = 3.05, sigma 1.75): many
  # samples fall outside [-2, 2].
  for variable in server._network.trainable_variables:  # pylint: disable=protected-access
    if variable.name.endswith('variance/b:0'):
      variable.assign([3.0])
  recording = Recording(server)
  worker = builder.make_worker(recording, seed=7)
  environment = Recorded(builder.environment.make_environment(seed=0))
  acme.EnvironmentLoop(environment, worker, logger=Quiet()).run_episode()

  # One episode, cut by the time limit, learned from in rollouts of t_max.
  assert len(environment.actions) == EPISODE_LENGTH
  assert environment.discounts == [1.0] * EPISODE_LENGTH  # No terminal.
  assert [call['steps'] for call in recording.calls] == (
      [T_MAX] * (EPISODE_LENGTH // T_MAX))
  assert server.environment_steps == EPISODE_LENGTH
  observations = np.stack(environment.observations).astype(np.float64)

  rng = np.random.default_rng(7)  # The worker's generator.
  clipped = 0
  mean_squares = None
  for index, call in enumerate(recording.calls):
    start, end = index * T_MAX, (index + 1) * T_MAX
    params = by_name(server._network, call['before'])  # pylint: disable=protected-access
    policy = forward(params, observations[start:end])
    # The samples, redrawn: mean + sqrt(variance) * one normal draw a step.
    samples = np.stack([
        policy['mean'][i] + math.sqrt(policy['variance'][i]) *
        rng.standard_normal(1) for i in range(T_MAX)])
    actions = np.stack(environment.actions[start:end])
    assert actions.shape == (T_MAX, 1) and actions.dtype == np.float32
    assert np.all((-2.0 <= actions) & (actions <= 2.0))
    np.testing.assert_allclose(actions, np.clip(samples, -2.0, 2.0),
                               rtol=1e-5, atol=1e-5, err_msg=f'rollout {index}')
    clipped += int(np.sum(np.abs(samples) > 2.0))

    # The loss of the unclipped samples, bootstrapped from V(s_end).
    discounts = config.discount * np.asarray(environment.discounts[start:end])
    parts, gradients = reference_update(
        params, observations[start:end + 1], samples,
        np.asarray(environment.rewards[start:end]), discounts,
        config.value_cost, config.max_gradient_norm)
    statistics = call['statistics']
    for name, value in parts.items():
      assert statistics[name] == pytest.approx(value, rel=1e-4, abs=1e-4), (
          index, name)
    sent = by_name(server._network, call['gradients'])  # pylint: disable=protected-access
    for name, gradient in gradients.items():
      np.testing.assert_allclose(sent[name], gradient, rtol=1e-3, atol=1e-5,
                                 err_msg=f'rollout {index}: {name}')

    # Shared RMSProp (Supp. §7, Eq. S2-S3) at the constant rate (no step
    # budget to anneal over).
    if mean_squares is None:
      mean_squares = {name: np.zeros_like(p) for name, p in params.items()}
    after = by_name(server._network, call['after'])  # pylint: disable=protected-access
    for name, gradient in gradients.items():
      mean_squares[name] = (config.rmsprop_decay * mean_squares[name] +
                            (1 - config.rmsprop_decay) * gradient**2)
      theta = params[name] - config.learning_rate * gradient / np.sqrt(
          mean_squares[name] + config.rmsprop_epsilon)
      np.testing.assert_allclose(after[name], theta, rtol=1e-4, atol=1e-6,
                                 err_msg=f'rollout {index}: {name}')
  # Clipping happened, and the loss took the samples, not what the
  # environment got (a loss of the clipped actions would differ).
  assert clipped >= 10, clipped
  assert np.sum(np.abs(np.stack(environment.actions)) == 2.0) == clipped


def test_the_evaluator_acts_with_the_mean_inside_the_bounds():
  builder = make_builder()
  tf.random.set_seed(2)
  server = builder.make_learner()
  observations = pendulum_observations(8).astype(np.float32)
  for bias, expected in ((0.0, None), (6.0, 2.0), (-6.0, -2.0)):
    for variable in server._network.trainable_variables:  # pylint: disable=protected-access
      if variable.name.endswith('mean/b:0'):
        variable.assign([bias])
    evaluator = builder.make_actor(server, exploration=0.0)
    mode = networks.ModePolicy(server._network,  # pylint: disable=protected-access
                               builder.environment.spec.actions)
    params = by_name(server._network, server.get_variables([POLICY])[0])  # pylint: disable=protected-access
    mean = forward(params, observations.astype(np.float64))['mean']
    for observation, row in zip(observations, mean):
      action = evaluator.select_action(observation)
      assert action.shape == (1,) and action.dtype == np.float32
      if expected is None:
        assert np.all(np.abs(row) < 2.0)  # Inside the bounds: the mean.
        np.testing.assert_allclose(action, row, rtol=1e-5, atol=1e-6)
      else:
        assert np.all(np.sign(row) == np.sign(expected))
        assert np.all(np.abs(row) > 2.0)
        np.testing.assert_array_equal(action, [expected])
      np.testing.assert_array_equal(mode(observation[None]).numpy()[0],
                                    action)
