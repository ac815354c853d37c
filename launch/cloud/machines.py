"""Each node group's machine request, and the checks a plan must pass.

Vertex AI gives every replica a machine of its own: the N1 machine with the
fewest CPUs, then the least memory, that has what its group asks for
(`CloudOptions`). `requests` picks each group's machine, and refuses a
replay its machine cannot hold, a machine xmanager cannot ask for, or a
learner's GPUs that Vertex AI's compatibility table does not allow on its
machine (`compatibility`);
`check_plan` refuses more worker pools than Vertex AI runs; `Plan` is the
checked launch. `job_requirements` and `xmanager_machine` say a request as
xmanager asks Vertex AI for it.
"""

import dataclasses
from typing import Any, Dict, List, Optional, Tuple

from launch import node_groups
from launch.cloud import compatibility
from launch.cloud.capacity import GIB
from launch.cloud.capacity import replay_memory_bytes
from launch.cloud.options import CloudOptions

# The coordinator asks for less than any other group (and lands on the
# smallest machine), so that it is a pool of its own and, added first to the
# program, the job's primary replica.
COORDINATOR_CPUS = 1
COORDINATOR_MEMORY_GB = 2.0


def machine_types() -> Dict[str, Tuple[int, int]]:
  """Vertex AI's N1 machines that xmanager can ask for: name -> (CPUs,
  memory in bytes)."""
  # pylint: disable=g-import-not-at-top,unused-import
  # xmanager 0.3.0's vertex module, imported first, fails on a circular
  # import of its own; through xm_local it imports (as a launch does).
  from xmanager import xm_local
  from xmanager.cloud import vertex
  return dict(vertex._MACHINE_TYPE_TO_CPU_RAM)  # pylint: disable=protected-access


def smallest_machine(cpus: int, memory: int, flags: Tuple[str, ...]) -> str:
  """The N1 machine with the fewest CPUs, then the least memory, that has
  `cpus` and `memory`; raises ValueError naming `flags` if none has."""
  fitting = sorted((machine_cpus, machine_memory, name) for name, (
      machine_cpus, machine_memory) in machine_types().items()
                   if machine_cpus >= cpus and machine_memory >= memory)
  if not fitting:
    raise ValueError(
        f'No Vertex AI machine has {cpus} CPUs and {memory / GIB:.1f} GiB; '
        f'lower {" or ".join("--" + flag for flag in flags)}.')
  return fitting[0][2]


@dataclasses.dataclass(frozen=True)
class Request:
  """What one node group asks of Vertex AI: its machine (and what the group
  asked for, which picked it), its accelerator, and the flags that set it."""
  machine: str
  cpus: int
  memory: int
  accelerator: Optional[str] = None
  accelerator_count: int = 0
  flags: Tuple[str, ...] = ()

  def shape(self):
    return (self.cpus, self.memory, self.accelerator, self.accelerator_count)

  def describe(self) -> str:
    text = self.machine
    if self.machine in machine_types():
      cpus, memory = machine_types()[self.machine]
      text += f' ({cpus} CPUs, {memory / GIB:g} GiB)'
    elif compatibility.machine_shape(self.machine):
      cpus, memory_gb = compatibility.machine_shape(self.machine)
      text += f' ({cpus} CPUs, {memory_gb:g} GB)'
    if self.accelerator:
      text += f' + {self.accelerator_count} x {self.accelerator}'
    return text


@dataclasses.dataclass(frozen=True)
class Plan:
  """A checked Vertex AI launch: each node group's request, and the
  launch's cloud flags (a plan only, or a submission); `replay` says what
  the replay's load will be and how many shards it needs (no replay: ''),
  `parameters` what sending the parameters costs the learner and the
  variable cachers (`capacity.parameter_advice`; none estimated: '')."""
  requests: Dict[str, Request]
  options: CloudOptions
  replay: str = ''
  parameters: str = ''


def _request(cpus: int, memory: int, flags: Tuple[str, ...] = (),
             exact: bool = True) -> Request:
  """The smallest machine for (cpus, memory). `exact`: ask xmanager for the
  machine's own CPUs and memory, which it maps back to that machine (for
  what lies between, its choice weighs memory in bytes against CPUs, and a
  4-CPU 9-GiB request gets a 16-CPU machine)."""
  machine = smallest_machine(cpus, memory, flags)
  if exact:
    cpus, memory = machine_types()[machine]
  return Request(machine, cpus, memory, flags=flags)


def _bytes(value_gb: float) -> int:
  return int(value_gb * GIB)


