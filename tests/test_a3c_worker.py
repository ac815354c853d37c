"""The A3C worker and the shared parameters, end to end in one process: a
worker driven by `acme.EnvironmentLoop` sends, after t_max steps and at the
end of an episode, exactly the gradient that a float64 numpy forward and
backward pass of Algorithm S3 computes from the shared parameters, and the
parameter server applies it with shared RMSProp at the annealed rate."""

import math
from typing import Dict, List

import acme
import dm_env
import numpy as np
import pytest
import tensorflow as tf
from acme import specs
from acme.tf import utils as tf2_utils

from agents import actor_loop
from agents.a3c import losses as losses_lib
from agents.a3c import networks
from agents.a3c.actor import A3CActor
from agents.a3c.config import A3CConfig
from agents.a3c.presets import PAPER
from agents.a3c.learning import POLICY
from agents.a3c.learning import A3CParameterServer
from agents.networks.torsos import MLPTorso

OBS_DIM, HIDDEN, NUM_ACTIONS = 3, 4, 2
EPISODE_LENGTH = 7  # Rollouts of 5 (bootstrapped) and 2 (terminal) steps.
OBSERVATION_SPEC = specs.Array((OBS_DIM,), np.float32)
ACTION_SPEC = specs.DiscreteArray(NUM_ACTIONS)


class ScriptedEpisodes(dm_env.Environment):
  """Episodes of EPISODE_LENGTH steps, ending in a terminal state (or, if
  `truncated`, cut by a time limit), with fixed observations and rewards;
  records the actions it is given."""

  def __init__(self, truncated: bool = False):
    self._truncated = truncated
    rng = np.random.default_rng(5)
    self._observations = rng.normal(size=(EPISODE_LENGTH + 1, OBS_DIM)
                                    ).astype(np.float32)
    self._rewards = rng.normal(size=EPISODE_LENGTH)
    self.observations = self._observations
    self.rewards = self._rewards
    self.actions: List[int] = []
    self._t = 0

  def reset(self):
    self._t = 0
    return dm_env.restart(self._observations[0])

  def step(self, action):
    self.actions.append(int(action))
    self._t += 1
    observation = self._observations[self._t]
    reward = float(self._rewards[self._t - 1])
    if self._t == EPISODE_LENGTH:
      if self._truncated:
        return dm_env.truncation(reward, observation)
      return dm_env.termination(reward, observation)
    return dm_env.transition(reward, observation)

  def observation_spec(self):
    return OBSERVATION_SPEC

  def action_spec(self):
    return ACTION_SPEC


class Recording:
  """The parameter server as a worker sees it, with every call's
  parameters before and after and its gradients recorded."""

  def __init__(self, server: A3CParameterServer):
    self.server = server
    self.calls: List[Dict[str, object]] = []

  def get_variables(self, names):
    return self.server.get_variables(names)

  def apply_gradients(self, gradients, steps, statistics=None, worker=None,
                      targets=None):
    before = self.server.get_variables([POLICY])[0]
    after = self.server.apply_gradients(gradients, steps, statistics, worker,
                                        targets)
    self.calls.append(dict(before=before, gradients=gradients, steps=steps,
                           after=after, statistics=statistics, worker=worker,
                           targets=targets))
    return after


class RowLogger:
  """An acme logger that keeps the rows it is given."""

  def __init__(self):
    self.rows: List[Dict[str, float]] = []

  def write(self, row):
    self.rows.append(dict(row))

  def close(self):
    pass


def test_staleness_counts_the_other_workers_updates_since_a_pull():
  config = A3CConfig()
  rows = RowLogger()
  server = A3CParameterServer(_network(1), config, logger=rows, log_every=0.0)
  zeros = [np.zeros_like(v) for v in server.get_variables([POLICY])[0]]
  server.apply_gradients(zeros, 5, {}, worker='a')  # Sent version 1.
  for _ in range(3):
    server.apply_gradients(zeros, 5, {}, worker='b')
  server.apply_gradients(zeros, 5, {}, worker='a')
  server.apply_gradients(zeros, 5, {}, worker='b')
  server.apply_gradients(zeros, 5, {})  # Unnamed: not counted.
  assert [row.get('staleness') for row in rows.rows] == [
      None, None, 0, 0, 3, 1, None]


