"""The nodes of a program of workers (`agents.builders.WorkerBuilder`, A3C's):
the learner holding the shared parameters, in the learner's place, and the
workers, in the actors'.

    workers ──(rollouts' gradients)──▶ learner (shared parameters)
       ▲                                    │
       └───────(newest parameters)──────────┘
    evaluator ◀─(parameters)─ learner;  every node ─(counts)─▶ counter

There is no replay. The program graph (`launch.program`) adds the counter,
the evaluator and the coordinator, as to every program.

Both nodes are made of the pieces every program's nodes share
(`launch.nodes`): the learner is a `LearningNode` (checkpoints, stop,
heartbeat), a worker an `ActingNode` (the actor's loop, failure handling,
counts, logs, stop).
"""

from acme.utils import counting

from launch import nodes
from launch.options import RunOptions


class SharedParametersNode(nodes.LearningNode):
  """The builder's learner in the learner's place: the workers'
  `apply_gradients` calls update it, each in a thread of the node's server,
  none waiting for another (Hogwild, as A3C's shared parameters); its loop
  only checkpoints, as the learner's does, and ends in the learner's way at
  a stop. Made as a `LearningNode` is, with no `learner_args`: (builder,
  counter, options)."""

  def apply_gradients(self, gradients, steps: int, statistics=None,
                      **extras):
    """A worker's update (the learner's `apply_gradients`, with any keyword
    arguments the agent's workers add, e.g. A3C's `worker`); returns the
    newest parameters."""
    return self._learner.apply_gradients(gradients, steps, statistics,
                                         **extras)


class WorkerNode(nodes.ActingNode):
  """A worker (A3C's actor-learner, Algorithm S3) in an actor's place: one
  environment, the actor's loop, failure handling, counts, logs and stop;
  its rollouts' gradients go to the learner (`parameter_server`). It writes
  to no replay, so it has none to stop waiting for."""

  def __init__(self, builder, parameter_server, counter: counting.Counter,
               actor_id: int, options: RunOptions):
    worker = builder.make_worker(parameter_server,
                                 seed=self.actor_seed(options, actor_id))
    super().__init__(builder, worker, counter, actor_id, options)
