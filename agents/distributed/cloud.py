"""Launching a program on Google Cloud, through Launchpad's Vertex AI launcher.

`--lp_launch_type=vertex_ai` hands the program to Launchpad 0.5's own
launcher (`lp.launch(program, 'vertex_ai', xm_resources)`), which

* puts node groups with the same container and resources into one Vertex AI
  worker pool (at most 4; the first pool must hold exactly one replica, the
  job's primary, whose exit ends the job and gives its status),
* serialises each pool's nodes into its container (`job.pkl`), and builds
  the container from `python:3.10` plus the requirements file given here,
* starts each replica as `python -m process_entry --data_file=job.pkl`,
  which runs the node of index `CLUSTER_SPEC["task"]["index"]` and binds
  its one address from `CLUSTER_SPEC`.

This module says what each node group asks for (`CloudOptions`, flags of
the same names), refuses a plan Vertex AI cannot run before anything is
packaged, stages the code and requirements that go into the containers,
and with `--dry_run` stops at the one step that reaches Google Cloud
(building and pushing the images, submitting the job): the containers
are packaged by the real launcher, then kept in `--package_dir` with a
description of the job (`job.json`) instead of being submitted, and the
plan is printed. `agents.distributed.vertex_emulator` runs such a package
on this machine as Vertex AI would.

Every replica serves Courier or Reverb on every interface without asking
who calls, and a caller that reaches a Courier port runs code there. So
the job is submitted with interactive shells into its replicas off
(`--enable_web_access` opens them), as the service account given
(`--service_account`; without one, xmanager's own, which xmanager grants
project-wide roles), on the VPC network given (`--network`; without one,
peered with none), and the plan says so (docs/google_cloud_security.md).
"""

import contextlib
import dataclasses
import io
import json
import logging
import math
import os
import re
import shutil
import sys
import tempfile
import types
from typing import Any, Dict, List, Optional, Tuple

import agents
from agents.config import check_flag

GIB = 2**30
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))
# What the containers need of this repository: the nodes' code (pickled by
# reference to these packages).
CODE = ('agents',)
JOB_FILE = 'job.json'

# Accelerators Vertex AI offers that xmanager 0.3.0 can ask for
# (`xm.GpuType`); the A100 picks its own a2 machine.
ACCELERATORS = ('P4', 'T4', 'P100', 'V100', 'A100')

# Replay's bytes per stored transition, by environment kind, measured on this
# machine as the replay server's resident-memory growth per transition
# (`benchmarks/replay_memory.py`, README "Replay memory"): Atari frames are
# stored once per step and compressed; the small observations of MinAtar and
# vector environments are dominated by Reverb's per-item cost.
REPLAY_BYTES_PER_TRANSITION = {
    'atari': 2_390,    # Pong, 20,000 transitions
    'minatar': 1_960,  # breakout, 50,000 transitions
    'gym': 1_920,      # CartPole-v1, 50,000 transitions
    'control': 1_920,  # vector observations, as gym
}
# Replay's machine holds its items with this headroom, plus the process
# itself (Python, TensorFlow, Reverb: ~0.4 GB measured) and a checkpoint's
# buffers.
REPLAY_HEADROOM = 1.5
REPLAY_BASE_GIB = 2.0

# The replay's load, for the shard count a plan proposes (README "Replay in
# shards"), from `benchmarks/replay_shards.py` on this machine with Atari
# (Pong) transitions: a shard's server CPU per transition, microseconds,
# for an insert, a sample and a priority update, with 2 shards each pinned
# to a core (both cores busy: dearer than one shard's 24.5/16.6/2.5, so the
# plan errs on the side of more shards).
REPLAY_SHARD_MICROSECONDS = dict(insert=37.27, sample=13.25, update=2.69)
# Agent steps (one transition each) per second of one actor core with K
# environments, in the program (`benchmarks/program_throughput.py`, Pong).
ACTOR_STEPS_PER_SECOND = {1: 220.31, 16: 731.66}
# The learner's draw: the paper's 19 batches of 512 per second (§4.1), each
# transition's priority updated once.
LEARNER_SAMPLES_PER_SECOND = 19 * 512
# The share of its core a shard is planned to use: room for checkpoints and
# bursts, and for the table's lock, which a cost per transition does not
# see.
SHARD_LOAD = 0.5

# Who can reach a job (docs/google_cloud_security.md). A service account's
# email: user-managed ones are <name>@<project>.iam.gserviceaccount.com,
# Google's default ones end in gserviceaccount.com too.
SERVICE_ACCOUNT = re.compile(
    r'[a-z0-9][a-z0-9._-]*@[a-z0-9][a-z0-9.-]*\.gserviceaccount\.com')
