"""ApeXDQNLearner: loss, double-Q targets, importance weights, SGD step,
gradient clipping, target-network copies and Reverb priority updates.

Every expectation is computed independently in numpy (float64) from the
networks' weights, except the reference gradient, which is also taken with
`tf.GradientTape` on a copy of the online network.
"""

import copy
import math
import time
from typing import Dict, List, Tuple

import numpy as np
import pytest
import reverb
import sonnet as snt
import tensorflow as tf
from acme.utils import counting
from acme.utils import loggers as acme_loggers

from agents.replay import adders
from agents.replay import tables
from agents.networks import torsos
from agents.apex_dqn import networks
from agents.apex_dqn.builder import ApeXDQNBuilder
from agents.apex_dqn.config import ApeXDQNConfig
from agents.apex_dqn.learning import ApeXDQNLearner
from agents.envs.environments import resolve_discrete
import replay_items

OBS_DIM = 4
NUM_ACTIONS = 3
BATCH = 6
TABLE_SIZE = 40
DISCOUNT_3 = 0.99 ** 3

# --------------------------------------------------------------------------
# Helpers: a tiny dueling network, its numpy twin, hand-made replay samples.
# --------------------------------------------------------------------------

Layers = List[Tuple[np.ndarray, np.ndarray]]


def _mlp_layers(mlp: snt.nets.MLP) -> List[snt.Linear]:
  return list(mlp._layers)  # pylint: disable=protected-access


def _network_parts(net: networks.DuelingQNetwork) -> Dict[str, List[snt.Linear]]:
  # pylint: disable=protected-access
  return {
      'torso': _mlp_layers(net._torso._mlp),
      'value': _mlp_layers(net._value),
      'advantage': _mlp_layers(net._advantage),
  }


def make_network(seed: int) -> networks.DuelingQNetwork:
  """A tiny dueling MLP network whose every weight and bias is drawn from
  a seeded numpy generator (biases non-zero, so they matter)."""
  net = networks.DuelingQNetwork(
      torsos.MLPTorso([5]), NUM_ACTIONS, hidden_size=4)
  net(tf.zeros([1, OBS_DIM], tf.float32))  # Creates the variables.
  rng = np.random.default_rng(seed)
  for layers in _network_parts(net).values():
    for layer in layers:
      layer.w.assign(rng.normal(0.0, 0.6, layer.w.shape).astype(np.float32))
      layer.b.assign(rng.normal(0.0, 0.3, layer.b.shape).astype(np.float32))
  return net


def params_of(net: networks.DuelingQNetwork) -> Dict[str, Layers]:
  """A float64 numpy snapshot of the network's weights."""
  return {
      part: [(layer.w.numpy().astype(np.float64),
              layer.b.numpy().astype(np.float64)) for layer in layers]
      for part, layers in _network_parts(net).items()
  }


def _mlp_np(layers: Layers, x: np.ndarray, activate_final: bool) -> np.ndarray:
  for i, (w, b) in enumerate(layers):
    x = x @ w + b
    if activate_final or i < len(layers) - 1:
      x = np.maximum(x, 0.0)
  return x


def q_np(params: Dict[str, Layers], observation: np.ndarray) -> np.ndarray:
  """Dueling Q-values, Wang et al. 2016: V + A - mean(A)."""
  embedding = _mlp_np(params['torso'], observation.astype(np.float64), True)
  value = _mlp_np(params['value'], embedding, False)
  advantage = _mlp_np(params['advantage'], embedding, False)
  return value + advantage - advantage.mean(axis=-1, keepdims=True)


def is_weights_np(probabilities, table_size, beta) -> np.ndarray:
  w = (np.asarray(table_size, np.float64) *
       np.asarray(probabilities, np.float64)) ** (-beta)
  return w / w.max()


