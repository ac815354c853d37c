"""Launching on Google Cloud (Vertex AI), tested without it.

* `--dry_run` runs Launchpad's real Vertex AI launcher through node
  serialisation and container packaging, and prints the plan; bad plans are
  refused before anything is packaged.
* A real launch fails only where it must reach Google Cloud, with the
  program's own message.
* The packaged job runs on this machine as Vertex AI would run it
  (`agents.distributed.vertex_emulator`: every replica a process with its
  own loopback address, from CLUSTER_SPEC): it trains to its step limit,
  ends with its primary replica, and resumes from its checkpoints.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time

import psutil
import pytest

from agents.distributed import cloud
from tests import helpers


def _environment(home, **extra):
  """This environment with an empty home (no gcloud credentials, no
  xmanager database) and no Google Cloud variables, plus `extra`."""
  environment = {key: value for key, value in os.environ.items()
                 if not key.startswith(('GOOGLE_', 'CLOUDSDK_'))}
  environment.update(HOME=str(home), **extra)
  return environment


def _run(command, home, timeout=600, **extra) -> subprocess.CompletedProcess:
  process = subprocess.run(command, cwd=helpers.ROOT, capture_output=True,
                           text=True, timeout=timeout,
                           env=_environment(home, **extra))
  return process


def _dry_run(tmp_path, *flags, package_dir=None, workdir=None):
  package_dir = package_dir or tmp_path / 'package'
  workdir = workdir or tmp_path / 'run'
  return _run(helpers.program_command(
      'apex_dqn', '--dry_run', f'--package_dir={package_dir}',
      f'--workdir={workdir}', *flags, launch_type='vertex_ai'),
              tmp_path / 'home'), package_dir, workdir


def test_dry_run_plans_256_actors_and_a_gpu_learner(tmp_path):
  (tmp_path / 'home').mkdir()
  result, package_dir, workdir = _dry_run(
      tmp_path, '--num_actors=256', '--learner_accelerator=T4')
  assert result.returncode == 0, result.stderr[-3000:]
  out = result.stdout
  # The coordinator is the primary replica, alone in the first pool.
  assert re.search(r'workerpool0: 1 replica\(s\), each on its own '
                   r'n1-highmem-2 .*: coordinator\n', out), out
  assert 'Primary replica (its exit ends the job and gives its status): ' \
         'coordinator (workerpool0)' in out
  # 256 actors share the small machines with the counter and the evaluator.
  assert re.search(r': 258 replica\(s\), each on its own n1-highmem-2 '
                   r'\(2 CPUs, 13 GiB\): counter, 256 x actor, evaluator',
                   out), out
  assert re.search(r'n1-standard-8 \(8 CPUs, 30 GiB\) \+ 1 x T4: learner',
                   out), out
  # Replay: 2,000,000 Atari transitions x 2,390 bytes x 1.5 + 2 GiB =
  # 8.68 GiB, on the smallest N1 machine with 4 CPUs and that memory.
  assert 2e6 * 2390 * 1.5 / 2**30 + 2 == pytest.approx(8.68, abs=0.01)
  assert re.search(r'n1-standard-4 \(4 CPUs, 15 GiB\): replay', out), out
  assert 'Machine-hours per hour of running: 259 x n1-highmem-2, ' \
         '1 x n1-standard-4, 1 x n1-standard-8.' in out
  assert 'FROM python:3.10' in out and 'process_entry' in out
  # A plan creates nothing where the run's files would go.
  assert not workdir.exists()

  job = json.loads((package_dir / 'job.json').read_text())
  assert sum(pool['replicas'] for pool in job['pools']) == 256 + 5
  for pool in job['pools']:
    container = package_dir / pool['directory']
    for name in ('job.pkl', 'process_entry.py', 'requirements.txt',
                 'agents/distributed/nodes.py'):
      assert (container / name).exists(), (pool['name'], name)
    assert not (container / '.venv').exists()
    requirements = (container / 'requirements.txt').read_text()
    assert 'xmanager==0.3.0' in requirements
    assert 'protobuf==3.19.6' in requirements
    if pool['nodes'] == ['learner']:
      assert 'tensorflow==2.8.4' in requirements
      assert 'nvidia-cudnn-cu11' in requirements
    else:
      assert 'tensorflow-cpu==2.8.4' in requirements
      assert 'nvidia' not in requirements
    dockerfile = (package_dir / pool['name'] / 'Dockerfile').read_text()
    assert 'FROM python:3.10' in dockerfile
    # TensorFlow 2.8 finds CUDA on the library path only: the GPU image
    # names where the wheels put it (e.g. nvidia/cuda_runtime/lib holds
    # libcudart.so.11.0 in nvidia-cuda-runtime-cu11 11.8.89).
    gpu_path = re.search(r'ENV LD_LIBRARY_PATH="([^"]+)"', dockerfile)
    if pool['nodes'] == ['learner']:
      assert gpu_path, dockerfile
      entries = gpu_path.group(1).split(':')
      assert ('/usr/local/lib/python3.10/site-packages/nvidia/cuda_runtime/'
              'lib') in entries
      assert any(entry.endswith('nvidia/cudnn/lib') for entry in entries)
    else:
      assert not gpu_path, dockerfile


@pytest.mark.parametrize('flags, named', [
    # Five distinct machines: the counter and evaluator on n1-standard-8
    # beside a T4 learner on another.
    (['--learner_accelerator=T4', '--small_node_cpus=8'], 'small_node_cpus'),
    (['--replay_memory_gb=4'], '--replay_memory_gb=4 cannot hold'),
    (['--replay_capacity=1000000000', '--min_replay_size=50000'],
     '--replay_capacity'),
    (['--learner_accelerator=K80'], '--learner_accelerator=K80'),
    (['--learner_machine=n2-standard-8'], '--learner_machine=n2-standard-8'),
])
def test_a_bad_plan_is_refused_before_anything_is_packaged(
    tmp_path, flags, named):
  (tmp_path / 'home').mkdir()
  result, package_dir, workdir = _dry_run(tmp_path, *flags)
  assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-2000:]
  assert result.stderr.startswith('error: '), result.stderr[-2000:]
  assert named in result.stderr
  assert 'Traceback' not in result.stderr
  assert not package_dir.exists() and not workdir.exists()


def test_dry_run_needs_vertex_ai(tmp_path):
  (tmp_path / 'home').mkdir()
  result = _run(helpers.program_command(
      'apex_dqn', '--dry_run', f'--workdir={tmp_path / "run"}'),
                tmp_path / 'home')
  assert result.returncode == 2
  assert '--dry_run plans a launch on Google Cloud' in result.stderr
  assert not (tmp_path / 'run').exists()


def test_a_run_on_vertex_ai_needs_its_workdir_on_cloud_storage(tmp_path):
  (tmp_path / 'home').mkdir()
  result = _run(helpers.program_command(
      'apex_dqn', '--preset=cartpole_smoke', f'--workdir={tmp_path / "run"}',
      launch_type='vertex_ai'), tmp_path / 'home',
                GOOGLE_CLOUD_BUCKET_NAME='apex-test-bucket')
  assert result.returncode == 2
  assert 'is not on Cloud Storage' in result.stderr
  assert 'gs://<bucket>/<path>' in result.stderr
  assert not (tmp_path / 'run').exists()


def test_the_real_launch_fails_only_where_it_reaches_google_cloud(tmp_path):
  # Launchpad's launcher serialises the nodes and packages the containers,
  # then xmanager needs the project's credentials to name and build the
  # images: there, with none, the launch stops with the program's message.
  (tmp_path / 'home').mkdir()
  result = _run(helpers.program_command(
      'apex_dqn', '--preset=cartpole_smoke',
      '--workdir=gs://apex-test-bucket/run', launch_type='vertex_ai'),
                tmp_path / 'home', GOOGLE_CLOUD_BUCKET_NAME='apex-test-bucket')
  assert result.returncode == 1, result.stdout[-2000:] + result.stderr[-3000:]
  error = result.stderr.strip().splitlines()[-1]
  assert error.startswith('error: Google Cloud refused or could not be '
                          'reached'), result.stderr[-3000:]
  # Launchpad's own words for a failed packaging, raised at the credentials.
  assert 'GCP project seems not to be configured correctly' in error
  assert 'On Google Cloud' in error and 'GOOGLE_CLOUD_BUCKET_NAME' in error
  # Without the staging bucket, xmanager is not even asked.
  result = _run(helpers.program_command(
      'apex_dqn', '--preset=cartpole_smoke',
      '--workdir=gs://apex-test-bucket/run', launch_type='vertex_ai'),
                tmp_path / 'home')
  assert result.returncode == 1
  assert 'GOOGLE_CLOUD_BUCKET_NAME is not set' in result.stderr


# An emulated job: the CartPole smoke program, actors held to the learner
# by a samples-per-insert rate limiter, stopped by its step limit.
EMULATED_FLAGS = ('--preset=cartpole_smoke', '--samples_per_insert=4',
                  '--replay_checkpoint_every=600', '--checkpoint_every=1')


def _package(tmp_path, name, workdir, *flags):
  (tmp_path / 'home').mkdir(exist_ok=True)
  result, package_dir, _ = _dry_run(
      tmp_path, *EMULATED_FLAGS, *flags, package_dir=tmp_path / name,
      workdir=workdir)
  assert result.returncode == 0, result.stderr[-3000:]
  return package_dir


def _emulate(package_dir, timeout=600) -> subprocess.CompletedProcess:
  return helpers.run([sys.executable, '-m',
                      'agents.distributed.vertex_emulator',
                      f'--package_dir={package_dir}', '--grace_seconds=30'],
                     timeout)


def _replica_log(package_dir, node: str) -> str:
  replicas = json.loads((package_dir / 'logs' / 'replicas.json').read_text())
  (replica,) = [r for r in replicas if r['node'] == node]
  return (package_dir / 'logs' / f'{replica["replica"]}.log').read_text()


def test_the_packaged_job_runs_as_on_vertex_ai_and_resumes(tmp_path):
  workdir = tmp_path / 'run'
  package_dir = _package(tmp_path, 'first', workdir, '--max_actor_steps=2000')
  result = _emulate(package_dir)
  assert result.returncode == 0, result.stdout[-5000:]
  assert 'Job succeeded.' in result.stdout
  record = json.loads((workdir / 'stop.json').read_text())
  assert not record['failed'], record
  assert record['reason'].startswith('reached'), record
  assert record['counts']['actor_steps'] >= 2000
  learner_steps = helpers.last(workdir, 'learner', 'learner_steps')
  assert learner_steps > 0
  for label in ('learner', 'counter', 'replay'):
    assert os.listdir(workdir / 'checkpoints' / label), label
  helpers.check_learner_logs(workdir)

  # Every replica bound the address CLUSTER_SPEC gave it, on a loopback
  # address of its own, and the others reached it there.
  replicas = json.loads((package_dir / 'logs' / 'replicas.json').read_text())
  hosts = [replica['address'].split(':')[0] for replica in replicas]
  assert len(set(hosts)) == len(replicas) == 7
  for replica in replicas:
    port = replica['address'].split(':')[1]
    log = (package_dir / 'logs' / f'{replica["replica"]}.log').read_text()
    if replica['node'] == 'replay':
      assert f'Started replay server on port {port}' in log
    else:
      assert f'Courier server on port {port} started' in log
  (replay,) = [r for r in replicas if r['node'] == 'replay']
  assert f'Reverb client connecting to: {replay["address"]}' in \
      _replica_log(package_dir, 'learner')
  # The coordinator, the primary, saved replay and the counter, then ended
  # the job.
  coordinator = _replica_log(package_dir, 'coordinator')
  assert 'Final replay checkpoint' in coordinator
  assert 'Ending the job (succeeded).' in coordinator

  # A second job on the same workdir goes on from the checkpoints.
  package_dir = _package(tmp_path, 'second', workdir, '--max_actor_steps=4000')
  result = _emulate(package_dir)
  assert result.returncode == 0, result.stdout[-5000:]
  restored = re.search(r'Learner starts at step (\d+)',
                       _replica_log(package_dir, 'learner'))
  assert restored and int(restored.group(1)) > 0
  record = json.loads((workdir / 'stop.json').read_text())
  assert record['counts']['actor_steps'] >= 4000


def test_the_emulator_refuses_a_directory_without_a_job(tmp_path):
  result = helpers.run([sys.executable, '-m',
                        'agents.distributed.vertex_emulator',
                        f'--package_dir={tmp_path}'], 60)
  assert result.returncode == 2
  assert 'must name a packaged job' in result.stdout


def test_a_gs_workdir_is_the_mount_path_in_the_containers():
  assert cloud.container_path('gs://bucket/runs/a') == '/gcs/bucket/runs/a'
  assert cloud.container_path('/tmp/x') == '/tmp/x'


def _wait_for(condition, timeout: float, what: str):
  deadline = time.time() + timeout
  while time.time() < deadline:
    if condition():
      return
    time.sleep(0.5)
  pytest.fail(f'Waited {timeout} s for {what}.')


@pytest.mark.slow
@pytest.mark.parametrize('signum', [signal.SIGKILL, signal.SIGSTOP])
def test_a_killed_or_frozen_learner_replica_fails_the_job(tmp_path, signum):
  # No pid file or /proc can see another machine: the coordinator learns
  # that the learner is gone (or frozen) from its heartbeats over Courier.
  workdir = tmp_path / 'run'
  package_dir = _package(tmp_path, 'job', workdir, '--heartbeat_timeout=10')
  emulator = subprocess.Popen(
      [sys.executable, '-m', 'agents.distributed.vertex_emulator',
       f'--package_dir={package_dir}', '--grace_seconds=10'],
      cwd=helpers.ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
      text=True, start_new_session=True)
  try:
    _wait_for(lambda: os.path.exists(workdir / 'logs' / 'learner' /
                                     'logs.csv') and
              helpers.last(workdir, 'learner', 'learner_steps') > 0, 300,
              'the learner\'s first logged update')
    replicas = json.loads(
        (package_dir / 'logs' / 'replicas.json').read_text())
    (learner,) = [r for r in replicas if r['node'] == 'learner']
    os.kill(learner['pid'], signum)
    output, _ = emulator.communicate(timeout=300)
  finally:
    helpers.kill_group(emulator)
  assert emulator.returncode == 1, output[-3000:]
  assert 'Job failed' in output
  record = json.loads((workdir / 'stop.json').read_text())
  assert record['failed'], record
  assert 'learner' in record['reason'], record
  # The job's end took the frozen learner with it.
  assert not psutil.pid_exists(learner['pid']) or psutil.Process(
      learner['pid']).status() == psutil.STATUS_ZOMBIE
  coordinator = _replica_log(package_dir, 'coordinator')
  assert 'Ending the job (failed).' in coordinator


@pytest.mark.slow
def test_ape_x_dpg_runs_as_a_vertex_ai_job_too(tmp_path):
  (tmp_path / 'home').mkdir()
  workdir = tmp_path / 'run'
  package_dir = tmp_path / 'job'
  result = _run(helpers.program_command(
      'apex_dpg', '--dry_run', f'--package_dir={package_dir}',
      f'--workdir={workdir}', '--preset=cartpole_smoke',
      '--samples_per_insert=4', '--max_actor_steps=2000',
      launch_type='vertex_ai'), tmp_path / 'home')
  assert result.returncode == 0, result.stderr[-3000:]
  assert re.search(r'workerpool0: 1 replica\(s\), .*: coordinator\n',
                   result.stdout), result.stdout
  result = _emulate(package_dir)
  assert result.returncode == 0, result.stdout[-5000:]
  record = json.loads((workdir / 'stop.json').read_text())
  assert not record['failed'] and record['counts']['actor_steps'] >= 2000
  assert helpers.last(workdir, 'learner', 'learner_steps') > 0
