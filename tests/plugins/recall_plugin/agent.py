"""recall_dqn's parts: an LSTM Q-network, an actor that carries its state and
writes sequences (`agents.replay.sequences`), and a learner that unrolls the
network over them from their stored start states (R2D2 in miniature:
1-step double Q-learning, no burn-in, no value rescaling).

The TD errors and the priorities of a sequence are computed in one place,
`td_errors` and `sequence_priorities`, by the learner on its batch and by
the actors on the values they computed while acting.
"""

import copy
from typing import Optional

import numpy as np
import sonnet as snt
import tensorflow as tf

from agents import actor_loop
from agents.apex import actors
from agents.apex import builder as apex_builder
from agents.apex import learning
from agents import snapshots
from agents import variables as variables_lib
from agents.apex_dqn.actor import apex_epsilons
from agents.replay import sequences
from agents.replay import tables


def make_network(environment, config) -> snt.RNNCore:
  """Q-values from an LSTM over a layer of the observation."""
  return snt.DeepRNN([snt.Linear(32), tf.nn.relu, snt.LSTM(config.lstm_size),
                      snt.Linear(environment.spec.actions.num_values)])


def td_errors(q, q_select, q_evaluate, actions, rewards, discounts,
              discount: float):
  """[B, L - 1]: r_t + gamma d_t q_evaluate(t + 1, argmax q_select(t + 1))
  - q(t, a_t), for the rows t < L - 1 of sequences of L ([B, L, A] Q-values;
  the last row only bootstraps)."""
  chosen = tf.gather(q[:, :-1], actions[:, :-1], batch_dims=2)
  best = tf.argmax(q_select[:, 1:], axis=-1, output_type=tf.int32)
  bootstrap = tf.gather(q_evaluate[:, 1:], best, batch_dims=2)
  target = rewards[:, :-1] + discount * discounts[:, :-1] * bootstrap
  return tf.stop_gradient(target) - chosen


def sequence_priorities(errors, masks, eta: float):
  """R2D2 §2.3: eta max |delta| + (1 - eta) mean |delta| over the rows with
  a TD error (mask 1); [B]."""
  masks = masks[:, :-1]
  errors = tf.abs(errors) * masks
  mean = tf.reduce_sum(errors, -1) / tf.maximum(tf.reduce_sum(masks, -1), 1.)
  return eta * tf.reduce_max(errors, -1) + (1. - eta) * mean


def unroll(core: snt.RNNCore, observations, state):
  """[B, L, A] outputs of `core` over [B, L, ...] observations from
  `state`."""
  time_major = tf.nest.map_structure(
      lambda x: tf.transpose(x, [1, 0, *range(2, x.shape.rank)]),
      observations)
  outputs, _ = snt.static_unroll(core, time_major, state)
  return tf.transpose(outputs, [1, 0, 2])


class RecallLearner(learning.ApeXLearner):
  """Double Q-learning on sequences, from their stored states."""

  def __init__(self, network, target_network, optimizer, discount: float,
               eta: float, **replay_learning):
    super().__init__(variables={'network': network.trainable_variables},
                     target_pairs=[(network, target_network)],
                     **replay_learning)
    self._network = network
    self._target_network = target_network
    self._optimizer = optimizer
    self._discount = discount
    self._eta = eta

  def _update(self, data, weights):
    observations = data[sequences.OBSERVATION]
    state = data[sequences.START_STATE]
    masks = data[sequences.MASK]
    with tf.GradientTape() as tape:
      q = unroll(self._network, observations, state)
      q_target = unroll(self._target_network, observations, state)
      errors = td_errors(q, q, q_target, data[sequences.ACTION],
                         data[sequences.REWARD], data[sequences.DISCOUNT],
                         self._discount)
      rows = masks[:, :-1]
      per_sequence = (tf.reduce_sum(0.5 * tf.square(errors) * rows, -1) /
                      tf.maximum(tf.reduce_sum(rows, -1), 1.))
      loss = tf.reduce_mean(weights * per_sequence)
    variables = self._network.trainable_variables
    self._optimizer.apply(tape.gradient(loss, variables), variables)
    return sequence_priorities(errors, masks, self._eta), {'loss': loss}

  def _optimizers(self):
    return [(self._optimizer, self._network.trainable_variables)]

  @property
  def state(self):
    return {'network': self._network, 'target_network': self._target_network,
            'optimizer': self._optimizer, 'num_steps': self._num_steps,
            'max_priority': self._max_priority}


