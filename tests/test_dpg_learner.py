"""ApeXDPGLearner: n-step critic targets from the target networks, importance
weights, |TD| priorities, the SGD steps of critic and policy (with the
element-wise dq/da clip), target-network copies and Reverb priority updates.

Every expectation is computed independently in numpy float64 from the
networks' weights: the networks have numpy twins, gradients are central finite
differences of numpy losses, and dq/da is a finite difference of the numpy
critic. No TensorFlow gradient is used as a reference.
"""

from typing import List

import numpy as np
import pytest
import reverb
import sonnet as snt
import tensorflow as tf

from agents.replay import adders
from agents.replay import tables
from agents.apex_dpg import networks
from agents.apex_dpg.builder import ApeXDPGBuilder
from agents.apex_dpg.config import ApeXDPGConfig
from agents.apex_dpg.learning import ApeXDPGLearner
from agents.envs.environments import resolve_continuous
import replay_items

OBS_DIM = 3
ACTION_DIM = 2
MINIMUM = np.array([-2.0, 0.0], np.float32)
MAXIMUM = np.array([1.0, 3.0], np.float32)
CRITIC_HIDDEN = [4, 3]
POLICY_HIDDEN = [3, 2]
BATCH = 6
TABLE_SIZE = 40
DISCOUNT_3 = 0.99 ** 3

# --------------------------------------------------------------------------
# Helpers: tiny networks, their numpy twins, hand-made replay samples.
# --------------------------------------------------------------------------

Params = List[np.ndarray]  # [w0, b0, w1, b1, w2, b2], float64.


def linears(module: snt.Module) -> List[snt.Linear]:
  # pylint: disable=protected-access
  return [layer for layer in module._network._layers
          if isinstance(layer, snt.Linear)]


def _randomise(module: snt.Module, seed: int, scale: float):
  rng = np.random.default_rng(seed)
  for index, layer in enumerate(linears(module)):
    layer.w.assign(rng.normal(0.0, scale, layer.w.shape).astype(np.float32))
    if index == 1:
      # Positive biases into the ReLU layer: few dead units, so that dq/da
      # and dpi/dtheta are rarely zero.
      bias = rng.uniform(0.3, 0.8, layer.b.shape)
    else:
      bias = rng.normal(0.0, 0.3, layer.b.shape)
    layer.b.assign(bias.astype(np.float32))


def make_critic(seed: int) -> networks.Critic:
  """A tiny critic whose every weight and bias is drawn from a seeded numpy
  generator (biases non-zero, so they matter)."""
  critic = networks.Critic(CRITIC_HIDDEN)
  critic(tf.zeros([1, OBS_DIM]), tf.zeros([1, ACTION_DIM]))
  _randomise(critic, seed, 0.7)
  return critic


def make_policy(seed: int) -> networks.Policy:
  policy = networks.Policy(MINIMUM, MAXIMUM, POLICY_HIDDEN)
  policy(tf.zeros([1, OBS_DIM]))
  _randomise(policy, seed, 0.7)
  return policy


def params_of(module: snt.Module) -> Params:
  """A float64 numpy snapshot of the module's weights, layer by layer."""
  params = []
  for layer in linears(module):
    params += [layer.w.numpy().astype(np.float64),
               layer.b.numpy().astype(np.float64)]
  return params


def flat(params: Params) -> np.ndarray:
  return np.concatenate([p.ravel() for p in params])


def unflat(vector: np.ndarray, like: Params) -> Params:
  params, start = [], 0
  for p in like:
    params.append(vector[start:start + p.size].reshape(p.shape))
    start += p.size
  return params


def critic_np(p: Params, observations, actions) -> np.ndarray:
  """[s, a] -> tanh -> ReLU -> linear, squeezed."""
  x = np.concatenate([np.asarray(observations, np.float64),
                      np.asarray(actions, np.float64)], axis=-1)
  h = np.tanh(x @ p[0] + p[1])
  h = np.maximum(h @ p[2] + p[3], 0.0)
  return (h @ p[4] + p[5])[..., 0]