def reference(online: Dict[str, Layers], target: Dict[str, Layers],
              sample: reverb.ReplaySample, beta: float) -> Dict[str, np.ndarray]:
  """The expected learner update, in numpy float64."""
  data = {k: v.numpy() for k, v in sample.data.items()}
  rows = np.arange(len(data[adders.ACTION]))
  weights = is_weights_np(sample.info.probability.numpy(),
                          sample.info.table_size.numpy(), beta)
  q_tm1 = q_np(online, data[adders.OBSERVATION])
  q_t_selector = q_np(online, data[adders.NEXT_OBSERVATION])
  q_t_evaluator = q_np(target, data[adders.NEXT_OBSERVATION])
  best = np.argmax(q_t_selector, axis=-1)
  targets = (data[adders.N_STEP_RETURN].astype(np.float64) +
             data[adders.DISCOUNT].astype(np.float64) *
             q_t_evaluator[rows, best])
  td = targets - q_tm1[rows, data[adders.ACTION]]
  return {
      'weights': weights,
      'targets': targets,
      'td': td,
      'loss': np.mean(weights * 0.5 * td ** 2),
      'priorities': np.abs(td),
      # Plain (non-double) Q-learning target, to make sure the batch tells
      # the two apart.
      'single_q_targets': (data[adders.N_STEP_RETURN] +
                           data[adders.DISCOUNT] * q_t_evaluator.max(-1)),
  }


def make_sample(seed: int, batch: int = BATCH) -> reverb.ReplaySample:
  """A hand-made prioritised batch, as `tables.make_dataset` yields it."""
  return replay_items.hand_made_batch(
      seed, batch, OBS_DIM, TABLE_SIZE, DISCOUNT_3,
      actions=lambda rng, size: rng.integers(
          0, NUM_ACTIONS, size=size).astype(np.int32))


def make_learner(samples, *, learning_rate=0.1, beta=0.4, max_gradient_norm=1e6,
                 target_update_period=1000, online_seed=1, target_seed=2,
                 optimizer=None, **logging_args):
  online = make_network(online_seed)
  target = make_network(target_seed)
  learner = ApeXDQNLearner(
      network=online,
      target_network=target,
      iterator=replay_items.iterator_over(samples),
      replay_client=None,
      optimizer=optimizer or snt.optimizers.SGD(learning_rate=learning_rate),
      importance_sampling_exponent=beta,
      target_update_period=target_update_period,
      max_gradient_norm=max_gradient_norm,
      **logging_args)
  return learner, online, target


def flat(params: Dict[str, Layers]) -> np.ndarray:
  return np.concatenate([np.concatenate([w.ravel(), b.ravel()])
                         for layers in params.values() for w, b in layers])


def finite_difference_gradient(online, target, sample, beta,
                               eps=1e-6) -> Dict[str, Layers]:
  """d loss / d online params, by central differences in float64, with the
  double-Q targets held fixed (they are a stop_gradient in the learner)."""
  fixed = reference(online, target, sample, beta)
  data = {k: v.numpy() for k, v in sample.data.items()}
  rows = np.arange(len(data[adders.ACTION]))

  def loss(params):
    q = q_np(params, data[adders.OBSERVATION])[rows, data[adders.ACTION]]
    return np.mean(fixed['weights'] * 0.5 * (fixed['targets'] - q) ** 2)

  gradient = {}
  for part, layers in online.items():
    gradient[part] = []
    for index, (w, b) in enumerate(layers):
      grads = []
      for which, array in ((0, w), (1, b)):
        grad = np.zeros_like(array)
        for position in np.ndindex(array.shape):
          shifted = []
          for sign in (1.0, -1.0):
            params = copy.deepcopy(online)
            layer = list(params[part][index])
            perturbed = layer[which].copy()
            perturbed[position] += sign * eps
            layer[which] = perturbed
            params[part][index] = tuple(layer)
            shifted.append(loss(params))
          grad[position] = (shifted[0] - shifted[1]) / (2 * eps)
        grads.append(grad)
      gradient[part].append(tuple(grads))
  return gradient


# --------------------------------------------------------------------------
# importance_sampling_weights
# --------------------------------------------------------------------------


