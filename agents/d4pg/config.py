"""D4PG's hyper-parameters (Barth-Maron et al. 2018): Ape-X DPG's, and the
categorical critic's support.

Nothing here imports TensorFlow.
"""

import dataclasses
from typing import Optional, Tuple

from agents.apex_dpg.config import ApeXDPGConfig
from agents.config import check_flag


@dataclasses.dataclass
class D4PGConfig(ApeXDPGConfig):
  """D4PG's hyper-parameters; see `ApeXDPGConfig` for the actors, the
  replay and the networks' sizes, which D4PG keeps (D4PG §4: Ape-X DPG's
  architecture with a distributional critic)."""

  n_step: int = 5
  """D4PG §5: its N-step variants, the best of its figures, use N = 5."""
  num_atoms: int = 51
  """D4PG §3 and App. A (after Bellemare et al. 2017's C51): the critic's
  distribution over returns has mass on 51 evenly spaced atoms."""
  v_min: Optional[float] = None
  """The lowest atom. None: the lowest discounted return the environment
  can give, from its suite's reward range (`value_bounds`): 0 on the
  DeepMind Control suite."""
  v_max: Optional[float] = None
  """The highest atom. None: the highest discounted return the environment
  can give, k r_max / (1 - discount) for an agent step of k frames: 100 k
  on the DeepMind Control suite at discount 0.99. (Acme's D4PG examples
  take [-150, 150] for the suite without an action repeat.)"""

  CHECKPOINT_FIELDS = ApeXDPGConfig.CHECKPOINT_FIELDS + (
      'num_atoms', 'v_min', 'v_max')

  def validate(self):
    super().validate()
    check_flag('num_atoms', self.num_atoms >= 2, self.num_atoms, '>= 2')
    if self.v_min is not None and self.v_max is not None:
      check_flag('v_max', self.v_max > self.v_min, self.v_max,
                 f'above --v_min ({self.v_min})')

  def check_environment(self, environment):
    """Refuses an environment whose returns' bounds are unknown when
    --v_min or --v_max is left to them."""
    super().check_environment(environment)
    value_bounds(self, environment)


def value_bounds(config: D4PGConfig, environment) -> Tuple[float, float]:
  """(v_min, v_max) of the critic's support for `environment` (an
  `agents.envs.environments.EnvironmentSpec`): the config's, or, where it
  leaves one to the environment (None), the discounted return of an
  endless run of the suite's lowest or highest reward, each agent step
  `frames_per_step` frames, widened to take 0 (an episode that ends at
  once).

  Raises:
    ValueError: a bound is left to an environment whose suite declares no
      reward range; it says which flags to give.
  """
  v_min, v_max = config.v_min, config.v_max
  if v_min is None or v_max is None:
    reward_range = environment.suite.reward_range
    if reward_range is None:
      raise ValueError(
          f'--v_min and --v_max: {environment.name} has no known reward '
          'range to bound the critic\'s support with. Give both, e.g. '
          '--v_min=-150 --v_max=150 (returns outside them are clipped to '
          'the nearest atom).')
    if config.discount >= 1.0:
      raise ValueError(
          '--v_min and --v_max: with --discount=1 the returns have no '
          'bound; give both flags, or a discount below 1.')
    horizon = environment.frames_per_step / (1.0 - config.discount)
    low, high = (bound * horizon for bound in reward_range)
    v_min = min(low, 0.0) if v_min is None else v_min
    v_max = max(high, 0.0) if v_max is None else v_max
  if v_max <= v_min:
    raise ValueError(f'--v_max ({v_max}) must be above --v_min ({v_min}).')
  return float(v_min), float(v_max)
