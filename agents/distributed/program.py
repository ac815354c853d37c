"""The Ape-X program graph, shared by every Ape-X agent.

    actors ──(n-step transitions + initial priorities)──▶ replay (Reverb)
      ▲                                                     │  ▲
      └──────────(network parameters)── learner ◀─(batches)─┘  │
                                          └──(new priorities)──┘
    evaluator ◀─(parameters)─ learner;  every node ─(step counts)─▶ counter
    coordinator: stops the program (agents/distributed/coordinator.py)

Replay may be several Reverb servers (`--replay_shards`): each actor
writes to one, and the learner samples them as one table (`agents.replay.shards`).

A3C's program is the same graph without replay: its learner is the
parameter server (`nodes.ParameterServerNode`), to which its actors (A3C's
workers, `nodes.WorkerNode`) send gradients and from which they take
parameters.

An agent supplies a builder (`agents.distributed.interfaces`): its class
gives the program's shape, with replay or of workers; the platform
(`agents/distributed/platforms.py`, `local.py`) sets up the nodes' processes
where they run.
"""

import launchpad as lp

from agents.runs import checkpointing
from agents.distributed import interfaces
from agents.distributed import local
from agents.distributed import nodes
from agents.distributed import platforms
from agents.distributed.coordinator import Coordinator
from agents.distributed.options import RunOptions
from agents.distributed.options import actor_label
from agents.distributed.options import replay_label


def platform_for(options: RunOptions) -> platforms.SharedProcess:
  """Where the nodes run: this machine's processes under local_mp, machines
  of a cluster under vertex_ai, threads of one process under local_mt and
  test_mt."""
  if options.launch_type == 'local_mp':
    return local.LocalProcesses(options.workdir)
  if options.launch_type == 'vertex_ai':
    return platforms.ClusterProcesses()
  return platforms.SharedProcess()


def make_program(builder, options: RunOptions) -> lp.Program:
  """The Ape-X program: replay, counter, learner, actors, evaluator, and
  the coordinator that stops them.

  The coordinator's group comes first: on Vertex AI that makes it the job's
  primary replica (the first pool of one replica), whose exit ends the job.
  """
  platform = platform_for(options)
  node = platform.courier_node
  replay_nodes, replays = [], []
  if isinstance(builder, interfaces.ReplayBuilder):
    shards = builder.replay_shards
    for shard in range(shards):
      label = replay_label(shard, shards)
      replay_nodes.append(nodes.ReplayNode(
          builder.make_replay_tables, options.workdir,
          options.replay_checkpoint_every, platform.process_setup(label),
          platform.replay_server(label),
          builder.make_eviction(options.seed + 7_919 * shard), label))
    replays = [replay_node.create_handle() for replay_node in replay_nodes]
  # What the learner samples: the replay server, or every shard.
  replay = replays[0] if len(replays) == 1 else replays
  counter_node = node('counter', checkpointing.CheckpointedCounter,
                      options.workdir, options.checkpoint_every > 0)
  counter = counter_node.create_handle()
  if replays:
    learner_node = node('learner', nodes.LearnerNode, builder, replay,
                        counter, options)
  else:  # A builder of workers: the node in the learner's place learns
    # from the workers' calls.
    learner_node = node('learner', nodes.ParameterServerNode, builder,
                        counter, options)
  learner = learner_node.create_handle()
  if replays:
    # Each actor writes to one shard, all its environments included, the
    # actors dealt to the shards in turn. Not one shard per environment: a
    # shard's rate limiter holds an actor's writes back whenever the learner
    # has drawn too little from it, and an actor held back in its writes to
    # one shard stops writing to all; the learner draws from each shard by
    # its priority mass, which differs between environments of different
    # epsilons, so an actor writing to several shards could be held back by
    # one while the learner waits for its writes to another.
    actor_nodes = [node(actor_label(actor_id), nodes.ActorNode, builder,
                        replays[actor_id % len(replays)], learner, counter,
                        actor_id, options)
                   for actor_id in range(options.num_actors)]
  else:
    actor_nodes = [node(actor_label(actor_id), nodes.WorkerNode, builder,
                        learner, counter, actor_id, options)
                   for actor_id in range(options.num_actors)]
  evaluator_nodes = [
      node('evaluator', nodes.EvaluatorNode, builder, learner, counter,
           options) for _ in range(options.num_evaluators)]
  coordinator_node = node(
      'coordinator', Coordinator, counter, learner,
      [actor.create_handle() for actor in actor_nodes],
      [evaluator.create_handle() for evaluator in evaluator_nodes],
      options.max_actor_steps, options.max_seconds, options.workdir,
      platform.node_watch([actor_label(i) for i in range(options.num_actors)]),
      replays, platform.end_program,
      options.heartbeat_timeout if platform.heartbeats else None)

  program = lp.Program(name=builder.name)
  groups = [('coordinator', [coordinator_node]),
            ('replay', replay_nodes),
            ('counter', [counter_node]), ('learner', [learner_node]),
            ('actor', actor_nodes), ('evaluator', evaluator_nodes)]
  for label, group in groups:
    if group:
      with program.group(label):
        for member in group:
          program.add_node(member)
  return program
