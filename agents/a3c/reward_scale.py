"""Rewards divided by the running standard deviation of the discounted
return (`--normalize_rewards`).

The A3C paper's hyper-parameters (entropy weight 0.01, learning rates of
1e-4 to 1e-2 through RMSProp) were chosen on Atari with rewards clipped to
[-1, 1] (Supp. §8), where returns stay near 1; with RMSProp's epsilon at
0.1 its steps follow the gradient's size (docs/a3c.md), so the rewards'
scale reaches every step. A task that pays every step
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


class AdvantageScale:
  """What a worker multiplies its advantages by in the policy term
  (`--normalize_advantages`): 1 / the root of an exponential moving average
  of their square, over this worker's rollouts, corrected for its start at
  0 (as Adam corrects its moments, Kingma & Ba 2015, §3).

  Rewards scaled by the return's deviation (ReturnScale) put returns near
  1, but the advantages, returns less the value, are a task's own fraction
  of that: near 0.05 on Pendulum-v1, 0.1-0.9 on CartPole-v1 early on
  (docs/a3c.md). The policy term's gradient, and with it the balance
  between the policy term and the entropy term's fixed weight, follows
  them. Dividing by their running root mean square puts the advantages
  near 1 on every task, as PPO's per-batch normalisation does; a batch
  here is one rollout of at most t_max steps, too few to normalise by
  alone, hence the average over rollouts. Each worker keeps its own (not
  checkpointed: a resumed worker estimates it anew).
  """

  def __init__(self, decay: float = 0.99, epsilon: float = 1e-8):
    self._decay = decay
    self._epsilon = epsilon
    self._mean_square = 0.0
    self._weight = 0.0  # 1 - decay^n after n rollouts: the start's bias.

  def observe(self, mean_square: float):
    """Takes one rollout's mean squared advantage."""
    self._mean_square = (self._decay * self._mean_square +
                         (1.0 - self._decay) * mean_square)
    self._weight = self._decay * self._weight + (1.0 - self._decay)

  @property
  def factor(self) -> float:
    """1 / the advantages' root mean square so far (1 before any)."""
    if self._weight == 0.0:
      return 1.0
    return 1.0 / math.sqrt(self._mean_square / self._weight + self._epsilon)


class AdvantageMean:
  """What a worker subtracts from its advantages in the policy term
  (`--center_advantages`): their running mean, step by step, over its
  rollouts, each rollout's weight decaying by `decay` per later rollout.

  On-policy a right value makes the advantages' mean 0, and any value is an
  unbiased baseline; but a value whose level is off by b (CartPole's, above
  the largest return the task can give: docs/a3c.md) shifts every advantage
  by about -(1 - gamma^k) b, which adds to each update's variance. The
  running mean removes the shift (PPO subtracts each batch's mean; a
  rollout of at most t_max steps is too few for that); on CartPole that
  did not stop the collapse (docs/a3c.md). Weighted by steps,
  so that the short rollouts that end an episode count no more than their
  steps. Each worker keeps its own (not checkpointed).
  """

  def __init__(self, decay: float = 0.99):
    self._decay = decay
    self._sum = 0.0
    self._count = 0.0

  def observe(self, total: float, steps: int):
    """Takes one rollout's sum of advantages over its `steps` steps."""
    self._sum = self._decay * self._sum + total
    self._count = self._decay * self._count + steps

  @property
  def offset(self) -> float:
    """The advantages' running mean (0 before any)."""
    return self._sum / self._count if self._count else 0.0
