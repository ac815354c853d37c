"""The program graph: the counter, the evaluator and the coordinator of
every program, around the nodes of the builder's shape
(`agents.builders`).

A program with replay (`ReplayBuilder`, Ape-X's), shared by every Ape-X
agent:

    actors ──(items + initial priorities)──▶ replay (Reverb)
      ▲                                        │  ▲
      └─────(network parameters)── learner ◀───┘  │
                                     └──(new priorities)──┘
    evaluator ◀─(parameters)─ learner;  every node ─(step counts)─▶ counter
    coordinator: stops the program (launch/supervision/coordinator.py)

What an item is (an n-step transition, a sequence), how it is written and
read, and what its priority is, are the builder's (`make_replay_tables`,
`make_actor`, `make_learner`); nothing here depends on it.

With `--variable_cachers=N` the actors' parameters come through N cachers
(`launch.variable_cache`): learner ─▶ cacher k ─▶ actors i with
i mod N = k.

Replay may be several Reverb servers (`--replay_shards`): each actor
writes to one, and the learner samples them as one table (`agents.replay.shards`).

A program of workers (`WorkerBuilder`) has no replay: the builder's learner,
which holds the shared parameters, is in the learner's place and its
workers in the actors' places (`launch.worker_nodes`); the evaluator and
the coordinator take them for the learner and the actors.

The platform (`launch/supervision/platforms.py`, `local.py`) sets up the
nodes' processes where they run.
"""

import dataclasses
from typing import Any, List

import launchpad as lp

from launch.runs import checkpointing
from agents import builders
from launch.supervision import local
from launch import node_groups
from launch.machine import placement
from launch.supervision import platforms
from launch import replay_nodes as replay_nodes_lib
from launch import variable_cache
from launch import worker_nodes
from launch.supervision.coordinator import Coordinator
from launch.nodes import EvaluatorNode
from launch.options import RunOptions
from launch.node_groups import actor_label
from launch.node_groups import cacher_label
from launch.node_groups import replay_label


def platform_for(options: RunOptions) -> platforms.SharedProcess:
  """Where the nodes run: this machine's processes under local_mp, machines
  of a cluster under vertex_ai, threads of one process under local_mt and
  test_mt."""
  groups = [group.name for group in node_groups.GROUPS]
  if options.launch_type == 'local_mp':
    return local.LocalProcesses(
        options.workdir, options.max_node_restarts,
        placement.plan(groups, options.placement, options.pin_learner,
                       options.pin_others))
  if options.launch_type == 'vertex_ai':
    return platforms.ClusterProcesses(
        options.workdir, options.max_node_restarts,
        placement.plan(groups, options.placement, pin=False))
  return platforms.SharedProcess()


@dataclasses.dataclass
class _Nodes:
  """The nodes a program's shape gives, and the handles the rest of the
  program takes (to the counter, to the node in the learner's place, to
  each replay server), and the variable cachers, if any."""

  counter_node: Any
  counter: Any
  learner_node: Any
  learner: Any
  actor_nodes: List[Any]
  replay_nodes: List[Any] = dataclasses.field(default_factory=list)
  replays: List[Any] = dataclasses.field(default_factory=list)
  cacher_nodes: List[Any] = dataclasses.field(default_factory=list)


def _counter_node(platform: platforms.SharedProcess, options: RunOptions):
  """The counter's node and a handle to it."""
  counter_node = platform.courier_node(
      'counter', checkpointing.CheckpointedCounter, options.workdir,
      options.checkpoint_every)
  return counter_node, counter_node.create_handle()