def requests(cloud: CloudOptions, env_kind: str,
             replay_capacity: Optional[int],
             item_bytes: Optional[int] = None) -> Dict[str, Request]:
  """Every node group's request (no replay for a program without one, a
  program of workers: `replay_capacity` None; `item_bytes`: an item's, as
  `capacity.replay_memory_bytes` takes it); raises ValueError for a plan no machine
  fits (a replay the machine asked for cannot hold, an unknown machine),
  naming the flags and the fix."""
  small = _request(cloud.small_node_cpus, _bytes(cloud.small_node_memory_gb),
                   ('small_node_cpus', 'small_node_memory_gb'))
  actor = _request(cloud.actor_cpus, _bytes(cloud.actor_memory_gb),
                   ('actor_cpus', 'actor_memory_gb'))
  # By `NodeGroup.machine`. A variable cacher's work is its network: the
  # small nodes' machine, in their pool (the plan chooses how many for
  # their egress caps).
  machines = {
      'coordinator': _request(COORDINATOR_CPUS,
                              _bytes(COORDINATOR_MEMORY_GB), exact=False),
      'small': small,
      'learner': _learner_request(cloud),
      'actor': actor,
  }
  if replay_capacity is not None:
    machines['replay'] = _replay_request(cloud, env_kind, replay_capacity,
                                         item_bytes)
  return {group.name: machines[group.machine]
          for group in node_groups.GROUPS if group.machine in machines}


def _replay_request(cloud: CloudOptions, env_kind: str,
                    replay_capacity: int,
                    item_bytes: Optional[int] = None) -> Request:
  needed = replay_memory_bytes(env_kind, replay_capacity, item_bytes)
  replay_flags = ('replay_cpus', 'replay_memory_gb')
  if cloud.replay_memory_gb is not None and _bytes(
      cloud.replay_memory_gb) < needed:
    raise ValueError(
        f'--replay_memory_gb={cloud.replay_memory_gb:g} cannot hold '
        f'--replay_capacity={replay_capacity} items of a {env_kind} '
        f'environment (about {needed / GIB:.1f} GiB with headroom); raise '
        '--replay_memory_gb, leave it unset (none) to have it computed, or '
        'lower --replay_capacity.')
  replay_memory = (needed if cloud.replay_memory_gb is None else
                   _bytes(cloud.replay_memory_gb))
  try:
    replay = _request(cloud.replay_cpus, replay_memory, replay_flags)
  except ValueError as error:
    raise ValueError(
        f'{error} The replay needs about {needed / GIB:.1f} GiB for '
        f'--replay_capacity={replay_capacity} ({env_kind}): lower '
        '--replay_capacity.') from error
  return replay


def _learner_request(cloud: CloudOptions) -> Request:
  """The learner's machine and accelerator, refused (naming what is
  allowed) where Vertex AI's GPU compatibility table does not allow them.
  An A100 picks its machine: the A2 machine of its count."""
  flags = ('learner_machine', 'learner_accelerator',
           'learner_accelerator_count')
  if cloud.accelerator == 'A100':
    machine = compatibility.machines_for(
        'A100', cloud.learner_accelerator_count)[0]
    return Request(machine, 0, 0, 'A100', cloud.learner_accelerator_count,
                   flags)
  if cloud.learner_machine not in machine_types():
    raise ValueError(
        f'--learner_machine={cloud.learner_machine} is not a Vertex AI '
        f'machine xmanager can ask for; choose one of '
        f'{", ".join(sorted(machine_types()))}.')
  if cloud.accelerator:
    compatibility.check(cloud.learner_machine, cloud.accelerator,
                        cloud.learner_accelerator_count, flags)
  cpus, memory = machine_types()[cloud.learner_machine]
  return Request(cloud.learner_machine, cpus, memory, cloud.accelerator,
                 cloud.learner_accelerator_count if cloud.accelerator else 0,
                 flags)


def job_requirements(request: Request):
  """The request as xmanager's `JobRequirements`."""
  from xmanager import xm  # pylint: disable=g-import-not-at-top
  resources = {}
  if request.accelerator:
    resources[request.accelerator.lower()] = request.accelerator_count
  if request.cpus:
    resources['cpu'] = request.cpus
    resources['ram'] = request.memory
  return xm.JobRequirements(**resources)


def xmanager_machine(request: Request) -> str:
  """The machine xmanager itself picks for the request (what Vertex AI is
  asked for)."""
  from xmanager import xm  # pylint: disable=g-import-not-at-top
  from xmanager import xm_local  # pylint: disable=g-import-not-at-top
  from xmanager.cloud import vertex  # pylint: disable=g-import-not-at-top
  job = xm.Job(executable=None,
               executor=xm_local.Caip(requirements=job_requirements(request)))
  return vertex.get_machine_spec(job)['machine_type']


def check_plan(group_requests: Dict[str, Request], groups: List[str]):
  """Refuses a plan Vertex AI cannot run, naming the flags: more than 4
  distinct requests (worker pools)."""
  shapes: Dict[Any, List[str]] = {}
  for label in groups:
    shapes.setdefault(group_requests[label].shape(), []).append(label)
  if len(shapes) > 4:
    described = '; '.join(
        f'{", ".join(labels)}: {group_requests[labels[0]].describe()}'
        for labels in shapes.values())
    raise ValueError(
        f'The plan needs {len(shapes)} worker pools, one per distinct '
        f'request ({described}), and Vertex AI runs at most 4 (one of them '
        'the coordinator\'s). Give the counter and the evaluator the actors\' '
        'machine (--small_node_cpus and --small_node_memory_gb as '
        '--actor_cpus and --actor_memory_gb).')
