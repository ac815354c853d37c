"""What every Ape-X builder shares: the replay table, the learner's dataset,
the actors' n-step adder and their parameter-pull period.

The builder owns its experience: the items of its table
(`replay_signature`, n-step transitions by default), the actors' adders
that write them (`make_adder`), the learner's dataset of them
(`make_iterator`), the priorities its learner's update returns, and the
bytes an item takes in replay (its config's `replay_item_bytes`, for the
cloud plan). An agent of another experience (sequences:
`agents.replay.sequences`) overrides those, and the launch package, which
only calls `make_replay_tables`, `make_learner` and `make_actor`, is the
same for it.

`ApeXBuilder`, the base of the Ape-X agents' builders, is a ReplayBuilder:
`name`, `environment`, `make_replay_tables()` (of one replay server: of one
shard, with several), `make_eviction(seed)`, `make_learner(replay_client,
counter, logger, log_every)`, `make_actor(variable_source, exploration,
replay_client, seed)` (`exploration`: one value per environment of the
actor; the learner's `replay_client` is a sequence of clients, one per
shard, with several, and an actor's the one shard it writes to),
`actor_exploration(actor_id, num_actors, envs_per_actor)`,
`evaluation_exploration`, and for policy snapshots and restoring a policy
`policy_state()` and `policy_snapshot(learner_state)`.
"""

from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from absl import logging
import numpy as np
import reverb

from agents import builders
from agents.networks import precision
from agents.replay import adders
from agents.apex import learning
from agents.replay import tables
from agents.replay import shards
from agents.apex.config import ApeXConfig
from agents.apex.config import shard_config
from agents.envs.environments import EnvironmentSpec


ReplayClients = Union[reverb.Client, Sequence[reverb.Client]]


def _clients(replay_client: ReplayClients) -> List[reverb.Client]:
  if isinstance(replay_client, (list, tuple)):
    return list(replay_client)
  return [replay_client]