# A VPC network as Vertex AI's CustomJob takes it: the project's number
# (not its ID), and the network's name (lowercase letters, digits, hyphens).
NETWORK = re.compile(
    r'projects/[0-9]+/global/networks/[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?')
# Without --service_account, xmanager 0.3.0 runs the job as its own account,
# creating it if missing and granting it these roles on the whole project.
XMANAGER_ACCOUNT = 'xmanager@<project>.iam.gserviceaccount.com'
XMANAGER_ROLES = ('roles/aiplatform.user', 'roles/storage.admin')
SECURITY_DOCS = 'docs/google_cloud_security.md'

# The coordinator asks for less than any other group (and lands on the
# smallest machine), so that it is a pool of its own and, added first to the
# program, the job's primary replica.
COORDINATOR_CPUS = 1
COORDINATOR_MEMORY_GB = 2.0


@dataclasses.dataclass(frozen=True)
class CloudOptions:
  """What each node group asks of Google Cloud (--lp_launch_type=vertex_ai).

  Vertex AI gives every replica a machine of its own: the N1 machine with
  the fewest CPUs, then the least memory, that has what a group asks for.
  """

  dry_run: bool = False
  """With --lp_launch_type=vertex_ai: package the containers, print the plan
  (worker pools, their nodes and replicas, machines, accelerators, memory,
  image and install steps, where the run's files go) and exit without
  submitting anything; needs no credentials."""
  package_dir: Optional[str] = None
  """With --dry_run: where the packaged containers and job.json are kept
  (agents/distributed/vertex_emulator.py runs them on this machine);
  default: a new temporary directory."""
  learner_machine: str = 'n1-standard-8'
  """The learner's Vertex AI machine type (N1; an A100 brings its own a2
  machine)."""
  learner_accelerator: str = 'none'
  """The learner's accelerator: none, P4, T4, P100, V100 or A100 (its image
  then holds TensorFlow 2.8 built for GPUs, with CUDA 11 and cuDNN 8)."""
  learner_accelerator_count: int = 1
  """How many of --learner_accelerator (1, 2, 4 or 8)."""
  actor_cpus: int = 2
  """CPUs of each actor's machine (an actor acts with one core; give it
  more with --envs_per_actor)."""
  actor_memory_gb: float = 4.0
  """Memory of each actor's machine, GB."""
  replay_cpus: int = 4
  """CPUs of the replay's machine (one Reverb server served ~13,900
  inserts/s on about one core here: README "Replay headroom")."""
  replay_memory_gb: Optional[float] = None
  """Memory of the replay's machine, GB; none: --replay_capacity times the
  measured bytes per transition of the environment's kind, x1.5, + 2 GB."""
  small_node_cpus: int = 2
  """CPUs of the counter's and the evaluator's machines (the actors' puts
  them in the actors' worker pool)."""
  small_node_memory_gb: float = 4.0
  """Memory of the counter's and the evaluator's machines, GB."""
  enable_web_access: bool = False
  """Let Vertex AI open an interactive shell into each replica (the job's
  web access URIs): whoever may open them runs commands in every replica,
  as the job's service account. Off by default: no shells."""
  service_account: Optional[str] = None
  """The service account the job runs as (its email,
  <name>@<project>.iam.gserviceaccount.com); the launch then creates no
  account and grants no role. none (default): xmanager's own,
  xmanager@<project>.iam.gserviceaccount.com, which the launch creates if
  missing and grants roles/aiplatform.user and roles/storage.admin on the
  whole project (docs/google_cloud_security.md: the least a job needs)."""
  network: Optional[str] = None
  """The VPC network of yours the job is peered with,
  projects/<project number>/global/networks/<name> (VPC Network Peering
  with Vertex AI set up on it first): its hosts can then reach the
  replicas. none (default): the job is peered with no network."""

  def validate(self):
    """Raises ValueError naming the first flag whose value is out of range."""
    self._validate_access()
    for name in ('actor_cpus', 'replay_cpus', 'small_node_cpus'):
      check_flag(name, getattr(self, name) >= 1, getattr(self, name), '>= 1')
    for name in ('actor_memory_gb', 'small_node_memory_gb'):
      check_flag(name, getattr(self, name) > 0, getattr(self, name), '> 0')
    check_flag('replay_memory_gb',
               self.replay_memory_gb is None or self.replay_memory_gb > 0,
               self.replay_memory_gb, '> 0 (or none to compute it)')
    accelerator = self.learner_accelerator
    check_flag('learner_accelerator',
               accelerator == 'none' or accelerator.upper() in ACCELERATORS,
               accelerator, f'none or one of {", ".join(ACCELERATORS)}')
    counts = (1, 2, 4, 8, 16) if self.accelerator == 'A100' else (1, 2, 4, 8)
    check_flag('learner_accelerator_count',
               self.learner_accelerator_count in counts,
               self.learner_accelerator_count,
               ', '.join(str(count) for count in counts))

  def _validate_access(self):
    if self.service_account is not None and not SERVICE_ACCOUNT.fullmatch(
        self.service_account):
      raise ValueError(
          f'--service_account={self.service_account} is not a service '
          'account\'s email: give <name>@<project>.iam.gserviceaccount.com '
          '(`gcloud iam service-accounts list` shows them; '
          f'{SECURITY_DOCS} says how to make one).')
    if self.network is not None and not NETWORK.fullmatch(self.network):
      raise ValueError(
          f'--network={self.network} is not a VPC network\'s full name: give '
          'projects/<project number>/global/networks/<name>, with the '
          'project\'s number, not its ID (`gcloud projects describe '
          '<project> --format="value(projectNumber)"`).')

  def job_settings(self) -> Dict[str, Any]:
    """Who can reach the job, as `aiplatform.CustomJob.run` takes it: its
    web access, the account it runs as (None: xmanager's), its network
    (None: peered with none)."""
    return {'enable_web_access': self.enable_web_access,
            'service_account': self.service_account,
            'network': self.network}

  @property
  def accelerator(self) -> Optional[str]:
    if self.learner_accelerator == 'none':
      return None
    return self.learner_accelerator.upper()


