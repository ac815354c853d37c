"""Ape-X DPG hyper-parameters; defaults are the paper's (Ape-X §3.2, App. D)
where it gives them."""

import dataclasses

from agents.apex.config import ApeXConfig
from agents.config import check_flag
from agents.config import check_layer_sizes


@dataclasses.dataclass
class ApeXDPGConfig(ApeXConfig):
  """Ape-X DPG's hyper-parameters; see `ApeXConfig` for the shared ones."""

  # Shared fields whose Ape-X DPG default differs.
  replay_capacity: int = 1_000_000
  """Ape-X App. D: replay holds 10^6 transitions."""
  min_replay_size: int = 10_000
  """Transitions in replay before learning starts (not given for Ape-X DPG
  in the paper; 10K here)."""
  batch_size: int = 256
  """Ape-X App. D: batches of 256 transitions."""

  policy_learning_rate: float = 1e-4
  """Ape-X App. D: Adam learning rate of the policy network."""
  critic_learning_rate: float = 1e-4
  """Ape-X App. D: Adam learning rate of the critic network."""
  target_update_period: int = 100
  """Ape-X App. D: target networks copied every 100 learner updates."""
  dqda_clip: float = 1.0
  """Ape-X App. D: the action gradient dq/da is clipped element-wise to
  [-x, x] in the policy update."""
  sigma: float = 0.3
  """Ape-X App. D: std of the actors' Gaussian exploration noise, drawn
  independently at every step (not Ornstein-Uhlenbeck), in units of half the
  action range (= action units for bounds [-1, 1])."""
  critic_hidden_sizes: str = '400,300'
  """Ape-X App. D: critic layers (the first followed by tanh)."""
  policy_hidden_sizes: str = '300,200'
  """Ape-X App. D: policy layers (the first followed by tanh)."""

  CHECKPOINT_FIELDS = ApeXConfig.CHECKPOINT_FIELDS + (
      'critic_hidden_sizes', 'policy_hidden_sizes')

  def validate(self):
    super().validate()
    for name in ('policy_learning_rate', 'critic_learning_rate',
                 'target_update_period', 'dqda_clip'):
      check_flag(name, getattr(self, name) > 0, getattr(self, name), '> 0')
    check_flag('sigma', self.sigma >= 0, self.sigma, '>= 0')
    for name in ('critic_hidden_sizes', 'policy_hidden_sizes'):
      check_layer_sizes(name, getattr(self, name), '400,300')