@pytest.mark.parametrize('probabilities, table_size, beta, expected', [
    # N P = [1, 2, 4]; (N P)^-0.5 = [1, 1/sqrt 2, 1/2]; max is 1.
    ([0.1, 0.2, 0.4], 10, 0.5, [1.0, 2 ** -0.5, 0.5]),
    # N P = [0.5, 1, 2]; (N P)^-1 = [2, 1, 0.5]; divided by 2.
    ([0.05, 0.1, 0.2], 10, 1.0, [1.0, 0.5, 0.25]),
    # beta = 0: no correction at all.
    ([0.05, 0.1, 0.2], 10, 0.0, [1.0, 1.0, 1.0]),
    # Uniform sampling (P = 1/N): weights all 1 whatever beta.
    ([0.25, 0.25, 0.25, 0.25], 4, 0.4, [1.0, 1.0, 1.0, 1.0]),
    # N P = [4, 1]; (N P)^-0.4 = [4^-0.4, 1]; max is the rarer sample's.
    ([0.04, 0.01], 100, 0.4, [4 ** -0.4, 1.0]),
])
def test_importance_sampling_weights_hand_computed(probabilities, table_size,
                                                   beta, expected):
  # Types as reverb delivers them: float64 probabilities, int64 table sizes.
  weights = tables.importance_sampling_weights(
      tf.constant(probabilities, tf.float64),
      tf.constant([table_size] * len(probabilities), tf.int64), beta)
  assert weights.dtype == tf.float32
  np.testing.assert_allclose(weights.numpy(), expected, rtol=1e-6)


def test_importance_sampling_weights_max_is_one_and_rare_samples_weigh_most():
  probabilities = np.array([0.001, 0.3, 0.02, 0.1])
  weights = tables.importance_sampling_weights(
      tf.constant(probabilities), tf.constant([50] * 4, tf.int64), 0.6).numpy()
  assert weights.max() == pytest.approx(1.0)
  assert np.argmax(weights) == np.argmin(probabilities)
  np.testing.assert_allclose(weights, is_weights_np(probabilities, 50, 0.6),
                             rtol=1e-6)


# --------------------------------------------------------------------------
# Loss, targets and priorities.
# --------------------------------------------------------------------------


def test_network_numpy_twin_matches_sonnet():
  """Sanity check of the numpy reference itself (and of the dueling head)."""
  net = make_network(1)
  obs = np.random.default_rng(0).normal(size=(7, OBS_DIM)).astype(np.float32)
  np.testing.assert_allclose(net(tf.constant(obs)).numpy(),
                             q_np(params_of(net), obs), rtol=1e-5, atol=1e-6)


