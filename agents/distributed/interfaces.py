"""What the launch layer needs of an agent's builder.

The launch layer (`agents.distributed`) makes a program from a builder and
the run's options, and knows no agent: it asks of a builder only what these
classes declare, and takes the program's shape from which of them the
builder is:

  Builder         what every builder gives: its name, its environment, the
                  evaluator's actor, the policy's snapshot, and a hook with
                  a default (`with_options`)
  ReplayBuilder   a program with replay (Ape-X's): replay shards, a learner
                  sampling them, actors writing to them; the graph is the
                  launch layer's own (`agents.distributed.program`)
  WorkerBuilder   a program of workers without replay: the builder makes
                  the node in the learner's place and the workers in the
                  actors' places, of nodes of its own

An agent's builder subclasses one of the last two. They are abstract base
classes, not structural protocols: a builder says what it is by the class
it names, and the launch layer chooses by `isinstance`, never by which
attributes a builder happens to have.

They live in the launch layer, which imports no agent: the agents depend on
what the launch layer declares, not the launch layer on them. What the
launch layer asks of an agent before it loads the builder (and TensorFlow)
is its config's: `agents.config.AgentConfig`.
"""

import abc
from typing import Any, Callable, List, Optional, Sequence

from agents.distributed.options import RunOptions

# `node(label, constructor, *args)`: a Courier node of the program, set up
# for the platform it runs on (`platforms.SharedProcess.courier_node`).
NodeFactory = Callable[..., Any]


class Builder(abc.ABC):
  """What the launch layer needs of every builder.

  `name`: the agent's name (the program's); `environment`: its
  `agents.envs.environments.EnvironmentSpec`. A node in the learner's
  place that is a `agents.distributed.nodes.LearningNode` calls
  `make_learner(..., counter=, logger=, log_every=)` and `policy_snapshot`;
  the evaluator (`agents.distributed.nodes.EvaluatorNode`) `make_actor` and
  `evaluation_exploration`; restoring a policy (`agents.restore`)
  `policy_state` and `policy_snapshot`.
  """

  name: str

  def with_options(self, options: RunOptions) -> 'Builder':
    """This builder for a run with `options`. By default: itself, as the
    run's options change nothing it makes."""
    del options
    return self

  @abc.abstractmethod
  def make_actor(self, variable_source, exploration,
                 replay_client=None, seed: Optional[int] = None):
    """An actor pulling parameters from `variable_source`, one environment
    per value of `exploration`; writing to `replay_client` if one is
    given (the evaluator's: none)."""

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
    """The policy of `learner_state` as an `agents.runs.snapshots.
    PolicySnapshot`."""


class ReplayBuilder(Builder):
  """A builder of a program with replay: `replay_shards` replay servers,
  each of the tables of `make_replay_tables()`, a learner sampling them,
  and actors each writing to one of them (`agents.distributed.program`)."""

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
    """The bytes of the parameters one actor's pull copies (the plan's
    estimate of the learner's and the variable cachers' egress)."""

  @abc.abstractmethod
  def actor_exploration(self, actor_id: int, num_actors: int,
                        envs_per_actor: int = 1) -> Sequence[float]:
    """The exploration of each environment of actor `actor_id`."""


class WorkerBuilder(Builder):
  """A builder of a program of workers without replay: the builder makes,
  of nodes of its own, the node in the learner's place and the workers
  (`make_learner_node`, `make_worker_nodes`); the program graph adds the
  counter, the evaluator and the coordinator."""

  @abc.abstractmethod
  def make_learner_node(self, node: NodeFactory, counter,
                        options: RunOptions):
    """The node in the learner's place, labelled 'learner', made with
    `node`; `counter` is a handle to the counter. The evaluator pulls
    parameters from it and the coordinator stops it as the learner: an
    `acme.VariableSource` with `ping()` and `stop(timeout)`."""

  @abc.abstractmethod
  def make_worker_nodes(self, node: NodeFactory, learner, counter,
                        options: RunOptions) -> List[Any]:
    """`options.num_actors` workers in the actors' places, labelled
    `agents.distributed.options.actor_label(i)`, made with `node`;
    `learner` is a handle to the node in the learner's place. The coordinator stops them as the
    actors: each with `ping()` and `stop(timeout)`."""
