"""R2D2's loss (§2.3): n-step double Q-learning over stored sequences,
its targets under the invertible value rescaling h, learnt only past the
burn-in (§3).

A batch holds sequences of L rows (`agents.replay.sequences`): row t has
the observation o_t, the action a_t taken there, the reward r_{t+1} and
the discount d_{t+1} (0 where the episode terminated) of its step, and a
mask (1 where a step starts there). The last row only bootstraps. Each
row t < L - 1 with a step has the n-step target

  G_t = sum_{k<m} gamma^k (prod_{i<k} d_{t+i}) r_{t+k+1}
        + gamma^m (prod_{i<m} d_{t+i}) h^-1(q_target(o_{t+m}, a*)),
  a* = argmax_a q_online(o_{t+m}, a),

where m = n, or fewer where the sequence or its episode ends first (its
window stops at the first row without a step: the episode's final
observation, or the sequence's last row), and the TD error
delta_t = h(G_t) - q_online(o_t, a_t).
"""

import tensorflow as tf


def value_rescaling(x, epsilon: float):
  """R2D2 §2.3 (Pohlen et al. 2018): h(x) = sign(x)(sqrt(|x| + 1) - 1) +
  epsilon x."""
  return tf.sign(x) * (tf.sqrt(tf.abs(x) + 1.0) - 1.0) + epsilon * x


def inverse_value_rescaling(x, epsilon: float):
  """h^-1(x) = sign(x)(((sqrt(1 + 4 epsilon (|x| + 1 + epsilon)) - 1) /
  (2 epsilon))^2 - 1), for epsilon > 0 (Pohlen et al. 2018, Prop. A.2)."""
  root = (tf.sqrt(1.0 + 4.0 * epsilon * (tf.abs(x) + 1.0 + epsilon)) - 1.0)
  return tf.sign(x) * (tf.square(root / (2.0 * epsilon)) - 1.0)


def learnt_rows(masks, episode_start, burn_in: int):
  """[B, L - 1]: 1 at the rows whose TD error is learnt from: a step
  starts there (mask 1), it is not the last row (which only bootstraps),
  and it is past the first `burn_in` rows, unless the sequence begins at
  its episode's start (`episode_start` [B] 1; its stored state is the
  episode's first, which no burn-in need refresh)."""
  steps = masks[:, :-1]
  past_burn_in = tf.cast(tf.range(tf.shape(steps)[1]) >= burn_in,
                         steps.dtype)
  return steps * tf.maximum(past_burn_in[None], episode_start[:, None])


def td_errors(q_online, q_selector, q_evaluator, actions, rewards, discounts,
              masks, n_step: int, discount: float, epsilon: float):
  """[B, L - 1]: h(G_t) - q_online(o_t, a_t) for the rows t < L - 1
  (module docstring), from [B, L, A] Q-values: `q_selector` chooses the
  bootstrap action, `q_evaluator` values it (the learner's online and
  target networks; an actor's own values in both roles). Rows without a
  step have an error of no meaning: `learnt_rows` leaves them out."""
  steps = masks[:, :-1]
  rows = steps.shape[1]
  pad = lambda x: tf.pad(x, [[0, 0], [0, n_step]])
  steps, step_rewards, step_discounts = (
      pad(steps), pad(rewards[:, :-1]), pad(discounts[:, :-1]))
  returns = tf.zeros_like(steps[:, :rows])
  scale = tf.ones_like(returns)  # gamma^k prod_{i<k} d_{t+i}.
  alive = tf.ones_like(returns)  # Whether step t + k is in t's window.
  window = tf.zeros_like(returns, tf.int32)  # m_t.
  for k in range(n_step):
    alive = alive * steps[:, k:k + rows]
    returns += alive * scale * step_rewards[:, k:k + rows]
    scale = tf.where(alive > 0,
                     scale * discount * step_discounts[:, k:k + rows], scale)
    window += tf.cast(alive, tf.int32)
  bootstrap_rows = tf.range(rows)[None] + window
  best = tf.argmax(tf.gather(q_selector, bootstrap_rows, batch_dims=1),
                   axis=-1, output_type=tf.int32)
  bootstrap = tf.gather(tf.gather(q_evaluator, bootstrap_rows, batch_dims=1),
                        best, batch_dims=2)
  targets = value_rescaling(
      returns + scale * inverse_value_rescaling(bootstrap, epsilon), epsilon)
  chosen = tf.gather(q_online[:, :-1], tf.cast(actions[:, :-1], tf.int32),
                     batch_dims=2)
  return tf.stop_gradient(targets) - chosen


def sequence_loss(errors, rows, importance_weights):
  """The batch's loss: each sequence's 1/2 delta^2 summed over its learnt
  `rows`, weighted by importance sampling, averaged over the batch. (The
  paper does not say how a sequence's steps are reduced; summed, as
  Acme's R2D2, each learnt step weighs the same.)"""
  per_sequence = tf.reduce_sum(0.5 * tf.square(errors) * rows, axis=-1)
  return tf.reduce_mean(importance_weights * per_sequence)
