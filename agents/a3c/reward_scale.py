"""Rewards divided by the running standard deviation of the discounted
return (`--normalize_rewards`).

The A3C paper's hyper-parameters (entropy weight 0.01, learning rates of
1e-4 to 1e-2 through RMSProp, whose steps are about the learning rate
whatever the gradient's size) were chosen on Atari with rewards clipped to
[-1, 1] (Supp. §8), where returns stay near 1. A task that pays every step
has returns of -1 / (1 - gamma), -100 on Acrobot at gamma 0.99: the value's
output then needs tens of thousands of RMSProp steps to reach the returns,
its errors dominate the shared torso's gradient, and the advantages dwarf
or are dwarfed by the entropy term depending on the discount
(docs/a3c.md). Dividing each reward by the standard deviation of the
discounted return seen so far puts the returns near 1 again, as Atari's
clipping does, without moving their sign or the optimum (a constant
positive factor on every reward). This is what OpenAI Baselines'
`VecNormalize` does for its `ret` statistics (a running variance of
`ret = gamma * ret + r`, reset at each episode's end; rewards divided by its
square root, then clipped); the clip is left out here.
"""

import math


class ReturnScale:
  """Running variance of a worker's discounted return, for scaling its
  rewards. Each worker keeps its own (the statistics are not part of the
  run's checkpoint: a resumed worker estimates them anew)."""

  def __init__(self, discount: float, epsilon: float = 1e-8):
    self._discount = discount
    self._epsilon = epsilon
    self._return = 0.0
    # Welford's running mean and sum of squared deviations of the returns.
    self._count = 0
    self._mean = 0.0
    self._squares = 0.0

  def scale(self, reward: float, last: bool) -> float:
    """`reward` over the return's running standard deviation, the return
    including this reward; `last`: the step ended its episode."""
    self._return = self._discount * self._return + reward
    self._count += 1
    delta = self._return - self._mean
    self._mean += delta / self._count
    self._squares += delta * (self._return - self._mean)
    if last:
      self._return = 0.0
    return reward * self.factor

  @property
  def factor(self) -> float:
    """What a reward is multiplied by now: 1 / the returns' standard
    deviation (1 before there are two returns to spread)."""
    if self._count < 2:
      return 1.0
    return 1.0 / math.sqrt(self.variance + self._epsilon)

  @property
  def variance(self) -> float:
    """The population variance of the returns seen so far."""
    return self._squares / self._count if self._count else 0.0