def _network(seed: int, popart: bool = False
             ) -> networks.DiscretePolicyValueNetwork:
  tf.random.set_seed(seed)
  network = networks.DiscretePolicyValueNetwork(MLPTorso([HIDDEN]),
                                                NUM_ACTIONS, popart=popart)
  tf2_utils.create_variables(network, [OBSERVATION_SPEC])
  return network


def _by_name(network, values) -> Dict[str, np.ndarray]:
  """{'linear_0/w', ..., 'value/b'}: each variable's value, by its layer
  (the variables the server sends, or with fewer values the trained ones,
  whose gradients a worker sends); with --popart the value layer is
  'normalized_value/w' and '.../b', and its statistics 'popart_value/mean'
  and 'popart_value/second_moment'."""
  variables = (network.variables if len(values) == len(network.variables)
               else network.trainable_variables)
  return {'/'.join(variable.name.split(':')[0].split('/')[-2:]):
          np.asarray(value, np.float64)
          for variable, value in zip(variables, values)}


def reference_gradients(params, observations, actions, rewards, discounts,
                        config: A3CConfig, advantage_scale: float = 1.0,
                        advantage_offset: float = 0.0):
  """Algorithm S3's accumulated gradient, by hand: forward and backward
  through relu(x W1 + b1) -> (logits, V), in float64; the policy term's
  advantages, less `advantage_offset`, multiplied by `advantage_scale`. With Pop-Art's parameters
  (`params` has 'popart_value/mean'), V = sigma n + mu with n the linear
  value layer's output, and the errors and advantages are (R - V) / sigma,
  sigma = sqrt(nu - mu^2): the gradients are at n."""
  w1, b1 = params['linear_0/w'], params['linear_0/b']
  wp, bp = params['policy_logits/w'], params['policy_logits/b']
  popart = 'popart_value/mean' in params
  value_layer = 'normalized_value' if popart else 'value'
  wv, bv = params[f'{value_layer}/w'], params[f'{value_layer}/b']
  mean, scale = 0.0, 1.0
  if popart:
    mean = float(params['popart_value/mean'])
    scale = math.sqrt(float(params['popart_value/second_moment']) - mean**2)
  pre = observations @ w1 + b1
  hidden = np.maximum(pre, 0.0)
  logits = hidden @ wp + bp
  values = scale * (hidden @ wv + bv)[:, 0] + mean
  steps = len(actions)
  returns = np.zeros(steps)
  following = values[-1]  # V(s_T); multiplied by 0 after a terminal step.
  for i in reversed(range(steps)):
    following = rewards[i] + discounts[i] * following
    returns[i] = following
  shifted = logits[:steps] - logits[:steps].max(axis=-1, keepdims=True)
  pi = np.exp(shifted) / np.exp(shifted).sum(axis=-1, keepdims=True)
  log_pi = np.log(pi)
  entropy = -(pi * log_pi).sum(axis=-1)
  advantages = (returns - values[:steps]) / scale
  beta = config.entropy_weight(continuous=False)
  zeros = np.zeros(steps)
  # The loss's three terms' gradients at the logits and the values (at n,
  # the value layer's output, with Pop-Art).
  reference_gradients.advantages = advantages
  reference_gradients.returns = returns
  parts = {'policy': ((pi - np.eye(NUM_ACTIONS)[actions]) * advantage_scale *
                      (advantages - advantage_offset)[:, None], zeros),
           'entropy': (beta * pi * (log_pi + entropy[:, None]), zeros),
           'value': (np.zeros_like(pi), -2.0 * config.value_cost * advantages)}

  def backward(d_logits, d_values):
    d_hidden = d_logits @ wp.T + d_values[:, None] @ wv.T
    d_pre = d_hidden * (pre[:steps] > 0)
    x = observations[:steps]
    return {
        'linear_0/w': x.T @ d_pre, 'linear_0/b': d_pre.sum(axis=0),
        'policy_logits/w': hidden[:steps].T @ d_logits,
        'policy_logits/b': d_logits.sum(axis=0),
        f'{value_layer}/w': hidden[:steps].T @ d_values[:, None],
        f'{value_layer}/b': np.array([d_values.sum()]),
    }

  def global_norm(gradients):
    return math.sqrt(sum((g**2).sum() for g in gradients.values()))

  gradients = backward(sum(d for d, _ in parts.values()),
                       sum(d for _, d in parts.values()))
  norm = global_norm(gradients)
  scale = min(1.0, config.max_gradient_norm / norm)
  reference_gradients.part_norms = {
      name: global_norm(backward(*part)) for name, part in parts.items()}
  return {name: g * scale for name, g in gradients.items()}, norm