def policy_np(p: Params, observations) -> np.ndarray:
  """s -> tanh -> ReLU -> tanh, rescaled from [-1, 1] into the bounds."""
  h = np.tanh(np.asarray(observations, np.float64) @ p[0] + p[1])
  h = np.maximum(h @ p[2] + p[3], 0.0)
  squashed = np.tanh(h @ p[4] + p[5])
  minimum, maximum = MINIMUM.astype(np.float64), MAXIMUM.astype(np.float64)
  return minimum + (maximum - minimum) * (squashed + 1.0) / 2.0


def is_weights_np(probabilities, table_size, beta) -> np.ndarray:
  w = (np.asarray(table_size, np.float64) *
       np.asarray(probabilities, np.float64)) ** (-beta)
  return w / w.max()


def numerical_gradient(function, vector: np.ndarray,
                       eps: float = 1e-6) -> np.ndarray:
  """Central differences of a scalar function of a float64 vector."""
  gradient = np.zeros_like(vector)
  for i in range(vector.size):
    up, down = vector.copy(), vector.copy()
    up[i] += eps
    down[i] -= eps
    gradient[i] = (function(up) - function(down)) / (2 * eps)
  return gradient


def dqda_np(critic_params: Params, observations, actions,
            eps: float = 1e-6) -> np.ndarray:
  """dq(s_i, a_i)/da_i by central differences, one action dimension at a
  time."""
  actions = np.asarray(actions, np.float64)
  dqda = np.zeros_like(actions)
  for j in range(actions.shape[-1]):
    up, down = actions.copy(), actions.copy()
    up[:, j] += eps
    down[:, j] -= eps
    dqda[:, j] = (critic_np(critic_params, observations, up) -
                  critic_np(critic_params, observations, down)) / (2 * eps)
  return dqda


class Nets:
  """Online and target networks, all with different weights (`critic`:
  what makes a critic of a seed)."""

  def __init__(self, seed: int = 1, critic=None):
    critic = critic or make_critic
    self.policy = make_policy(seed)
    self.critic = critic(seed + 1)
    self.target_policy = make_policy(seed + 2)
    self.target_critic = critic(seed + 3)

  def snapshot(self):
    return {name: params_of(getattr(self, name))
            for name in ('policy', 'critic', 'target_policy', 'target_critic')}


def reference(params, sample: reverb.ReplaySample, beta: float,
              dqda_clip: float) -> dict:
  """The expected learner update, in numpy float64."""
  data = {k: v.numpy().astype(np.float64) for k, v in sample.data.items()}
  o_tm1, o_t = data[adders.OBSERVATION], data[adders.NEXT_OBSERVATION]
  weights = is_weights_np(sample.info.probability.numpy(),
                          sample.info.table_size.numpy(), beta)

  def bootstrap(policy, critic):
    return critic_np(critic, o_t, policy_np(policy, o_t))

  q_t = bootstrap(params['target_policy'], params['target_critic'])
  targets = data[adders.N_STEP_RETURN] + data[adders.DISCOUNT] * q_t
  q_tm1 = critic_np(params['critic'], o_tm1, data[adders.ACTION])
  td = targets - q_tm1

  def critic_loss(vector):
    q = critic_np(unflat(vector, params['critic']), o_tm1,
                  data[adders.ACTION])
    return np.mean(weights * 0.5 * (targets - q) ** 2)  # targets fixed.

  # The DPG update, with the pre-update critic.
  policy_actions = policy_np(params['policy'], o_tm1)
  raw_dqda = dqda_np(params['critic'], o_tm1, policy_actions)
  dqda = np.clip(raw_dqda, -dqda_clip, dqda_clip)

  def chained(vector):
    # d/dtheta of mean_i dqda_i . pi_theta(s_i), dqda held fixed: minus the
    # gradient of the DPG loss.
    actions = policy_np(unflat(vector, params['policy']), o_tm1)
    return np.mean(np.sum(dqda * actions, axis=-1))

  # Alternatives the learner must not use (to check the batch tells them
  # apart from the target networks).
  alternatives = {
      'online_policy': bootstrap(params['policy'], params['target_critic']),
      'online_critic': bootstrap(params['target_policy'], params['critic']),
      'online_both': bootstrap(params['policy'], params['critic']),
  }
  return {
      'weights': weights,
      'targets': targets,
      'q_tm1': q_tm1,
      'td': td,
      'loss': np.mean(weights * 0.5 * td ** 2),
      'unweighted_loss': np.mean(0.5 * td ** 2),
      'priorities': np.abs(td),
      'critic_gradient': numerical_gradient(critic_loss,
                                            flat(params['critic'])),
      'raw_dqda': raw_dqda,
      'dqda': dqda,
      'policy_gradient': -numerical_gradient(chained, flat(params['policy'])),
      'policy_loss': np.mean(0.5 * np.sum(dqda ** 2, axis=-1)),
      'mean_q': np.mean(critic_np(params['critic'], o_tm1, policy_actions)),
      'alternative_bootstraps': alternatives,
  }