class RecallActor(actors.ApeXActor):
  """Epsilon-greedy over K environments, each with its own recurrent state,
  begun again at its episode's start; with adders, it writes each
  environment's sequences with the state before each step. (The Ape-X
  actor's batching, parameter pulls and adders' life, with a state.)"""

  def __init__(self, network, epsilons, adders=(), variable_client=None,
               seed: Optional[int] = None):
    self._epsilons = actor_loop.per_environment(epsilons, 'epsilon')
    super().__init__(len(self._epsilons), adders, variable_client)
    self._rng = np.random.default_rng(seed)
    self._step = tf.function(network)
    numpy = lambda state: tf.nest.map_structure(np.array, state)
    self._first = numpy(network.initial_state(1))
    self._state = numpy(network.initial_state(len(self._epsilons)))
    self._before = self._state

  def _act(self, observations):
    self._before = self._state
    q, state = self._step(observations, self._state)
    self._state = tf.nest.map_structure(np.array, state)
    q = q.numpy()
    return actor_loop.epsilon_greedy(self._rng, q, self._epsilons), q

  def _final_values(self, observation):
    raise NotImplementedError  # Needs the state: see `observe_at`.

  def observe_first_at(self, index: int, timestep):
    actor_loop.begin_again(self._state, self._first, index)
    super().observe_first_at(index, timestep)

  def observe_at(self, index: int, action, next_timestep):
    if not self._adders:
      return
    final_values = None
    if next_timestep.last() and next_timestep.discount > 0:
      q, _ = self._step(next_timestep.observation[None],
                        tf.nest.map_structure(lambda x: x[index:index + 1],
                                              self._state))
      final_values = q.numpy()[0]
    self._adders[index].add(
        action, next_timestep, self._values[index],
        tf.nest.map_structure(lambda x: x[index], self._before), final_values)


class RecallBuilder(apex_builder.ApeXBuilder):
  """recall_dqn's builder: the Ape-X builder with sequences for items."""

  name = 'recall_dqn'

  def default_networks(self):
    return make_network

  def make_network(self) -> snt.RNNCore:
    network = self.network_factory(self.environment, self.config)
    observations = tf.zeros((1, *self.environment.spec.observations.shape),
                            self.environment.spec.observations.dtype)
    network(observations, network.initial_state(1))  # Its variables.
    return network

  def _state_spec(self, network):
    return tf.nest.map_structure(
        lambda x: tf.TensorSpec(x.shape[1:], x.dtype),
        network.initial_state(1))

  def replay_signature(self):
    spec = self.environment.spec
    return sequences.sequence_signature(
        spec.observations, spec.actions,
        self._state_spec(self.make_network()), self.config.sequence_length)

  @property
  def priority_fn(self):
    discount, eta = self.config.discount, self.config.priority_eta

    def initial_priorities(values, actions, rewards, discounts, masks):
      errors = td_errors(values, values, values, actions, rewards, discounts,
                         discount)
      return sequence_priorities(errors, masks, eta).numpy()

    return initial_priorities

  def make_adder(self, replay_client, priority_fn=None):
    return sequences.SequenceAdder(
        replay_client, tables.TABLE, self.config.sequence_length,
        self.config.sequence_period, priority_fn or self.priority_fn,
        flush_size=self.config.actor_flush_size)

  def make_learner(self, replay_client, counter=None, logger=None,
                   log_every: float = 0.0):
    network = self.make_network()
    return RecallLearner(
        network, copy.deepcopy(network),
        snt.optimizers.Adam(self.config.learning_rate),
        discount=self.config.discount, eta=self.config.priority_eta,
        target_update_period=self.config.target_update_period,
        **self.replay_learner_arguments(replay_client, counter, logger,
                                        log_every))

  def actor_networks(self):
    return [self.make_network()]

  def make_actor(self, variable_source, exploration, replay_client=None,
                 seed: Optional[int] = None):
    network = self.make_network()
    variable_client = variables_lib.NewestVariableClient(
        variable_source, {'network': network.trainable_variables},
        update_period=self.variable_update_period)
    variable_client.update_and_wait()
    return RecallActor(network, exploration,
                       self.make_adders(replay_client, exploration),
                       variable_client, seed)

  def actor_exploration(self, actor_id: int, num_actors: int,
                        envs_per_actor: int = 1):
    epsilons = apex_epsilons(num_actors * envs_per_actor,
                             self.config.epsilon_base,
                             self.config.epsilon_alpha)
    return epsilons[actor_id * envs_per_actor:(actor_id + 1) * envs_per_actor]

  def policy_state(self):
    return {'network': self.make_network()}

  def policy_snapshot(self, learner_state) -> snapshots.PolicySnapshot:
    return snapshots.PolicySnapshot(learner_state['network'],
                                    self.environment, self.name,
                                    q_network=True, recurrent=True)

  @property
  def evaluation_exploration(self) -> float:
    return self.config.evaluation_epsilon