def reference_rmsprop(theta, mean_square, gradient, learning_rate,
                      config: A3CConfig):
  mean_square = (config.rmsprop_decay * mean_square +
                 (1 - config.rmsprop_decay) * gradient**2)
  return (theta - learning_rate * gradient /
          np.sqrt(mean_square + config.rmsprop_epsilon), mean_square)


def _run(worker, environment, loop: str, episodes: int):
  """`episodes` episodes of the worker, in Acme's loop (which calls `update`
  before the next episode's `observe_first`) or in the program's actor loop
  (which starts the next episode first)."""
  if loop == 'acme':
    run = acme.EnvironmentLoop(environment, worker, should_update=True,
                               logger=_Quiet())
    for _ in range(episodes):
      run.run_episode()
    return
  run = actor_loop.VectorEnvironmentLoop([environment], worker)
  run.run(should_stop=lambda: len(environment.actions) >= (
      episodes * EPISODE_LENGTH))


def reference_rmsprop_step(mean_square, gradient, learning_rate,
                           config: A3CConfig):
  """The step reference_rmsprop takes and its scale, lr / sqrt(g + eps)."""
  mean_square = (config.rmsprop_decay * mean_square +
                 (1 - config.rmsprop_decay) * gradient**2)
  scale = learning_rate / np.sqrt(mean_square + config.rmsprop_epsilon)
  return scale * gradient, scale