def _replay_program_nodes(builder: builders.ReplayBuilder,
                          platform: platforms.SharedProcess,
                          options: RunOptions) -> _Nodes:
  """Replay (one node per shard), the counter, the learner sampling replay,
  and the actors writing to it."""
  node = platform.courier_node
  shards = builder.replay_shards
  replay_nodes = []
  for shard in range(shards):
    label = replay_label(shard, shards)
    replay_nodes.append(replay_nodes_lib.ReplayNode(
        builder.make_replay_tables, options.workdir,
        options.replay_checkpoint_every, platform.process_setup(label),
        platform.replay_server(label),
        builder.make_eviction(options.seed + 7_919 * shard), label))
  replays = [replay_node.create_handle() for replay_node in replay_nodes]
  # What the learner samples: the replay server, or every shard.
  replay = replays[0] if len(replays) == 1 else replays
  counter_node, counter = _counter_node(platform, options)
  learner_node = node('learner', replay_nodes_lib.LearnerNode, builder,
                      replay, counter, options)
  learner = learner_node.create_handle()
  # Parameters: from the learner, or from a tier of cachers of its
  # parameters, actor i served by cacher i mod N (`variable_cache`).
  cachers = options.variable_cachers
  cacher_nodes = [node(cacher_label(index, cachers),
                       variable_cache.VariableCacherNode, learner,
                       cacher_label(index, cachers), options)
                  for index in range(cachers)]
  sources = ([cacher.create_handle() for cacher in cacher_nodes] or
             [learner])
  # Each actor writes to one shard, all its environments included, the
  # actors dealt to the shards in turn. Not one shard per environment: a
  # shard's rate limiter holds an actor's writes back whenever the learner
  # has drawn too little from it, and an actor held back in its writes to
  # one shard stops writing to all; the learner draws from each shard by
  # its priority mass, which differs between environments of different
  # epsilons, so an actor writing to several shards could be held back by
  # one while the learner waits for its writes to another.
  actor_nodes = [node(actor_label(actor_id), replay_nodes_lib.ActorNode,
                      builder, replays[actor_id % len(replays)],
                      sources[actor_id % len(sources)], counter, actor_id,
                      options)
                 for actor_id in range(options.num_actors)]
  return _Nodes(counter_node, counter, learner_node, learner, actor_nodes,
                replay_nodes, replays, cacher_nodes)


def _worker_program_nodes(builder: builders.WorkerBuilder,
                          platform: platforms.SharedProcess,
                          options: RunOptions) -> _Nodes:
  """The counter, the builder's learner (the shared parameters) in the
  learner's place and its workers in the actors', each sending its
  gradients to the learner and taking its parameters from it."""
  node = platform.courier_node
  counter_node, counter = _counter_node(platform, options)
  learner_node = node('learner', worker_nodes.SharedParametersNode, builder,
                      counter, options)
  learner = learner_node.create_handle()
  actor_nodes = [node(actor_label(actor_id), worker_nodes.WorkerNode,
                      builder, learner, counter, actor_id, options)
                 for actor_id in range(options.num_actors)]
  return _Nodes(counter_node, counter, learner_node, learner, actor_nodes)


def _program_nodes(builder: builders.Builder,
                   platform: platforms.SharedProcess,
                   options: RunOptions) -> _Nodes:
  """The nodes of the builder's shape."""
  if isinstance(builder, builders.ReplayBuilder):
    return _replay_program_nodes(builder, platform, options)
  if isinstance(builder, builders.WorkerBuilder):
    return _worker_program_nodes(builder, platform, options)
  raise TypeError(
      f'{type(builder).__name__} is neither a ReplayBuilder nor a '
      'WorkerBuilder (agents.builders): the program has no '
      'shape for it.')


def make_program(builder: builders.Builder,
                 options: RunOptions) -> lp.Program:
  """The program: the nodes of the builder's shape (replay, learner and
  actors; or a node in the learner's place and workers), the counter, the
  evaluator, and the coordinator that stops them.

  The groups are `launch.node_groups`'s, in its order.
  """
  platform = platform_for(options)
  node = platform.courier_node
  shape = _program_nodes(builder, platform, options)
  cachers = shape.cacher_nodes
  evaluator_nodes = [
      node('evaluator', EvaluatorNode, builder, shape.learner, shape.counter,
           options) for _ in range(options.num_evaluators)]
  # In the order in which the coordinator names nodes gone at once.
  members = {'learner': [shape.learner_node], 'counter': [shape.counter_node],
             'replay': shape.replay_nodes, 'cacher': cachers,
             'actor': shape.actor_nodes, 'evaluator': evaluator_nodes}
  node_groups.check_sizes(
      {group: len(nodes) for group, nodes in members.items()},
      node_groups.counts(options, len(shape.replay_nodes)))
  labels = {group: node_groups.labels(group, len(nodes))
            for group, nodes in members.items()}
  members['coordinator'] = [node(
      'coordinator', Coordinator,
      {group: [member.create_handle() for member in nodes]
       for group, nodes in members.items() if nodes},
      max_actor_steps=options.max_actor_steps,
      max_seconds=options.max_seconds, workdir=options.workdir,
      node_watch=platform.node_watch(labels),
      kept_nodes=platform.kept_nodes(), end_program=platform.end_program,
      heartbeat_timeout=(options.heartbeat_timeout if platform.heartbeats
                         else None),
      record_outside_stop=platform.records_outside_stop)]

  program = lp.Program(name=builder.name)
  # In the order of `node_groups.GROUPS`: the coordinator's first.
  for group in node_groups.GROUPS:
    if members.get(group.name):
      with program.group(group.name):
        for member in members[group.name]:
          program.add_node(member)
  return program
