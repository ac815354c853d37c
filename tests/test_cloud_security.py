"""Who can reach a Vertex AI job: its interactive shells (web access), the
service account it runs as, its network (docs/google_cloud_security.md).

* The real submission path, run to the Vertex AI call that would send the
  job (`tests/vertex_submission_probe.py` replaces only the image build and
  push, xmanager's account calls and that one call): the job it would send
  has web access as `--enable_web_access` says, runs as `--service_account`
  (and xmanager then neither creates its account nor grants it anything),
  and is peered with `--network`.
* `--dry_run`'s plan and job.json say the same.
* A bad value of each flag is refused before anything is packaged.

No traffic leaves this machine: the workdir's bucket is a local Cloud
Storage emulator, the credentials name a project but can reach nothing,
and every other HTTP or gRPC request is sent to a closed local port.
"""

import json
import subprocess
import sys

import portpicker
import pytest

from tests import helpers
from tests.conftest import BUCKET
from tests.test_cloud import _dry_run
from tests.test_cloud import _environment

PROJECT = 'apex-test-project'
ACCOUNT = f'apex-job@{PROJECT}.iam.gserviceaccount.com'
XMANAGER_ACCOUNT = f'xmanager@{PROJECT}.iam.gserviceaccount.com'
NETWORK = 'projects/123456789012/global/networks/apex-jobs'
SMALL = ('--preset=cartpole_smoke', '--num_actors=2')


def _credentials(tmp_path) -> str:
  """User credentials (as `gcloud auth application-default login` leaves)
  that Google's auth library loads without asking anything; any use of
  them would need a token from Google, which the proxy below stops."""
  path = tmp_path / 'credentials.json'
  path.write_text(json.dumps({
      'type': 'authorized_user', 'client_id': 'apex-test.apps',
      'client_secret': 'none', 'refresh_token': 'none'}))
  return str(path)


def _no_way_out() -> dict:
  """Every HTTP and gRPC request but to this machine goes to a port where
  nothing listens."""
  proxy = f'http://127.0.0.1:{portpicker.pick_unused_port()}'
  local = '127.0.0.1,localhost'
  return {'HTTPS_PROXY': proxy, 'https_proxy': proxy, 'HTTP_PROXY': proxy,
          'http_proxy': proxy, 'grpc_proxy': proxy, 'NO_PROXY': local,
          'no_proxy': local}


def _submit(tmp_path, name: str, storage: dict, *flags: str):
  """The real launch of apex_dqn on Vertex AI, to the call that would send
  the job; returns (the process, what the probe recorded)."""
  home = tmp_path / 'home'
  home.mkdir(exist_ok=True)
  record = tmp_path / f'{name}.json'
  command = [sys.executable, '-m', 'tests.vertex_submission_probe',
             str(record), 'apex_dqn', '--lp_launch_type=vertex_ai',
             f'--workdir=gs://{BUCKET}/{name}', *SMALL, *flags]
  environment = _environment(
      home, GOOGLE_APPLICATION_CREDENTIALS=_credentials(tmp_path),
      GOOGLE_CLOUD_PROJECT=PROJECT, GOOGLE_CLOUD_BUCKET_NAME=BUCKET,
      **storage, **_no_way_out())
  result = subprocess.run(command, cwd=helpers.ROOT, env=environment,
                          capture_output=True, text=True, timeout=600)
  assert record.exists(), result.stdout[-2000:] + result.stderr[-3000:]
  return result, json.loads(record.read_text())


def _refused_at_the_submission(result, recorded) -> dict:
  """Checks that the launch went through packaging to the one submission,
  which the probe refused, and that the program said so; returns the job
  it would have sent."""
  error = result.stderr.strip().splitlines()[-1]
  assert result.returncode == 1, result.stderr[-3000:]
  assert error.startswith('error: Google Cloud refused the launch (403 '), (
      error)
  assert 'roles/iam.serviceAccountUser' in error
  assert 'docs/google_cloud_security.md' in error
  (job,) = recorded['jobs']
  # Each worker pool's image, as packaged and named by xmanager.
  assert sorted(pool['image_uri'] for pool in job['pools']) == sorted(
      recorded['images'])
  assert all(image.startswith(f'gcr.io/{PROJECT}/')
             for image in recorded['images'])
  assert job['parent'] == f'projects/{PROJECT}/locations/us-central1'
  # Coordinator, replay, counter, learner, evaluator and the two actors.
  assert sum(pool['replica_count'] for pool in job['pools']) == 5 + 2
  return job


def test_the_job_runs_as_the_given_account_without_shells_on_the_network(
    tmp_path, cloud_storage):
  result, recorded = _submit(tmp_path, 'given', cloud_storage,
                             f'--service_account={ACCOUNT}',
                             f'--network={NETWORK}', '--job_timeout_hours=2')
  job = _refused_at_the_submission(result, recorded)
  # The time limit asked for goes with the job, as Vertex AI's
  # scheduling.timeout.
  assert job['timeout_seconds'] == 7200
  assert job['service_account'] == ACCOUNT
  assert job['network'] == NETWORK
  assert job['enable_web_access'] is False
  # xmanager made no account of its own and granted nothing.
  assert recorded['account_calls'] == []