def machine_types() -> Dict[str, Tuple[int, int]]:
  """Vertex AI's N1 machines that xmanager can ask for: name -> (CPUs,
  memory in bytes)."""
  from xmanager.cloud import vertex  # pylint: disable=g-import-not-at-top
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
    if self.accelerator:
      text += f' + {self.accelerator_count} x {self.accelerator}'
    return text


@dataclasses.dataclass(frozen=True)
class Plan:
  """A checked Vertex AI launch: each node group's request, and the
  launch's cloud flags (a plan only, or a submission); `replay` says what
  the replay's load will be and how many shards it needs (no replay: '')."""
  requests: Dict[str, Request]
  options: CloudOptions
  replay: str = ''


def actor_steps_per_second(envs_per_actor: int,
                           measured: Dict[int, float] = None) -> float:
  """One actor core's agent steps per second with `envs_per_actor`
  environments, from `measured` (K: steps/s; default
  `ACTOR_STEPS_PER_SECOND`): linear between the two K measured, and no
  more than the larger K's beyond it (the emulators then take the core)."""
  (k_low, low), (k_high, high) = sorted(
      (measured or ACTOR_STEPS_PER_SECOND).items())
  k = min(max(envs_per_actor, k_low), k_high)
  return low + (high - low) * (k - k_low) / (k_high - k_low)


@dataclasses.dataclass(frozen=True)
class ReplayLoad:
  """The replay's expected load and the shards it needs."""
  inserts_per_second: float
  samples_per_second: float
  server_cores: float
  shards: int


def replay_load(num_actors: int, envs_per_actor: int,
                microseconds: Dict[str, float] = None,
                steps_per_second: Dict[int, float] = None,
                shard_load: float = SHARD_LOAD) -> ReplayLoad:
  """`num_actors` actor cores of `envs_per_actor` Atari environments each
  and a learner as the paper's: the transitions the shards take in and give
  out per second, the server cores that costs (`microseconds` of a server's
  CPU per insert, sample and update; default `REPLAY_SHARD_MICROSECONDS`),
  and the shards that keep each at `shard_load` of a core."""
  cost = microseconds or REPLAY_SHARD_MICROSECONDS
  inserts = num_actors * actor_steps_per_second(envs_per_actor,
                                                steps_per_second)
  samples = LEARNER_SAMPLES_PER_SECOND
  cores = (inserts * cost['insert'] +
           samples * (cost['sample'] + cost['update'])) / 1e6
  return ReplayLoad(inserts, samples, cores,
                    max(1, math.ceil(cores / shard_load)))


