"""Ape-X DQN hyper-parameters; defaults are the paper's (App. C)."""

import dataclasses
from typing import Optional

from agents.apex.config import ApeXConfig
from agents.config import check_flag
from agents.config import check_layer_sizes


@dataclasses.dataclass
class ApeXDQNConfig(ApeXConfig):
  """Ape-X DQN's hyper-parameters; see `ApeXConfig` for the shared ones."""

  learning_rate: float = 0.00025 / 4
  """Ape-X App. C: centered RMSProp learning rate 0.00025 / 4."""
  rmsprop_decay: float = 0.95
  """Ape-X App. C: RMSProp decay."""
  rmsprop_epsilon: float = 1.5e-7
  """Ape-X App. C: RMSProp epsilon (no momentum)."""
  max_gradient_norm: float = 40.0
  """Ape-X App. C: gradients clipped to global norm 40."""
  target_update_period: int = 2500
  """Ape-X App. C: target network copied every 2,500 learner updates."""
  epsilon_base: float = 0.4
  """Ape-X §4.1: actor i explores with epsilon_base^(1 + alpha i / (N - 1))."""
  epsilon_alpha: float = 7.0
  """Ape-X §4.1: alpha in the per-actor epsilon schedule."""
  evaluation_epsilon: float = 0.001
  """Exploration of the evaluator's near-greedy policy."""
  max_abs_reward: Optional[float] = None
  """Rewards clipped to [-x, x] on the actor side; None: the environment's
  default (1.0 on Atari, following DQN, no clipping elsewhere)."""
  mlp_hidden_sizes: str = '512'
  """Torso layers for vector observations, comma-separated."""
  dueling_hidden_size: int = 512
  """Wang et al. 2016: hidden units of each dueling stream."""

  CHECKPOINT_FIELDS = ApeXConfig.CHECKPOINT_FIELDS + (
      'max_abs_reward', 'mlp_hidden_sizes', 'dueling_hidden_size')

  def validate(self):
    super().validate()
    for name in ('learning_rate', 'max_gradient_norm', 'target_update_period',
                 'dueling_hidden_size', 'rmsprop_epsilon'):
      check_flag(name, getattr(self, name) > 0, getattr(self, name), '> 0')
    # Ape-X's epsilons eps^(1 + alpha i / (N - 1)) stay in [0, eps] only
    # for alpha >= 0.
    check_flag('epsilon_alpha', self.epsilon_alpha >= 0, self.epsilon_alpha,
               '>= 0')
    for name in ('epsilon_base', 'evaluation_epsilon', 'rmsprop_decay'):
      value = getattr(self, name)
      check_flag(name, 0.0 <= value <= 1.0, value, 'in [0, 1]')
    check_flag('max_abs_reward',
               self.max_abs_reward is None or self.max_abs_reward > 0,
               self.max_abs_reward, '> 0 (or unset for the default)')
    check_layer_sizes('mlp_hidden_sizes', self.mlp_hidden_sizes,
                      '512 or 256,256')