@pytest.mark.parametrize('max_gradient_norm, loop, ending', [
    (40.0, 'acme', 'terminal'),
    (0.5, 'acme', 'terminal'),
    (40.0, 'vector', 'terminal'),
    (40.0, 'vector', 'time_limit'),
    (40.0, 'acme', 'time_limit'),
])
def test_a_worker_sends_algorithm_s3s_gradient(max_gradient_norm, loop,
                                               ending):
  # The gradient's parts are logged too (a lower clip: they would be
  # checked against unclipped ones the same way).
  # The paper's algorithm (Algorithm S3's value weight 1, RMSProp's
  # epsilon 0.1), its gradients against the reference's.
  config = A3CConfig(**{**PAPER, 't_max': 5, 'learning_rate': 0.01,
                        'max_gradient_norm': max_gradient_norm},
                     log_gradient_parts=True)
  total_steps = 100
  rows = RowLogger()
  server = A3CParameterServer(_network(1), config, total_steps=total_steps,
                              logger=rows, log_every=0.0)
  server_rows = rows.rows  # One a update (log_every 0).
  recording = Recording(server)
  # The worker's own copy starts elsewhere: it must act and learn with the
  # shared parameters (Algorithm S3 synchronises before each rollout).
  worker = A3CActor(_network(2), OBSERVATION_SPEC, ACTION_SPEC, config,
                    parameter_server=recording, seed=3)
  truncated = ending == 'time_limit'
  environment = ScriptedEpisodes(truncated=truncated)
  episodes = 2
  _run(worker, environment, loop, episodes)

  # Each episode: a rollout of t_max steps, bootstrapped from V(s_5), then
  # one of 2 that ends with the episode: cut at a terminal state, and
  # bootstrapped from the episode's own last state after a time limit.
  rollouts = [(0, 5), (5, 7)] * episodes
  assert [call['steps'] for call in recording.calls] == [5, 2] * episodes
  names = None
  mean_squares = None
  done = 0
  for index, (call, (start, end)) in enumerate(zip(recording.calls,
                                                  rollouts)):
    params = _by_name(server._network, call['before'])  # pylint: disable=protected-access
    names = list(params)
    discounts = np.full(end - start, config.discount)
    if end == EPISODE_LENGTH and not truncated:
      discounts[-1] = 0.0
    actions = environment.actions[index // 2 * EPISODE_LENGTH:][start:end]
    expected, norm = reference_gradients(
        params, environment.observations[start:end + 1].astype(np.float64),
        np.array(actions), environment.rewards[start:end], discounts, config)
    sent = _by_name(server._network, call['gradients'])  # pylint: disable=protected-access
    for name in names:
      np.testing.assert_allclose(sent[name], expected[name], rtol=2e-4,
                                 atol=1e-6, err_msg=f'update {index}: {name}')
    statistics = call['statistics']
    assert statistics['gradient_norm'] == pytest.approx(norm, rel=1e-4)
    assert statistics['clipped_gradient_norm'] == pytest.approx(
        min(norm, max_gradient_norm), rel=1e-4)
    for part, part_norm in reference_gradients.part_norms.items():
      assert statistics[f'{part}_gradient_norm'] == pytest.approx(
          part_norm, rel=1e-4, abs=1e-7), part
    if max_gradient_norm < 1.0:
      assert norm > max_gradient_norm  # The clipping was exercised.
    # The server's update: shared RMSProp at the annealed rate, T counting
    # the steps of the updates before this one.
    learning_rate = config.learning_rate * (1 - done / total_steps)
    done += end - start
    if mean_squares is None:
      mean_squares = {name: np.zeros_like(p) for name, p in params.items()}
    after = _by_name(server._network, call['after'])  # pylint: disable=protected-access
    steps, scales = [], []
    for name in names:
      step, scale = reference_rmsprop_step(mean_squares[name], sent[name],
                                           learning_rate, config)
      steps.append(step)
      scales.append(scale)
      theta, mean_squares[name] = reference_rmsprop(
          params[name], mean_squares[name], sent[name], learning_rate, config)
      np.testing.assert_allclose(after[name], theta, rtol=1e-5, atol=1e-7,
                                 err_msg=f'update {index}: {name}')
    # What the server logs of its update: the step's global norm and the
    # mean effective learning rate over every parameter.
    logged = server_rows[index]
    assert logged['update_norm'] == pytest.approx(
        math.sqrt(sum((step**2).sum() for step in steps)), rel=1e-4)
    assert logged['step_size'] == pytest.approx(
        np.concatenate([scale.ravel() for scale in scales]).mean(), rel=1e-5)
    # One worker: nothing else updates between its pulls.
    assert logged.get('staleness') == (None if index == 0 else 0)
  # The worker continues with the newest parameters.
  for variable, value in zip(worker._variables, recording.calls[-1]['after']):  # pylint: disable=protected-access
    np.testing.assert_array_equal(variable.numpy(), value)
  assert server.num_steps == 2 * episodes
  assert server.environment_steps == EPISODE_LENGTH * episodes


def _check_each_rollouts_gradient(config: A3CConfig, reference_arguments):
  """Runs a worker of `config` for 2 episodes and checks the gradient of
  each of its rollouts against the reference's, called with the keyword
  arguments `reference_arguments(earlier)` gives, `earlier` the earlier
  rollouts' advantages, in order. Returns each rollout's (statistics sent,
  arguments)."""
  server = A3CParameterServer(_network(1), config, total_steps=100)
  recording = Recording(server)
  worker = A3CActor(_network(2), OBSERVATION_SPEC, ACTION_SPEC, config,
                    parameter_server=recording, seed=3)
  environment = ScriptedEpisodes()
  _run(worker, environment, 'actor_loop', 2)
  rollouts = [(0, 5), (5, 7)] * 2
  earlier: List[np.ndarray] = []
  checked = []
  for index, (call, (start, end)) in enumerate(zip(recording.calls,
                                                  rollouts)):
    arguments = reference_arguments(earlier)
    params = _by_name(server._network, call['before'])  # pylint: disable=protected-access
    discounts = np.full(end - start, config.discount)
    if end == EPISODE_LENGTH:
      discounts[-1] = 0.0
    actions = environment.actions[index // 2 * EPISODE_LENGTH:][start:end]
    expected, _ = reference_gradients(
        params, environment.observations[start:end + 1].astype(np.float64),
        np.array(actions), environment.rewards[start:end], discounts, config,
        **arguments)
    earlier.append(reference_gradients.advantages)
    sent = _by_name(server._network, call['gradients'])  # pylint: disable=protected-access
    for name in sent:
      np.testing.assert_allclose(sent[name], expected[name], rtol=2e-4,
                                 atol=1e-6, err_msg=f'update {index}: {name}')
    checked.append((call['statistics'], arguments))
  return checked


def test_normalised_advantages_are_over_the_earlier_rollouts_root_mean_square():
  # --normalize_advantages: each rollout's policy term takes its advantages
  # times 1 / sqrt(m), m the average of the earlier rollouts' mean squared
  # advantages weighted 0.99^age (the weights summing to 1); the first
  # rollout's are left as they are.
  def scale(earlier):
    if not earlier:
      return {'advantage_scale': 1.0}
    weights = 0.99**np.arange(len(earlier))[::-1]
    mean_squares = [np.mean(advantages**2) for advantages in earlier]
    return {'advantage_scale': 1 / math.sqrt(
        np.dot(weights, mean_squares) / weights.sum())}

  checked = _check_each_rollouts_gradient(
      A3CConfig(t_max=5, learning_rate=0.01, normalize_advantages=True),
      scale)
  for statistics, arguments in checked:
    assert statistics['advantage_scale'] == pytest.approx(
        arguments['advantage_scale'], rel=1e-5)
  # The scale moved: the check above is not of 1s alone.
  assert min(abs(arguments['advantage_scale'] - 1.0)
             for _, arguments in checked[1:]) > 0.01


def test_centred_advantages_are_less_the_earlier_rollouts_mean_step_by_step():
  # --center_advantages: each rollout's policy term takes its advantages
  # less m, the mean of the earlier rollouts' advantages, each advantage
  # weighted 0.99^(rollouts since its own); the first rollout's are left
  # as they are.
  def offset(earlier):
    weights = [0.99**(len(earlier) - 1 - age) for age in range(len(earlier))]
    total = sum(w * a.sum() for w, a in zip(weights, earlier))
    count = sum(w * len(a) for w, a in zip(weights, earlier))
    return {'advantage_offset': total / count if earlier else 0.0}

  checked = _check_each_rollouts_gradient(
      A3CConfig(t_max=5, learning_rate=0.01, center_advantages=True), offset)
  for statistics, arguments in checked:
    assert statistics['advantage_offset'] == pytest.approx(
        arguments['advantage_offset'], rel=1e-5, abs=1e-7)
  assert min(abs(arguments['advantage_offset'])
             for _, arguments in checked[1:]) > 0.01


def _hand_moved_statistics(mean, second_moment, targets, beta):
  """Pop-Art's moving averages of the returns and their squares, one
  target at a time (van Hasselt et al. 2016, Algorithm 1)."""
  for target in targets:
    mean = (1 - beta) * mean + beta * target
    second_moment = (1 - beta) * second_moment + beta * target**2
  return mean, second_moment


def test_with_popart_a_worker_learns_in_the_returns_units_and_the_server_keeps_v():
  # --popart: the server's statistics start at mu 3, nu 13 (sigma 2). Each
  # rollout's gradient is the reference's with V = sigma n + mu and errors
  # (R - V) / sigma; the server moves mu and nu by the rollout's returns,
  # rescales the value layer so that V is unchanged, then takes the
  # RMSProp step on the gradient.
  beta = 0.05  # Large, so that the statistics move visibly in 4 rollouts.
  config = A3CConfig(t_max=5, learning_rate=0.01, popart=True,
                     popart_step_size=beta)
  network = _network(1, popart=True)
  head = networks.popart_head(network)
  head.mean.assign(3.0)
  head.second_moment.assign(13.0)
  server = A3CParameterServer(network, config, total_steps=100)
  recording = Recording(server)
  worker = A3CActor(_network(2, popart=True), OBSERVATION_SPEC, ACTION_SPEC,
                    config, parameter_server=recording, seed=3)
  environment = ScriptedEpisodes()
  _run(worker, environment, 'acme', 2)
  rollouts = [(0, 5), (5, 7)] * 2
  mean, second_moment = 3.0, 13.0
  mean_squares, done = None, 0
  for index, (call, (start, end)) in enumerate(zip(recording.calls,
                                                  rollouts)):
    params = _by_name(network, call['before'])
    assert params['popart_value/mean'] == pytest.approx(mean, rel=1e-6)
    discounts = np.full(end - start, config.discount)
    if end == EPISODE_LENGTH:
      discounts[-1] = 0.0
    actions = environment.actions[index // 2 * EPISODE_LENGTH:][start:end]
    observations = environment.observations[start:end + 1].astype(np.float64)
    expected, _ = reference_gradients(
        params, observations, np.array(actions),
        environment.rewards[start:end], discounts, config)
    sent = _by_name(network, call['gradients'])
    assert set(sent) == set(expected)
    for name in sent:
      np.testing.assert_allclose(sent[name], expected[name], rtol=2e-4,
                                 atol=1e-6, err_msg=f'update {index}: {name}')
    np.testing.assert_allclose(call['targets'], reference_gradients.returns,
                               rtol=1e-5)
    # The statistics, by hand; the value layer rescaled to keep V.
    scale = math.sqrt(second_moment - mean**2)
    new_mean, second_moment = _hand_moved_statistics(
        mean, second_moment, reference_gradients.returns, beta)
    new_scale = math.sqrt(second_moment - new_mean**2)
    kept = dict(params)
    kept['normalized_value/w'] = params['normalized_value/w'] * (
        scale / new_scale)
    kept['normalized_value/b'] = (scale * params['normalized_value/b'] +
                                  mean - new_mean) / new_scale
    mean = new_mean
    after = _by_name(network, call['after'])
    assert after['popart_value/mean'] == pytest.approx(mean, rel=1e-5)
    assert after['popart_value/second_moment'] == pytest.approx(
        second_moment, rel=1e-5)
    learning_rate = config.learning_rate * (1 - done / 100)
    done += end - start
    if mean_squares is None:
      mean_squares = {name: np.zeros_like(g) for name, g in sent.items()}
    for name in sent:
      theta, mean_squares[name] = reference_rmsprop(
          kept[name], mean_squares[name], sent[name], learning_rate, config)
      np.testing.assert_allclose(after[name], theta, rtol=1e-4, atol=1e-6,
                                 err_msg=f'update {index}: {name}')
  assert abs(mean - 3.0) > 0.1  # The statistics moved.


def test_the_first_action_comes_from_the_shared_parameters():
  config = A3CConfig()
  server = A3CParameterServer(_network(1), config)
  worker = A3CActor(_network(2), OBSERVATION_SPEC, ACTION_SPEC, config,
                    parameter_server=server, seed=3)
  worker.observe_first(ScriptedEpisodes().reset())
  for mine, shared in zip(worker._variables, server.get_variables([POLICY])[0]):  # pylint: disable=protected-access
    np.testing.assert_array_equal(mine.numpy(), shared)


def test_an_evaluator_takes_the_most_likely_action_and_does_not_learn():
  config = A3CConfig()
  network = _network(1)
  evaluator = A3CActor(network, OBSERVATION_SPEC, ACTION_SPEC, config)
  environment = ScriptedEpisodes()
  acme.EnvironmentLoop(environment, evaluator, logger=_Quiet()).run_episode()
  logits = network(environment.observations[:EPISODE_LENGTH]).policy.logits
  assert environment.actions == list(np.argmax(logits.numpy(), axis=-1))


def test_an_evaluator_of_several_environments_acts_for_a_batch_per_row():
  config = A3CConfig()
  network = _network(1)
  rng = np.random.default_rng(0)
  observations = rng.normal(size=(64, OBS_DIM)).astype(np.float32)
  greedy = np.argmax(network(observations).policy.logits.numpy(), axis=-1)
  assert len(set(greedy.tolist())) == NUM_ACTIONS  # Not a constant policy.
  # Three greedy environments: row i's action is row i's most likely one.
  evaluator = A3CActor(network, OBSERVATION_SPEC, ACTION_SPEC, config,
                       epsilon=[0.0] * 3)
  assert evaluator.num_environments == 3
  for first in range(0, 63, 3):
    np.testing.assert_array_equal(
        evaluator.select_actions(observations[first:first + 3]),
        greedy[first:first + 3])
  # Epsilon per environment: row 0 always random, row 1 never.
  evaluator = A3CActor(network, OBSERVATION_SPEC, ACTION_SPEC, config,
                       epsilon=[1.0, 0.0], seed=2)
  rows = np.stack([evaluator.select_actions(observations[:2])
                   for _ in range(400)])
  assert np.all(rows[:, 1] == greedy[1])
  # Uniform over 2 actions: 400 draws, within 5 standard deviations (of 10).
  assert abs(np.sum(rows[:, 0] == greedy[0]) - 200) < 50
  # A learning worker acts in one environment.
  with pytest.raises(ValueError, match='one environment'):
    A3CActor(network, OBSERVATION_SPEC, ACTION_SPEC, config,
             parameter_server=A3CParameterServer(_network(1), config),
             epsilon=[0.0, 0.0])


class _Quiet(acme.utils.loggers.Logger):
  """Acme's loop logs every episode; these tests read nothing of it."""

  def write(self, data):
    del data

  def close(self):
    pass


CONTINUOUS_SPEC = specs.BoundedArray((2,), np.float32, -0.1, 0.1)


class ScriptedContinuous(ScriptedEpisodes):
  """The same episodes with a 2-D action inside [-0.1, 0.1]."""

  def step(self, action):
    action = np.asarray(action)
    assert action.shape == (2,) and np.all(np.abs(action) <= 0.1 + 1e-7)
    timestep = super().step(0)
    self.actions[-1] = action
    return timestep

  def action_spec(self):
    return CONTINUOUS_SPEC


def test_a_gaussian_worker_learns_from_its_samples_and_acts_inside_bounds():
  # Supp. §9's policy: the gradient is that of the sampled actions' log
  # probabilities, while the environment gets them clipped to its bounds.
  config = A3CConfig(t_max=5, learning_rate=0.01)

  def network(seed):
    tf.random.set_seed(seed)
    made = networks.GaussianPolicyValueNetwork([HIDDEN], action_dims=2)
    tf2_utils.create_variables(made, [OBSERVATION_SPEC])
    return made

  server = A3CParameterServer(network(1), config)
  recording = Recording(server)
  worker = A3CActor(network(2), OBSERVATION_SPEC, CONTINUOUS_SPEC, config,
                    parameter_server=recording, seed=4)
  environment = ScriptedContinuous()
  acme.EnvironmentLoop(environment, worker, logger=_Quiet()).run_episode()
  assert [call['steps'] for call in recording.calls] == [5, 2]

  # The samples, redrawn: the worker's generator (seed 4) draws one normal
  # vector per step, mean + sqrt(variance) * noise, with the parameters of
  # its rollout.
  rng = np.random.default_rng(4)
  reference = network(3)
  samples = []
  for call, (start, end) in zip(recording.calls, [(0, 5), (5, 7)]):
    for variable, value in zip(reference.trainable_variables, call['before']):
      variable.assign(value)
    policy = reference(environment.observations[start:end]).policy
    noise = rng.standard_normal((end - start, 2))
    rollout = (policy.mean.numpy() + np.sqrt(policy.variance.numpy())[:, None]
               * noise)
    samples.append(rollout)
    np.testing.assert_allclose(np.stack(environment.actions[start:end]),
                               np.clip(rollout, -0.1, 0.1), rtol=1e-5,
                               atol=1e-6)
    assert np.any(np.abs(rollout) > 0.1)  # Clipping mattered here.
    discounts = np.full(end - start, config.discount, np.float32)
    if end == EPISODE_LENGTH:
      discounts[-1] = 0.0
    with tf.GradientTape() as tape:
      outputs = reference(environment.observations[start:end + 1])
      returns = losses_lib.n_step_returns(
          environment.rewards[start:end].astype(np.float32), discounts,
          tf.stop_gradient(outputs.value[-1]))
      taken = tf.nest.map_structure(lambda x: x[:-1], outputs)
      loss, _ = losses_lib.a3c_loss(taken, tf.constant(rollout, tf.float32),
                                    tf.stop_gradient(returns), 1e-4,
                                    config.value_cost)
    expected = tape.gradient(loss, reference.trainable_variables)
    expected, _ = tf.clip_by_global_norm(expected, config.max_gradient_norm)
    for sent, wanted in zip(call['gradients'], expected):
      np.testing.assert_allclose(sent, wanted.numpy(), rtol=1e-4, atol=1e-6)


def test_the_builders_parts_run_in_acmes_loop_in_one_process():
  # The README's "Inside your own Acme code": A3C without the program.
  from agents.envs import environments  # pylint: disable=g-import-not-at-top
  from agents.a3c.builder import A3CBuilder  # pylint: disable=g-import-not-at-top
  environment = environments.resolve_any('gym:CartPole-v1')
  config = A3CConfig(mlp_hidden_sizes='32')
  builder = A3CBuilder(config, environment, max_actor_steps=10_000)
  server = builder.make_learner()
  worker = builder.make_worker(server, seed=0)
  counter = acme.utils.counting.Counter()
  loop = acme.EnvironmentLoop(environment.make_environment(seed=0), worker,
                              counter=counter, logger=_Quiet())
  for _ in range(3):
    loop.run_episode()
  steps = counter.get_counts()['steps']
  # Every step went into an update (episodes end with their rollouts), in
  # rollouts of at most t_max steps; the rate has annealed by T.
  assert server.environment_steps == steps
  assert steps / config.t_max <= server.num_steps <= steps
  assert server.learning_rate == pytest.approx(
      config.learning_rate * (1 - steps / 10_000))
  evaluator = builder.make_actor(server, exploration=0.0)
  acme.EnvironmentLoop(environment.make_environment(seed=1), evaluator,
                       logger=_Quiet()).run_episode()
  # Every variable is served (with Pop-Art, its statistics too).
  for mine, shared in zip(evaluator._network.variables,  # pylint: disable=protected-access
                          server.get_variables(['policy'])[0]):
    np.testing.assert_array_equal(mine.numpy(), shared)