class ApeXBuilder(builders.ReplayBuilder):
  """Base of the Ape-X agents' builders; see the module docstring."""

  name = 'apex'
  config: ApeXConfig
  environment: EnvironmentSpec

  @property
  def replay_shards(self) -> int:
    """Replay servers (`ApeXConfig.replay_shards`)."""
    return self.config.replay_shards

  def replay_signature(self):
    """The structure of one item of the table (`tf.TensorSpec`s); None:
    an n-step transition (`tables.transition_signature`)."""
    return None

  @property
  def stored_frames(self) -> int:
    """How many frames of each stacked observation an item stores apart,
    each once (`adders.NStepPrioritizedAdder`), to be put back on the
    observations' last axis as batches are drawn (`tables.make_dataset`);
    0: items hold whole observations."""
    return self.environment.stacked_frames

  def make_replay_tables(self) -> List[reverb.Table]:
    """The tables of one replay server (of one shard, with several)."""
    return [tables.make_replay_table(
        shard_config(self.config), self.environment.spec,
        stacked_frames=self.stored_frames,
        signature=self.replay_signature())]

  def make_eviction(self, seed: Optional[int] = None):
    """The replay node's rounds of eviction (`agents.replay.eviction`), or None
    when Reverb's own remover keeps the table at its capacity."""
    return tables.make_eviction(shard_config(self.config), seed)

  def make_iterator(self, replay_client: reverb.Client):
    """A new iterator over prefetched batches of the replay table."""
    return iter(tables.make_dataset(
        replay_client.server_address, self.config.batch_size,
        self.config.prefetch_size, stacked_frames=self.stored_frames))

  @property
  def priority_fn(self) -> adders.PriorityFn:
    """The agent's initial priorities (see `adders.NStepPrioritizedAdder`)."""
    raise NotImplementedError

  @property
  def max_abs_reward(self) -> Optional[float]:
    """Rewards are clipped to [-x, x] on the actor side; None: no clipping."""
    return None

  def replay_learner_arguments(self, replay_client: ReplayClients,
                               counter=None, logger=None,
                               log_every: float = 0.0) -> Dict[str, Any]:
    """What every agent's learner takes to learn from replay (the arguments
    of `agents.apex.learning.ApeXLearner` that do not depend on the agent):
    `replay_client` is a client of the replay server, or a sequence of
    clients, one per shard (`agents.replay.shards`)."""
    computes_in, why = precision.resolve(self.config.learner_precision)
    logging.info('%s', why)
    common = dict(
        importance_sampling_exponent=self.config.importance_sampling_exponent,
        jit_compile=self.config.jit_compile, precision=computes_in,
        counter=counter, logger=logger, log_every=log_every)
    clients = _clients(replay_client)
    if len(clients) > 1:
      return dict(common, replay_client=None, iterator=shards.ShardedBatches(
          [client.server_address for client in clients],
          self.config.batch_size, self.config.priority_exponent,
          stacked_frames=self.stored_frames))
    return dict(
        common,
        iterator=self.make_iterator(clients[0]),
        replay_client=reverb.TFClient(clients[0].server_address),
        make_iterator=lambda: self.make_iterator(clients[0]))

  def actor_priorities(self, writes: bool
                       ) -> Tuple[adders.PriorityFn, Dict[str, List[Any]]]:
    """(the adders' priority function, what the actor must pull for it).

    `config.initial_priority` 'actor': the agent's own |TD| from the actor's
    values (`priority_fn`), nothing to pull. 'max': every new transition
    gets the largest priority the learner has written so far, pulled with
    the parameters (`learning.MAX_PRIORITY`). An actor that does not write
    (`writes` False: the evaluator) needs neither.
    """
    if not writes or self.config.initial_priority == 'actor':
      return self.priority_fn, {}
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    max_priority = tf.Variable(1.0, dtype=tf.float64, trainable=False)

    def max_so_far(n_step_returns, **unused_batch):
      return np.full(len(n_step_returns), max_priority.numpy())

    return max_so_far, {learning.MAX_PRIORITY: [max_priority]}

  def actor_parameter_bytes(self) -> int:
    """The bytes of the parameters one actor's pull copies: its networks'
    (`actor_networks`) and, with `initial_priority` 'max', the largest
    priority."""
    size = sum(int(np.prod(variable.shape)) * variable.dtype.size
               for network in self.actor_networks()
               for variable in network.trainable_variables)
    return size + (8 if self.config.initial_priority == 'max' else 0)

  def actor_networks(self) -> List[Any]:
    """The networks whose parameters an actor that writes pulls."""
    raise NotImplementedError

  def make_adder(self, replay_client: reverb.Client,
                 priority_fn: Optional[adders.PriorityFn] = None
                 ) -> adders.NStepPrioritizedAdder:
    """The actors' local buffer of n-step transitions (Ape-X §3), with the
    agent's initial priorities unless `priority_fn` is given."""
    return adders.NStepPrioritizedAdder(
        client=replay_client,
        table=tables.TABLE,
        n_step=self.config.n_step,
        discount=self.config.discount,
        priority_fn=priority_fn or self.priority_fn,
        flush_size=self.config.actor_flush_size,
        max_abs_reward=self.max_abs_reward,
        stacked_frames=self.stored_frames)

  def make_adders(self, replay_client: Optional[reverb.Client],
                  exploration,
                  priority_fn: Optional[adders.PriorityFn] = None
                  ) -> List[adders.NStepPrioritizedAdder]:
    """One adder per environment of an actor (`exploration` has one value
    per environment), all writing to `replay_client`; none without one."""
    if replay_client is None:
      return []
    return [self.make_adder(replay_client, priority_fn)
            for _ in range(len(np.atleast_1d(exploration)))]

  @property
  def variable_update_period(self) -> int:
    """Actor steps between two parameter pulls (the config counts frames).

    An actor of K environments counts one step per batch of K: each of its
    environments takes this many frames between pulls, as one of the
    paper's single-environment actors does."""
    return max(1, self.config.variable_update_period //
               self.environment.frames_per_step)