def make_sample(seed: int, batch: int = BATCH) -> reverb.ReplaySample:
  """A hand-made prioritised batch, as `tables.make_dataset` yields it."""
  return replay_items.hand_made_batch(
      seed, batch, OBS_DIM, TABLE_SIZE, DISCOUNT_3,
      actions=lambda rng, size: rng.uniform(
          MINIMUM, MAXIMUM, size=(size, ACTION_DIM)).astype(np.float32))


def make_learner(samples, *, nets=None, policy_lr=0.1, critic_lr=0.1,
                 beta=0.4, target_update_period=1000, dqda_clip=1e6):
  nets = nets or Nets()
  learner = ApeXDPGLearner(
      policy=nets.policy,
      critic=nets.critic,
      target_policy=nets.target_policy,
      target_critic=nets.target_critic,
      iterator=replay_items.iterator_over(samples),
      replay_client=None,
      policy_optimizer=snt.optimizers.SGD(learning_rate=policy_lr),
      critic_optimizer=snt.optimizers.SGD(learning_rate=critic_lr),
      importance_sampling_exponent=beta,
      target_update_period=target_update_period,
      dqda_clip=dqda_clip)
  return learner, nets


# --------------------------------------------------------------------------
# Networks.
# --------------------------------------------------------------------------


