"""The program's node groups, each declared once.

A node group is a Launchpad group of nodes of one kind (the learner, the
actors, ...). Everything the launch layer does by group reads `GROUPS`:

* the Launchpad groups, in this order (`launch.program`): on Vertex AI the
  first group's is the job's primary replica, whose exit ends the job;
* how many nodes each has (`count`), for the program and for the cloud plan
  made before it (`launch.console.command_line`);
* each node's label: its name in `<workdir>/nodes/`, `logs/`, the keepers'
  settings and the faults' records (`label`);
* which nodes the program cannot go on without (`needed`): the process
  watch (`launch.supervision.local.ProgramWatch`) and the heartbeats
  (`launch.supervision.heartbeat`) stop the program once one of them is gone for good;
* the call each answers as its heartbeat (`heartbeat`);
* the coordinator's ordered stop (`stop_step`, `stop_seconds`);
* which nodes call no other (`server`): no stop watchdog
  (`launch.supervision.local`), whose job is a node blocked in a call to one that has
  stopped;
* which run under a keeper (`kept`, `launch.supervision.keeper`);
* the machine each asks for on Vertex AI (`machine`,
  `launch.cloud.machines`).

Adding a node group is one `NodeGroup` here, and making its nodes in
`launch.program` (where they are wired to the others).
"""

import dataclasses
from typing import Any, Callable, Dict, List, Optional, Sequence

# What a group's nodes are to the program (`NodeGroup.needed`).
EACH = 'each'  # It stops once one of them is gone for good.
ALL = 'all'  # It stops once all of them are.
NONE = 'none'  # It goes on without them.

# Their heartbeat calls (`NodeGroup.heartbeat`).
COURIER = 'courier'  # The node's `ping()`, a Python method.
REVERB = 'reverb'  # Reverb's `server_info`.

# How long the coordinator's ordered stop waits for each step of it. A
# node's stop takes an environment step (actors, evaluator) or an update and
# a checkpoint (the learner); a node that does not answer in time (stuck, or
# dead) is left to the program's stop and, on this machine, to the stop
# watchdog.
ACTING_STOP_SECONDS = 30.0
LEARNER_STOP_SECONDS = 120.0

# How a group's nodes are numbered in their labels (`NodeGroup.numbered`).
ONE_PLAIN = 'one plain'  # `replay` of one; `replay_<k>` of several.
FIRST_PLAIN = 'first plain'  # `actor`, `actor_1`, ... (Acme's logs/).


@dataclasses.dataclass(frozen=True)
class NodeGroup:
  """One group of the program's nodes; see the module docstring.

  Attributes:
    name: the Launchpad group's name, and its nodes' labels' first word.
    count: how many nodes it has, from the run options and the number of
      replay shards (0 for a program without replay); 0: the group is
      left out.
    title: how the logs and the stop records speak of one of its nodes
      (with its number, where it has one).
    needed: EACH, ALL or NONE (see above).
    heartbeat: the call its nodes answer as their heartbeat.
    stop_step: where it stops in the coordinator's ordered stop (lower
      first; a group waits on none of a higher step), or None: by
      Launchpad's stop, once the coordinator is done (replay and the counter
      save their final checkpoints then).
    stop_seconds: how long the ordered stop waits for its nodes' answers.
    server: its nodes call no other node.
    kept: its nodes run under a keeper, which starts them again in place.
    machine: which of the cloud plan's requests its nodes take
      (`launch.cloud.machines.requests`).
    numbered: how its nodes are numbered in their labels.
  """

  name: str
  count: Callable[[Any, int], int]
  title: str
  needed: str
  heartbeat: str = COURIER
  stop_step: Optional[int] = None
  stop_seconds: float = ACTING_STOP_SECONDS
  server: bool = False
  kept: bool = True
  machine: str = 'small'
  numbered: str = ONE_PLAIN

  def label(self, index: int, count: int) -> str:
    """The label of its node `index` of `count`."""
    if self.numbered == FIRST_PLAIN:
      return self.name if index == 0 else f'{self.name}_{index}'
    return self.name if count == 1 else f'{self.name}_{index}'

  def labels(self, count: int) -> List[str]:
    return [self.label(index, count) for index in range(count)]

  def describe(self, index: int, count: int) -> str:
    """How the logs speak of its node `index` of `count` ("actor 0",
    "replay 1", "learner")."""
    if self.numbered == FIRST_PLAIN or count > 1:
      return f'{self.title} {index}'
    return self.title


