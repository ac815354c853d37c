"""What a builder gives.

A builder makes an agent's parts (networks, learner, actors, replay) from its
config and its environment's spec. These classes declare what a builder
gives; the launch package (`launch`, above the agents) turns any builder into
a program, and knows an agent only through them. They are abstract base
classes, not structural protocols: a builder says what it is by the class it
names, and the launch package chooses the program's shape by `isinstance`.

  Builder         what every builder gives: its name, its environment, the
                  evaluator's actor, the policy's snapshot, and a hook with
                  a default (`for_program`)
  ReplayBuilder   a program with replay (Ape-X's): replay shards, a learner
                  sampling them, actors writing to them
  WorkerBuilder   a program of workers without replay (A3C's): a learner
                  that takes the workers' gradients, and the workers

A builder is made as `Builder(config, environment, networks=None,
name=None)`: `networks(environment, config)` makes its networks, unbuilt
(default: its agent's `networks.make_networks`; `agents.registry` passes an
agent's own); `name` is its agent's (default: the class's).

`ProgramShape` is what a builder may know of the program it is built for.
What the launch asks of an agent before it loads the builder (and
TensorFlow) is its config's: `agents.config.AgentConfig`.

Nothing here imports TensorFlow: the launch checks a builder against these
classes before it loads one.
"""

import abc
import dataclasses
from typing import Any, List, Optional, Sequence


@dataclasses.dataclass(frozen=True)
class ProgramShape:
  """What a builder may know of the program it is built for: how many
  actors (or workers), of how many environments each, behind how many
  variable cachers, and the actors' step budget (None: none)."""
  num_actors: int = 1
  envs_per_actor: int = 1
  variable_cachers: int = 0
  max_actor_steps: Optional[int] = None


class Builder(abc.ABC):
  """What every builder gives.

  `name`: the agent's name (its program's); `environment`: its
  `agents.envs.environments.EnvironmentSpec`; `network_factory`: what
  makes its networks, `(environment, config) -> networks`. The node in the learner's
  place calls `make_learner(..., counter=, logger=, log_every=)` and
  `policy_snapshot`; the evaluator `make_actor` and
  `evaluation_exploration`; restoring a policy `policy_state` and
  `policy_snapshot`.
  """

  name: str

  def __init__(self, config, environment, networks=None,
               name: Optional[str] = None):
    self.config = config
    self.environment = environment
    self.network_factory = networks or self.default_networks()
    if name is not None:
      self.name = name

  @abc.abstractmethod
  def default_networks(self):
    """The agent's own network factory, `(environment, config) ->
    networks`."""

  def for_program(self, shape: ProgramShape) -> 'Builder':
    """This builder for a program of `shape`. By default: itself, as the
    program's shape changes nothing it makes."""
    del shape
    return self

  @abc.abstractmethod
  def make_actor(self, variable_source, exploration,
                 replay_client=None, seed: Optional[int] = None):
    """An actor pulling parameters from `variable_source`, one environment
    per value of `exploration`; writing to `replay_client` if one is
    given (the evaluator's: none). An actor whose writes can wait for
    replay (a rate limiter) may offer `stop_waiting_for_replay()`, callable
    from any thread: the launch calls it when the actor is asked to stop,
    so that a write held back does not hold the stop."""

  @property
  @abc.abstractmethod
  def evaluation_exploration(self) -> float:
    """The evaluator's exploration."""

  @abc.abstractmethod
  def policy_state(self):
    """The part of the learner's state that its policy needs, newly built
    (to restore from a checkpoint, then `policy_snapshot`)."""

  @abc.abstractmethod
  def policy_snapshot(self, learner_state):
    """The policy of `learner_state` as an `agents.snapshots.PolicySnapshot`."""


class ReplayBuilder(Builder):
  """A builder of a program with replay: `replay_shards` replay servers,
  each of the tables of `make_replay_tables()`, a learner sampling them,
  and actors each writing to one of them."""

  @property
  @abc.abstractmethod
  def replay_shards(self) -> int:
    """Replay servers."""

  @abc.abstractmethod
  def make_replay_tables(self) -> List[Any]:
    """The Reverb tables of one replay server."""

  @abc.abstractmethod
  def make_eviction(self, seed: Optional[int] = None):
    """The replay node's rounds of eviction (`agents.replay.eviction`), or
    None."""

  @abc.abstractmethod
  def make_learner(self, replay_client, counter=None, logger=None,
                   log_every: float = 0.0):
    """The learner: `replay_client` is a client of the replay server, or a
    sequence of clients, one per shard."""

  @abc.abstractmethod
  def actor_parameter_bytes(self) -> int:
    """The bytes of the parameters one actor's pull copies (the cloud plan's
    estimate of the learner's and the variable cachers' egress)."""

  @abc.abstractmethod
  def actor_exploration(self, actor_id: int, num_actors: int,
                        envs_per_actor: int = 1) -> Sequence[float]:
    """The exploration of each environment of actor `actor_id`."""


class WorkerBuilder(Builder):
  """A builder of a program of workers without replay: a learner that holds
  the shared parameters and takes the workers' gradients, and workers that
  act, each in one environment, and send it their gradients.

  The learner (`make_learner`) is an `acme.VariableSource` with `state`,
  `num_steps`, `try_step(timeout)` (True once an update arrived),
  `write_final_log()` and `apply_gradients(gradients, steps, statistics)`
  (and whatever keyword arguments its own workers add), which returns the
  newest parameters; the launch serves that call to the
  workers. A worker (`make_worker`) is an actor of one environment whose
  `parameter_server` is the learner, or a handle to its node."""

  @abc.abstractmethod
  def make_learner(self, counter=None, logger=None, log_every: float = 0.0):
    """The learner: the shared parameters, updated by the workers."""

  @abc.abstractmethod
  def make_worker(self, parameter_server, seed: Optional[int] = None):
    """A worker sending its gradients to `parameter_server`."""
