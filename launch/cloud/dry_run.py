"""--dry_run: the job packaged by the real launcher, kept, not submitted.

Launchpad's Vertex AI launcher runs up to the one step that reaches Google
Cloud (building and pushing the images, submitting the job), where
`_KeptExperiment` stands for xmanager's experiment: the containers it
packaged are kept in `--package_dir`, one directory per worker pool, with a
description of the job (`JOB_FILE`), and the plan is printed.
The Vertex AI emulator among the tests runs such a package on this machine
as Vertex AI would (docs/google_cloud.md, "Try the job on this machine").
"""

import contextlib
import io
import json
import os
import shutil
import sys
import tempfile
from typing import Any, Dict, List, Optional

from launch.cloud import packaging
from launch.cloud.machines import Request
from launch.cloud.machines import xmanager_machine
from launch.cloud.options import CloudOptions
from launch.cloud.printing import format_plan

JOB_FILE = 'job.json'


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


def package(program, group_requests: Dict[str, Request], directory: str,
            workdir: str, options: CloudOptions,
            keeping: Optional[Dict[str, Any]] = None,
            labels=None) -> Dict[str, Any]:
  """Runs Launchpad's Vertex AI launcher up to the step that reaches Google
  Cloud and keeps what it packaged in `directory` (one directory per worker
  pool, and `job.json`, with who can reach the job: `options`'
  `job_settings`); returns the job's description."""
  # Kept at the step where the launcher would reach Google Cloud.
  experiment = _KeptExperiment(directory)
  # Launchpad prints that the program was launched: it was not.
  with contextlib.redirect_stdout(io.StringIO()):
    packaging.launch(program, group_requests,
                     lambda **unused: experiment, keeping, labels)
  nodes = packaging.bound_pools(program)
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
                  'accelerator': request.accelerator,
                  'accelerator_count': request.accelerator_count,
                  'gpu_image': request.accelerator is not None})
  job = {'name': program.name, 'workdir': workdir, 'pools': pools,
         'access': options.job_settings(), 'scheduling': options.scheduling()}
  with open(os.path.join(directory, JOB_FILE), 'w') as f:
    json.dump(job, f, indent=2)
  return job


def dry_run(program, group_requests: Dict[str, Request], workdir: str,
            options: CloudOptions, replay: str = '', parameters: str = '',
            keeping: Optional[Dict[str, Any]] = None, labels=None):
  """Packages the program for Vertex AI in `options.package_dir` (a new
  directory if none), prints the plan (and `replay`, what it says of the
  replay's load, and `parameters`, of the parameters' egress), exits 0."""
  directory = options.package_dir
  directory = directory or tempfile.mkdtemp(prefix='apex-vertex-')
  os.makedirs(directory, exist_ok=True)
  if os.listdir(directory):
    raise ValueError(f'--package_dir={directory} is not empty; choose a new '
                     'or empty directory.')
  job = package(program, group_requests, directory, workdir, options,
                keeping, labels)
  print(format_plan(job, workdir, directory, replay, parameters))
  sys.stdout.flush()