def replay_advice(env_kind: str, num_actors: int, envs_per_actor: int,
                  replay_shards: int) -> str:
  """What a plan says of the replay's load: the shards it proposes, and
  whether --replay_shards gives them."""
  if env_kind != 'atari':
    return (f'Replay load: not estimated for {env_kind} environments (the '
            'figures are measured with Atari frames: README "Replay in '
            'shards").')
  load = replay_load(num_actors, envs_per_actor)
  text = (
      f'Replay load (an estimate from this project\'s measurements, README '
      f'"Replay in shards"): {num_actors} actors x {envs_per_actor} '
      f'environments write about {load.inserts_per_second:,.0f} '
      'transitions/s; a learner as the paper\'s (19 batches of 512/s) '
      f'samples and updates {load.samples_per_second:,.0f}/s: '
      f'{load.server_cores:.2f} cores of replay servers. '
      f'--replay_shards={load.shards} keeps each shard at '
      f'{SHARD_LOAD:g} of a core or less')
  if replay_shards < load.shards:
    return (f'{text}; with --replay_shards={replay_shards} each would need '
            f'{load.server_cores / replay_shards:.2f}: raise '
            f'--replay_shards to {load.shards}.')
  return f'{text}; --replay_shards={replay_shards} does.'


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


def replay_memory_bytes(env_kind: str, capacity: int) -> int:
  """The memory the replay's machine needs for `capacity` transitions of an
  environment of kind `env_kind`."""
  per_transition = REPLAY_BYTES_PER_TRANSITION.get(
      env_kind, max(REPLAY_BYTES_PER_TRANSITION.values()))
  return int(capacity * per_transition * REPLAY_HEADROOM +
             REPLAY_BASE_GIB * GIB)


def _bytes(value_gb: float) -> int:
  return int(value_gb * GIB)


def requests(cloud: 'CloudOptions', env_kind: str,
             replay_capacity: Optional[int]) -> Dict[str, Request]:
  """Every node group's request (no replay for a program without one, a
  program of workers: `replay_capacity` None); raises ValueError for a plan no machine
  fits (a replay the machine asked for cannot hold, an unknown machine),
  naming the flags and the fix."""
  small = _request(cloud.small_node_cpus, _bytes(cloud.small_node_memory_gb),
                   ('small_node_cpus', 'small_node_memory_gb'))
  actor = _request(cloud.actor_cpus, _bytes(cloud.actor_memory_gb),
                   ('actor_cpus', 'actor_memory_gb'))
  groups = {
      'coordinator': _request(COORDINATOR_CPUS,
                              _bytes(COORDINATOR_MEMORY_GB), exact=False),
      'counter': small,
      'learner': _learner_request(cloud),
      'actor': actor,
      'evaluator': small,
  }
  if replay_capacity is None:
    return groups
  return {**groups, 'replay': _replay_request(cloud, env_kind,
                                              replay_capacity)}


