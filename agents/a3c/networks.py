"""A3C's networks (Supp. §8, §9): a policy and a value from one torso for
discrete actions; a spherical Gaussian policy and a separate value network
for continuous ones. The torsos are the agents' shared ones
(agents/networks/torsos.py)."""

import math
from typing import NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np
import sonnet as snt
import tensorflow as tf

from agents.a3c import popart as popart_lib
from agents.networks.torsos import MLPTorso
from agents.networks.torsos import make_torso


class Categorical(NamedTuple):
  """A softmax policy over discrete actions, from its logits [..., A]."""
  logits: tf.Tensor

  def log_prob(self, actions: tf.Tensor) -> tf.Tensor:
    log_probs = tf.nn.log_softmax(self.logits)
    return tf.gather(log_probs, tf.cast(actions, tf.int32), batch_dims=1)

  def entropy(self) -> tf.Tensor:
    log_probs = tf.nn.log_softmax(self.logits)
    return -tf.reduce_sum(tf.exp(log_probs) * log_probs, axis=-1)


class SphericalGaussian(NamedTuple):
  """A3C Supp. §9: a normal distribution over actions [..., d] with mean
  `mean` and one variance for every dimension (spherical covariance)."""
  mean: tf.Tensor
  variance: tf.Tensor  # [...]: sigma^2, one per distribution.

  def log_prob(self, actions: tf.Tensor) -> tf.Tensor:
    dims = tf.cast(tf.shape(self.mean)[-1], tf.float32)
    squared = tf.reduce_sum(tf.square(tf.cast(actions, tf.float32) -
                                      self.mean), axis=-1)
    return -0.5 * (squared / self.variance +
                   dims * tf.math.log(2.0 * math.pi * self.variance))

  def entropy(self) -> tf.Tensor:
    # Supp. §9: each dimension's differential entropy is
    # (log(2 pi sigma^2) + 1) / 2.
    dims = tf.cast(tf.shape(self.mean)[-1], tf.float32)
    return 0.5 * dims * (tf.math.log(2.0 * math.pi * self.variance) + 1.0)


Policy = Union[Categorical, SphericalGaussian]


class PolicyValue(NamedTuple):
  """What an A3C network gives for a batch of observations."""
  policy: Policy
  value: tf.Tensor  # [B]: V(s).
  # [B]: what the value's errors are divided by in the loss: Pop-Art's sigma
  # (`--popart`, agents/a3c/popart.py), else 1.
  value_scale: tf.Tensor


class ScaledInitializer(snt.initializers.Initializer):
  """Sonnet's default for a linear layer's weights (a truncated normal of
  standard deviation 1 / sqrt(fan-in)), times `scale`."""

  def __init__(self, scale: float):
    self._scale = scale

  def __call__(self, shape, dtype):
    default = snt.initializers.TruncatedNormal(stddev=1.0 / math.sqrt(
        shape[0]))
    return self._scale * default(shape, dtype)


def policy_layer(size: int, init_scale: float, name: str) -> snt.Module:
  """The policy's output layer (logits, or a Gaussian's mean): linear, its
  initial weights `init_scale` times the default's (1: A3C's)."""
  if init_scale == 1.0:
    return snt.Linear(size, name=name)
  return snt.Linear(size, w_init=ScaledInitializer(init_scale), name=name)


def value_head(popart: bool) -> snt.Module:
  """A3C's value layer: linear, or with `popart` Pop-Art's
  (agents/a3c/popart.py)."""
  return popart_lib.PopArtValue() if popart else snt.Linear(1, name='value')


