"""The A3C worker (Algorithm S3's actor-learner thread) as an `acme.Actor`:
it acts with its copy of the policy, and after t_max steps or at the end of
an episode computes the rollout's gradients, sends them to the shared
parameters and continues with the newest ones. Without a parameter server
to send to (the evaluator) it only acts, with the most likely action."""

import uuid
from typing import List, Optional, Sequence, Union

import acme
import dm_env
import numpy as np
import sonnet as snt
import tensorflow as tf
from acme.tf import variable_utils

from agents import actor_loop
from agents.a3c import losses
from agents.a3c import reward_scale
from agents.a3c.config import A3CConfig
from agents.a3c.learning import POLICY


class A3CActor(acme.Actor):
  """One environment, driven by `acme.EnvironmentLoop`, or by the program's
  actor loop (`agents.actor_loop`, with K = 1: `num_environments`,
  `select_actions`, `observe_first_at`, `observe_at`).

  `parameter_server` (an `A3CParameterServer` or a handle to one) makes this
  a learning worker; else `variable_client` keeps an evaluator's copy of the
  parameters fresh, and actions are the policy's mode, or with probability
  `epsilon` a random one (discrete actions). An evaluator acts for as many
  environments as it has epsilons (one float: one environment), with one
  batched forward pass (`select_actions`).
  """

  def __init__(self, network: snt.Module, observation_spec,
               action_spec, config: A3CConfig, parameter_server=None,
               variable_client: Optional[variable_utils.VariableClient] = None,
               epsilon: Union[float, Sequence[float]] = 0.0,
               seed: Optional[int] = None):
    self._network = network
    # Gradients are of the trained variables; the parameter server sends
    # every variable (with --popart also its statistics of the returns).
    self._variables = list(network.trainable_variables)
    self._synchronised_variables = list(network.variables)
    self._config = config
    self._server = parameter_server
    self._variable_client = variable_client
    self._epsilons = actor_loop.per_environment(epsilon, 'epsilon')
    if parameter_server is not None and len(self._epsilons) != 1:
      raise ValueError('An A3C worker acts in one environment: give one '
                       f'epsilon, not {len(self._epsilons)}.')
    self._rng = np.random.default_rng(seed)
    self._discrete = np.issubdtype(action_spec.dtype, np.integer)
    self._action_spec = action_spec
    self._entropy_cost = config.entropy_weight(not self._discrete)
    observations = tf.TensorSpec((None, *observation_spec.shape),
                                 tf.as_dtype(observation_spec.dtype))
    self._policy = tf.function(self._policy_parameters,
                               input_signature=[observations])
    action_dtype = tf.int32 if self._discrete else tf.float32
    action_shape = () if self._discrete else tuple(action_spec.shape)
    self._gradients = tf.function(self._rollout_gradients, input_signature=[
        observations,
        tf.TensorSpec((None, *action_shape), action_dtype),
        tf.TensorSpec((None,), tf.float32),
        tf.TensorSpec((None,), tf.float32),
        tf.TensorSpec((), tf.float32),
        tf.TensorSpec((), tf.float32),
    ])
    self._return_scale = (reward_scale.ReturnScale(config.discount)
                          if config.normalize_rewards else None)
    self._advantage_scale = (reward_scale.AdvantageScale()
                             if config.normalize_advantages else None)
    self._advantage_mean = (reward_scale.AdvantageMean()
                            if config.center_advantages else None)
    self._observations: List[np.ndarray] = []
    self._actions: List[np.ndarray] = []
    self._rewards: List[float] = []
    self._discounts: List[float] = []
    self._last_observation: Optional[np.ndarray] = None
    self._episode_ended = False
    self._raw_action: Optional[np.ndarray] = None
    self._synchronised = False
    # How the parameter server tells this worker's updates from the others'
    # (their staleness).
    self._name = f'worker-{uuid.uuid4().hex[:12]}'

  # The network, as tf.functions.

  def _policy_parameters(self, observations):
    policy = self._network(observations).policy
    return tuple(policy)

  def _rollout_gradients(self, observations, actions, rewards, discounts,
                         advantage_scale, advantage_offset):
    """Algorithm S3's accumulated gradients of one rollout: `observations`
    are its T states and the one after its last step; the policy term's
    advantages, less `advantage_offset`, multiplied by `advantage_scale`."""
    parts = self._config.log_gradient_parts
    with tf.GradientTape(persistent=parts) as tape:
      outputs = self._network(observations)
      taken = tf.nest.map_structure(lambda x: x[:-1], outputs)
      returns = losses.n_step_returns(rewards, discounts,
                                      tf.stop_gradient(outputs.value[-1]))
      loss, statistics = losses.a3c_loss(taken, actions,
                                         tf.stop_gradient(returns),
                                         self._entropy_cost,
                                         self._config.value_cost,
                                         advantage_scale, advantage_offset)
      # The loss is the policy term - beta entropy + c value: each on its
      # own (the entropy term's and the value term's with their weights).
      terms = {'policy': statistics['policy_loss'],
               'value': self._config.value_cost * statistics['value_loss'],
               'entropy': -self._entropy_cost * statistics['entropy_sum']}
    gradients = tape.gradient(loss, self._variables)
    if parts:
      for name, term in terms.items():
        statistics[f'{name}_gradient_norm'] = tf.linalg.global_norm(
            [g if g is not None else tf.zeros_like(v) for g, v in zip(
                tape.gradient(term, self._variables), self._variables)])
      del tape
    gradients, norm = tf.clip_by_global_norm(gradients,
                                             self._config.max_gradient_norm)
    statistics.pop('entropy_sum')
    statistics['loss'] = loss
    statistics['gradient_norm'] = norm
    statistics['clipped_gradient_norm'] = tf.minimum(
        norm, self._config.max_gradient_norm)
    return gradients, returns, statistics

  # The program's actor loop: one environment for a worker (A3C's has
  # one), one per epsilon for an evaluator.

  @property
  def num_environments(self) -> int:
    return len(self._epsilons)

  def select_actions(self, observations: np.ndarray) -> np.ndarray:
    if self._server is None:
      return self._evaluation_actions(observations)
    if len(observations) != 1:
      raise ValueError(f'An A3C worker acts in one environment, not '
                       f'{len(observations)}.')
    return np.asarray(self.select_action(observations[0]))[None]

  def _evaluation_actions(self, observations: np.ndarray) -> np.ndarray:
    """The evaluator's actions for a batch: the policy's mode, or with
    probability epsilon (row i: environment i's) a random action."""
    parameters = [p.numpy() for p in self._policy(observations)]
    if not self._discrete:
      return np.clip(parameters[0], self._action_spec.minimum,
                     self._action_spec.maximum).astype(self._action_spec.dtype)
    return actor_loop.epsilon_greedy(self._rng, parameters[0], self._epsilons)

  def observe_first_at(self, index: int, timestep: dm_env.TimeStep):
    del index  # A worker's is 0; an evaluator keeps nothing per environment.
    self.observe_first(timestep)

  def observe_at(self, index: int, action, next_timestep: dm_env.TimeStep):
    del index
    self.observe(action, next_timestep)

  # Acting.

  def select_action(self, observation: np.ndarray):
    if self._server is None:
      return self._evaluation_actions(observation[None])[0]
    parameters = [p.numpy()[0] for p in self._policy(observation[None])]
    if self._discrete:
      logits = parameters[0].astype(np.float64)
      probabilities = np.exp(logits - logits.max())
      probabilities /= probabilities.sum()
      return np.int32(self._rng.choice(len(logits), p=probabilities))
    mean, variance = parameters
    sample = mean + np.sqrt(variance) * self._rng.standard_normal(mean.shape)
    # The rollout keeps the sample; the environment gets it inside its
    # bounds.
    self._raw_action = sample.astype(np.float32)
    return np.clip(sample, self._action_spec.minimum,
                   self._action_spec.maximum).astype(self._action_spec.dtype)

  def observe_first(self, timestep: dm_env.TimeStep):
    if self._server is not None and not self._synchronised:
      # Algorithm S3 acts with the shared parameters from the start.
      self._assign(self._server.get_variables([POLICY])[0])
      self._synchronised = True
    if self._server is not None and self._episode_ended and self._observations:
      # A loop that starts the next episode before calling `update` (the
      # program's actor loop): the ended episode's rollout is learned from
      # first, bootstrapped (after a time limit) from its own last state.
      self._learn()
    self._last_observation = timestep.observation
    self._episode_ended = False

  def observe(self, action, next_timestep: dm_env.TimeStep):
    if self._server is None:
      return
    self._observations.append(self._last_observation)
    self._actions.append(action if self._discrete else self._raw_action)
    reward = float(next_timestep.reward or 0.0)
    if self._return_scale is not None:
      reward = self._return_scale.scale(reward, next_timestep.last())
    self._rewards.append(reward)
    # gamma times the step's discount: 0 where the episode terminated.
    self._discounts.append(self._config.discount *
                           float(next_timestep.discount))
    self._last_observation = next_timestep.observation
    self._episode_ended = next_timestep.last()

  def update(self, wait: bool = False):
    """A learning worker: its update once the rollout has t_max steps or
    its episode ended. An evaluator: a parameter pull (now with `wait`)."""
    if self._server is None:
      if self._variable_client is not None:
        if wait:
          self._variable_client.update_and_wait()
        else:
          self._variable_client.update()
      return
    if not self._observations:
      return
    if len(self._observations) < self._config.t_max and not self._episode_ended:
      return
    self._learn()

  def _learn(self):
    """Sends the rollout's gradients, takes the newest parameters, and
    starts a new rollout."""
    observations = np.stack(self._observations + [self._last_observation])
    # The scale of the rollouts before this one (--normalize_advantages).
    advantage_scale = (1.0 if self._advantage_scale is None
                       else self._advantage_scale.factor)
    advantage_offset = (0.0 if self._advantage_mean is None
                        else self._advantage_mean.offset)
    gradients, returns, statistics = self._gradients(
        observations, np.asarray(self._actions),
        np.asarray(self._rewards, np.float32),
        np.asarray(self._discounts, np.float32),
        np.float32(advantage_scale), np.float32(advantage_offset))
    statistics = {key: float(value) for key, value in statistics.items()}
    if self._advantage_scale is not None:
      self._advantage_scale.observe(statistics['advantage_square'])
      statistics['advantage_scale'] = advantage_scale
    if self._advantage_mean is not None:
      self._advantage_mean.observe(
          statistics['advantage'] * len(self._rewards), len(self._rewards))
      statistics['advantage_offset'] = advantage_offset
    if self._return_scale is not None:
      # What each reward was multiplied by (--normalize_rewards).
      statistics['reward_scale'] = self._return_scale.factor
    # With --popart the server moves its statistics by the rollout's returns
    # (the value's targets, in the task's units) before it applies the
    # gradient.
    targets = returns.numpy().tolist() if self._config.popart else None
    parameters = self._server.apply_gradients(
        [g.numpy() for g in gradients], len(self._rewards), statistics,
        worker=self._name, targets=targets)
    self._assign(parameters)
    self._observations, self._actions = [], []
    self._rewards, self._discounts = [], []

  def _assign(self, parameters: List[np.ndarray]):
    for variable, value in zip(self._synchronised_variables, parameters):
      variable.assign(value)
