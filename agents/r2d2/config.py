"""R2D2's hyper-parameters (Kapturowski et al. 2019); the defaults are the
paper's (§2.3, §3 and its Appendix, Table 2), each with its source; where
the paper is silent the docstring says so and what was chosen.

Replay's items are sequences (`agents.replay.sequences`): the sizes of
replay and of a batch count sequences. Nothing here imports TensorFlow.
"""

import dataclasses

from agents.apex.config import ApeXConfig
from agents.config import check_choice
from agents.config import check_flag
from agents.config import check_layer_sizes


@dataclasses.dataclass
class R2D2Config(ApeXConfig):
  """R2D2's hyper-parameters; see `ApeXConfig` for the shared machinery
  (replay, actors, learner), whose defaults R2D2 changes here."""

  # Targets (§2.3).
  n_step: int = 5
  """R2D2 §2.3: n-step double Q-learning with n = 5."""
  discount: float = 0.997
  """R2D2 §2.3 (Table 2): gamma = 0.997, 'slightly higher' than Ape-X's."""
  value_rescaling_epsilon: float = 1e-3
  """R2D2 §2.3 (Table 2): the value rescaling h(x) = sign(x)(sqrt(|x| + 1)
  - 1) + eps x with eps = 1e-3 (Pohlen et al. 2018), in place of reward
  clipping: rewards are not clipped."""

  # Sequences (§2.3, §3).
  trace_length: int = 80
  """R2D2 §2.3 (Table 2): sequences of m = 80 steps are learnt from."""
  burn_in_length: int = 40
  """R2D2 §3 (Table 2: 'prefix of l = 40'): steps before the learnt ones,
  unrolled from the stored state only to refresh it (no loss, no gradient
  into them). A sequence that begins at its episode's start has the
  episode's own first state stored, which cannot be stale: its burn-in
  steps are learnt from too. (The paper is silent on this case; Acme skips
  the first 40 steps of every episode. On Atari that is nothing; on a task
  of short episodes it would be most of them.)"""
  sequence_period: int = 40
  """R2D2 §2.3: adjacent sequences overlap by 40 steps: a sequence begins
  every 40 steps of an episode, so each step is learnt from in two."""

  # Replay (§2.3, Table 2), in sequences.
  replay_capacity: int = 100_000
  """R2D2 Table 2: 4M observations, 1e5 part-overlapping sequences."""
  min_replay_size: int = 1_250
  """The paper is silent: Ape-X's 50K transitions (App. C) before learning,
  which are 1,250 sequences of 40 new steps each."""
  priority_exponent: float = 0.9
  """R2D2 §2.3 (Table 2): priority exponent 0.9."""
  importance_sampling_exponent: float = 0.6
  """R2D2 Table 2: importance sampling exponent 0.6. (§2.3 says that they
  found no benefit from the importance weights; 0 turns them off.)"""
  priority_eta: float = 0.9
  """R2D2 §2.3: a sequence's priority is eta max_i |delta_i| + (1 - eta)
  mean_i |delta_i| over its TD errors, eta = 0.9."""

  # Actors (Ape-X §4.1, which R2D2 follows, §2.3).
  actor_flush_size: int = 2
  """The paper is silent: sequences whose initial priorities an actor
  computes in one batch; 2 sequences are 80 new steps, inside Ape-X's
  local buffer of up to 100 transitions (§3)."""
  epsilon_base: float = 0.4
  """R2D2 §2.3, as Ape-X §4.1: actor i of N explores with
  epsilon_base^(1 + epsilon_alpha i / (N - 1))."""
  epsilon_alpha: float = 7.0
  """Ape-X §4.1: alpha of the per-actor epsilons."""
  evaluation_epsilon: float = 0.001
  """The paper is silent: the evaluator's epsilon, Ape-X DQN's 0.001."""

  # Learner (Table 2).
  batch_size: int = 64
  """R2D2 §2.3 (Table 2): batches of 64 sequences."""
  learning_rate: float = 1e-4
  """R2D2 Table 2: Adam, learning rate 1e-4."""
  adam_epsilon: float = 1e-3
  """R2D2 Table 2: Adam's epsilon 1e-3."""
  target_update_period: int = 2500
  """R2D2 §2.3 (Table 2): the target network is copied every 2,500
  updates."""

  # Network (§2.3, Appendix).
  lstm_size: int = 512
  """R2D2 §2.3 and Appendix: an LSTM of 512 units after the convolutional
  torso (Ape-X's), then Ape-X's dueling head."""
  dueling_hidden_size: int = 512
  """Ape-X's dueling head (Wang et al. 2016): 512 units per stream."""
  mlp_hidden_sizes: str = '512'
  """The torso for vector observations, which the paper has none of:
  comma-separated layer sizes (Ape-X DQN's)."""

  CHECKPOINT_FIELDS = ApeXConfig.CHECKPOINT_FIELDS + (
      'trace_length', 'burn_in_length', 'sequence_period', 'lstm_size',
      'dueling_hidden_size', 'mlp_hidden_sizes')

  @property
  def sequence_length(self) -> int:
    """Rows of a stored sequence: the burn-in, the learnt steps and one
    row more, which the last learnt step bootstraps from (as Acme's
    R2D2)."""
    return self.burn_in_length + self.trace_length + 1

  def validate(self):
    super().validate()
    check_flag('trace_length', self.trace_length >= 1, self.trace_length,
               '>= 1')
    check_flag('burn_in_length', self.burn_in_length >= 0,
               self.burn_in_length, '>= 0 (0: no burn-in)')
    check_flag('sequence_period',
               1 <= self.sequence_period <= self.trace_length,
               self.sequence_period,
               f'in [1, --trace_length={self.trace_length}], so that every '
               'step is learnt from in some sequence')
    check_flag('priority_eta', 0.0 <= self.priority_eta <= 1.0,
               self.priority_eta, 'in [0, 1]')
    for name in ('learning_rate', 'adam_epsilon', 'value_rescaling_epsilon',
                 'target_update_period', 'lstm_size', 'dueling_hidden_size'):
      check_flag(name, getattr(self, name) > 0, getattr(self, name), '> 0')
    for name in ('epsilon_base', 'evaluation_epsilon'):
      check_flag(name, 0.0 <= getattr(self, name) <= 1.0,
                 getattr(self, name), 'in [0, 1]')
    check_flag('epsilon_alpha', self.epsilon_alpha >= 0, self.epsilon_alpha,
               '>= 0')
    check_layer_sizes('mlp_hidden_sizes', self.mlp_hidden_sizes,
                      '512 or 256,256')
    check_choice('initial_priority', self.initial_priority, ('actor',))
    check_flag('learner_precision', self.learner_precision == 'float32',
               repr(self.learner_precision),
               "'float32': R2D2's LSTM learner has not been run in bfloat16")

  def replay_item_bytes(self, suite) -> int:
    """A sequence's share of replay: its `sequence_period` new steps (the
    rest it shares with the sequences that overlap it), each taken as a
    transition's measured bytes, an upper bound (a transition holds two
    observations, a step one)."""
    return self.sequence_period * super().replay_item_bytes(suite)
