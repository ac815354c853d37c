"""A3C's hyper-parameters. Each says where its default comes from: the A3C
paper (Algorithm S3, Supplementary §7-§9), or, where the default departs
from it, why (docs/a3c.md, "One configuration for every task");
`--preset=paper` (agents/a3c/presets.py) sets every one of them to the
paper's."""

import dataclasses
from typing import Optional

from agents.config import AgentConfig
from agents.config import check_flag
from agents.config import check_layer_sizes
from agents.config import parse_layer_sizes
from agents.config import MLP_ACTIVATIONS


@dataclasses.dataclass
class A3CConfig(AgentConfig):
  """A3C's hyper-parameters."""

  t_max: int = 20
  """Each worker updates after every t_max actions, or at the end of its
  episode. 20, IMPALA's unroll on Atari (Espeholt et al. 2018), four times
  the paper's 5 (Supp. §8; `--preset=paper`): fewer updates, each from
  four times the steps and less noisy; at 5 every configuration tried lost
  CartPole-v1 after learning it (docs/a3c.md)."""
  discount: float = 0.99
  """A3C Supp. §8: gamma = 0.99."""
  entropy_cost: Optional[float] = None
  """beta, the weight of the policy's entropy in the objective; None: 0.01
  with discrete actions (A3C Supp. §8, Atari and TORCS) and 1e-4 with
  continuous ones (Supp. §9)."""
  value_cost: float = 0.5
  """Weight of the value loss (R - V(s))^2 beside the policy loss: 0.5, the
  gradient of (R - V)^2 / 2, as in OpenAI's and Stable-Baselines3's A2C;
  Algorithm S3's is 1, the gradient of (R - V)^2 (`--preset=paper`)."""
  learning_rate: float = 7e-4
  """Initial learning rate. The paper sampled it from LogUniform(1e-4, 1e-2)
  (Supp. §8) and does not print the fixed value of its 57-game runs; 7e-4
  lies in that range. With RMSProp's small epsilon it is about the size of
  each parameter's step."""
  anneal_learning_rate: bool = True
  """A3C Supp. §8: the learning rate is annealed linearly to 0 over the run
  (over --max_actor_steps; without a step budget it stays constant)."""
  rmsprop_decay: float = 0.99
  """A3C Supp. §8: shared RMSProp's decay alpha = 0.99."""
  rmsprop_epsilon: float = 1e-5
  """epsilon of shared RMSProp, theta -= lr * d / sqrt(g + epsilon) (Supp.
  §7, Eq. S3); the paper gives no value. 1e-5 (OpenAI's and
  Stable-Baselines3's A2C) normalises each parameter's step to about lr
  whatever the task's rewards make of the gradient. `--preset=paper`'s
  0.1, larger than almost every parameter's mean square g, makes RMSProp
  gradient descent at about 3.2 lr, whose steps scale with the gradient
  (docs/a3c.md); it caps the first steps, while g is still small, at
  3.2 lr |d| where a tiny epsilon allows about 10 lr."""
  max_gradient_norm: float = 40.0
  """Each worker's gradient is clipped to this global norm before it is sent.
  The paper tuned "the amount of gradient norm clipping" (§5.1) without
  printing it; 40 is Ape-X's (App. C)."""
  mlp_hidden_sizes: str = '200'
  """Torso for vector observations, comma-separated: A3C Supp. §9's one
  hidden layer of 200 ReLU units."""
  mlp_activation: str = 'tanh'
  """The MLP torsos' activation (vector observations), `relu` or `tanh`:
  tanh, which Andrychowicz et al. 2021 (What Matters in On-Policy RL, §3.3)
  found better for on-policy agents' separate policy and value MLPs;
  `--preset=paper`: Supp. §9's rectifiers. The suites' own torsos (Atari's,
  MinAtar's) keep their ReLUs."""
  policy_init_scale: float = 0.01
  """The policy's output layer (logits, or a Gaussian's mean) starts with
  weights this times the default initial ones (a truncated normal of
  deviation 1 / sqrt(fan-in)): 0.01 starts near the uniform policy (a
  Gaussian's mean near the middle) whatever the torso gives, as
  Andrychowicz et al. 2021 (§3.2) recommend; `--preset=paper`: 1."""
  normalize_rewards: bool = False
  """Each worker divides its rewards by the running standard deviation of
  its discounted return (agents/a3c/reward_scale.py), so that returns are
  near 1 whatever the task pays, as on the paper's clipped Atari rewards,
  for which its other values were chosen. Not in the paper."""
  normalize_advantages: bool = False
  """Each worker multiplies the policy term's advantages by 1 / the root of
  a moving average of their square over its rollouts
  (agents/a3c/reward_scale.py, AdvantageScale), so that they are near 1 on
  every task, as on the paper's Atari, against which its entropy weight
  was chosen; the value's errors are left as they are. Not in the paper
  (PPO normalises its advantages per batch)."""
  popart: bool = True
  """The value learns the return in units of the returns' running mean and
  deviation, its last layer rescaled whenever they move so that its values
  do not (Pop-Art, van Hasselt et al. 2016; agents/a3c/popart.py); the
  value's errors and the policy's advantages are in those units, as in
  PopArt-IMPALA (Hessel et al. 2019). The statistics are the parameter
  server's, shared by every worker and checkpointed with the parameters.
  Not in the paper (`--preset=paper`: off): with it the value's errors,
  the advantages and so the steps are on one scale whatever a task pays."""
  popart_step_size: float = 3e-4
  """beta, the step size of Pop-Art's moving averages of the returns and
  their squares, per return (Hessel et al. 2019's 3e-4)."""
  center_advantages: bool = False
  """Each worker subtracts from the policy term's advantages their running
  mean over its rollouts, step by step (agents/a3c/reward_scale.py,
  AdvantageMean), so that a value whose level is off does not shift every
  advantage one way; the value's errors are left as they are. Not in the
  paper (PPO centres its advantages per batch)."""
  scale_observations: bool = False
  """Each observation dimension whose bounds the environment declares (a
  gym: vector environment's observation space) is mapped from [low, high]
  onto [-1, 1] as the network's first step; unbounded dimensions pass
  unchanged. Not in the paper, whose Atari pixels are scaled to [0, 1] and
  whose physics states arrive as they are (Supp. §9)."""
  bounded_mean: bool = True
  """Continuous actions: True, the Gaussian's mean is the tanh of its linear
  layer mapped onto the action bounds, so that it never leaves them. False:
  the linear layer itself (A3C Supp. §9), whose mean can drift past a
  bound, where every sample is clipped to the same action; there a
  sample's advantage says nothing of the mean, and the variance shrinks
  while the log-probability's gradient, (a - mu) / sigma^2, grows. With
  the linear mean a Pendulum run's mean reached +-37 in most states within
  46K steps, every torque clipped to +-2, and it never learned
  (docs/a3c.md). Not in the paper (`--preset=paper`: False)."""
  state_independent_variance: bool = True
  """Continuous actions: True, the Gaussian's variance is one learned
  parameter of the policy, the same in every state (as PPO's and TRPO's
  Gaussian policies), starting at `initial_stddev_scale`; False: a SoftPlus
  of a linear layer of the policy's torso (A3C Supp. §9), which can
  collapse towards 0 in the states the policy sees, where the
  log-probability's gradient grows as 1/sigma^2. Not in the paper
  (`--preset=paper`: False)."""
  initial_stddev_scale: float = 0.5
  """With `state_independent_variance`: the Gaussian's standard deviation
  starts at this times half the action range (the widest dimension's).
  At 1, samples spread over the whole range and control:cartpole:balance
  barely learned in 500K steps (best round 364 of 1000); at 0.5 it reached
  999 (docs/a3c.md). Andrychowicz et al. 2021 (§3.2) also recommend
  decreasing the initial standard deviation of actions. Not in the paper,
  whose variance is a SoftPlus of a layer."""
  shared_torso: bool = True
  """Discrete actions: True, the policy and the value share the torso (A3C
  Supp. §8, "all non-output layers shared"). False: the value has a torso
  of its own, the same shape, and shares nothing with the policy, as Supp.
  §9's continuous-control networks (which always share nothing). Shared:
  on MinAtar a separate policy torso, a ReLU conv net trained by the
  policy gradient alone, drove the policy's entropy from 1.1 to 0.01
  within 50K frames, where the shared one kept it near 0.6 (docs/a3c.md);
  on CartPole and Acrobot the two kept what they learned alike."""

  log_gradient_parts: bool = False
  """Also log the global norm of each part of a worker's gradient on its
  own: the policy term's (`policy_gradient_norm`), the value term's with
  its weight (`value_gradient_norm`) and the entropy term's with its weight
  (`entropy_gradient_norm`), before clipping; which of them moves the
  shared parameters (docs/a3c.md). Costs two more gradients a rollout."""
  evaluation_epsilon: float = 0.0
  """The evaluator acts with the policy's most likely action (its mean with
  continuous actions), with this probability of a uniformly random discrete
  action instead."""

  # Fields that a run's checkpoints depend on (network shapes).
  CHECKPOINT_FIELDS = ('mlp_hidden_sizes', 'mlp_activation', 'shared_torso',
                       'state_independent_variance', 'popart')
  # Fields that act on one kind of action space only: a run of the other
  # kind is the same whatever they are.
  CONTINUOUS_FIELDS = ('bounded_mean', 'state_independent_variance',
                       'initial_stddev_scale')
  DISCRETE_FIELDS = ('shared_torso',)

  def entropy_weight(self, continuous: bool) -> float:
    """beta for this action space (`entropy_cost`, else the paper's)."""
    if self.entropy_cost is not None:
      return self.entropy_cost
    return 1e-4 if continuous else 0.01

  def validate(self):
    """Raises ValueError naming the first flag whose value is out of range."""
    check_flag('t_max', self.t_max >= 1, self.t_max, '>= 1')
    for name in ('discount', 'rmsprop_decay', 'evaluation_epsilon',
                 'popart_step_size'):
      value = getattr(self, name)
      check_flag(name, 0.0 <= value <= 1.0, value, 'in [0, 1]')
    for name in ('learning_rate', 'rmsprop_epsilon', 'max_gradient_norm'):
      check_flag(name, getattr(self, name) > 0, getattr(self, name), '> 0')
    check_flag('value_cost', self.value_cost >= 0, self.value_cost, '>= 0')
    check_flag('entropy_cost',
               self.entropy_cost is None or self.entropy_cost >= 0,
               self.entropy_cost, '>= 0 (or unset for the paper\'s)')
    check_layer_sizes('mlp_hidden_sizes', self.mlp_hidden_sizes,
                      '200 or 64,64')
    check_flag('mlp_activation', self.mlp_activation in MLP_ACTIVATIONS,
               self.mlp_activation, f'one of {", ".join(MLP_ACTIVATIONS)}')
    check_flag('policy_init_scale', self.policy_init_scale > 0,
               self.policy_init_scale, '> 0')
    check_flag('initial_stddev_scale', self.initial_stddev_scale > 0,
               self.initial_stddev_scale, '> 0')

  def check_program(self, shape):
    """Refuses programs A3C cannot run in."""
    if shape.envs_per_actor != 1:
      raise ValueError(
          f'--envs_per_actor={shape.envs_per_actor}: an A3C worker is one '
          'actor-learner acting in one environment (Algorithm S3); for more '
          'environments give more workers with --num_actors.')
    if shape.variable_cachers:
      raise ValueError(
          f'--variable_cachers={shape.variable_cachers}: cachers serve the '
          'parameters of a program with replay to its actors; an A3C '
          'worker exchanges gradients and parameters with the parameter '
          'server itself. Leave --variable_cachers at 0.')

  def check_environment(self, environment):
    """--scale_observations needs the bounds of the observations."""
    if self.scale_observations and environment.observation_bounds is None:
      raise ValueError(
          f'--scale_observations: {environment.name} declares no bounds of '
          'its observations (only gym: vector environments do). Leave '
          '--scale_observations off for it.')

  @property
  def hidden_sizes(self):
    return parse_layer_sizes(self.mlp_hidden_sizes)