def test_loss_targets_and_priorities_match_numpy_reference():
  beta = 0.4
  sample = make_sample(seed=10)
  learner, online, target = make_learner([sample], beta=beta)
  expected = reference(params_of(online), params_of(target), sample, beta)

  # The batch is discriminative: non-uniform weights, a terminal transition,
  # and double Q-learning disagreeing with plain Q-learning somewhere.
  assert expected['weights'].min() < 0.9
  assert not np.allclose(expected['targets'], expected['single_q_targets'])

  learner.step()
  update = learner.last_update
  assert learner.num_steps == 1
  np.testing.assert_allclose(update['loss'], expected['loss'], rtol=1e-5)
  np.testing.assert_allclose(update['priorities'], expected['priorities'],
                             rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(update['mean_priority'],
                             expected['priorities'].mean(), rtol=1e-5)
  np.testing.assert_array_equal(update['keys'], sample.info.key.numpy())


def test_loss_with_beta_zero_and_beta_one():
  for beta in (0.0, 1.0):
    sample = make_sample(seed=11)
    learner, online, target = make_learner([sample], beta=beta)
    expected = reference(params_of(online), params_of(target), sample, beta)
    learner.step()
    np.testing.assert_allclose(learner.last_update['loss'], expected['loss'],
                               rtol=1e-5)


# --------------------------------------------------------------------------
# The optimiser step and gradient clipping.
# --------------------------------------------------------------------------


# --jit_compile: the same step, compiled by XLA, against the same references.
@pytest.mark.parametrize('jit_compile', [False, True])
def test_sgd_step_moves_weights_by_minus_lr_times_gradient(jit_compile):
  beta, lr = 0.4, 0.1
  sample = make_sample(seed=12)
  learner, online, target = make_learner([sample], learning_rate=lr, beta=beta,
                                         jit_compile=jit_compile)
  before_online, before_target = params_of(online), params_of(target)
  expected = reference(before_online, before_target, sample, beta)

  # Reference gradient 1: GradientTape on a copy of the online network, with
  # the numpy targets and weights as constants.
  twin = copy.deepcopy(online)
  data = sample.data
  with tf.GradientTape() as tape:
    q = tf.gather(twin(data[adders.OBSERVATION]), data[adders.ACTION],
                  batch_dims=1)
    twin_loss = tf.reduce_mean(
        tf.constant(expected['weights'], tf.float32) * 0.5 *
        tf.square(tf.constant(expected['targets'], tf.float32) - q))
  tape_grads = tape.gradient(twin_loss, twin.trainable_variables)
  tape_by_var = {v.name: g.numpy() for v, g in
                 zip(twin.trainable_variables, tape_grads)}
  np.testing.assert_allclose(twin_loss.numpy(), expected['loss'], rtol=1e-5)

  # Reference gradient 2: finite differences of the numpy loss.
  fd = finite_difference_gradient(before_online, before_target, sample, beta)

  learner.step()
  after = params_of(online)
  delta = flat(after) - flat(before_online)
  np.testing.assert_allclose(delta, -lr * flat(fd), rtol=1e-3, atol=1e-6)
  assert np.linalg.norm(delta) > 1e-3  # The step did something.

  for variable in online.trainable_variables:
    twin_name = variable.name  # deepcopy keeps names.
    before = {v.name: v for v in twin.trainable_variables}[twin_name].numpy()
    np.testing.assert_allclose(variable.numpy(),
                               before - lr * tape_by_var[twin_name],
                               rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(learner.last_update['gradient_norm'],
                             np.linalg.norm(flat(fd)), rtol=1e-3)
  # The target network did not move.
  np.testing.assert_array_equal(flat(params_of(target)), flat(before_target))


@pytest.mark.parametrize('jit_compile', [False, True])
def test_gradient_clipping_by_global_norm(jit_compile):
  beta, lr, clip = 0.4, 1.0, 0.01
  sample = make_sample(seed=13)
  learner, online, target = make_learner([sample], learning_rate=lr,
                                         jit_compile=jit_compile,
                                         beta=beta, max_gradient_norm=clip)
  before = params_of(online)
  gradient = flat(finite_difference_gradient(before, params_of(target),
                                             sample, beta))
  gradient_norm = np.linalg.norm(gradient)
  assert gradient_norm > 5 * clip  # So that clipping must act.

  learner.step()
  delta = flat(params_of(online)) - flat(before)
  np.testing.assert_allclose(np.linalg.norm(delta), lr * clip, rtol=1e-4)
  # Clipping rescales the whole gradient: same direction.
  # (atol: float32 rounding of weights of order 1.)
  np.testing.assert_allclose(delta, -lr * clip * gradient / gradient_norm,
                             rtol=1e-3, atol=1e-6)
  # The reported norm is the one before clipping.
  np.testing.assert_allclose(learner.last_update['gradient_norm'],
                             gradient_norm, rtol=1e-3)


# --------------------------------------------------------------------------
# The target network.
# --------------------------------------------------------------------------


def test_target_network_copied_exactly_every_period_and_not_before():
  beta, period, steps = 0.4, 3, 7
  samples = [make_sample(seed=100 + i) for i in range(steps)]
  learner, online, target = make_learner(samples, learning_rate=0.05,
                                         beta=beta,
                                         target_update_period=period)
  initial_target = flat(params_of(target))
  last_copy = initial_target
  for step in range(1, steps + 1):
    # The loss of each step uses the target network as it is at that step.
    expected = reference(params_of(online), params_of(target),
                         samples[step - 1], beta)
    learner.step()
    assert learner.num_steps == step
    np.testing.assert_allclose(learner.last_update['loss'], expected['loss'],
                               rtol=1e-5)
    online_now, target_now = flat(params_of(online)), flat(params_of(target))
    if step % period == 0:
      # An exact copy of the online weights after this step's update.
      np.testing.assert_array_equal(target_now, online_now)
      last_copy = target_now
    else:
      np.testing.assert_array_equal(target_now, last_copy)
      assert not np.allclose(target_now, online_now)
  assert not np.array_equal(last_copy, initial_target)


def test_try_step_returns_between_waits_for_replay():
  # With a way to make a new dataset, an ended one (a rate-limiter timeout)
  # makes try_step return False, with nothing changed, so that a stopping
  # learner node can check its stop between two waits; step() waits on.
  sample = make_sample(seed=301)
  learner, online, target = make_learner([sample], target_update_period=1)
  ended = lambda: iter(tf.data.Dataset.from_tensors(sample).take(0))
  learner._make_iterator = ended  # pylint: disable=protected-access
  learner._iterator = ended()  # pylint: disable=protected-access
  initial_target = flat(params_of(target))
  assert [learner.try_step() for _ in range(3)] == [False] * 3
  assert learner.num_steps == 0
  np.testing.assert_array_equal(flat(params_of(target)), initial_target)
  batches = iter([ended(), replay_items.iterator_over([sample])])
  learner._make_iterator = lambda: next(batches)  # pylint: disable=protected-access
  learner.step()  # One more ended dataset, then the batch.
  assert learner.num_steps == 1
  np.testing.assert_array_equal(flat(params_of(target)),
                                flat(params_of(online)))


def test_a_step_ended_by_the_dataset_changes_nothing():
  # A Reverb dataset ends when the rate limiter lets no sample through for a
  # while: such a step must neither count as an update nor copy the target.
  sample = make_sample(seed=300)
  learner, online, target = make_learner([sample], target_update_period=1)
  learner._iterator = iter(  # pylint: disable=protected-access
      tf.data.Dataset.from_tensors(sample).take(0))
  initial_target = flat(params_of(target))
  for _ in range(3):
    with pytest.raises(tf.errors.OutOfRangeError):
      learner.step()
  assert learner.num_steps == 0
  np.testing.assert_array_equal(flat(params_of(target)), initial_target)
  assert not np.allclose(flat(params_of(online)), initial_target)
  # The next batch is the first update, and the first copy.
  learner._iterator = replay_items.iterator_over([sample])  # pylint: disable=protected-access
  learner.step()
  assert learner.num_steps == 1
  np.testing.assert_array_equal(flat(params_of(target)),
                                flat(params_of(online)))


def test_final_log_row_holds_the_updates_since_the_last_row():
  """At stop the learner writes what its periodic rows have not shown yet:
  nothing before any update; after only the first (tracing) update a row
  without a rate; later, the rate of the updates since that first one."""
  samples = [make_sample(seed=200 + i) for i in range(4)]
  logger = acme_loggers.InMemoryLogger()
  learner, _, _ = make_learner(samples, counter=counting.Counter(),
                               logger=logger, log_every=1e9)
  learner.write_final_log()
  assert logger.data == []

  start = time.time()
  learner.step()
  learner.write_final_log()
  (row,) = logger.data
  assert row['steps'] == 1
  assert math.isnan(row['steps_per_second'])
  assert row['loss'] == learner.last_update['loss']
  learner.write_final_log()  # Nothing new since.
  assert len(logger.data) == 1

  for _ in range(3):
    learner.step()
  learner.write_final_log()
  end = time.time()
  assert len(logger.data) == 2
  row = logger.data[-1]
  assert row['steps'] == 4
  assert row['loss'] == learner.last_update['loss']
  # 3 updates timed from the end of the first: at least 3 per whole span.
  assert 3 / (end - start) <= row['steps_per_second'] < math.inf


# --------------------------------------------------------------------------
# End to end: a real Reverb server, the adder, the builder's learner.
# --------------------------------------------------------------------------


def test_end_to_end_priorities_written_back_to_reverb():
  env_spec = resolve_discrete('gym:CartPole-v1')
  config = ApeXDQNConfig(batch_size=8, min_replay_size=8, replay_capacity=100,
                         mlp_hidden_sizes='16', dueling_hidden_size=16,
                         actor_flush_size=8, prefetch_size=1,
                         learning_rate=1e-3)
  config.validate()
  tf.random.set_seed(0)
  builder = ApeXDQNBuilder(config, env_spec)
  server, client = replay_items.write_random_steps(
      builder, env_spec, lambda rng: np.int32(rng.integers(2)))
  try:
    size = client.server_info()[tables.TABLE].current_size
    assert size >= 30

    initial = replay_items.sample_priorities(client,
                                             lambda seen: len(seen) == size)
    assert len(initial) == size

    learner = builder.make_learner(client)
    latest = {}
    for _ in range(3):
      learner.step()
      update = learner.last_update
      assert update['keys'].shape == (config.batch_size,)
      assert np.all(np.isfinite(update['priorities']))
      assert np.all(update['priorities'] >= 0)
      for key, priority in zip(update['keys'], update['priorities']):
        latest[int(key)] = float(priority)
    assert learner.num_steps == 3

    replay_items.check_priorities_written_back(client, latest, initial)
  finally:
    server.stop()


def test_optimizer_state_is_made_before_the_first_update_and_changes_nothing():
  # The moments exist before the first update (outside its tf.function),
  # and the updates are those of an optimiser that makes them in its first
  # update.
  samples = [make_sample(seed=400 + i) for i in range(3)]

  def rmsprop():
    return snt.optimizers.RMSProp(learning_rate=0.01, decay=0.95,
                                  epsilon=1e-6, centered=True)

  eager_optimizer, lazy_optimizer = rmsprop(), rmsprop()
  eager, eager_online, _ = make_learner(samples, optimizer=eager_optimizer)
  lazy, lazy_online, _ = make_learner(samples, optimizer=lazy_optimizer)
  lazy._optimizer_state_made = True  # pylint: disable=protected-access
  assert not eager_optimizer.ms and not lazy_optimizer.ms

  eager._iterator = iter(  # pylint: disable=protected-access
      tf.data.Dataset.from_tensors(samples[0]).take(0))
  with pytest.raises(tf.errors.OutOfRangeError):  # Ended: no update.
    eager.try_step()
  assert len(eager_optimizer.ms) == len(eager_online.trainable_variables)
  assert not any(np.any(moment.numpy()) for moment in eager_optimizer.ms)
  eager._iterator = replay_items.iterator_over(samples)  # pylint: disable=protected-access

  for _ in samples:
    eager.step()
    lazy.step()
  np.testing.assert_allclose(flat(params_of(eager_online)),
                             flat(params_of(lazy_online)), rtol=1e-6)
  for a, b in zip(eager_optimizer.ms, lazy_optimizer.ms):
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)


@pytest.mark.parametrize('jit_compile', [False, True])
def test_fused_optimizer_step_matches_the_separate_operations(jit_compile):
  # The clipping and centered RMSProp step compiled by XLA
  # (fuse_optimizer_step) against the same step as separate operations: the same weights, moments
  # and gradient norms after 4 updates, the norm clipped in some of them.
  samples = [make_sample(seed=500 + i) for i in range(4)]
  runs = {}
  for fused in (True, False):
    optimizer = snt.optimizers.RMSProp(learning_rate=0.01, decay=0.95,
                                       epsilon=1e-6, centered=True)
    learner, online, _ = make_learner(
        samples, optimizer=optimizer, max_gradient_norm=0.5,
        jit_compile=jit_compile, fuse_optimizer_step=fused)
    norms = []
    for _ in samples:
      learner.step()
      norms.append(float(learner.last_update['gradient_norm']))
    runs[fused] = (flat(params_of(online)), norms,
                   [v.numpy() for v in optimizer.ms + optimizer.mg])
  (fused_params, fused_norms, fused_moments), (params, norms, moments) = (
      runs[True], runs[False])
  assert max(norms) > 0.5  # Clipping took part.
  np.testing.assert_allclose(fused_norms, norms, rtol=1e-5)
  np.testing.assert_allclose(fused_params, params, rtol=1e-5, atol=1e-7)
  for a, b in zip(fused_moments, moments):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-9)
  assert not np.allclose(params, flat(params_of(make_network(1))))
