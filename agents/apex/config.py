"""The Ape-X machinery's hyper-parameters (`ApeXConfig`), which every Ape-X
agent's config extends, and the config of one replay shard. Imports no
TensorFlow."""

import dataclasses
import math
from typing import List, Optional

from agents.networks import precision
from agents.config import AgentConfig
from agents.config import check_choice
from agents.config import check_flag

REPLAY_REMOVERS = ('fifo', 'min_heap', 'inverse_priority')
INITIAL_PRIORITIES = ('actor', 'max')


@dataclasses.dataclass
class ApeXConfig(AgentConfig):
  """The Ape-X machinery's hyper-parameters; agents extend this dataclass."""

  # Targets.
  n_step: int = 3
  """Ape-X §3.1: length of the multi-step return."""
  discount: float = 0.99
  """Per-step discount gamma. The paper gives none; 0.99 is DQN's (Mnih et
  al. 2015) and the Dueling DDQN agent's that Ape-X DQN builds on (App. C)."""

  # Replay (Ape-X §3, §4.1, App. C).
  replay_capacity: int = 2_000_000
  """Ape-X §4.1: replay holds 2M transitions. The paper's limit is soft
  (inserts always succeed; every 100 learner steps the excess leaves, oldest
  first); here it is Reverb's hard cap: each insert into a full replay
  removes one item (`replay_remover`)."""
  min_replay_size: int = 50_000
  """Ape-X App. C: learning starts once replay holds 50K transitions."""
  replay_shards: int = 1
  """Replay servers, each with an equal part of the capacity and of the
  size before learning; the learner samples them as one table (each
  transition with probability p^alpha over the sum over all shards) and
  each actor, all its environments, writes to one of them. The paper has
  one."""
  priority_exponent: float = 0.6
  """Ape-X §4.1: proportional prioritisation exponent alpha."""
  importance_sampling_exponent: float = 0.4
  """Ape-X §4.1: importance-sampling exponent beta."""
  replay_remover: str = 'fifo'
  """Which items leave a full replay: 'fifo' (the oldest; Ape-X DQN, §4.1),
  'inverse_priority' (Ape-X DPG, App. D: victims sampled in proportion to
  priority^eviction_priority_exponent, so low-priority data leaves first, at
  random; in rounds, from a snapshot of the table: agents/replay/eviction.py) or
  'min_heap' (Reverb's MinHeap: the lowest priority first, a deterministic
  approximation of App. D)."""
  eviction_priority_exponent: float = -0.4
  """Ape-X App. D: the exponent of --replay_remover=inverse_priority's
  proportional sampling of victims, (priority + 1e-6)^x; must be < 0."""
  samples_per_insert: Optional[float] = None
  """If set, Reverb's SampleToInsertRatio ties learner samples to actor
  inserts so that learning depends on steps, not machine speed. The paper's
  default (None) lets actors run freely and the learner sample at will."""

  # Actors (Ape-X §3, §4.1).
  initial_priority: str = 'actor'
  """How new transitions enter replay: 'actor' (Ape-X §3: each with its
  |TD error| computed by the actor from the values it computed while
  acting) or 'max' (Schaul et al.'s prioritised replay: the largest priority
  the learner has written so far, pulled with the parameters), to compare the
  two as the paper's §3 argues."""
  actor_flush_size: int = 50
  """Ape-X §3: transitions in an actor's local buffer before their priorities
  are computed in one batch and sent (paper: up to 100)."""
  variable_update_period: int = 400
  """Ape-X §4.1: actors copy the learner's parameters every 400 frames
  (environment frames; an Atari agent step is 4 frames)."""

  # Learner.
  batch_size: int = 512
  """Ape-X §4.1 (and App. E, which tried 32 to 1024): batches of 512
  transitions."""
  prefetch_size: int = 4
  """Batches the learner's Reverb dataset keeps ready in memory."""
  jit_compile: bool = False
  """Compiles the learner's loss, gradients and optimiser step with XLA
  (`tf.function(jit_compile=True)`; sampling and priority writes stay
  outside it). Off: TensorFlow's own kernels, as the paper's learner
  (benchmarks/learner_xla.py measures both)."""
  learner_precision: str = 'float32'
  """What the learner's forward and backward passes compute in:
  'float32', 'bfloat16' (its weights, optimiser state, targets and
  priorities stay float32: agents/networks/precision.py), or 'auto' (bfloat16 where
  the learner's CPU has bfloat16 arithmetic, AVX512_BF16 or AMX-BF16, else
  float32). Where the CPU has none, bfloat16 runs as float32, and the
  program says so. The default stays float32 until learning by steps is
  shown unchanged in bfloat16 (docs/performance.md). Actors always compute
  in float32."""

  # Fields that a run's checkpoints depend on (network shapes, what replay
  # holds): a run cannot be resumed with other values.
  CHECKPOINT_FIELDS = ('n_step', 'discount', 'replay_capacity',
                       'min_replay_size', 'priority_exponent',
                       'replay_remover', 'samples_per_insert',
                       'replay_shards')

  def validate(self):
    """Raises ValueError naming the first flag whose value is out of range."""
    positive = ('n_step', 'replay_capacity', 'replay_shards',
                'actor_flush_size',
                'variable_update_period', 'batch_size', 'prefetch_size')
    for name in positive:
      check_flag(name, getattr(self, name) >= 1, getattr(self, name), '>= 1')
    check_flag('batch_size', self.batch_size <= self.replay_capacity,
               self.batch_size,
               f'at most --replay_capacity ({self.replay_capacity})')
    check_flag('min_replay_size',
           self.batch_size <= self.min_replay_size <= self.replay_capacity,
           self.min_replay_size,
           f'between --batch_size ({self.batch_size}) and --replay_capacity '
           f'({self.replay_capacity})')
    for name in ('discount', 'importance_sampling_exponent'):
      check_flag(name, 0.0 <= getattr(self, name) <= 1.0, getattr(self, name),
             'in [0, 1]')
    check_flag('priority_exponent', self.priority_exponent >= 0.0,
           self.priority_exponent, '>= 0')
    if self.replay_remover == 'prioritized':
      raise ValueError(
          "--replay_remover='prioritized' was removed: it evicted items "
          'sampled in proportion to priority^0.6, the highest priorities '
          "first, the opposite of the paper's Ape-X DPG (App. D). Use "
          "--replay_remover=inverse_priority (App. D's eviction), min_heap "
          '(the lowest priority first) or fifo.')
    check_choice('replay_remover', self.replay_remover, REPLAY_REMOVERS)
    check_flag('eviction_priority_exponent',
               self.eviction_priority_exponent < 0,
               self.eviction_priority_exponent, '< 0 (the paper: -0.4)')
    check_choice('initial_priority', self.initial_priority,
                 INITIAL_PRIORITIES)
    check_choice('learner_precision', self.learner_precision,
                 precision.PRECISIONS)
    if self.samples_per_insert is not None:
      check_flag('samples_per_insert', self.samples_per_insert > 0,
             self.samples_per_insert, '> 0 (or unset for no rate limit)')

  def start_notes(self, launch_type: str) -> List[str]:
    """With --learner_precision auto or bfloat16, what the learner
    computes in: decided here on this machine's CPU for a program whose
    learner runs here; on Vertex AI, by the learner's machine (its node
    decides and logs it as it starts)."""
    if self.learner_precision == 'float32':
      return []
    if launch_type == 'vertex_ai':
      return [f'--learner_precision={self.learner_precision}: the learner '
              'decides on its own machine and logs its choice as it starts. '
              'The machines this launcher can ask Vertex AI for through '
              'xmanager 0.3.0 (N1, and A2 with A100s) have no bfloat16 CPU '
              'arithmetic, so it will compute in float32; Google Cloud\'s '
              'C3 and C3D machines have it (AMX-BF16, AVX512_BF16), but '
              'xmanager 0.3.0 cannot ask for them.']
    return [precision.resolve(self.learner_precision)[1]]

  def check_program(self, shape):
    """Refuses a program in which a replay shard would have no actor
    writing to it: it would never reach its part of --min_replay_size, and
    the learner would wait for it forever."""
    if self.replay_shards > shape.num_actors:
      raise ValueError(
          f'--replay_shards={self.replay_shards} with --num_actors='
          f'{shape.num_actors}: each actor writes (all its environments) '
          'to one shard, so a shard would get no data. Give at most as many '
          'shards as actors.')

  def replay_shard_capacity(self) -> Optional[int]:
    """The items one replay server (one shard) holds."""
    return shard_config(self).replay_capacity


def shard_config(config: ApeXConfig) -> ApeXConfig:
  """The config of one of `config.replay_shards` shards: an equal part of
  the capacity and of the size before sampling starts (rounded up), the
  same samples per insert."""
  shards = config.replay_shards
  if shards == 1:
    return config
  return dataclasses.replace(
      config, replay_shards=1,
      replay_capacity=math.ceil(config.replay_capacity / shards),
      min_replay_size=math.ceil(config.min_replay_size / shards))
