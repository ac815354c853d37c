"""The Ape-X program graph, shared by every Ape-X agent.

    actors ──(n-step transitions + initial priorities)──▶ replay (Reverb)
      ▲                                                     │  ▲
      └──────────(network parameters)── learner ◀─(batches)─┘  │
                                          └──(new priorities)──┘
    evaluator ◀─(parameters)─ learner;  every node ─(step counts)─▶ counter
    coordinator: stops the program (agents/distributed/coordinator.py)

An agent supplies a builder (see `agents/builders.py`); the platform
(`agents/distributed/platforms.py`, `local.py`) sets up the nodes' processes
where they run.
"""

import launchpad as lp

from agents import checkpointing
from agents.distributed import local
from agents.distributed import nodes
from agents.distributed import platforms
from agents.distributed.coordinator import Coordinator
from agents.distributed.options import RunOptions
from agents.distributed.options import actor_label


def platform_for(options: RunOptions) -> platforms.SharedProcess:
  """Where the nodes run: this machine's processes under local_mp, threads
  of one process under local_mt and test_mt."""
  if options.launch_type == 'local_mp':
    return local.LocalProcesses(options.workdir)
  return platforms.SharedProcess()


def make_program(builder, options: RunOptions) -> lp.Program:
  """The Ape-X program: replay, counter, learner, actors, evaluator, and
  the coordinator that stops them."""
  platform = platform_for(options)
  node = platform.courier_node
  program = lp.Program(name=builder.name)
  with program.group('replay'):
    replay = program.add_node(nodes.ReplayNode(
        builder.make_replay_tables, options.workdir,
        options.replay_checkpoint_every, platform.process_setup('replay'),
        platform.replay_server()))
  with program.group('counter'):
    counter = program.add_node(node(
        'counter', checkpointing.CheckpointedCounter, options.workdir,
        options.checkpoint_every > 0))
  with program.group('learner'):
    learner = program.add_node(
        node('learner', nodes.LearnerNode, builder, replay, counter, options))
  with program.group('actor'):
    actors = [
        program.add_node(node(actor_label(actor_id), nodes.ActorNode, builder,
                              replay, learner, counter, actor_id, options))
        for actor_id in range(options.num_actors)]
  evaluators = []
  if options.num_evaluators:
    with program.group('evaluator'):
      evaluators.append(program.add_node(node(
          'evaluator', nodes.EvaluatorNode, builder, learner, counter,
          options)))
  with program.group('coordinator'):
    program.add_node(node(
        'coordinator', Coordinator, counter, learner, actors, evaluators,
        options.max_actor_steps, options.max_seconds, options.workdir,
        platform.node_watch([actor_label(i)
                             for i in range(options.num_actors)])))
  return program