def value_output(head: snt.Module,
                 embedding: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
  """(V [B], the scale of its errors [B]) from `value_head`'s layer."""
  if isinstance(head, popart_lib.PopArtValue):
    return head(embedding)
  value = tf.squeeze(head(embedding), axis=-1)
  return value, tf.ones_like(value)


def popart_head(network: snt.Module) -> Optional[popart_lib.PopArtValue]:
  """The Pop-Art value layer of an A3C network (None without `--popart`)."""
  heads = [module for module in network.submodules
           if isinstance(module, popart_lib.PopArtValue)]
  return heads[0] if heads else None


class DiscretePolicyValueNetwork(snt.Module):
  """A3C Supp. §8: one torso, a softmax policy and a linear value, "with all
  non-output layers shared"."""

  def __init__(self, torso: snt.Module, num_actions: int,
               value_torso: Optional[snt.Module] = None,
               popart: bool = False, policy_init_scale: float = 1.0,
               name: str = 'policy_value_network'):
    super().__init__(name=name)
    self._torso = torso
    self._value_torso = value_torso
    self._logits = policy_layer(num_actions, policy_init_scale,
                                'policy_logits')
    self._value = value_head(popart)

  def __call__(self, observation: tf.Tensor) -> PolicyValue:
    embedding = self._torso(observation)
    value_embedding = (embedding if self._value_torso is None
                       else self._value_torso(observation))
    return PolicyValue(Categorical(self._logits(embedding)),
                       *value_output(self._value, value_embedding))


class GaussianPolicyValueNetwork(snt.Module):
  """A3C Supp. §9: the mean is a linear layer, the variance a SoftPlus of a
  linear layer; "the networks for policy network and value network do not
  share any parameters". Supp. §9 also had 128 LSTM cells, whole episodes per
  update and no bootstrapping; this one is feedforward and learns from
  t_max steps like the discrete agent."""

  def __init__(self, hidden_sizes: Sequence[int], action_dims: int,
               bounds: Optional[Tuple[np.ndarray, np.ndarray]] = None,
               initial_stddev: Optional[float] = None,
               popart: bool = False, policy_init_scale: float = 1.0,
               mlp_activation: str = 'relu',
               name: str = 'gaussian_policy_value_network'):
    """`bounds`, (minimum, maximum) of the actions: the mean is mapped onto
    them by tanh (`--bounded_mean`); None: the mean is linear, as Supp.
    §9's. `initial_stddev`: the standard deviation is one learned parameter
    of the policy, the same in every state, starting there
    (`--state_independent_variance`); None: a SoftPlus of a linear layer,
    as Supp. §9's. `popart`: the value is Pop-Art's (agents/a3c/popart.py).
    `policy_init_scale` scales the mean layer's initial weights;
    `mlp_activation` is both torsos'."""
    super().__init__(name=name)
    self._bounds = None
    if bounds is not None:
      low, high = (tf.constant(np.asarray(bound, np.float32))
                   for bound in bounds)
      self._bounds = ((high + low) / 2.0, (high - low) / 2.0)
    self._policy_torso = MLPTorso(hidden_sizes, name='policy_torso',
                                  activation=mlp_activation)
    self._mean = policy_layer(action_dims, policy_init_scale, 'mean')
    if initial_stddev is None:
      self._variance = snt.Linear(1, name='variance')
      self._log_stddev = None
    else:
      self._variance = None
      self._log_stddev = tf.Variable(
          math.log(initial_stddev), dtype=tf.float32, name='log_stddev')
    self._value_torso = MLPTorso(hidden_sizes, name='value_torso',
                                 activation=mlp_activation)
    self._value = value_head(popart)

  def __call__(self, observation: tf.Tensor) -> PolicyValue:
    embedding = self._policy_torso(observation)
    if self._log_stddev is None:
      variance = tf.nn.softplus(tf.squeeze(self._variance(embedding),
                                           axis=-1))
    else:
      variance = tf.fill(tf.shape(embedding)[:-1],
                         tf.exp(2.0 * self._log_stddev))
    mean = self._mean(embedding)
    if self._bounds is not None:
      middle, half_range = self._bounds
      mean = middle + half_range * tf.tanh(mean)
    policy = SphericalGaussian(mean, variance)
    return PolicyValue(policy, *value_output(
        self._value, self._value_torso(observation)))


class BoundsScale(snt.Module):
  """Maps each observation dimension with finite bounds from [low, high]
  onto [-1, 1]; the others pass unchanged (`--scale_observations`)."""

  def __init__(self, low: np.ndarray, high: np.ndarray,
               name: str = 'bounds_scale'):
    super().__init__(name=name)
    low, high = np.asarray(low, np.float64), np.asarray(high, np.float64)
    bounded = np.isfinite(low) & np.isfinite(high) & (high > low)
    low, high = np.where(bounded, low, -1.0), np.where(bounded, high, 1.0)
    centre, half_range = (high + low) / 2, (high - low) / 2
    self._centre = tf.constant(centre, tf.float32)
    self._half_range = tf.constant(half_range, tf.float32)

  def __call__(self, observation: tf.Tensor) -> tf.Tensor:
    return (tf.cast(observation, tf.float32) - self._centre) / self._half_range


class ScaledObservations(snt.Module):
  """`network` of observations scaled by `scale` first."""

  def __init__(self, scale: snt.Module, network: snt.Module,
               name: str = 'scaled_observations'):
    super().__init__(name=name)
    self._scale = scale
    self._network = network

  def __call__(self, observation: tf.Tensor) -> PolicyValue:
    return self._network(self._scale(observation))


def make_network(suite, action_spec, hidden_sizes: Sequence[int],
                 shared_torso: bool = True,
                 observation_bounds=None,
                 bounded_mean: bool = False,
                 state_independent_variance: bool = False,
                 popart: bool = False,
                 mlp_activation: str = 'relu',
                 policy_init_scale: float = 1.0,
                 initial_stddev_scale: float = 1.0) -> snt.Module:
  """A3C's network for the observations of `suite` (an
  `agents.envs.suites.Suite`: its torso of kind 'dense', ending in a layer
  of its own, as A3C's heads are one linear layer each) and an action spec
  (discrete, or a bounded vector); `observation_bounds`, (low, high):
  observations are scaled by them first (`BoundsScale`); `bounded_mean`: a
  Gaussian's mean is kept inside the action bounds;
  `state_independent_variance`: its variance is one learned parameter,
  starting at a standard deviation of `initial_stddev_scale` times half the
  action range (the widest dimension's); `popart`: the value is Pop-Art's
  (agents/a3c/popart.py); `mlp_activation`: the MLP torsos' (vector
  observations); the policy's output layer starts at `policy_init_scale`
  times the default weights."""
  options = dict(bounded_mean=bounded_mean,
                 state_independent_variance=state_independent_variance,
                 popart=popart, mlp_activation=mlp_activation,
                 policy_init_scale=policy_init_scale,
                 initial_stddev_scale=initial_stddev_scale)
  if observation_bounds is not None:
    return ScaledObservations(
        BoundsScale(*observation_bounds),
        make_network(suite, action_spec, hidden_sizes, shared_torso,
                     **options))
  if np.issubdtype(action_spec.dtype, np.integer):
    def torso():
      return make_torso(suite, 'dense', hidden_sizes, mlp_activation)
    return DiscretePolicyValueNetwork(
        torso(), int(action_spec.num_values),
        value_torso=None if shared_torso else torso(), popart=popart,
        policy_init_scale=policy_init_scale)
  bounds = ((action_spec.minimum, action_spec.maximum) if bounded_mean
            else None)
  initial_stddev = None
  if state_independent_variance:
    half_ranges = (np.asarray(action_spec.maximum, np.float64) -
                   np.asarray(action_spec.minimum, np.float64)) / 2.0
    initial_stddev = initial_stddev_scale * float(
        np.max(np.broadcast_to(half_ranges, action_spec.shape)))
  return GaussianPolicyValueNetwork(
      hidden_sizes, int(action_spec.shape[-1]), bounds, initial_stddev,
      popart, policy_init_scale, mlp_activation)


def make_networks(environment, config) -> snt.Module:
  """A3C's network factory: the policy and value network of `config` (an
  `A3CConfig`) for `environment` (an `EnvironmentSpec`), its variables not
  yet created; with `scale_observations`, observations are scaled by the
  environment's bounds first."""
  bounds = (environment.observation_bounds if config.scale_observations
            else None)
  return make_network(environment.suite, environment.spec.actions,
                      config.hidden_sizes, config.shared_torso, bounds,
                      config.bounded_mean, config.state_independent_variance,
                      config.popart, config.mlp_activation,
                      config.policy_init_scale,
                      config.initial_stddev_scale)


class ModePolicy(snt.Module):
  """The policy's most likely action, for snapshots and evaluation: the
  argmax of the logits, or the Gaussian's mean inside the action bounds."""

  def __init__(self, network: snt.Module, action_spec,
               name: str = 'mode_policy'):
    super().__init__(name=name)
    self._network = network
    self._discrete = np.issubdtype(action_spec.dtype, np.integer)
    if not self._discrete:
      self._minimum = tf.constant(action_spec.minimum, tf.float32)
      self._maximum = tf.constant(action_spec.maximum, tf.float32)

  def __call__(self, observation: tf.Tensor) -> tf.Tensor:
    policy = self._network(observation).policy
    if self._discrete:
      return tf.argmax(policy.logits, axis=-1, output_type=tf.int32)
    return tf.clip_by_value(policy.mean, self._minimum, self._maximum)
