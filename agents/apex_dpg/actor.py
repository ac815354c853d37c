"""The Ape-X DPG actor: Gaussian exploration around a deterministic policy,
with actor-side priorities (Ape-X §3.2, App. D)."""

from typing import Optional

import dm_env
import numpy as np
import sonnet as snt
import tensorflow as tf
from acme.tf import variable_utils

from agents import actors
from agents import adders as adders_lib


class ApeXDPGActor(actors.ApeXActor):
  """An `acme.Actor` acting with a = clip(pi(s) + noise, bounds).

  The noise is drawn independently at every step from N(0, sigma^2) per
  action dimension, scaled by half the action range. With an adder, each step
  also evaluates the critic at the action taken and at pi(s), in the same
  graph call that chose the action; the adder turns these into the
  transitions' initial priorities. With `sigma` = 0 and no critic (the
  evaluator), the actor runs the noiseless policy alone.
  """

  def __init__(self,
               policy: snt.Module,
               critic: Optional[snt.Module],
               observation_spec,
               action_spec,
               sigma: float,
               adder: Optional[adders_lib.NStepPrioritizedAdder] = None,
               variable_client: Optional[variable_utils.VariableClient] = None,
               seed: Optional[int] = None):
    if adder is not None and critic is None:
      raise ValueError('An actor that writes to replay needs the critic for '
                       'the initial priorities.')
    self._policy = policy
    self._critic = critic
    self._sigma = float(sigma)
    super().__init__(adder, variable_client)
    self._rng = np.random.default_rng(seed)
    self._minimum = np.asarray(action_spec.minimum, np.float32)
    self._maximum = np.asarray(action_spec.maximum, np.float32)
    self._noise_scale = self._sigma * (self._maximum - self._minimum) / 2
    self._values: Optional[np.ndarray] = None
    observation = tf.TensorSpec((None, *observation_spec.shape),
                                tf.as_dtype(observation_spec.dtype))
    noise = tf.TensorSpec((None, *action_spec.shape), tf.float32)
    self._policy_function = tf.function(policy, input_signature=[observation])
    self._act_function = None
    if critic is not None:
      self._act_function = tf.function(self._act,
                                       input_signature=[observation, noise])

  def _act(self, observations, noise):
    greedy = self._policy(observations)
    actions = tf.clip_by_value(greedy + noise, self._minimum, self._maximum)
    q_taken = self._critic(observations, actions)
    q_policy = self._critic(observations, greedy)
    return actions, tf.stack([q_taken, q_policy], axis=-1)

  def act_and_evaluate(self, observation: np.ndarray, noise: np.ndarray):
    """(action, [q(s, a), q(s, pi(s))]) for one observation and noise."""
    actions, values = self._act_function(
        observation[None], np.asarray(noise, np.float32)[None])
    return actions[0].numpy(), values[0].numpy()

  def select_action(self, observation: np.ndarray) -> np.ndarray:
    if self._adder is None:
      action = self._policy_function(observation[None])[0].numpy()
      if self._sigma > 0:
        noise = self._rng.normal(size=action.shape) * self._noise_scale
        action = np.clip(action + noise, self._minimum, self._maximum)
      return action.astype(np.float32)
    noise = self._rng.normal(size=self._minimum.shape) * self._noise_scale
    action, self._values = self.act_and_evaluate(observation, noise)
    return action.astype(np.float32)

  def observe(self, action, next_timestep: dm_env.TimeStep):
    if self._adder is None:
      return
    final_values = None
    if next_timestep.last() and next_timestep.discount > 0:
      # A truncated episode (every dm_control episode) bootstraps from its
      # final observation, from which no action was chosen.
      _, final_values = self.act_and_evaluate(
          next_timestep.observation, np.zeros_like(self._minimum))
    self._adder.add(action, next_timestep, self._values, final_values)
