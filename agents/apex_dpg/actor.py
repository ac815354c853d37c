"""The Ape-X DPG actor: Gaussian exploration around a deterministic policy,
with actor-side priorities (Ape-X §3.2, App. D)."""

from typing import Optional, Sequence, Union

import numpy as np
import sonnet as snt
import tensorflow as tf
from acme.tf import variable_utils

from agents import actor_loop
from agents.apex import actors
from agents.replay import adders as adders_lib


class ApeXDPGActor(actors.ApeXActor):
  """Acts with a = clip(pi(s) + noise, bounds), for one or K environments.

  The noise is drawn independently at every step from N(0, sigma^2) per
  action dimension, scaled by half the action range; `sigma` is one float or
  one per environment. With adders, each step also evaluates the critic at
  the action taken and at pi(s), in the same graph call that chose the
  actions (row i: [critic(s_i, a_i), critic(s_i, pi(s_i))], each a scalar,
  or a distribution's logits for D4PG's critic); the adders turn these into
  the transitions' initial priorities.
  With `sigma` = 0 and no critic (the evaluator), the actor runs the noiseless
  policy alone.
  """

  def __init__(self,
               policy: snt.Module,
               critic: Optional[snt.Module],
               observation_spec,
               action_spec,
               sigma: Union[float, Sequence[float]],
               adders: Sequence[adders_lib.NStepPrioritizedAdder] = (),
               variable_client: Optional[variable_utils.VariableClient] = None,
               seed: Optional[int] = None):
    if adders and critic is None:
      raise ValueError('An actor that writes to replay needs the critic for '
                       'the initial priorities.')
    sigmas = actor_loop.per_environment(sigma, 'sigma')
    super().__init__(len(sigmas), adders, variable_client)
    self._policy = policy
    self._critic = critic
    self._sigmas = sigmas
    self._rng = np.random.default_rng(seed)
    self._minimum = np.asarray(action_spec.minimum, np.float32)
    self._maximum = np.asarray(action_spec.maximum, np.float32)
    # Row i: environment i's noise scale per action dimension.
    self._noise_scales = (sigmas[:, None] *
                          (self._maximum - self._minimum).ravel() / 2).reshape(
                              (len(sigmas), *self._minimum.shape))
    observation = tf.TensorSpec((None, *observation_spec.shape),
                                tf.as_dtype(observation_spec.dtype))
    noise = tf.TensorSpec((None, *action_spec.shape), tf.float32)
    self._policy_function = tf.function(policy, input_signature=[observation])
    self._act_function = None
    if critic is not None:
      self._act_function = tf.function(self._act_graph,
                                       input_signature=[observation, noise])

  def _act_graph(self, observations, noise):
    greedy = self._policy(observations)
    actions = tf.clip_by_value(greedy + noise, self._minimum, self._maximum)
    q_taken = self._critic(observations, actions)
    q_policy = self._critic(observations, greedy)
    return actions, tf.stack([q_taken, q_policy], axis=1)

  def act_and_evaluate(self, observation: np.ndarray, noise: np.ndarray):
    """(action, [critic(s, a), critic(s, pi(s))]) for one observation and
    noise."""
    actions, values = self._act_function(
        observation[None], np.asarray(noise, np.float32)[None])
    return actions[0].numpy(), values[0].numpy()

  def _noise(self, count: int) -> np.ndarray:
    return (self._rng.normal(size=(count, *self._minimum.shape)) *
            self._noise_scales[:count]).astype(np.float32)

  def _act(self, observations: np.ndarray):
    count = len(observations)
    if self._act_function is None:
      actions = self._policy_function(observations).numpy()
      if np.any(self._noise_scales > 0):
        actions = np.clip(actions + self._noise(count), self._minimum,
                          self._maximum)
      return actions.astype(np.float32), None
    actions, values = self._act_function(observations, self._noise(count))
    return actions.numpy().astype(np.float32), values.numpy()

  def _final_values(self, observation: np.ndarray) -> np.ndarray:
    _, values = self.act_and_evaluate(observation,
                                      np.zeros_like(self._minimum))
    return values