def _replay_request(cloud: 'CloudOptions', env_kind: str,
                    replay_capacity: int) -> Request:
  needed = replay_memory_bytes(env_kind, replay_capacity)
  replay_flags = ('replay_cpus', 'replay_memory_gb')
  if cloud.replay_memory_gb is not None and _bytes(
      cloud.replay_memory_gb) < needed:
    raise ValueError(
        f'--replay_memory_gb={cloud.replay_memory_gb:g} cannot hold '
        f'--replay_capacity={replay_capacity} transitions of a {env_kind} '
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


def _learner_request(cloud: 'CloudOptions') -> Request:
  flags = ('learner_machine', 'learner_accelerator',
           'learner_accelerator_count')
  if cloud.accelerator == 'A100':
    # Vertex AI puts A100s on a2 machines of their own count.
    from xmanager.cloud import vertex  # pylint: disable=g-import-not-at-top
    machine = dict(vertex._A100_GPUS_TO_MACHINE_TYPE)[  # pylint: disable=protected-access
        cloud.learner_accelerator_count]
    return Request(machine, 0, 0, 'A100', cloud.learner_accelerator_count,
                   flags)
  if cloud.learner_machine not in machine_types():
    raise ValueError(
        f'--learner_machine={cloud.learner_machine} is not a Vertex AI '
        f'machine xmanager can ask for; choose one of '
        f'{", ".join(sorted(machine_types()))}.')
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


# The containers' Python packages: the local set, with TensorFlow built for
# GPUs where a GPU is asked for, and what Launchpad's process_entry needs
# beside them (it imports xmanager through Launchpad's DockerConfig).
_GPU_PACKAGES = (
    # TensorFlow 2.8 loads CUDA 11 and cuDNN 8 (see `gpu_libraries`).
    'nvidia-cuda-runtime-cu11==11.8.89',
    'nvidia-cublas-cu11==11.11.3.6',
    'nvidia-cufft-cu11==10.9.0.58',
    'nvidia-curand-cu11==10.3.0.86',
    'nvidia-cusolver-cu11==11.4.1.48',
    'nvidia-cusparse-cu11==11.7.5.86',
    'nvidia-cudnn-cu11==8.6.0.163',
)


# Where the CUDA and cuDNN wheels put their libraries in the image
# (python:3.10's site-packages), and where Vertex AI's GPU machines expose
# the driver: TensorFlow 2.8 looks for CUDA on the library path only.
_SITE_PACKAGES = '/usr/local/lib/python3.10/site-packages'
GPU_LIBRARY_PATH = ':'.join(
    [f'{_SITE_PACKAGES}/nvidia/{name}/lib' for name in (
        'cuda_runtime', 'cublas', 'cufft', 'curand', 'cusolver', 'cusparse',
        'cudnn')] + ['/usr/local/nvidia/lib', '/usr/local/nvidia/lib64'])


def _with_environment(packageable):
  """A pool's image gets TensorFlow's oneDNN switch
  (`agents.onednn_setting`: on, unless the launcher's environment sets
  it), and a pool whose requirements hold the CUDA wheels gets their
  libraries on its library path: ENV lines in its Dockerfile (Launchpad's
  own Docker steps have no room for them)."""
  import attr  # pylint: disable=g-import-not-at-top
  env_vars = {**packageable.env_vars,
              agents.ONEDNN: agents.onednn_setting()}
  with open(os.path.join(packageable.executable_spec.path,
                         'requirements.txt')) as f:
    if 'nvidia-cudnn' in f.read():
      env_vars['LD_LIBRARY_PATH'] = GPU_LIBRARY_PATH
  return attr.evolve(packageable, env_vars=env_vars)


class _GpuAwareExperiment:
  """xmanager's experiment, with `_with_environment` applied to what
  Launchpad packages."""

  def __init__(self, experiment):
    self._experiment = experiment

  def __enter__(self):
    self._entered = self._experiment.__enter__()
    return self

  def __exit__(self, *exc_info):
    return self._experiment.__exit__(*exc_info)

  def package(self, packageables):
    return self._entered.package(
        [_with_environment(packageable) for packageable in packageables])

  def add(self, *args, **kwargs):
    return self._entered.add(*args, **kwargs)


@contextlib.contextmanager
def _launcher_experiment(make_experiment):
  """Within: Launchpad's Vertex AI launcher opens `make_experiment(...)`
  wrapped in `_GpuAwareExperiment`, where it would open xmanager's."""
  from launchpad.launch.xm_docker import launch as xm_launch  # pylint: disable=g-import-not-at-top
  real = xm_launch.xm_local
  xm_launch.xm_local = types.SimpleNamespace(
      create_experiment=lambda **kwargs: _GpuAwareExperiment(
          make_experiment(**kwargs)), Caip=real.Caip)
  try:
    yield
  finally:
    xm_launch.xm_local = real


def container_requirements(gpu: bool) -> str:
  """The text of a container's requirements file."""
  lines = []
  for name in ('requirements.txt', 'requirements-cloud.txt'):
    with open(os.path.join(ROOT, name)) as f:
      for line in f:
        text = line.split('#')[0].strip()
        if not text or text.startswith('-c') or text.startswith('pytest'):
          continue
        if gpu and text.startswith('tensorflow-cpu=='):
          text = text.replace('tensorflow-cpu==', 'tensorflow==')
        lines.append(text)
  if gpu:
    lines.extend(_GPU_PACKAGES)
  return '\n'.join(lines) + '\n'


def stage_code(directory: str) -> str:
  """Copies what the containers need of this repository into `directory`;
  returns the code directory for Launchpad's DockerConfig."""
  code = os.path.join(directory, 'code')
  for name in CODE:
    shutil.copytree(os.path.join(ROOT, name), os.path.join(code, name),
                    ignore=shutil.ignore_patterns('__pycache__', '*.pyc'))
  return code


def xm_resources(group_requests: Dict[str, Request], groups: List[str],
                 staging: str) -> Dict[str, Any]:
  """Launchpad's `xm_resources`: one DockerConfig per node group."""
  from launchpad.nodes.python import xm_docker  # pylint: disable=g-import-not-at-top
  code = stage_code(staging)
  files = {}
  for gpu in (False, True):
    path = os.path.join(staging, 'requirements-gpu.txt' if gpu
                        else 'requirements.txt')
    with open(path, 'w') as f:
      f.write(container_requirements(gpu))
    files[gpu] = path
  return {label: xm_docker.DockerConfig(
      code_directory=code,
      docker_requirements=files[group_requests[label].accelerator is not None],
      hw_requirements=job_requirements(group_requests[label]))
          for label in groups}


def check_cloud_dependencies():
  """Raises ValueError saying how to install what the launch needs."""
  # google-cloud-bigquery (through aiplatform) announces at import, at INFO,
  # that it could trace itself with OpenTelemetry.
  logging.getLogger('google.cloud.bigquery.opentelemetry_tracing').setLevel(
      logging.WARNING)
  try:
    import xmanager  # pylint: disable=g-import-not-at-top,unused-import
    from xmanager import xm_local  # pylint: disable=g-import-not-at-top
    xm_local.Caip  # pylint: disable=pointless-statement
  except Exception as error:  # pylint: disable=broad-except
    raise ValueError(
        f'--lp_launch_type=vertex_ai needs xmanager ({error}); install it '
        'with `make cloud-deps` (pip install -r requirements-cloud.txt).'
    ) from error


class _Packaged:
  """An executable that was packaged and kept, not built nor pushed."""

  def __init__(self, pool: str, spec, environment: Dict[str, str]):
    self.pool = pool
    self.spec = spec
    self.environment = environment  # Its Dockerfile's ENV lines.


class _KeptExperiment:
  """Stands where Launchpad opens an xmanager experiment (the step that
  builds images with Cloud Build or Docker, pushes them and submits the job):
  keeps each packaged container and what would have been submitted."""

  def __init__(self, directory: str):
    self._directory = directory
    self.pools: List[Dict[str, Any]] = []
    self._packaged: List[_Packaged] = []

  def __enter__(self):
    return self

  def __exit__(self, *exc_info):
    return False

  def package(self, packageables):
    from xmanager.cloud import build_image  # pylint: disable=g-import-not-at-top
    executables = []
    for packageable in packageables:
      spec = packageable.executable_spec
      pool = f'workerpool{len(self._packaged)}'
      target = os.path.join(self._directory, pool)
      shutil.copytree(spec.path, os.path.join(target, os.path.basename(
          spec.path)))
      # The Dockerfile xmanager would build the image from (it writes it to
      # a temporary file and returns its path).
      dockerfile = build_image._create_dockerfile(  # pylint: disable=protected-access
          spec, packageable.args, packageable.env_vars)
      shutil.move(dockerfile, os.path.join(target, 'Dockerfile'))
      packaged = _Packaged(pool, spec, dict(packageable.env_vars))
      self._packaged.append(packaged)
      executables.append(packaged)
    return executables

  def add(self, job_group):
    for job in job_group.jobs.values():
      packaged = job.executable
      requirements = job.executor.requirements
      entrypoint = ' '.join(packaged.spec.entrypoint.commands)
      self.pools.append({
          'name': packaged.pool,
          'directory': os.path.join(packaged.pool,
                                    os.path.basename(packaged.spec.path)),
          'replicas': requirements.replicas,
          'command': entrypoint,
          'base_image': packaged.spec.base_image,
          'docker_instructions': list(packaged.spec.docker_instructions),
          'environment': packaged.environment,
          'requirements': repr(requirements),
      })


def _launch(program, group_requests: Dict[str, Request], make_experiment):
  """Launchpad's Vertex AI launcher on `program`, with its code and
  requirements staged here and `make_experiment` where it opens xmanager's
  experiment (`_launcher_experiment`)."""
  import launchpad as lp  # pylint: disable=g-import-not-at-top
  staging = tempfile.mkdtemp(prefix='apex-staging-')
  try:
    resources = xm_resources(group_requests, list(program.groups), staging)
    with _launcher_experiment(make_experiment):
      lp.launch(program, launch_type='vertex_ai', xm_resources=resources)
  finally:
    shutil.rmtree(staging, ignore_errors=True)


def _bound_pools(program) -> Dict[str, List[str]]:
  """Which nodes Launchpad bound to which worker pool: pool -> labels by
  replica index (read from each node's address, bound from CLUSTER_SPEC)."""
  pools: Dict[str, Dict[int, str]] = {}
  for label, nodes in program.groups.items():
    for node in nodes:
      builder = node.addresses[0]._address_builder  # pylint: disable=protected-access
      pools.setdefault(builder._cluster, {})[builder._instance] = label  # pylint: disable=protected-access
  return {pool: [labels[index] for index in sorted(labels)]
          for pool, labels in sorted(pools.items())}


def package(program, group_requests: Dict[str, Request], directory: str,
            workdir: str, options: CloudOptions) -> Dict[str, Any]:
  """Runs Launchpad's Vertex AI launcher up to the step that reaches Google
  Cloud and keeps what it packaged in `directory` (one directory per worker
  pool, and `job.json`, with who can reach the job: `options`'
  `job_settings`); returns the job's description."""
  # Kept at the step where the launcher would reach Google Cloud.
  experiment = _KeptExperiment(directory)
  # Launchpad prints that the program was launched: it was not.
  with contextlib.redirect_stdout(io.StringIO()):
    _launch(program, group_requests, lambda **unused: experiment)
  nodes = _bound_pools(program)
  pools = []
  for pool in experiment.pools:
    labels = nodes[pool['name']]
    request = group_requests[labels[0]]
    machine = xmanager_machine(request)
    if machine != request.machine:  # The plan must say what is asked for.
      raise RuntimeError(f'xmanager asks for {machine} where the plan says '
                         f'{request.machine} ({", ".join(labels)}).')
    pools.append({**pool, 'nodes': labels, 'machine_type': machine,
                  'machine': request.describe(),
                  'gpu_image': request.accelerator is not None})
  job = {'name': program.name, 'workdir': workdir, 'pools': pools,
         'access': options.job_settings()}
  with open(os.path.join(directory, JOB_FILE), 'w') as f:
    json.dump(job, f, indent=2)
  return job


def _counted(labels: List[str]) -> str:
  counts: Dict[str, int] = {}
  for label in labels:
    counts[label] = counts.get(label, 0) + 1
  return ', '.join(f'{count} x {label}' if count > 1 else label
                   for label, count in counts.items())


def format_plan(job: Dict[str, Any], workdir: str, directory: str) -> str:
  """The plan `--dry_run` prints."""
  lines = [f'Vertex AI job "{job["name"]}" (not submitted: --dry_run).', '']
  machine_hours: Dict[str, int] = {}
  for pool in job['pools']:
    lines.append(f'{pool["name"]}: {pool["replicas"]} replica(s), each on '
                 f'its own {pool["machine"]}: {_counted(pool["nodes"])}')
    machine_hours[pool['machine_type']] = machine_hours.get(
        pool['machine_type'], 0) + pool['replicas']
  first = job['pools'][0]
  lines += ['', f'Primary replica (its exit ends the job and gives its '
                f'status): {first["nodes"][0]} ({first["name"]}).', '',
            f'Container of each pool: FROM {first["base_image"]}, then']
  lines += [f'  {step}' for step in first['docker_instructions']]
  lines.append(f'  CMD {first["command"]}')
  lines.append('  requirements.txt: this project\'s pinned set and '
               'requirements-cloud.txt' + ''.join(
                   f'; in {pool["name"]}, TensorFlow 2.8 for GPUs with CUDA '
                   '11 and cuDNN 8 wheels' for pool in job['pools']
                   if pool['gpu_image']))
  lines += ['', 'Machine-hours per hour of running: ' + ', '.join(
      f'{count} x {machine}' for machine, count in sorted(
          machine_hours.items())) + '.', '']
  lines += access_lines(job['access'])
  lines += ['', f'Run files (logs, checkpoints, run.json, stop.json): '
                f'{workdir}',
            f'Packaged containers and job.json: {directory}']
  return '\n'.join(lines)


def access_lines(access: Dict[str, Any]) -> List[str]:
  """What the plan says of who can reach the job (`job_settings`)."""
  lines = [f'Who can reach the job ({SECURITY_DOCS}):']
  if access['enable_web_access']:
    lines.append('  Interactive shells (web access): on: whoever may open '
                 'the job\'s web access URIs runs commands in every '
                 'replica, as its service account.')
  else:
    lines.append('  Interactive shells (web access): off '
                 '(--enable_web_access opens them).')
  if access['service_account']:
    lines.append(f'  Runs as: {access["service_account"]} (--service_account:'
                 ' no account is created, no role granted).')
  else:
    lines.append(f'  Runs as: {XMANAGER_ACCOUNT}, which the launch creates '
                 f'if missing and grants {" and ".join(XMANAGER_ROLES)} on '
                 'the whole project (--service_account=<email> runs it as '
                 'an account of yours instead).')
  if access['network']:
    lines.append(f'  Network: peered with {access["network"]}: its hosts, '
                 'and networks connected to it, can reach every replica\'s '
                 'ports.')
  else:
    lines.append('  Network: peered with no VPC network (Vertex AI\'s own; '
                 '--network=projects/<project number>/global/networks/'
                 '<name> peers one of yours).')
  return lines


def dry_run(program, group_requests: Dict[str, Request], workdir: str,
            options: CloudOptions, replay: str = ''):
  """Packages the program for Vertex AI in `options.package_dir` (a new
  directory if none), prints the plan (and `replay`, what it says of the
  replay's load), exits 0."""
  directory = options.package_dir
  directory = directory or tempfile.mkdtemp(prefix='apex-vertex-')
  os.makedirs(directory, exist_ok=True)
  if os.listdir(directory):
    raise ValueError(f'--package_dir={directory} is not empty; choose a new '
                     'or empty directory.')
  job = package(program, group_requests, directory, workdir, options)
  print(format_plan(job, workdir, directory))
  if replay:
    print(f'\n{replay}')
  sys.stdout.flush()


SETUP_HELP = ('see the README\'s "On Google Cloud": a project with Vertex AI, '
              'Cloud Build and Container Registry enabled, `gcloud auth '
              'application-default login`, GOOGLE_CLOUD_PROJECT and '
              'GOOGLE_CLOUD_BUCKET_NAME set')
ACCESS_HELP = (f'{SECURITY_DOCS} gives the roles a launch needs (among them, '
               'with --service_account, roles/iam.serviceAccountUser on that '
               'account)')


class _Overlay:
  """A module with some of its names replaced: what xmanager's Vertex AI
  client sees as `aiplatform` and `auth` while it submits a job."""

  def __init__(self, module, **names):
    self._module = module
    self._names = names

  def __getattr__(self, name):
    if name in self._names:
      return self._names[name]
    return getattr(self._module, name)


def _custom_job(settings: Dict[str, Any]):
  """Vertex AI's `CustomJob`, run with `settings`' web access and network
  whatever its caller asks (xmanager 0.3.0 asks for web access, always, and
  for no network)."""
  from google.cloud import aiplatform  # pylint: disable=g-import-not-at-top

  class CustomJob(aiplatform.CustomJob):

    def run(self, *args, **kwargs):
      kwargs.update(enable_web_access=settings['enable_web_access'],
                    network=settings['network'])
      return super().run(*args, **kwargs)

  return CustomJob


@contextlib.contextmanager
def _submitted_with(settings: Dict[str, Any]):
  """Within: xmanager's Vertex AI client (`vertex.Client.launch`, which runs
  the job with web access on, as the account `auth.get_service_account()`
  creates and grants project-wide roles) submits the job with `settings`
  (`CloudOptions.job_settings`): web access and network as given, and,
  given an account, that one, without asking xmanager for its own.
  Launchpad's launch returns only once xmanager has submitted (its
  experiment waits for its tasks on exit), so this covers the submission."""
  from xmanager.cloud import vertex  # pylint: disable=g-import-not-at-top
  names = {'aiplatform': _Overlay(vertex.aiplatform,
                                  CustomJob=_custom_job(settings))}
  if settings['service_account']:
    names['auth'] = _Overlay(
        vertex.auth, get_service_account=lambda: settings['service_account'])
  real = {name: getattr(vertex, name) for name in names}
  for name, value in names.items():
    setattr(vertex, name, value)
  try:
    yield
  finally:
    for name, value in real.items():
      setattr(vertex, name, value)


def submit(program, group_requests: Dict[str, Request],
           options: CloudOptions):
  """Launches the program on Vertex AI through Launchpad's launcher: images
  built (Cloud Build, or a local Docker) and pushed, the job submitted with
  `options`' `job_settings`. Raises
  ValueError saying what to set up when Google Cloud is not, or refuses."""
  from google.api_core import exceptions as api_exceptions  # pylint: disable=g-import-not-at-top
  from google.auth import exceptions as auth_exceptions  # pylint: disable=g-import-not-at-top
  from xmanager import xm_local  # pylint: disable=g-import-not-at-top
  if not os.environ.get('GOOGLE_CLOUD_BUCKET_NAME'):
    raise ValueError('GOOGLE_CLOUD_BUCKET_NAME is not set: xmanager stages '
                     'the job\'s files in that Cloud Storage bucket; ' +
                     SETUP_HELP + '.')
  try:
    with _submitted_with(options.job_settings()):
      _launch(program, group_requests, xm_local.create_experiment)
  except auth_exceptions.GoogleAuthError as error:
    raise ValueError(f'Google Cloud refused or could not be reached '
                     f'({error}); {SETUP_HELP}.') from error
  except api_exceptions.GoogleAPICallError as error:
    raise ValueError(f'Google Cloud refused the launch ({error}); '
                     f'{ACCESS_HELP}.') from error