def test_numpy_twins_match_sonnet_and_shapes():
  """Sanity check of the numpy references, and of the networks' shapes."""
  nets = Nets()
  rng = np.random.default_rng(0)
  obs = rng.normal(size=(7, OBS_DIM)).astype(np.float32)
  actions = rng.uniform(MINIMUM, MAXIMUM, (7, ACTION_DIM)).astype(np.float32)
  q = nets.critic(tf.constant(obs), tf.constant(actions))
  pi = nets.policy(tf.constant(obs))
  assert q.shape == (7,) and q.dtype == tf.float32
  assert pi.shape == (7, ACTION_DIM) and pi.dtype == tf.float32
  np.testing.assert_allclose(q.numpy(), critic_np(params_of(nets.critic),
                                                  obs, actions),
                             rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(pi.numpy(), policy_np(params_of(nets.policy),
                                                   obs),
                             rtol=1e-5, atol=1e-6)
  # Layer sizes as asked for: [s, a] -> 4 -> 3 -> 1 and s -> 3 -> 2 -> |A|.
  assert [p.shape for p in params_of(nets.critic)] == [
      (OBS_DIM + ACTION_DIM, 4), (4,), (4, 3), (3,), (3, 1), (1,)]
  assert [p.shape for p in params_of(nets.policy)] == [
      (OBS_DIM, 3), (3,), (3, 2), (2,), (2, ACTION_DIM), (ACTION_DIM,)]
  # A single unbatched-looking batch of one works too.
  assert nets.critic(obs[:1], actions[:1]).shape == (1,)
  assert nets.policy(obs[:1]).shape == (1, ACTION_DIM)


def test_default_output_layers_are_small():
  """The default (DDPG-style) final layers start in [-3e-3, 3e-3]."""
  critic = networks.Critic(CRITIC_HIDDEN)
  critic(tf.zeros([1, OBS_DIM]), tf.zeros([1, ACTION_DIM]))
  policy = networks.Policy(MINIMUM, MAXIMUM, POLICY_HIDDEN)
  policy(tf.zeros([1, OBS_DIM]))
  for module in (critic, policy):
    final = linears(module)[-1]
    for variable in (final.w, final.b):
      assert np.all(np.abs(variable.numpy()) <= networks.FINAL_INIT_SCALE)
  # So the initial policy acts near the centre of the bounds.
  centre = (MINIMUM + MAXIMUM) / 2
  np.testing.assert_allclose(
      policy(tf.random.normal([16, OBS_DIM])).numpy(),
      np.broadcast_to(centre, (16, ACTION_DIM)), atol=0.05)


def test_policy_actions_stay_inside_non_symmetric_bounds():
  policy = networks.Policy(MINIMUM, MAXIMUM, POLICY_HIDDEN)
  policy(tf.zeros([1, OBS_DIM]))
  # Large weights saturate the final tanh: actions pile up on the bounds.
  _randomise(policy, seed=6, scale=20.0)
  obs = np.random.default_rng(1).normal(0, 5, (2000, OBS_DIM))
  actions = policy(tf.constant(obs, tf.float32)).numpy()
  assert np.all(actions >= MINIMUM) and np.all(actions <= MAXIMUM)
  for j in range(ACTION_DIM):
    # Both ends of each (non-symmetric) range are reached, within 1e-3.
    assert actions[:, j].min() < MINIMUM[j] + 1e-3, j
    assert actions[:, j].max() > MAXIMUM[j] - 1e-3, j
  np.testing.assert_allclose(actions, policy_np(params_of(policy), obs),
                             rtol=1e-5, atol=1e-5)


# --------------------------------------------------------------------------
# Critic targets, loss and priorities.
# --------------------------------------------------------------------------


def test_critic_targets_use_target_networks_and_terminals_do_not_bootstrap():
  beta = 0.4
  sample = make_sample(seed=10)
  learner, nets = make_learner([sample], beta=beta)
  params = nets.snapshot()
  expected = reference(params, sample, beta, dqda_clip=1e6)

  # The batch is discriminative: with either online network in the
  # bootstrap, the TD errors of bootstrapping transitions would differ.
  discounts = sample.data[adders.DISCOUNT].numpy()
  bootstrapping = discounts > 0
  target_q = (expected['targets'] -
              sample.data[adders.N_STEP_RETURN].numpy()) / np.where(
                  bootstrapping, discounts, 1.0)
  for name, q_t in expected['alternative_bootstraps'].items():
    assert np.all(np.abs(q_t - target_q)[bootstrapping] > 1e-2), name

  learner.step()
  update = learner.last_update
  assert learner.num_steps == 1
  np.testing.assert_allclose(update['priorities'], expected['priorities'],
                             rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(update['mean_priority'],
                             expected['priorities'].mean(), rtol=1e-5)
  np.testing.assert_array_equal(update['keys'], sample.info.key.numpy())
  # Terminal transitions: |R - q(s, a)|, whatever follows them.
  terminal = ~bootstrapping
  assert terminal.sum() == 2
  np.testing.assert_allclose(
      update['priorities'][terminal],
      np.abs(sample.data[adders.N_STEP_RETURN].numpy()[terminal] -
             expected['q_tm1'][terminal]), rtol=1e-5, atol=1e-6)


def test_next_observation_of_terminal_transitions_is_ignored():
  """Same batch but for s_{t+n}: only bootstrapping priorities change."""
  sample = make_sample(seed=11)
  data = dict(sample.data)
  next_obs = data[adders.NEXT_OBSERVATION].numpy() + 3.0
  data[adders.NEXT_OBSERVATION] = tf.constant(next_obs)
  moved = reverb.ReplaySample(info=sample.info, data=data)
  priorities = []
  for batch in (sample, moved):
    learner, _ = make_learner([batch])  # Same seeds: same networks.
    learner.step()
    priorities.append(learner.last_update['priorities'])
  terminal = sample.data[adders.DISCOUNT].numpy() == 0
  np.testing.assert_array_equal(priorities[0][terminal],
                                priorities[1][terminal])
  assert np.all(np.abs(priorities[0] - priorities[1])[~terminal] > 1e-4)


@pytest.mark.parametrize('beta', [0.0, 0.4, 1.0])
def test_critic_loss_is_importance_weighted_half_squared_td(beta):
  sample = make_sample(seed=12)
  learner, nets = make_learner([sample], beta=beta)
  expected = reference(nets.snapshot(), sample, beta, dqda_clip=1e6)
  if beta > 0:
    # Non-uniform weights that matter: the weighted loss is not the plain one.
    assert expected['weights'].min() < 0.8
    assert expected['weights'].max() == pytest.approx(1.0)
    assert expected['loss'] < 0.99 * expected['unweighted_loss']
  else:
    np.testing.assert_allclose(expected['weights'], 1.0)
  learner.step()
  update = learner.last_update
  np.testing.assert_allclose(update['loss'], expected['loss'], rtol=1e-5)
  np.testing.assert_allclose(update['priorities'], expected['priorities'],
                             rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------
# The SGD steps.
# --------------------------------------------------------------------------


def test_critic_sgd_step_is_minus_lr_times_weighted_td_loss_gradient():
  beta, critic_lr = 0.4, 0.5
  sample = make_sample(seed=13)
  learner, nets = make_learner([sample], beta=beta, critic_lr=critic_lr)
  before = nets.snapshot()
  expected = reference(before, sample, beta, dqda_clip=1e6)
  learner.step()
  delta = flat(params_of(nets.critic)) - flat(before['critic'])
  assert np.linalg.norm(delta) > 1e-2  # The step did something.
  np.testing.assert_allclose(delta, -critic_lr * expected['critic_gradient'],
                             rtol=1e-3, atol=1e-6)
  # The targets come from the target networks, which did not move.
  for name in ('target_policy', 'target_critic'):
    np.testing.assert_array_equal(flat(nets.snapshot()[name]),
                                  flat(before[name]))


@pytest.mark.parametrize('dqda_clip, policy_lr, clipped', [
    (1e6, 0.5, 'none'),      # The clip never acts.
    ('median', 2.0, 'some'),  # About half the elements are clipped.
    (1e-3, 200.0, 'all'),     # Every element is clipped.
])
def test_policy_sgd_step_follows_clipped_deterministic_policy_gradient(
    dqda_clip, policy_lr, clipped):
  beta = 0.4
  sample = make_sample(seed=14)
  learner_kwargs = dict(beta=beta, policy_lr=policy_lr)
  nets = Nets()
  before = nets.snapshot()
  unclipped = reference(before, sample, beta, dqda_clip=np.inf)
  raw = np.abs(unclipped['raw_dqda'])
  if dqda_clip == 'median':
    dqda_clip = float(np.median(raw))
  expected = reference(before, sample, beta, dqda_clip=dqda_clip)
  active = raw > dqda_clip
  if clipped == 'none':
    assert not active.any()
  elif clipped == 'all':
    assert active.all()
  else:
    assert 0 < active.sum() < active.size

  learner, _ = make_learner([sample], nets=nets, dqda_clip=dqda_clip,
                            **learner_kwargs)
  learner.step()
  delta = flat(params_of(nets.policy)) - flat(before['policy'])
  step = -policy_lr * expected['policy_gradient']
  assert np.linalg.norm(step) > 1e-2  # A step that rounding cannot hide.
  np.testing.assert_allclose(delta, step, rtol=1e-3, atol=1e-6)
  update = learner.last_update
  np.testing.assert_allclose(update['policy_loss'], expected['policy_loss'],
                             rtol=1e-4)
  np.testing.assert_allclose(update['mean_q'], expected['mean_q'], rtol=1e-5)

  if clipped != 'none':
    # The clip changed the step, and not just by a scale: it clips element
    # by element, not the norm of dq/da.
    unclipped_step = -policy_lr * unclipped['policy_gradient']
    assert not np.allclose(delta, unclipped_step, rtol=0.1, atol=1e-4)
    cosine = delta @ unclipped_step / (np.linalg.norm(delta) *
                                       np.linalg.norm(unclipped_step))
    assert cosine < 0.999


def test_policy_gradient_uses_the_critic_before_its_update():
  """With a huge critic learning rate the post-update critic's dq/da is very
  different; the policy step must still follow the pre-update one."""
  beta, policy_lr, critic_lr = 0.4, 0.5, 50.0
  sample = make_sample(seed=15)
  nets = Nets()
  before = nets.snapshot()
  expected = reference(before, sample, beta, dqda_clip=1e6)
  learner, _ = make_learner([sample], nets=nets, beta=beta,
                            policy_lr=policy_lr, critic_lr=critic_lr)
  learner.step()
  after_critic = dict(before, critic=params_of(nets.critic))
  stale = reference(after_critic, sample, beta, dqda_clip=1e6)
  step = -policy_lr * expected['policy_gradient']
  assert not np.allclose(step, -policy_lr * stale['policy_gradient'],
                         rtol=0.1, atol=1e-3)
  np.testing.assert_allclose(flat(params_of(nets.policy)) -
                             flat(before['policy']), step,
                             rtol=1e-3, atol=1e-6)


# --------------------------------------------------------------------------
# The target networks.
# --------------------------------------------------------------------------


def test_target_networks_copied_exactly_every_period_and_not_before():
  beta, period, steps = 0.4, 3, 7
  samples = [make_sample(seed=100 + i) for i in range(steps)]
  learner, nets = make_learner(samples, beta=beta, policy_lr=0.05,
                               critic_lr=0.05, target_update_period=period)
  pairs = (('policy', 'target_policy'), ('critic', 'target_critic'))
  initial = nets.snapshot()
  last_copy = {target: flat(initial[target]) for _, target in pairs}
  for step in range(1, steps + 1):
    # Each step's targets come from the target networks as they are then.
    expected = reference(nets.snapshot(), samples[step - 1], beta, 1e6)
    learner.step()
    assert learner.num_steps == step
    np.testing.assert_allclose(learner.last_update['priorities'],
                               expected['priorities'], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(learner.last_update['loss'], expected['loss'],
                               rtol=1e-5)
    now = nets.snapshot()
    for online, target in pairs:
      if step % period == 0:
        # An exact copy of the online weights after this step's update.
        np.testing.assert_array_equal(flat(now[target]), flat(now[online]))
        last_copy[target] = flat(now[target])
      else:
        np.testing.assert_array_equal(flat(now[target]), last_copy[target])
        assert not np.allclose(flat(now[target]), flat(now[online]))
  for _, target in pairs:
    assert not np.array_equal(last_copy[target], flat(initial[target]))


# --------------------------------------------------------------------------
# End to end: a real Reverb server, the builder's adder and learner.
# --------------------------------------------------------------------------


def test_end_to_end_priorities_written_back_to_reverb():
  env_spec = resolve_continuous('control:cartpole:balance')
  config = ApeXDPGConfig(batch_size=8, min_replay_size=8, replay_capacity=100,
                         actor_flush_size=8, prefetch_size=1,
                         critic_hidden_sizes='16,16',
                         policy_hidden_sizes='16,16',
                         critic_learning_rate=1e-3, policy_learning_rate=1e-3,
                         target_update_period=2)
  config.validate()
  tf.random.set_seed(0)
  builder = ApeXDPGBuilder(config, env_spec)
  spec = env_spec.spec
  # cartpole:balance's episodes last 1,000 steps: these 40 are one episode.
  server, client = replay_items.write_random_steps(
      builder, env_spec, lambda rng: rng.uniform(
          spec.actions.minimum, spec.actions.maximum).astype(np.float32))
  try:
    size = client.server_info()[tables.TABLE].current_size
    assert size == 40 - config.n_step

    initial = replay_items.sample_priorities(client,
                                             lambda seen: len(seen) == size)
    assert len(initial) == size

    learner = builder.make_learner(client)
    state = learner.state
    assert state['policy'](tf.zeros([3, *spec.observations.shape])).shape == (
        3, *spec.actions.shape)
    assert state['critic'](tf.zeros([3, *spec.observations.shape]),
                           tf.zeros([3, *spec.actions.shape])).shape == (3,)
    policy_before = flat(params_of(state['policy']))
    critic_before = flat(params_of(state['critic']))
    latest = {}
    for _ in range(3):
      learner.step()
      update = learner.last_update
      assert update['keys'].shape == (config.batch_size,)
      assert update['priorities'].shape == (config.batch_size,)
      assert np.all(np.isfinite(update['priorities']))
      assert np.all(update['priorities'] >= 0)
      for key, priority in zip(update['keys'], update['priorities']):
        latest[int(key)] = float(priority)
    assert learner.num_steps == 3
    # Both networks learned; the targets were copied at step 2 only.
    assert not np.array_equal(flat(params_of(state['policy'])), policy_before)
    assert not np.array_equal(flat(params_of(state['critic'])), critic_before)
    for online in ('policy', 'critic'):
      target = flat(params_of(state['target_' + online]))
      assert not np.array_equal(target, flat(params_of(state[online])))
      assert not np.array_equal(target, policy_before if online == 'policy'
                                else critic_before)

    replay_items.check_priorities_written_back(client, latest, initial)
  finally:
    server.stop()
