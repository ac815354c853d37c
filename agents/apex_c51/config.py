"""The distributional Ape-X DQN's hyper-parameters: Ape-X DQN's (App. C),
and the support of its return distributions (C51, Bellemare et al. 2017).

Nothing here imports TensorFlow.
"""

import dataclasses

from agents.apex_dqn.config import ApeXDQNConfig
from agents.config import check_flag


@dataclasses.dataclass
class ApeXC51Config(ApeXDQNConfig):
  """Ape-X DQN's hyper-parameters (its actors, replay, n-step double-Q
  targets, dueling torso, RMSProp) with a categorical return distribution
  per action in place of its Q-value; see `ApeXDQNConfig`."""

  num_atoms: int = 51
  """C51 §5 (Bellemare et al. 2017) and Rainbow (Hessel et al. 2018,
  Table 1): 51 evenly spaced atoms."""
  v_min: float = -10.0
  """C51 §5 and Rainbow Table 1 on Atari, whose rewards are clipped to
  [-1, 1]: the lowest atom, -10."""
  v_max: float = 10.0
  """C51 §5 and Rainbow Table 1: the highest atom, 10."""

  CHECKPOINT_FIELDS = ApeXDQNConfig.CHECKPOINT_FIELDS + (
      'num_atoms', 'v_min', 'v_max')

  def validate(self):
    super().validate()
    check_flag('num_atoms', self.num_atoms >= 2, self.num_atoms, '>= 2')
    check_flag('v_max', self.v_max > self.v_min, self.v_max,
               f'above --v_min ({self.v_min})')