GROUPS = (
    # First: on Vertex AI its replica is the job's primary.
    NodeGroup('coordinator', lambda options, shards: 1, 'coordinator',
              NONE, kept=False, machine='coordinator'),
    NodeGroup('replay', lambda options, shards: shards, 'replay', EACH,
              heartbeat=REVERB, server=True, machine='replay'),
    NodeGroup('counter', lambda options, shards: 1, 'counter', EACH,
              server=True),
    NodeGroup('learner', lambda options, shards: 1, 'learner', EACH,
              stop_step=2, stop_seconds=LEARNER_STOP_SECONDS,
              machine='learner'),
    # No actor pulls from them once the actors have stopped; their pulls
    # from the learner end before the learner stops.
    NodeGroup('cacher', lambda options, shards: options.variable_cachers,
              'variable cacher', EACH, stop_step=1),
    NodeGroup('actor', lambda options, shards: options.num_actors, 'actor',
              ALL, stop_step=0, machine='actor', numbered=FIRST_PLAIN),
    NodeGroup('evaluator', lambda options, shards: options.num_evaluators,
              'evaluator', NONE, stop_step=0),
)

BY_NAME: Dict[str, NodeGroup] = {group.name: group for group in GROUPS}


def group_of(label: str) -> NodeGroup:
  """The group of the node labelled `label`: its group's name, with
  `_<index>` after it for all but the first of a numbered group
  (`replay_1`: replay's; a group may have '_' in its name)."""
  name, _, index = label.rpartition('_')
  if name and index.isdigit() and name in BY_NAME:
    return BY_NAME[name]
  return BY_NAME[label]


def counts(options, replay_shards: int) -> Dict[str, int]:
  """{group: how many nodes} of every group the program has, in the order
  of `GROUPS`."""
  sizes = {group.name: group.count(options, replay_shards)
           for group in GROUPS}
  return {name: size for name, size in sizes.items() if size}


def labels(group: str, count: int) -> List[str]:
  return BY_NAME[group].labels(count)


def actor_label(actor_id: int) -> str:
  """An actor's name in logs/ and nodes/ (Acme's convention: the first
  actor writes `logs/actor/`)."""
  return BY_NAME['actor'].label(actor_id, actor_id + 1)


def cacher_label(index: int, cachers: int) -> str:
  """A variable cacher's name in logs/ and nodes/: `cacher` when there is
  one, `cacher_<k>` of several (as Launchpad's groups of nodes are
  named)."""
  return BY_NAME['cacher'].label(index, cachers)


def replay_label(shard: int, shards: int) -> str:
  """A replay shard's name in nodes/ and checkpoints/: `replay` when replay
  is one server (as before shards existed), `replay_<k>` of several."""
  return BY_NAME['replay'].label(shard, shards)


def servers() -> List[str]:
  """The groups whose nodes call no other node."""
  return [group.name for group in GROUPS if group.server]


def stop_steps(nodes: Dict[str, Sequence[Any]]) -> List[List[str]]:
  """The groups of `nodes` ({group: its nodes}) that the coordinator stops,
  step by step, in its order: [[first step's groups], ...]."""
  steps: Dict[int, List[str]] = {}
  for group in GROUPS:
    if group.stop_step is not None and nodes.get(group.name):
      steps.setdefault(group.stop_step, []).append(group.name)
  return [steps[step] for step in sorted(steps)]


def check_sizes(sizes: Dict[str, int], declared: Dict[str, int]):
  """Refuses a program whose groups (`sizes`, {group: how many nodes},
  the coordinator's left out) are not as `GROUPS` declares them
  (`declared`, of `counts`): the cloud plan, made from the declarations
  before the program, would not fit it."""
  check_known(list(sizes))
  made = {name: size for name, size in sizes.items() if size}
  expected = {name: size for name, size in declared.items()
              if name in sizes}
  if made != expected:
    raise ValueError(f'The program has the node groups {made}, and '
                     f'launch/node_groups.py declares {expected}: make the '
                     'declared counts (NodeGroup.count) match.')


def check_known(names: Sequence[str]):
  """Refuses a group of nodes not declared in `GROUPS` (a program would run
  it without a watch, a stop or a machine)."""
  unknown = sorted(set(names) - set(BY_NAME))
  if unknown:
    raise ValueError(f'Node groups {unknown} are not declared in '
                     'launch/node_groups.py (GROUPS): declare each there.')


def watched(nodes: Dict[str, Sequence[Any]],
            kept: bool) -> Dict[str, Sequence[Any]]:
  """The groups of `nodes` ({group: its nodes}) whose heartbeats the
  coordinator watches: those the program cannot go on without and, under
  keepers, every kept one (a node that froze is ended, for its keeper to
  start it again)."""
  return {name: members for name, members in nodes.items()
          if BY_NAME[name].needed != NONE or (kept and BY_NAME[name].kept)}
