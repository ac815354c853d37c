"""An Ape-X program launched on Vertex AI as a user launches it, with Google
Cloud replaced at the three places where the launch would reach it:

* building and pushing the images (`build_image.build_by_dockerfile`, which
  builds with a local Docker or Cloud Build, and `build_image.push`): the
  image's name is recorded and returned, as if built and pushed;
* xmanager's own service account (`auth._maybe_create_service_account` and
  `auth._maybe_grant_service_account_permissions`, which call the IAM and
  Resource Manager APIs): each call is recorded, as if done;
* submitting the job (`JobServiceClient.create_custom_job`, the Vertex AI
  API call that sends it): the request is recorded and answered with
  PERMISSION_DENIED, so that nothing further is asked of Vertex AI.

Everything else is the program's real code and the real libraries: its
flags and plan, Launchpad's launcher packaging the containers, xmanager's
experiment and Vertex AI client, the Vertex AI SDK's `CustomJob` making the
request. Used by test_cloud_security.py as

  python -m tests.vertex_submission_probe <record.json> <program> <flags>

(from the repository root, with credentials that name a project and a
Cloud Storage emulator for the workdir); <record.json> gets what was
recorded when the program exits.
"""

import atexit
import json
import os
import runpy
import sys

from google.api_core import exceptions as api_exceptions
from google.cloud.aiplatform_v1.services.job_service import JobServiceClient
from xmanager.cloud import auth
from xmanager.cloud import build_image

RECORD = {'images': [], 'pushed': [], 'account_calls': [], 'jobs': []}


def _built(path, dockerfile, image_name, *unused_args, **unused_kwargs):
  del path, dockerfile
  RECORD['images'].append(image_name)
  return image_name


def _pushed(image):
  RECORD['pushed'].append(image)
  return image


def _account_call(kind):
  def call(service_account):
    RECORD['account_calls'].append([kind, service_account])
  return call


def _create_custom_job(unused_client, request=None, *, parent=None,
                       custom_job=None, **unused_kwargs):
  del request
  spec = custom_job.job_spec
  RECORD['jobs'].append({
      'parent': parent,
      'display_name': custom_job.display_name,
      'service_account': spec.service_account,
      'network': spec.network,
      'enable_web_access': spec.enable_web_access,
      # Vertex AI's time limit (a timedelta; unset: 0).
      'timeout_seconds': spec.scheduling.timeout.total_seconds() if
                         spec.scheduling.timeout else 0,
      'pools': [{'image_uri': pool.container_spec.image_uri,
                 'replica_count': pool.replica_count,
                 'machine_type': pool.machine_spec.machine_type}
                for pool in spec.worker_pool_specs],
  })
  raise api_exceptions.PermissionDenied(
      'the job was recorded by tests/vertex_submission_probe.py, not sent')


def _write(path):
  with open(path, 'w') as f:
    json.dump(RECORD, f, indent=2)


def main():
  record, program, *flags = sys.argv[1:]
  build_image.build_by_dockerfile = _built
  build_image.push = _pushed
  auth._maybe_create_service_account = _account_call('create')  # pylint: disable=protected-access
  auth._maybe_grant_service_account_permissions = _account_call('grant')  # pylint: disable=protected-access
  JobServiceClient.create_custom_job = _create_custom_job
  atexit.register(_write, record)
  path = os.path.join(os.path.dirname(os.path.dirname(
      os.path.abspath(__file__))), 'programs', f'{program}.py')
  sys.argv = [path, *flags]
  runpy.run_path(path, run_name='__main__')


if __name__ == '__main__':
  main()