def test_without_flags_the_job_has_no_shells_and_runs_as_xmanagers_account(
    tmp_path, cloud_storage):
  # What the launch does without --service_account, as the plan says:
  # xmanager creates its account if missing and grants it project-wide
  # roles (here recorded, not done); web access only when asked for.
  result, recorded = _submit(tmp_path, 'default', cloud_storage)
  job = _refused_at_the_submission(result, recorded)
  assert job['enable_web_access'] is False
  assert job['timeout_seconds'] == 7 * 24 * 3600  # Vertex AI's default.
  assert job['service_account'] == XMANAGER_ACCOUNT
  assert job['network'] == ''
  assert recorded['account_calls'] == [['create', XMANAGER_ACCOUNT],
                                       ['grant', XMANAGER_ACCOUNT]]
  result, recorded = _submit(tmp_path, 'shells', cloud_storage,
                             '--enable_web_access')
  job = _refused_at_the_submission(result, recorded)
  assert job['enable_web_access'] is True


@pytest.mark.slow  # Two launches; the quick tier runs docs/google_cloud.md's
# --xm_gcp_service_account_name command (test_docs.py).
def test_xmanagers_own_flags_are_taken_and_name_its_account(
    tmp_path, cloud_storage):
  # xmanager defines its flags (--xm_*) as its modules are imported, after
  # absl has read the command line; a vertex_ai launch defines them first.
  named = f'apex-runner@{PROJECT}.iam.gserviceaccount.com'
  result, recorded = _submit(tmp_path, 'named', cloud_storage,
                             '--xm_gcp_service_account_name=apex-runner')
  job = _refused_at_the_submission(result, recorded)
  assert job['service_account'] == named
  assert recorded['account_calls'] == [['create', named], ['grant', named]]
  result, _, _ = _dry_run(tmp_path, *SMALL,
                          '--xm_gcp_service_account_name=apex-runner')
  assert result.returncode == 0, result.stderr[-3000:]
  assert 'Runs as: apex-runner@<project>.iam.gserviceaccount.com, which ' \
      'the launch creates if missing' in result.stdout


def test_the_plan_says_who_can_reach_the_job(tmp_path):
  (tmp_path / 'home').mkdir()
  result, package_dir, _ = _dry_run(tmp_path, *SMALL)
  assert result.returncode == 0, result.stderr[-3000:]
  out = result.stdout
  assert 'Who can reach the job (docs/google_cloud_security.md):' in out
  assert 'Interactive shells (web access): off (--enable_web_access ' \
      'opens them).' in out
  assert 'Runs as: xmanager@<project>.iam.gserviceaccount.com, which the ' \
      'launch creates if missing and grants roles/aiplatform.user and ' \
      'roles/storage.admin on the whole project' in out
  assert 'Network: peered with no VPC network' in out
  job = json.loads((package_dir / 'job.json').read_text())
  assert job['access'] == {'enable_web_access': False,
                           'service_account': None, 'network': None}

  result, package_dir, _ = _dry_run(
      tmp_path, *SMALL, '--enable_web_access', f'--service_account={ACCOUNT}',
      f'--network={NETWORK}', package_dir=tmp_path / 'given')
  assert result.returncode == 0, result.stderr[-3000:]
  out = result.stdout
  assert 'Interactive shells (web access): on: whoever may open the ' \
      'job\'s web access URIs runs commands in every replica' in out
  assert f'Runs as: {ACCOUNT} (--service_account: no account is created, ' \
      'no role granted).' in out
  assert f'Network: peered with {NETWORK}: its hosts' in out
  assert 'xmanager@' not in out
  job = json.loads((package_dir / 'job.json').read_text())
  assert job['access'] == {'enable_web_access': True,
                           'service_account': ACCOUNT, 'network': NETWORK}


@pytest.mark.parametrize('flag, named', [
    ('--service_account=apex-job', 'is not a service account\'s email'),
    (f'--service_account={ACCOUNT.replace("@", "")}',
     'is not a service account\'s email'),
    ('--service_account=someone@example.com',
     'is not a service account\'s email'),
    # A project's ID where its number belongs.
    (f'--network=projects/{PROJECT}/global/networks/apex-jobs',
     'with the project\'s number, not its ID'),
    ('--network=apex-jobs', 'is not a VPC network\'s full name'),
    ('--network=projects/123/global/networks/Apex_Jobs',
     'is not a VPC network\'s full name'),
])
def test_a_bad_account_or_network_is_refused_before_anything_is_packaged(
    tmp_path, flag, named):
  (tmp_path / 'home').mkdir()
  result, package_dir, workdir = _dry_run(tmp_path, *SMALL, flag)
  assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-2000:]
  assert result.stderr.startswith(f'error: {flag}'), result.stderr[-2000:]
  assert named in result.stderr
  assert 'Traceback' not in result.stderr
  assert not package_dir.exists() and not workdir.exists()
