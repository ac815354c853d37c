"""The R2D2 learner (§2.3, §3): n-step double Q-learning with value
rescaling over prioritised stored sequences, on the shared Ape-X loop
(`agents.apex.learning.ApeXLearner`: sampling, importance weights,
priorities written back, target copies)."""

import sonnet as snt
import tensorflow as tf

from agents.apex import learning
from agents.r2d2 import losses
from agents.r2d2 import networks
from agents.r2d2 import priorities
from agents.replay import sequences


class R2D2Learner(learning.ApeXLearner):
  """Each update unrolls the online and the target network over the
  batch's sequences from their stored states (§2.3), each through the
  burn-in of its own (§3), and learns from the TD errors of the rows past
  it (`losses`) with Adam; the sequences' new priorities are the mix of
  their TD errors (`priorities.sequence_priorities`)."""

  def __init__(self, network: networks.R2D2Network,
               target_network: networks.R2D2Network,
               optimizer: snt.Optimizer, n_step: int, discount: float,
               value_rescaling_epsilon: float, burn_in: int, eta: float,
               **replay_learning):
    """`replay_learning`: `ApeXLearner`'s arguments, by keyword."""
    super().__init__(variables={'network': network.trainable_variables},
                     target_pairs=[(network, target_network)],
                     **replay_learning)
    self._network = network
    self._target_network = target_network
    self._optimizer = optimizer
    self._n_step = n_step
    self._discount = discount
    self._epsilon = value_rescaling_epsilon
    self._burn_in = burn_in
    self._eta = eta

  def _update(self, data, weights):
    observations = data[sequences.OBSERVATION]
    start = data[sequences.START_STATE]
    core_state = start[networks.CORE_STATE]
    episode_start = start[networks.EPISODE_START]
    masks = data[sequences.MASK]
    q_target = self._target_network.unroll(observations, core_state,
                                           self._burn_in, episode_start)
    with tf.GradientTape() as tape:
      q = self._network.unroll(observations, core_state, self._burn_in,
                               episode_start)
      errors = losses.td_errors(
          q, q, q_target, data[sequences.ACTION], data[sequences.REWARD],
          data[sequences.DISCOUNT], masks, self._n_step, self._discount,
          self._epsilon)
      rows = losses.learnt_rows(masks, episode_start, self._burn_in)
      loss = losses.sequence_loss(errors, rows, weights)
    metrics = {}
    if sequences.STATE_AT_ROW in data:  # With the parameters q had.
      metrics['q_discrepancy'] = self._q_discrepancy(
          q, observations, data[sequences.STATE_AT_ROW], masks)
    variables = self._network.trainable_variables
    with tf.control_dependencies(list(metrics.values())):
      self._optimizer.apply(tape.gradient(loss, variables), variables)
    new_priorities = priorities.sequence_priorities(errors, rows, self._eta)
    return new_priorities, {
        **metrics,
        'loss': loss,
        'learnt_steps': tf.reduce_mean(tf.reduce_sum(rows, axis=-1)),
        'mean_q': tf.reduce_sum(tf.reduce_max(q[:, :-1], -1) * rows) /
                  tf.maximum(tf.reduce_sum(rows), 1.0)}

  def _q_discrepancy(self, q, observations, stored_state, masks):
    """R2D2 §3's measure of the stored states' staleness, where the burn-in
    ends (row b): ||Q(o_b; h_stored) - Q(o_b; h_burn-in)|| over the
    largest |Q(o_b; h_stored)|, with today's parameters for both: the
    actor's state then (computed with its older parameters over the whole
    episode so far) against the state the burn-in recomputed from the
    sequence's start state. The mean over the batch's sequences with a
    step at row b."""
    row = self._burn_in
    q_stored, _ = self._network(observations[:, row],
                                stored_state[networks.CORE_STATE])
    q_stored = tf.stop_gradient(q_stored)
    gap = tf.norm(q_stored - tf.stop_gradient(q[:, row]), axis=-1) / (
        tf.maximum(tf.reduce_max(tf.abs(q_stored), axis=-1), 1e-8))
    valid = masks[:, row]
    return tf.reduce_sum(gap * valid) / tf.maximum(tf.reduce_sum(valid), 1.0)

  def _optimizers(self):
    return [(self._optimizer, self._network.trainable_variables)]

  @property
  def state(self):
    """What a checkpoint of this learner holds."""
    return {'network': self._network, 'target_network': self._target_network,
            'optimizer': self._optimizer, 'num_steps': self._num_steps,
            'max_priority': self._max_priority}
