"""A3C's nodes and its part of the program graph: the parameter server in
the learner's place and the workers in the actors'.

    workers ──(rollouts' gradients)──▶ parameter server
       ▲                                    │
       └───────(newest parameters)──────────┘
    evaluator ◀─(parameters)─ parameter server;  every node ─(counts)─▶ counter

There is no replay. The program graph (`agents.distributed.program`) adds
the counter, the evaluator and the coordinator, as to every program; it
asks for these nodes through `A3CBuilder.make_learner_node` and
`make_worker_nodes` (`agents.distributed.interfaces.WorkerBuilder`).

Both nodes are made of the pieces every program's nodes share
(`agents.distributed.nodes`): the parameter server is a `LearningNode`
(checkpoints, stop, heartbeat), a worker an `ActingNode` (the actor's loop,
failure handling, counts, logs, stop).
"""

from typing import List

from acme.utils import counting

from agents.distributed import nodes
from agents.distributed.interfaces import NodeFactory
from agents.distributed.options import RunOptions
from agents.distributed.options import actor_label


class ParameterServerNode(nodes.LearningNode):
  """A3C's shared parameters in the learner's place (`builder.make_learner`
  is an `agents.a3c.learning.A3CParameterServer`): the workers'
  `apply_gradients` calls update them, each in a thread of the node's
  server, none waiting for another (Hogwild); its loop only checkpoints, as
  the learner's does, and ends in the learner's way at a stop. Made as a
  `LearningNode` is, with no `learner_args`: (builder, counter, options)."""

  def apply_gradients(self, gradients, steps: int, statistics=None):
    """A worker's update (`A3CParameterServer.apply_gradients`); returns the
    newest parameters."""
    return self._learner.apply_gradients(gradients, steps, statistics)


class WorkerNode(nodes.ActingNode):
  """An A3C worker (an actor-learner, Algorithm S3) in an actor's place: one
  environment, the actor's loop, failure handling, counts, logs and stop;
  its rollouts' gradients go to the parameter server (`parameter_server`).
  It writes to no replay, so it has none to stop waiting for."""

  def __init__(self, builder, parameter_server, counter: counting.Counter,
               actor_id: int, options: RunOptions):
    worker = builder.make_worker(parameter_server,
                                 seed=self.actor_seed(options, actor_id))
    super().__init__(builder, worker, counter, actor_id, options)


def make_learner_node(builder, node: NodeFactory, counter,
                      options: RunOptions):
  """The parameter server, labelled 'learner': it learns from the workers'
  gradients."""
  return node('learner', ParameterServerNode, builder, counter, options)


def make_worker_nodes(builder, node: NodeFactory, learner, counter,
                      options: RunOptions) -> List:
  """`options.num_actors` workers, each sending its gradients to and taking
  its parameters from `learner` (the parameter server)."""
  return [node(actor_label(actor_id), WorkerNode, builder, learner, counter,
               actor_id, options)
          for actor_id in range(options.num_actors)]
