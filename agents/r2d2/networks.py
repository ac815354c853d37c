"""R2D2's network (§2.3, Appendix): the torso of the environment's suite
(Ape-X's Nature CNN on Atari, Young & Tian's on MinAtar, an MLP on vectors:
agents/networks/torsos.py), an LSTM, and Ape-X's dueling head on its
output. An `snt.RNNCore`: one step at a time for the actors, the evaluator
and the policy snapshot; `unroll` for the learner's sequences.

What an item stores as its start state (`stored_state`): the actor's LSTM
state before the sequence's first step, and whether that step began its
episode (`losses.learnt_rows`).
"""

from typing import Any, Dict

import sonnet as snt
import tensorflow as tf

from agents.apex_dqn.networks import DuelingQNetwork
from agents.config import parse_layer_sizes
from agents.networks.torsos import make_torso

CORE_STATE = 'core'
EPISODE_START = 'episode_start'


def stored_state(core_state, episode_start) -> Dict[str, Any]:
  """A sequence's start state, as replay stores it."""
  return {CORE_STATE: core_state, EPISODE_START: episode_start}


class R2D2Network(snt.RNNCore):
  """Q(h_t, a): torso, LSTM, dueling head (Wang et al. 2016)."""

  def __init__(self, torso: snt.Module, num_actions: int, lstm_size: int,
               dueling_hidden_size: int, name: str = 'r2d2_network'):
    super().__init__(name=name)
    self._torso = torso
    self._lstm = snt.LSTM(lstm_size)
    self._head = DuelingQNetwork(tf.identity, num_actions,
                                 dueling_hidden_size)

  def __call__(self, observations, state):
    """One step of a batch: ([B, A] Q-values, the next state)."""
    outputs, state = self._lstm(self._torso(observations), state)
    return self._head(outputs), state

  def initial_state(self, batch_size):
    return self._lstm.initial_state(batch_size)

  def unroll(self, observations, state, burn_in: int = 0,
             episode_start=None):
    """[B, L, A] Q-values over [B, L, ...] observations from `state`. The
    torso and the head see all B x L observations at once; the LSTM goes
    step by step. With `burn_in`, the gradient stops at the state after
    the first `burn_in` steps (R2D2 §3), but for the sequences whose
    `episode_start` ([B]) is 1, which learn from their first steps too."""
    batch, length = observations.shape[0], observations.shape[1]
    batch = batch if batch is not None else tf.shape(observations)[0]
    flat = tf.reshape(observations, [-1, *observations.shape[2:]])
    embedding = self._torso(flat)
    embedding = tf.reshape(embedding, [batch, length, embedding.shape[-1]])
    time_major = tf.transpose(embedding, [1, 0, 2])
    outputs = []
    if burn_in:
      prefix, state = snt.static_unroll(self._lstm, time_major[:burn_in],
                                        state)
      outputs.append(prefix)
      if episode_start is None:
        state = tf.nest.map_structure(tf.stop_gradient, state)
      else:
        keep = tf.cast(episode_start, tf.bool)[:, None]
        state = tf.nest.map_structure(
            lambda x: tf.where(keep, x, tf.stop_gradient(x)), state)
    if burn_in < length:
      rest, _ = snt.static_unroll(self._lstm, time_major[burn_in:], state)
      outputs.append(rest)
    hidden = tf.transpose(tf.concat(outputs, axis=0), [1, 0, 2])
    q_values = self._head(tf.reshape(hidden, [-1, hidden.shape[-1]]))
    return tf.reshape(q_values, [batch, length, -1])


def make_networks(environment, config) -> R2D2Network:
  """R2D2's network factory: the network of `config` (an `R2D2Config`)
  for `environment` (an `EnvironmentSpec`), its variables not yet made."""
  return R2D2Network(
      make_torso(environment.suite, 'features',
                 parse_layer_sizes(config.mlp_hidden_sizes)),
      environment.spec.actions.num_values, config.lstm_size,
      config.dueling_hidden_size)
