"""Submitting the job to Vertex AI through xmanager, as `CloudOptions` says.

xmanager 0.3.0's Vertex AI client runs every job with interactive shells
into its replicas on, with no VPC network, and as its own service account,
which it creates and grants project-wide roles. `_submitted_with` replaces,
for the submission only, the `CustomJob` and `auth` that client sees, so
that the job goes with the web access, network and service account the
launch's flags give (`CloudOptions.job_settings`;
docs/google_cloud_security.md).
"""

import contextlib
import os
from typing import Any, Dict, Optional

from launch.cloud import packaging
from launch.runs import run_manifest
from launch.cloud.machines import Request
from launch.cloud.options import CloudOptions
from launch.cloud.options import SECURITY_DOCS

SETUP_HELP = ('see "On Google Cloud: set-up" in docs/google_cloud.md: a '
              'project with the Vertex AI, Artifact Registry, Cloud Build, '
              'Cloud Storage, IAM and Resource Manager APIs enabled, a '
              '`gcr.io` repository in Artifact Registry (location `us`), '
              '`gcloud auth application-default login`, GOOGLE_CLOUD_PROJECT '
              'and GOOGLE_CLOUD_BUCKET_NAME set')
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


def _custom_job(settings: Dict[str, Any], scheduling: Dict[str, Any],
                workdir: str):
  """Vertex AI's `CustomJob`, run with `settings`' web access and network
  whatever its caller asks (xmanager 0.3.0 asks for web access, always, and
  for no network), and `scheduling`'s time limit; once created, the job is
  recorded in the run's `workdir` (`run_manifest.write_job_record`), for
  `programs/watch.py`."""
  from google.cloud import aiplatform  # pylint: disable=g-import-not-at-top

  class CustomJob(aiplatform.CustomJob):

    def run(self, *args, **kwargs):
      kwargs.update(enable_web_access=settings['enable_web_access'],
                    network=settings['network'],
                    timeout=scheduling['timeout_seconds'])
      result = super().run(*args, **kwargs)
      self.wait_for_resource_creation()
      run_manifest.write_job_record(workdir, self.resource_name)
      return result

  return CustomJob


@contextlib.contextmanager
def _submitted_with(settings: Dict[str, Any], scheduling: Dict[str, Any],
                    workdir: str):
  """Within: xmanager's Vertex AI client (`vertex.Client.launch`, which runs
  the job with web access on, as the account `auth.get_service_account()`
  creates and grants project-wide roles) submits the job with `settings`
  (`CloudOptions.job_settings`): web access and network as given, and,
  given an account, that one, without asking xmanager for its own.
  Launchpad's launch returns only once xmanager has submitted (its
  experiment waits for its tasks on exit), so this covers the submission."""
  from xmanager.cloud import vertex  # pylint: disable=g-import-not-at-top
  names = {'aiplatform': _Overlay(
      vertex.aiplatform,
      CustomJob=_custom_job(settings, scheduling, workdir))}
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
           options: CloudOptions, workdir: str,
           keeping: Optional[Dict[str, Any]] = None, labels=None):
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
    with _submitted_with(options.job_settings(), options.scheduling(),
                         workdir):
      packaging.launch(program, group_requests,
                       xm_local.create_experiment, keeping, labels)
  except auth_exceptions.GoogleAuthError as error:
    raise ValueError(f'Google Cloud refused or could not be reached '
                     f'({error}); {SETUP_HELP}.') from error
  except api_exceptions.GoogleAPICallError as error:
    raise ValueError(f'Google Cloud refused the launch ({error}); '
                     f'{ACCESS_HELP}.') from error
