"""The containers of a Vertex AI job, and Launchpad's launcher run with them.

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

This module stages the code and requirements that go into the containers
(`xm_resources`), gives each image its environment (`_with_environment`),
and runs the launcher with them (`launch`) up to the experiment it opens
where xmanager builds, pushes and submits: `dry_run` keeps what was
packaged there, `submission` submits it.
"""

import contextlib
import importlib.util
import logging
import os
import shutil
import tempfile
import types
from typing import Any, Dict, List, Optional, Tuple

import agents
from agents import plugins
from launch import ONEDNN
from launch.supervision import keeper
from launch import node_groups
from launch import onednn_setting
from launch.cloud.machines import job_requirements
from launch.cloud.machines import Request

# This repository: the directory that holds the `agents` package.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(agents.__file__)))
# What the containers need of this repository: the nodes' code (pickled by
# reference to these packages).
CODE = ('agents', 'launch')

# The containers' Python packages: the local set, with TensorFlow built for
# GPUs where a GPU is asked for, and what Launchpad's process_entry needs
# beside them (it imports xmanager through Launchpad's DockerConfig).
_GPU_PACKAGES = (
    # TensorFlow 2.8 loads CUDA 11 and cuDNN 8 (see `GPU_LIBRARY_PATH`).
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


# The containers' base image: the Python this project's pinned set is
# verified with (../shared/STACK.md: 3.10), at a fixed patch release and
# Debian release, where Launchpad names the moving `python:3.10`.
BASE_IMAGE = 'python:3.10.13-bookworm'
# pip in the image, the version `scripts/setup_venv.sh` installs.
PIP_VERSION = '24.3.1'


def _docker_steps(spec) -> List[str]:
  """The image's steps in place of Launchpad 0.5's: its `apt-get install
  libpython3.10` (which python:3.10's Debian does not have: it installs
  nothing), its unpinned `pip install --upgrade pip` and `pip install
  xmanager` and its `apt-get install git` (no requirement needs git) go;
  what is left installs exactly the pinned requirements file (which pins
  xmanager too). Raises ValueError if Launchpad's steps are not the ones
  these replace (another Launchpad version)."""
  directory = os.path.basename(spec.path)
  kept = [f'COPY {directory}/requirements.txt requirements.txt',
          f'COPY {directory}/ {directory}', f'WORKDIR {directory}']
  expected = {'RUN apt-get update && apt-get install -y git',
              'RUN python -m pip install --upgrade pip',
              'RUN apt-get -y install libpython3.10',
              'RUN python -m pip install xmanager',
              'RUN python -m pip install -r requirements.txt', *kept}
  if set(spec.docker_instructions) != expected:
    raise ValueError(
        'Launchpad\'s Docker steps are not those of Launchpad 0.5, which '
        f'launch/cloud/packaging.py replaces: '
        f'{list(spec.docker_instructions)}')
  return [f'RUN python -m pip install --no-cache-dir pip=={PIP_VERSION}',
          kept[0],
          'RUN python -m pip install --no-cache-dir -r requirements.txt',
          *kept[1:]]


# A replica's command under a keeper (`launch.supervision.keeper`), which runs
# Launchpad's own (`python -m process_entry --data_file=job.pkl`) and starts
# it again when it dies; the primary replica (the coordinator) has none.
KEEPER_MODULE = 'launch.supervision.keeper'


def bound_pools(program, labels: Optional[Dict[Tuple[str, int], str]] = None
                ) -> Dict[str, List[str]]:
  """Which nodes Launchpad bound to which worker pool: pool -> labels by
  replica index (read from each node's address, bound from CLUSTER_SPEC;
  bound before the pools are packaged): each node's group's, or its own
  from `labels` ({(group, index): label}, `launcher.node_labels`)."""
  pools: Dict[str, Dict[int, str]] = {}
  for group, nodes in program.groups.items():
    for index, node in enumerate(nodes):
      label = labels[(group, index)] if labels else group
      builder = node.addresses[0]._address_builder  # pylint: disable=protected-access
      pools.setdefault(builder._cluster, {})[builder._instance] = label  # pylint: disable=protected-access
  return {pool: [labels[index] for index in sorted(labels)]
          for pool, labels in sorted(pools.items())}


def _with_environment(packageable, labels: List[str],
                      keeping: Optional[Dict[str, Any]]):
  """A pool's image: built from `BASE_IMAGE` with `_docker_steps`; with
  TensorFlow's oneDNN switch (`launch.onednn_setting`: on, unless the
  launcher's environment sets it); and, where its requirements hold the
  CUDA wheels, their libraries on its library path (ENV lines in its
  Dockerfile). With `keeping` (the keepers' settings, `keeper.settings`),
  each replica of a pool of nodes `labels` but the coordinator's runs its
  node under a keeper."""
  import attr  # pylint: disable=g-import-not-at-top
  from xmanager import xm  # pylint: disable=g-import-not-at-top
  env_vars = {**packageable.env_vars,
              ONEDNN: onednn_setting()}
  spec = packageable.executable_spec
  with open(os.path.join(spec.path, 'requirements.txt')) as f:
    if 'nvidia-cudnn' in f.read():
      env_vars['LD_LIBRARY_PATH'] = GPU_LIBRARY_PATH
  (command,) = spec.entrypoint.commands
  words = command.split()
  if words[:2] != ['python', '-m']:
    raise ValueError(f'Launchpad\'s container command is not Launchpad '
                     f'0.5\'s, which this packaging changes: {command}')
  if keeping is not None and all(node_groups.group_of(label).kept
                                 for label in labels):
    words = ['python', '-m', KEEPER_MODULE, *words[1:]]
    env_vars[keeper.SETTINGS] = keeper.encode_settings(
        {**keeping, 'labels': labels})
  # `exec`: xmanager's entrypoint.sh runs the command from bash, which as
  # the container's first process would take Vertex AI's SIGTERM (at a
  # job's end) and pass it on to nothing; exec'd, the command takes it.
  spec = attr.evolve(spec, base_image=BASE_IMAGE,
                     docker_instructions=_docker_steps(spec),
                     entrypoint=xm.CommandList([' '.join(['exec', *words])]))
  return attr.evolve(packageable, executable_spec=spec, env_vars=env_vars)


class _GpuAwareExperiment:
  """xmanager's experiment, with `_with_environment` applied to what
  Launchpad packages: its pools in order (workerpool0, ...), of the nodes
  `pools` names."""

  def __init__(self, experiment, pools: Dict[str, List[str]],
               keeping: Optional[Dict[str, Any]]):
    self._experiment = experiment
    self._pools = pools
    self._keeping = keeping
    self._packaged = 0

  def __enter__(self):
    self._entered = self._experiment.__enter__()
    return self

  def __exit__(self, *exc_info):
    return self._experiment.__exit__(*exc_info)

  def package(self, packageables):
    packaged = []
    for packageable in packageables:
      labels = self._pools[f'workerpool{self._packaged}']
      self._packaged += 1
      packaged.append(_with_environment(packageable, labels, self._keeping))
    return self._entered.package(packaged)

  def add(self, *args, **kwargs):
    return self._entered.add(*args, **kwargs)


@contextlib.contextmanager
def _launcher_experiment(make_experiment, program,
                         keeping: Optional[Dict[str, Any]],
                         labels: Optional[Dict[Tuple[str, int], str]]):
  """Within: Launchpad's Vertex AI launcher opens `make_experiment(...)`
  wrapped in `_GpuAwareExperiment`, where it would open xmanager's (after
  it has bound the nodes to their pools)."""
  from launchpad.launch.xm_docker import launch as xm_launch  # pylint: disable=g-import-not-at-top
  real = xm_launch.xm_local
  xm_launch.xm_local = types.SimpleNamespace(
      create_experiment=lambda **kwargs: _GpuAwareExperiment(
          make_experiment(**kwargs), bound_pools(program, labels), keeping),
      Caip=real.Caip)
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


def _plugin_sources() -> Dict[str, str]:
  """The plug-ins the launch imported (`agents.plugins`, --plugins), each
  as its top-level module's name -> its file or package directory. Their
  functions are pickled into the job by reference: the containers import
  them from their code directory."""
  sources = {}
  for name in plugins.imported():
    top = name.partition('.')[0]
    if top in CODE:
      continue  # Copied with the project's own code.
    spec = importlib.util.find_spec(top)
    if spec is None or not (spec.origin or spec.submodule_search_locations):
      raise ValueError(f'--plugins: {top!r} has no source file to copy into '
                       'the containers.')
    locations = list(spec.submodule_search_locations or [])
    sources[top] = locations[0] if locations else spec.origin
  return sources


def stage_code(directory: str) -> str:
  """Copies what the containers need of this repository, and the launch's
  plug-ins, into `directory`; returns the code directory for Launchpad's
  DockerConfig."""
  code = os.path.join(directory, 'code')
  ignore = shutil.ignore_patterns('__pycache__', '*.pyc')
  for name in CODE:
    shutil.copytree(os.path.join(ROOT, name), os.path.join(code, name),
                    ignore=ignore)
  for name, source in _plugin_sources().items():
    if os.path.isdir(source):
      shutil.copytree(source, os.path.join(code, name), ignore=ignore)
    else:
      shutil.copy(source, os.path.join(code, os.path.basename(source)))
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


def launch(program, group_requests: Dict[str, Request], make_experiment,
           keeping: Optional[Dict[str, Any]] = None,
           labels: Optional[Dict[Tuple[str, int], str]] = None):
  """Launchpad's Vertex AI launcher on `program`, with its code and
  requirements staged here and `make_experiment` where it opens xmanager's
  experiment (`_launcher_experiment`); `keeping`: the nodes' keepers'
  settings (`keeper.settings`), None for none, and `labels` the nodes'
  labels ({(group, index): label})."""
  import launchpad as lp  # pylint: disable=g-import-not-at-top
  staging = tempfile.mkdtemp(prefix='apex-staging-')
  try:
    resources = xm_resources(group_requests, list(program.groups), staging)
    with _launcher_experiment(make_experiment, program, keeping, labels):
      lp.launch(program, launch_type='vertex_ai', xm_resources=resources)
  finally:
    shutil.rmtree(staging, ignore_errors=True)
