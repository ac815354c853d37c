"""Launching on Google Cloud (Vertex AI), tested without it.

* `--dry_run` runs Launchpad's real Vertex AI launcher through node
  serialisation and container packaging, and prints the plan; bad plans are
  refused before anything is packaged.
* A real launch fails only where it must reach Google Cloud, with the
  program's own message.
* A run's files on Cloud Storage (a local Cloud Storage emulator, the
  `cloud_storage` fixture): the launcher keeps the run's records there and
  a relaunch naming only the workdir resumes with them.
* The packaged job runs on this machine as Vertex AI would run it
  (`tests/vertex_emulator.py`: every replica a process with its
  own host, from CLUSTER_SPEC, and the bucket mounted): it
  trains to its step limit, ends with its primary replica, leaves its files
  in the bucket, resumes from them, and stops in order when asked
  (`programs/stop.py`); a replica that dies fails it, and the
  coordinator's stop record names it; an actor that gives up on its
  environment does not.
* Each pool's image as far as this machine can build it: its Dockerfile's
  Python steps carried out into a fresh virtual environment
  (`tests/image_venv.py`), which holds exactly the project's pins, and from
  which the job's replicas run.
"""

import functools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from typing import List, Optional

import psutil
import pytest

from launch.supervision import keeper

from launch.runs import faults as fault_records
from launch.runs import run_manifest
from launch.runs import storage
from launch.cloud import capacity
from launch.cloud import compatibility
from launch.cloud import costs
from launch.cloud import machines
from launch.cloud import packaging
from launch.cloud.options import CloudOptions
from launch.node_groups import actor_label
from tests import faulty_envs
from tests import helpers
from tests import image_venv
from tests.conftest import BUCKET


def _environment(home, **extra):
  """This environment with an empty home (no gcloud credentials, no
  xmanager database), no Google Cloud variables and no storage emulator,
  plus `extra`. NO_GCE_CHECK: Google's auth library does not look for a
  Compute Engine metadata server (no traffic leaves this machine)."""
  environment = {key: value for key, value in os.environ.items()
                 if not key.startswith(('GOOGLE_', 'CLOUDSDK_')) and
                 key != 'STORAGE_EMULATOR_HOST'}
  environment.update(HOME=str(home), NO_GCE_CHECK='True', **extra)
  return environment


def _run(command, home, timeout=600, **extra) -> subprocess.CompletedProcess:
  process = subprocess.run(command, cwd=helpers.ROOT, capture_output=True,
                           text=True, timeout=timeout,
                           env=_environment(home, **extra))
  return process


def _dry_run(tmp_path, *flags, package_dir=None, workdir=None, **extra):
  package_dir = package_dir or tmp_path / 'package'
  workdir = workdir or tmp_path / 'run'
  (tmp_path / 'home').mkdir(exist_ok=True)
  return _run(helpers.program_command(
      'apex_dqn', '--dry_run', f'--package_dir={package_dir}',
      f'--workdir={workdir}', *flags, launch_type='vertex_ai'),
              tmp_path / 'home', **extra), package_dir, workdir


def _launch(tmp_path, workdir: str, *flags, **extra):
  """A real launch on Vertex AI, which stops where xmanager needs Google
  Cloud (no credentials here)."""
  (tmp_path / 'home').mkdir(exist_ok=True)
  return _run(helpers.program_command(
      'apex_dqn', f'--workdir={workdir}', *flags, launch_type='vertex_ai'),
              tmp_path / 'home', GOOGLE_CLOUD_BUCKET_NAME=BUCKET, **extra)


def _failed_at_google_cloud(result) -> bool:
  error = result.stderr.strip().splitlines()[-1]
  return result.returncode == 1 and error.startswith(
      'error: Google Cloud refused or could not be reached')


@pytest.mark.parametrize('replay_capacity, machine', [
    # By hand: transitions x 2,390 bytes (an Atari transition, docs/replay.md
    # "Replay memory") x 1.5 + 2 GiB, against Google's 4-CPU N1 machines:
    # n1-highcpu-4 3.6 GiB, n1-standard-4 15 GiB, n1-highmem-4 26 GiB.
    (1_000_000, 'n1-standard-4'),  # 5.34 GiB
    (2_000_000, 'n1-standard-4'),  # 8.68 GiB
    (3_890_000, 'n1-standard-4'),  # 14.99 GiB
    (3_900_000, 'n1-highmem-4'),   # 15.02 GiB
    (6_900_000, 'n1-highmem-4'),   # 25.04 GiB
])
def test_the_replay_gets_the_smallest_machine_that_holds_it(replay_capacity,
                                                            machine):
  requests = machines.requests(CloudOptions(), 'atari', replay_capacity)
  assert requests['replay'].machine == machine


# Hand-written from Vertex AI's GPU compatibility table (the rows of
# launch/cloud/compatibility.py's sources): machine, GPU, count.
@pytest.mark.parametrize('machine, accelerator, count', [
    ('n1-standard-4', 'T4', 4),
    ('n1-standard-8', 'V100', 8),
    ('n1-highmem-2', 'V100', 8),
    ('n1-standard-16', 'V100', 2),
    ('n1-standard-32', 'P4', 2),
    ('n1-highcpu-64', 'P100', 4),
    ('n1-standard-96', 'T4', 4),
])
def test_a_learner_gpu_count_vertex_ai_allows_is_planned(machine,
                                                         accelerator, count):
  request = machines.requests(
      CloudOptions(learner_machine=machine, learner_accelerator=accelerator,
                   learner_accelerator_count=count), 'atari', 100_000)[
                       'learner']
  assert (request.machine, request.accelerator,
          request.accelerator_count) == (machine, accelerator, count)


@pytest.mark.parametrize('machine, accelerator, count, allowed', [
    # T4, P4 and P100 allow at most 4 per machine.
    ('n1-standard-4', 'T4', 8, ['T4 allows 1, 2 or 4 per machine',
                                'n1-standard-4 takes 1, 2 or 4 of them']),
    ('n1-standard-8', 'P100', 8, ['P100 allows 1, 2 or 4 per machine']),
    # One V100 goes with 8 vCPUs at most: n1-standard-16 needs 2 or more.
    ('n1-standard-16', 'V100', 1, [
        'with 1: n1-standard-4 to n1-standard-8, n1-highmem-2 to '
        'n1-highmem-8;', 'n1-standard-16 takes 2, 4 or 8 of them']),
    ('n1-highcpu-16', 'V100', 1, ['n1-highcpu-16 takes 2, 4 or 8 of them']),
    ('n1-standard-32', 'T4', 1, ['n1-standard-32 takes 2 or 4 of them']),
    ('n1-standard-96', 'V100', 4, ['with 8: n1-standard-4 to '
                                   'n1-standard-96, n1-highmem-2 to '
                                   'n1-highmem-96, n1-highcpu-16 to '
                                   'n1-highcpu-96)']),
    # No P100 on n1-standard-64 or -96, nor on n1-highcpu-96.
    ('n1-standard-64', 'P100', 4, ['n1-standard-64 takes none',
                                   'with 4: n1-standard-4 to n1-standard-32,'
                                   ' n1-highmem-2 to n1-highmem-32, '
                                   'n1-highcpu-16 to n1-highcpu-64)']),
    ('n1-highcpu-96', 'P100', 4, ['n1-highcpu-96 takes none']),
])
def test_a_learner_gpu_count_vertex_ai_refuses_is_refused_naming_it(
    machine, accelerator, count, allowed):
  with pytest.raises(ValueError) as refused:
    machines.requests(
        CloudOptions(learner_machine=machine,
                     learner_accelerator=accelerator,
                     learner_accelerator_count=count), 'atari', 100_000)
  message = str(refused.value)
  assert message.startswith(
      f'--learner_machine={machine} --learner_accelerator={accelerator} '
      f'--learner_accelerator_count={count}: Vertex AI does not run'), message
  for text in allowed + [compatibility.COMPATIBILITY_SOURCE]:
    assert text in message, message


@pytest.mark.parametrize('count, machine', [
    (1, 'a2-highgpu-1g'), (2, 'a2-highgpu-2g'), (4, 'a2-highgpu-4g'),
    (8, 'a2-highgpu-8g'), (16, 'a2-megagpu-16g')])
def test_an_a100_learner_gets_the_a2_machine_of_its_count(count, machine):
  request = machines.requests(
      CloudOptions(learner_accelerator='A100',
                   learner_accelerator_count=count), 'atari', 100_000)[
                       'learner']
  assert request.machine == machine
  # The machine xmanager itself asks Vertex AI for.
  assert machines.xmanager_machine(request) == machine


def test_a_small_plan_costs_what_the_price_table_says():
  pools = [costs.Pool('workerpool0', 1, 'n1-highmem-2'),
           costs.Pool('workerpool1', 3, 'n1-standard-4'),
           costs.Pool('workerpool2', 1, 'n1-standard-8', 'T4', 2)]
  # By hand from the table: $0.03635265 per N1 vCPU hour, $0.00487255 per
  # GB hour; the table prices no GPU in us-central1.
  highmem_2 = 2 * 0.03635265 + 13 * 0.00487255        # 0.13604845
  standard_4 = 0.21849885  # The pricing page's own figure for it.
  standard_8 = 8 * 0.03635265 + 30 * 0.00487255       # 0.4369977
  assert costs.machine_price('n1-standard-4') == pytest.approx(standard_4)
  assert [pool.hourly() for pool in pools] == pytest.approx(
      [highmem_2, 3 * standard_4, standard_8])
  replicas, cpus, memory, gpus, hourly = costs.totals(pools)
  assert (replicas, cpus, memory, gpus) == (5, 2 + 12 + 8, 13 + 45 + 30, 2)
  assert hourly == pytest.approx(1.2285427)
  assert costs.quotas(pools) == {costs.N1_CPU_QUOTA: 22,
                                 costs.gpu_quota('T4'): 2}
  lines = '\n'.join(costs.resource_lines(pools))
  assert ('  workerpool2: 1 x n1-standard-8 + 2 x T4: 8 vCPUs, 30 GB, '
          '2 GPUs (T4): $0.4370/h without 2 x T4 (not in the price table)'
          ) in lines, lines
  assert ('  Total: 5 replicas, 22 vCPUs, 88 GB, 2 GPUs (T4): $1.23/h, plus '
          '2 x T4 (not in the price table).') in lines, lines
  assert ('  Custom model training CPUs for N1/E2 machine types per region '
          '(aiplatform.googleapis.com/custom_model_training_cpus): 22') \
      in lines, lines
  assert ('  Custom model training Nvidia T4 GPUs per region (aiplatform.'
          'googleapis.com/custom_model_training_nvidia_t4_gpus): 2') \
      in lines, lines


def test_a_plan_names_what_the_price_table_does_not_price():
  pools = [costs.Pool('workerpool0', 2, 'n1-highmem-2'),
           costs.Pool('workerpool1', 1, 'n1-standard-8', 'V100', 4),
           costs.Pool('workerpool2', 1, 'a2-highgpu-2g', 'A100', 2)]
  replicas, cpus, memory, gpus, hourly = costs.totals(pools)
  # The A2 machine's vCPUs and memory as Google lists them: 24 and 170 GB.
  assert (replicas, cpus, memory, gpus) == (4, 4 + 8 + 24, 26 + 30 + 170, 6)
  # Only the N1 machines are priced.
  assert hourly == pytest.approx(2 * costs.machine_price('n1-highmem-2') +
                                 costs.machine_price('n1-standard-8'))
  assert costs.quotas(pools) == {
      costs.N1_CPU_QUOTA: 12, costs.gpu_quota('V100'): 4,
      costs.A2_CPU_QUOTA: 24, costs.gpu_quota('A100'): 2}
  total = costs.resource_lines(pools)[4]
  assert total.endswith(', plus 4 x V100 and 1 x a2-highgpu-2g and 2 x A100 '
                        '(not in the price table).'), total


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
  # 256 actors share the small machines with the counter, the evaluator
  # and the variable cachers the plan chose (below).
  assert re.search(r': 290 replica\(s\), each on its own n1-highmem-2 '
                   r'\(2 CPUs, 13 GiB\): counter, 32 x cacher, 256 x actor, '
                   r'evaluator', out), out
  assert re.search(r'n1-standard-8 \(8 CPUs, 30 GiB\) \+ 1 x T4: learner',
                   out), out
  # Replay: 2,000,000 Atari transitions, about 8.7 GiB, on the smallest N1
  # machine with 4 CPUs and that memory (the next test draws the line).
  assert re.search(r'n1-standard-4 \(4 CPUs, 15 GiB\): replay', out), out
  assert 'Machine-hours per hour of running: 291 x n1-highmem-2, ' \
         '1 x n1-standard-4, 1 x n1-standard-8.' in out
  # Each pool's resources and cost, their totals and the quotas, by hand
  # from the price table: n1-highmem-2 2 x $0.03635265 + 13 x $0.00487255,
  # n1-standard-4 $0.21849885, n1-standard-8 8 x ... + 30 x ...; the T4
  # is named as not priced.
  assert ('workerpool2: 290 x n1-highmem-2: 580 vCPUs, 3,770 GB, no GPU: '
          '$39.45/h') in out, out
  assert ('workerpool3: 1 x n1-standard-8 + 1 x T4: 8 vCPUs, 30 GB, 1 GPU '
          '(T4): $0.4370/h without 1 x T4 (not in the price table)') in out, out
  assert ('Total: 293 replicas, 594 vCPUs, 3,828 GB, 1 GPU (T4): '
          '$40.25/h, plus 1 x T4 (not in the price table).') in out, out
  assert f'{costs.N1_CPU_QUOTA}: 594\n' in out, out
  assert f'{costs.gpu_quota("T4")}: 1\n' in out, out
  assert costs.PRICE_SOURCE in out and \
      compatibility.COMPATIBILITY_SOURCE in out, out
  assert 'FROM python:3.10' in out and 'process_entry' in out
  # The replay's load: 256 K=1 actors' inserts and the paper's learner, and
  # the shards that takes (docs/replay.md) against the one given.
  load = capacity.replay_load(256, 1)
  assert f'256 actors x 1 environments write about ' \
         f'{load.inserts_per_second:,.0f} transitions/s' in out, out
  assert (f'raise --replay_shards to {load.shards}.' if load.shards > 1 else
          '--replay_shards=1 does.') in out, out
  # The parameters, by hand: the Atari network's 13,175,452 bytes a pull,
  # 220.31 steps/s / 100 steps = 2.2031 pulls/s of each actor: 256 actors
  # would take 7,431 MB/s of the learner's n1-standard-8 (16 Gbps). A
  # cacher's n1-highmem-2 (4 Gbps; half: 250 MB/s) serves 8 actors (8 x
  # 29.03 MB/s = 232 MB/s; 9 would pass): 32 cachers, which take 32 x
  # 13.18 MB x 2 pulls/s = 843 MB/s (6.75 Gbps) of the learner.
  assert ('From the learner alone, 256 actors would take 7,431 MB/s (59.45 '
          'Gbps, 372% of its 16 Gbps cap) of the n1-standard-8.') in out, out
  assert ('With --variable_cachers=32 (each on a n1-highmem-2, pulling every '
          '0.5 s): the learner sends 843 MB/s (6.75 Gbps, 42% of its 16 Gbps '
          'cap); each cacher serves up to 8 actors and sends 232 MB/s (1.86 '
          'Gbps, 46% of its 4 Gbps cap).') in out, out
  assert '--variable_cachers=32: the fewest' in out, out
  # docs/google_cloud.md's worked example is this plan's: its figures are
  # the ones the plan printed.
  with open(os.path.join(helpers.ROOT, 'docs', 'google_cloud.md')) as f:
    page = ' '.join(f.read().split())
  alone = re.search(r'256 actors would take ([\d,]+) MB/s \(([\d.]+) Gbps',
                    out)
  sends = re.search(r'the learner sends (\d+) MB/s \(([\d.]+) Gbps', out)
  cacher = re.search(r'serves up to (\d+) actors and sends (\d+) MB/s', out)
  assert (f'~{float(alone[1].replace(",", "")) / 1000:.1f} GB/s, '
          f'{float(alone[2]):.0f} Gbps') in page
  assert (f'serves {cacher[1]} actors ({cacher[2]} MB/s), so 32 cachers, '
          f'which take {sends[1]} MB/s ({sends[2]} Gbps)') in page
  assert 'A cacher adds up to 0.5 s to the age of the parameters' in out, out
  # A plan creates nothing where the run's files would go.
  assert not workdir.exists()

  job = json.loads((package_dir / 'job.json').read_text())
  assert sum(pool['replicas'] for pool in job['pools']) == 256 + 5 + 32
  # Every replica but the primary runs its node under a keeper
  # (launch/supervision/keeper.py), told which node each replica of its pool runs.
  # Each command exec'd in the container's entrypoint.sh, so that Vertex
  # AI's SIGTERM reaches it, not the shell.
  launchpads = '-m process_entry --data_file=job.pkl'
  for pool in job['pools']:
    if pool['nodes'] == ['coordinator']:
      assert pool['command'] == 'exec python ' + launchpads
      assert keeper.SETTINGS not in pool['environment']
      continue
    assert pool['command'] == 'exec python -m launch.supervision.keeper ' + launchpads
    # Base64 in the image's ENV line, which Docker would strip of JSON's
    # quotes.
    encoded = pool['environment'][keeper.SETTINGS]
    assert '"' not in encoded and '$' not in encoded
    settings = keeper.read_settings(encoded)
    assert settings == {'workdir': str(workdir), 'max_restarts': 5,
                        'window': 3600.0, 'labels': settings['labels']}
    assert [label.rstrip('_0123456789') for label in settings['labels']] == (
        pool['nodes'])
    if 'actor' in pool['nodes']:
      actors = [label for label in settings['labels']
                if label.startswith('actor')]
      assert actors == [actor_label(index) for index in range(256)]
  assert job['scheduling'] == {'timeout_seconds': 7 * 24 * 3600}
  # The images' pip is the one the local environment is made with.
  with open(os.path.join(helpers.ROOT, 'scripts', 'setup_venv.sh')) as f:
    assert f'"pip=={packaging.PIP_VERSION}"' in f.read()
  for pool in job['pools']:
    container = package_dir / pool['directory']
    for name in ('job.pkl', 'process_entry.py', 'requirements.txt',
                 'launch/nodes.py'):
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
    # Every package the image installs is pinned: the requirements file
    # (each line name==version), and pip itself; the base image names its
    # Python's patch release and its Debian release; no step installs
    # anything else (Launchpad's own steps install xmanager and pip
    # unpinned, and a libpython3.10 that python:3.10's Debian has not).
    assert all(re.fullmatch(r'[A-Za-z0-9_.\-\[\]]+==[\w.+]+', line)
               for line in requirements.splitlines() if line), requirements
    assert re.fullmatch(r'python:3\.10\.\d+-[a-z]+', pool['base_image']), pool
    installs = [step for step in pool['docker_instructions']
                if 'install' in step]
    assert installs == [
        f'RUN python -m pip install --no-cache-dir '
        f'pip=={packaging.PIP_VERSION}',
        'RUN python -m pip install --no-cache-dir -r requirements.txt'], (
            pool['docker_instructions'])
    dockerfile = (package_dir / pool['name'] / 'Dockerfile').read_text()
    assert f'FROM {pool["base_image"]}\n' in dockerfile
    # TensorFlow 2.8's oneDNN kernels, off by default on Linux, on in every
    # image; the emulator sets what job.json says each image sets.
    assert 'ENV TF_ENABLE_ONEDNN_OPTS="1"' in dockerfile, dockerfile
    assert pool['environment']['TF_ENABLE_ONEDNN_OPTS'] == '1'
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
    # Vertex AI allows at most 4 T4s on a machine.
    (['--learner_accelerator=T4', '--learner_accelerator_count=8'],
     'T4 allows 1, 2 or 4 per machine'),
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


def test_the_real_launch_fails_only_where_it_reaches_google_cloud(
    tmp_path, cloud_storage):
  # The launcher records the run in its workdir on Cloud Storage (here the
  # emulator's bucket); Launchpad's launcher serialises the nodes and
  # packages the containers, then xmanager needs the project's credentials
  # to name and build the images: there, with none, the launch stops with
  # the program's message.
  result = _launch(tmp_path, f'gs://{BUCKET}/run', '--preset=cartpole_smoke',
                   '--num_actors=3', **cloud_storage)
  assert _failed_at_google_cloud(result), (
      result.stdout[-2000:] + result.stderr[-3000:])
  error = result.stderr.strip().splitlines()[-1]
  # Launchpad's own words for a failed packaging, raised at the credentials.
  assert 'GCP project seems not to be configured correctly' in error
  assert 'On Google Cloud' in error and 'GOOGLE_CLOUD_BUCKET_NAME' in error
  record = json.loads(helpers.bucket_text(BUCKET, 'run/run.json'))
  assert record['program'] == 'apex_dqn'
  assert record['env'] == 'gym:CartPole-v1'
  assert record['preset'] == 'cartpole_smoke'
  assert record['flags']['num_actors'] == 3
  # Without the staging bucket, xmanager is not even asked.
  result = _run(helpers.program_command(
      'apex_dqn', '--preset=cartpole_smoke', f'--workdir=gs://{BUCKET}/run',
      launch_type='vertex_ai'), tmp_path / 'home', **cloud_storage)
  assert result.returncode == 1
  assert 'GOOGLE_CLOUD_BUCKET_NAME is not set' in result.stderr
  # Without credentials (and no emulator) the first step that needs Google
  # Cloud is reading the run's record: refused there, before anything.
  result = _launch(tmp_path, f'gs://{BUCKET}/run', '--preset=cartpole_smoke')
  assert result.returncode == 2, result.stderr[-3000:]
  assert 'Cloud Storage cannot be reached without Google Cloud credentials' \
      in result.stderr
  assert 'gcloud auth application-default login' in result.stderr
  assert 'Traceback' not in result.stderr


@pytest.mark.slow  # Runs the program on an emulated Vertex AI job, twice.
def test_a_workdir_on_cloud_storage_keeps_its_record_and_resumes_with_it(
    tmp_path, cloud_storage):
  workdir = f'gs://{BUCKET}/runs/a'
  assert _failed_at_google_cloud(_launch(
      tmp_path, workdir, '--preset=cartpole_smoke', '--num_actors=3',
      **cloud_storage))
  # A relaunch naming only the workdir plans with the recorded values.
  result, _, _ = _dry_run(tmp_path, workdir=workdir, **cloud_storage)
  assert result.returncode == 0, result.stderr[-3000:]
  assert f'This plan resumes the run in {workdir}' in result.stdout
  assert 'CartPole' in result.stdout
  assert re.search(r'counter, 3 x actor, evaluator', result.stdout), \
      result.stdout
  # A plan writes nothing: the record is the launch's.
  assert helpers.bucket_names(BUCKET) == ['runs/a/run.json']
  # A value the checkpoints depend on cannot change.
  result, package_dir, _ = _dry_run(tmp_path, '--env=gym:Acrobot-v1',
                                    package_dir=tmp_path / 'other',
                                    workdir=workdir, **cloud_storage)
  assert result.returncode == 2
  assert f'--workdir={workdir} holds a run that differs' in result.stderr
  assert not package_dir.exists()
  # Checkpoints without a record: refused, as locally.
  helpers.storage_client().bucket(BUCKET).blob(
      'runs/b/checkpoints/learner/checkpoint').upload_from_string('x')
  result = _launch(tmp_path, f'gs://{BUCKET}/runs/b',
                   '--preset=cartpole_smoke', **cloud_storage)
  assert result.returncode == 2
  assert 'holds checkpoints but no run.json' in result.stderr
  # A bucket that does not exist is named, with the fix.
  result = _launch(tmp_path, 'gs://no-such-bucket/run',
                   '--preset=cartpole_smoke', **cloud_storage)
  assert result.returncode == 2
  assert 'the bucket gs://no-such-bucket does not exist' in result.stderr
  assert 'gsutil mb' in result.stderr
  # A plan needs no credentials: without them it says it could not read
  # the record, and plans with the flags as given.
  result, _, _ = _dry_run(tmp_path, '--preset=cartpole_smoke',
                          package_dir=tmp_path / 'third', workdir=workdir)
  assert result.returncode == 0, result.stderr[-3000:]
  assert f'warning: the record of {workdir} could not be read' in \
      result.stderr
  assert re.search(r'counter, 2 x actor, evaluator', result.stdout)
  # Local launches cannot use a bucket.
  result = helpers.run_program('apex_dqn', '--preset=cartpole_smoke',
                               f'--workdir={workdir}',
                               stderr=subprocess.PIPE, timeout=120)
  assert result.returncode == 2
  assert 'is on Cloud Storage, which only the nodes of a Vertex AI job ' \
      'reach' in result.stderr


# An emulated job: the CartPole smoke program, actors held to the learner
# by a samples-per-insert rate limiter, stopped by its step limit.
EMULATED_FLAGS = ('--preset=cartpole_smoke', '--samples_per_insert=4',
                  '--replay_checkpoint_every=600', '--checkpoint_every=1')
# Two replay shards, one per actor.
SHARDED = ('--num_actors=2', '--replay_shards=2')


def _package(tmp_path, name, workdir, *flags, **extra):
  result, package_dir, _ = _dry_run(
      tmp_path, *EMULATED_FLAGS, *flags, package_dir=tmp_path / name,
      workdir=workdir, **extra)
  assert result.returncode == 0, result.stderr[-3000:]
  return package_dir


def _emulator_command(package_dir, *flags):
  return [sys.executable, '-m', 'tests.vertex_emulator',
          f'--package_dir={package_dir}', *flags]


def _emulate(package_dir, *flags, timeout=600) -> subprocess.CompletedProcess:
  """The emulated job run to its end (with the storage emulator of the
  `cloud_storage` fixture, when the test has one)."""
  return helpers.run(_emulator_command(package_dir, '--grace_seconds=30',
                                       *flags), timeout)


def _start_emulator(package_dir, *flags) -> subprocess.Popen:
  """The emulated job, started in the background (the test ends it)."""
  return subprocess.Popen(
      _emulator_command(package_dir, *flags), cwd=helpers.ROOT,
      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
      start_new_session=True)


def _wait_for_learner(workdir):
  """Until the learner's first logged update in `workdir` (its files as the
  replicas see them)."""
  _wait_for(lambda: os.path.exists(workdir / 'logs' / 'learner' /
                                   'logs.csv') and
            helpers.last(workdir, 'learner', 'learner_steps') > 0, 300,
            'the learner\'s first logged update')


def _replicas(package_dir, node: Optional[str] = None) -> List[dict]:
  """The emulated job's replicas (`logs/replicas.json`), or `node`'s."""
  replicas = json.loads((package_dir / 'logs' / 'replicas.json').read_text())
  return [r for r in replicas if node is None or r['node'] == node]


def _log_of(package_dir, replica: dict) -> str:
  return (package_dir / 'logs' / f'{replica["replica"]}.log').read_text()


def _replica_log(package_dir, node: str) -> str:
  """The log of `node`'s one replica."""
  (replica,) = _replicas(package_dir, node)
  return _log_of(package_dir, replica)


def check_resumed(package_dir, shards: int):
  """The emulated job's learner started from a checkpoint past step 0, and
  each of its `shards` replay shards from a checkpoint of its own that
  holds items."""
  restored = re.search(r'Learner starts at step (\d+)',
                       _replica_log(package_dir, 'learner'))
  assert restored and int(restored.group(1)) > 0
  replays = _replicas(package_dir, 'replay')
  assert len(replays) == shards
  for replay in replays:
    log = _log_of(package_dir, replay)
    size = re.search(r"Replay starts with \{'priority_table': (\d+)\}", log)
    assert size and int(size.group(1)) > 0, log[-3000:]


@pytest.mark.slow  # Runs the packaged job on this machine, twice.
def test_the_packaged_job_runs_as_on_vertex_ai_resumes_and_stops_on_request(
    tmp_path, cloud_storage):
  # With two replay shards (--replay_shards=2), each on a host of its own
  # and checkpointed to the bucket; the single replay's job is Ape-X DPG's
  # below.
  workdir = f'gs://{BUCKET}/run'
  assert _failed_at_google_cloud(_launch(tmp_path, workdir, *EMULATED_FLAGS,
                                         *SHARDED, **cloud_storage))
  package_dir = _package(tmp_path, 'first', workdir, '--max_actor_steps=2000',
                         *SHARDED, **cloud_storage)
  result = _emulate(package_dir)
  assert result.returncode == 0, result.stdout[-5000:]
  assert 'Job succeeded.' in result.stdout
  # Everything the replicas wrote is in the bucket, as a local run's files.
  record = json.loads(helpers.bucket_text(BUCKET, 'run/stop.json'))
  assert not record['failed'], record
  assert record['reason'].startswith('reached'), record
  assert record['counts']['actor_steps'] >= 2000
  names = helpers.bucket_names(BUCKET, 'run/')
  for label in ('learner', 'counter', 'replay_0', 'replay_1'):
    assert any(name.startswith(f'run/checkpoints/{label}/')
               for name in names), (label, names)
  for part in ('logs/learner/logs.csv', 'logs/evaluator/logs.csv',
               'logs/actor/logs.csv', 'run.json'):
    assert f'run/{part}' in names, (part, names)
  assert any(name.startswith('run/snapshots/policy-') for name in names)
  assert any(name.startswith('run/tensorboard/learner/') for name in names)
  copy = tmp_path / 'copy'  # The bucket's files, read as a local run's.
  for name in names:
    path = copy / name[len('run/'):]
    path.parent.mkdir(parents=True, exist_ok=True)
    helpers.storage_client().bucket(BUCKET).blob(name).download_to_filename(
        str(path))
  assert helpers.last(copy, 'learner', 'learner_steps') > 0
  helpers.check_learner_logs(copy)

  # Every replica bound the address CLUSTER_SPEC gave it, on a loopback
  # address of its own, and the others reached it there.
  replicas = _replicas(package_dir)
  hosts = [replica['address'].split(':')[0] for replica in replicas]
  assert len(set(hosts)) == len(replicas) == 8
  for replica in replicas:
    port = replica['address'].split(':')[1]
    log = _log_of(package_dir, replica)
    if replica['node'] == 'replay':
      assert f'Started replay server on port {port}' in log
    else:
      assert f'Courier server on port {port} started' in log
  shards = _replicas(package_dir, 'replay')
  assert len(shards) == 2
  learner = _replica_log(package_dir, 'learner')
  # Its image's environment: TensorFlow says so as it starts.
  assert 'oneDNN custom operations are on' in learner
  for replay in shards:  # The learner reached both shards.
    assert f'Reverb client connecting to: {replay["address"]}' in learner
  # The coordinator, the primary, saved replay and the counter, then ended
  # the job.
  coordinator = _replica_log(package_dir, 'coordinator')
  for shard in range(2):
    assert f'Final replay_{shard} checkpoint' in coordinator
  assert 'Ending the job (succeeded).' in coordinator

  # A second job on the same workdir, on machines (a mount) of its own,
  # goes on from the checkpoints in the bucket, with no step limit, until
  # a stop request from anywhere that reaches the bucket: programs/stop.py
  # leaves one there; the coordinator (the primary replica) finds it through
  # its mount, stops the program in order and ends the job as succeeded.
  first = record['counts']
  # The launch clears the first job's stop record (a stop request finds
  # none), then fails where it would reach Google Cloud; the plan packages
  # the job it would have submitted.
  assert _failed_at_google_cloud(_launch(
      tmp_path, workdir, *EMULATED_FLAGS, '--max_actor_steps=none', *SHARDED,
      **cloud_storage))
  assert helpers.bucket_text(BUCKET, 'run/stop.json') is None
  package_dir = _package(tmp_path, 'second', workdir, '--max_actor_steps=none',
                         *SHARDED, **cloud_storage)
  mount = tmp_path / 'mount'
  emulator = _start_emulator(package_dir, f'--storage_dir={mount}')
  try:
    _wait_for(lambda: (package_dir / 'logs' / 'replicas.json').exists(), 120,
              'the emulator to start the replicas')
    # The bucket as the learner's machine sees it, its own mount.
    (learner,) = _replicas(package_dir, 'learner')
    assert learner['mount'] == str(mount / learner['replica'])
    view = mount / learner['replica'] / BUCKET / 'run'
    # The first job's logs are in the mount from the start: the second's
    # learner has logged once a row goes past the first job's last count.
    _wait_for(lambda: helpers.last(view, 'learner', 'learner_steps') >
              first['learner_steps'], 300,
              'the resumed learner\'s first logged update')
    # The learner trains on the restored replay before any actor steps:
    # wait, too, for an actor's episode counted past the first job's (its
    # log reaches the learner's mount through the bucket).
    _wait_for(lambda: helpers.last(view, 'actor', 'actor_steps') >
              first['actor_steps'], 300,
              'the resumed actors\' first logged episode')
    result = helpers.run_script('stop', f'--workdir={workdir}', timeout=600)
    output, _ = emulator.communicate(timeout=300)
  finally:
    helpers.kill_group(emulator)
  assert result.returncode == 0, result.stdout[-3000:]
  assert f'Asked the apex_dqn program of {workdir} to stop' in result.stdout
  assert 'The program is stopping: stopped on request (programs/stop.py)' \
      in result.stdout
  assert emulator.returncode == 0, output[-3000:]
  assert 'Job succeeded.' in output
  # Each shard from its own checkpoint in the bucket.
  check_resumed(package_dir, shards=2)
  record = json.loads(helpers.bucket_text(BUCKET, 'run/stop.json'))
  assert record['reason'] == 'stopped on request (programs/stop.py)'
  assert not record['failed']
  # The counts went on from the first job's.
  assert record['counts']['actor_steps'] > first['actor_steps'], (
      record, first)
  # Taken: no request is left for the next launch.
  assert helpers.bucket_text(BUCKET, 'run/stop_request.json') is None
  coordinator = _replica_log(package_dir, 'coordinator')
  for shard in range(2):
    assert f'Final replay_{shard} checkpoint' in coordinator
  assert 'Ending the job (succeeded).' in coordinator


def _connects(address: str, namespace=None) -> bool:
  """Whether a TCP connection to host:port succeeds, from this machine's
  network or from inside `namespace`."""
  host, port = address.rsplit(':', 1)
  code = (f'import socket\ntry:\n  socket.create_connection(({host!r}, '
          f'{port}), timeout=5).close()\nexcept OSError:\n  exit(1)')
  command = [sys.executable, '-c', code]
  if namespace:
    command = ['ip', 'netns', 'exec', namespace] + command
  return subprocess.run(command, capture_output=True,
                        timeout=60).returncode == 0


@pytest.mark.slow  # Runs the packaged job, its replicas on hosts of their own.
@pytest.mark.skipif(os.geteuid() != 0, reason='network namespaces need root')
def test_replicas_on_hosts_of_their_own_reach_each_other_only_there(
    tmp_path):
  # Each replica in a network namespace of its own, linked to the others by
  # a virtual switch: nothing listens on this machine's interfaces, and a
  # replica reaches another only at the address CLUSTER_SPEC gives it, as on
  # Vertex AI a host name and port 2222 on every host. The replay is four
  # shards (`--replay_shards=4`, one per actor of 4), each on a host of its
  # own, which the learner samples.
  workdir = tmp_path / 'run'
  package_dir = _package(tmp_path, 'job', workdir, '--max_actor_steps=2000',
                         '--num_actors=4', '--replay_shards=4')
  emulator = _start_emulator(package_dir, '--hosts=netns',
                             '--grace_seconds=30')
  try:
    _wait_for_learner(workdir)
    shards = _replicas(package_dir, 'replay')
    (learner,) = _replicas(package_dir, 'learner')
    assert len(shards) == 4
    for replica in _replicas(package_dir):
      assert re.fullmatch(r'cmle-training-workerpool\d-\d+-\d+:2222',
                          replica['address']), replica
      assert replica['ip'].startswith('10.66.'), replica
    for replay in shards:
      port = replay['address'].rsplit(':', 1)[1]
      # Each shard is reached at its name from the learner's host (whose
      # own loopback port 2222 is the learner's own server) ...
      assert _connects(replay['address'], learner['namespace'])
      # ... and not from this machine, which does not know the name (and
      # is not asked to: a look-up or a connection to 10.66.* there would
      # leave the machine), and where nothing of the job listens.
      with open('/etc/hosts') as f:
        assert replay['address'].split(':')[0] not in f.read()
      assert not _connects(f'127.0.0.1:{port}')
    output, _ = emulator.communicate(timeout=300)
  finally:
    # Asked first, so that it removes its namespaces if the test failed.
    if emulator.poll() is None:
      emulator.send_signal(signal.SIGTERM)
      try:
        emulator.wait(timeout=120)
      except subprocess.TimeoutExpired:
        pass
    helpers.kill_group(emulator)
  assert emulator.returncode == 0, output[-3000:]
  record = json.loads((workdir / 'stop.json').read_text())
  assert not record['failed'] and record['counts']['actor_steps'] >= 2000
  learner_log = _replica_log(package_dir, 'learner')
  for replay in shards:
    assert f'Reverb client connecting to: {replay["address"]}' in learner_log
  # The learner drew from every shard, and each checkpointed at the end.
  rows = helpers.rows(workdir, 'learner')
  for shard in range(4):
    assert sum(int(row[f'shard_{shard}_samples']) for row in rows) > 0
    assert any((workdir / 'checkpoints' / f'replay_{shard}').iterdir())
  # The namespaces, and their host files, went with the job.
  namespaces = subprocess.run(['ip', 'netns', 'list'], capture_output=True,
                              text=True, check=True).stdout
  assert learner['namespace'] not in namespaces
  assert not os.path.exists(os.path.join('/etc/netns',
                                         learner['namespace']))


def test_the_emulator_refuses_a_directory_without_a_job(tmp_path):
  result = helpers.run([sys.executable, '-m', 'tests.vertex_emulator',
                        f'--package_dir={tmp_path}'], 60)
  assert result.returncode == 2
  assert 'must name a packaged job' in result.stdout


def test_a_gs_workdir_is_a_path_under_the_mount_in_the_containers(
    monkeypatch):
  monkeypatch.delenv(storage.MOUNT_VARIABLE, raising=False)
  assert storage.node_path('gs://bucket/runs/a') == '/gcs/bucket/runs/a'
  assert storage.node_path('/tmp/x') == '/tmp/x'
  monkeypatch.setenv(storage.MOUNT_VARIABLE, '/elsewhere')
  assert storage.node_path('gs://bucket/runs/a') == '/elsewhere/bucket/runs/a'


def test_the_emulator_refuses_a_bucket_it_cannot_reach(tmp_path):
  package_dir = _package(tmp_path, 'job', f'gs://{BUCKET}/run')
  environment = {key: value for key, value in os.environ.items()
                 if key != 'STORAGE_EMULATOR_HOST'}
  result = subprocess.run(_emulator_command(package_dir), cwd=helpers.ROOT,
                          env=environment, capture_output=True, text=True,
                          timeout=120)
  assert result.returncode == 2
  assert 'does not reach' in result.stderr
  assert 'STORAGE_EMULATOR_HOST' in result.stderr
  assert not (package_dir / 'logs' / 'replicas.json').exists()


def test_the_emulator_refuses_a_python_for_a_replica_the_job_has_not(
    tmp_path):
  (tmp_path / 'job.json').write_text(json.dumps({
      'name': 'job', 'workdir': str(tmp_path / 'run'), 'pools': [
          {'name': 'workerpool0', 'replicas': 1, 'nodes': ['coordinator']},
          {'name': 'workerpool1', 'replicas': 2, 'nodes': ['actor'] * 2}]}))
  for flags, named in [
      (['--replica_python=workerpool2=' + sys.executable],
       'the job has no pool or replica workerpool2 (its replicas: '
       'workerpool0-0, workerpool1-0, workerpool1-1)'),
      (['--replica_python=workerpool1-1'], 'give <pool or replica>=<python>'),
      (['--replica_python=workerpool1-1=' + str(tmp_path / 'none')],
       f'{tmp_path / "none"} is not a Python this machine can run'),
      (['--python=' + str(tmp_path)],
       f'{tmp_path} is not a Python this machine can run')]:
    result = helpers.run(_emulator_command(tmp_path, *flags), 60)
    assert result.returncode == 2, result.stdout
    assert named in result.stdout, result.stdout
    assert not (tmp_path / 'logs' / 'replicas.json').exists()


# A Dockerfile as xmanager 0.3.0 writes it (build_image.py's template)
# around Launchpad's own steps for an image of the python:3.10 base.
XMANAGER_DOCKERFILE = """
FROM python:3.10.13-bookworm

RUN if ! id 1000; then useradd -m -u 1000 clouduser; fi

RUN apt-get update && apt-get install -y git
RUN python -m pip install --no-cache-dir pip==24.3.1
COPY code/requirements.txt requirements.txt
RUN python -m pip install --no-cache-dir \\
    -r requirements.txt
COPY code/ code
WORKDIR code
ENV TF_ENABLE_ONEDNN_OPTS="1"

COPY entrypoint.sh ./entrypoint.sh
RUN chown -R 1000:root ./entrypoint.sh && chmod -R 775 ./entrypoint.sh

ENTRYPOINT ["./entrypoint.sh"]
"""


def _image_context(tmp_path, dockerfile: str):
  """A pool's directory in `tmp_path`: `dockerfile` and its context."""
  (tmp_path / 'code').mkdir(exist_ok=True)
  (tmp_path / 'code' / 'requirements.txt').write_text('six==1.17.0\n')
  (tmp_path / 'Dockerfile').write_text(dockerfile)


def _image_plan(tmp_path, dockerfile: str):
  _image_context(tmp_path, dockerfile)
  return image_venv.plan(str(tmp_path / 'Dockerfile'), str(tmp_path))


def test_the_image_environment_does_the_python_steps_and_names_the_rest(
    tmp_path):
  the_plan = _image_plan(tmp_path, XMANAGER_DOCKERFILE)
  assert the_plan.base == (3, 10, 13, 'bookworm')
  assert [(kind, step.line, what) for kind, step, what in the_plan.steps] == [
      ('pip', 7, ['install', '--no-cache-dir', 'pip==24.3.1']),
      ('copy', 8, (['code/requirements.txt'], 'requirements.txt')),
      ('pip', 9, ['install', '--no-cache-dir', '-r', 'requirements.txt']),
      ('copy', 11, (['code/'], 'code')),
      ('workdir', 12, 'code'),
      ('env', 13, {'TF_ENABLE_ONEDNN_OPTS': '1'})]
  # Every other step is said, with why; none is left out silently.
  skipped = dict(the_plan.not_reproduced)
  assert list(skipped) == [
      'FROM python:3.10.13-bookworm',
      'RUN if ! id 1000; then useradd -m -u 1000 clouduser; fi',
      'RUN apt-get update && apt-get install -y git',
      'COPY entrypoint.sh ./entrypoint.sh',
      'RUN chown -R 1000:root ./entrypoint.sh && chmod -R 775 '
      './entrypoint.sh',
      'ENTRYPOINT ["./entrypoint.sh"]']
  assert 'operating system (bookworm)' in skipped[
      'FROM python:3.10.13-bookworm']
  assert 'system packages' in skipped[
      'RUN apt-get update && apt-get install -y git']


@pytest.mark.parametrize('step, why', [
    # A pip step whose shell does more than pip.
    ('RUN python -m pip install six==1.17.0 && rm -rf /tmp/x',
     'a pip step with shell syntax'),
    ('RUN pip download six==1.17.0', 'a pip command other than'),
    ('RUN curl -sSL https://example.com/install.sh | sh',
     'a RUN step that is neither `pip install` nor a known step'),
    # An apt step that goes on to something else.
    ('RUN apt-get update && rm -rf /usr/lib/python3',
     'a RUN step that is neither'),
    ('RUN python setup.py install', 'a RUN step that is neither'),
    ('ADD https://example.com/x.whl x.whl', 'ADD is not translated'),
    ('USER clouduser', 'USER is not translated'),
    ('COPY --chown=1000 code/ code', 'a COPY with options'),
    ('COPY wheels/ wheels', 'wheels/ is not in the build\'s context'),
    ('ENV PATH="/opt/bin:$PATH"', 'an ENV value with a variable'),
    ('FROM python:3.11-slim', 'a second FROM'),
])
def test_a_dockerfile_step_the_image_environment_cannot_take_is_refused(
    tmp_path, step, why):
  dockerfile = XMANAGER_DOCKERFILE.replace(
      'WORKDIR code\n', f'WORKDIR code\n{step}\n')
  with pytest.raises(image_venv.UntranslatableStep) as refused:
    _image_plan(tmp_path, dockerfile)
  message = str(refused.value)
  assert message.startswith(f'Dockerfile line 13, `{step}`: {why}'), message
  assert 'tests/image_venv.py' in message, message


def test_the_image_environment_tool_refuses_before_building_anything(
    tmp_path):
  cache = tmp_path / 'cache'
  _image_context(tmp_path, XMANAGER_DOCKERFILE.replace(
      'WORKDIR code\n', 'WORKDIR code\nRUN make install\n'))
  command = [sys.executable, '-m', 'tests.image_venv',
             f'--pool_dir={tmp_path}']
  result = subprocess.run(command, cwd=helpers.ROOT, capture_output=True,
                          text=True, timeout=60,
                          env={**os.environ, image_venv.CACHE_VARIABLE:
                               str(cache)})
  assert result.returncode == 2, result.stdout + result.stderr
  assert result.stderr.startswith(
      'error: Dockerfile line 13, `RUN make install`: a RUN step that is '
      'neither'), result.stderr
  assert not cache.exists()
  result = subprocess.run(command[:-1] + [f'--pool_dir={tmp_path / "code"}'],
                          cwd=helpers.ROOT, capture_output=True, text=True,
                          timeout=60)
  assert result.returncode == 2
  assert 'has no Dockerfile: give a worker pool\'s directory' in \
      result.stderr, result.stderr


def test_an_image_on_another_base_is_refused(tmp_path):
  with pytest.raises(image_venv.UntranslatableStep) as refused:
    _image_plan(tmp_path, 'FROM ubuntu:22.04\nRUN pip install six\n')
  assert 'not an official python:<version> image' in str(refused.value)


def test_an_image_environment_is_reused_only_for_the_same_python_steps(
    tmp_path):
  # Keyed by what its pip steps depend on: the same requirements under
  # another code directory's name (Launchpad names it anew each time) is
  # the same environment; another requirement, or a step before the last
  # pip step, is not; what comes after it (code, ENV) does not count.
  def key(directory: str, code: str, requirements: str,
          dockerfile: str = XMANAGER_DOCKERFILE) -> str:
    context = tmp_path / directory
    (context / code).mkdir(parents=True)
    (context / code / 'requirements.txt').write_text(requirements)
    (context / 'Dockerfile').write_text(dockerfile.replace('code', code))
    return image_venv.cache_key(str(context), image_venv.plan(
        str(context / 'Dockerfile'), str(context)), sys.executable)
  first = key('a', 'tmpabc', 'six==1.17.0\n')
  assert key('b', 'tmpxyz', 'six==1.17.0\n') == first
  assert key('c', 'tmpabc', 'six==1.16.0\n') != first
  assert key('d', 'tmpabc', 'six==1.17.0\n', XMANAGER_DOCKERFILE.replace(
      'pip==24.3.1', 'pip==24.3')) != first
  assert key('e', 'tmpabc', 'six==1.17.0\n', XMANAGER_DOCKERFILE.replace(
      'ONEDNN_OPTS="1"', 'ONEDNN_OPTS="0"')) == first


def test_the_image_environment_cache_keeps_the_most_recently_used(
    tmp_path, monkeypatch):
  # Each environment takes gigabytes: a build leaves the KEEP most recently
  # used (and its own), and never one that another build holds.
  import fcntl  # pylint: disable=g-import-not-at-top
  monkeypatch.setenv(image_venv.CACHE_VARIABLE, str(tmp_path))
  assert image_venv.KEEP == 2
  # Seconds since each entry was last used.
  for name, age in {'current': 50, 'old': 30, 'newest': 1, 'held': 40,
                    'oldest': 60}.items():
    (tmp_path / name).mkdir()
    (tmp_path / name / image_venv.RECORD).write_text('{}')
    os.utime(tmp_path / name / image_venv.RECORD,
             (time.time() - age, time.time() - age))
  # 'newest' and 'old' are the two most recently used but 'current'.
  with open(tmp_path / 'held.lock', 'w') as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    image_venv._prune(str(tmp_path / 'current'))  # pylint: disable=protected-access
  assert sorted(path.name for path in tmp_path.iterdir()
                if path.is_dir()) == ['current', 'held', 'newest', 'old']


def _pins(*names: str, leave_out=()) -> dict:
  """The pins (`name==version` lines) of the repository's requirement
  files `names`, by normalised name, but those of `leave_out`."""
  pins = {}
  for name in names:
    with open(os.path.join(helpers.ROOT, name)) as f:
      for line in f:
        text = line.split('#')[0].strip()
        if '==' in text:
          package, version = text.split('==')
          package = _normalised(package)
          if package not in leave_out:
            pins[package] = version
  return pins


def _normalised(name: str) -> str:
  return re.sub(r'[-_.]+', '-', name).lower()  # PEP 503


def _frozen(python: str) -> dict:
  """`pip freeze --all` of an environment: version by normalised name."""
  out = subprocess.run([python, '-m', 'pip', 'freeze', '--all'],
                       capture_output=True, text=True, check=True).stdout
  return {_normalised(line.split('==')[0]): line.split('==')[1]
          for line in out.splitlines() if '==' in line}


@pytest.mark.slow  # Builds the images' environment (minutes, unless cached).
def test_the_job_runs_from_environments_built_from_its_dockerfiles(
    tmp_path, cloud_storage):
  # Each pool's Dockerfile, its Python steps carried out into a fresh
  # virtual environment (tests/image_venv.py; cached across runs, keyed by
  # the Dockerfile and its requirements file), and the job run with each
  # replica's `python` that of its pool's environment.
  workdir = f'gs://{BUCKET}/run'
  package_dir = _package(tmp_path, 'job', workdir, '--max_actor_steps=2000',
                         **cloud_storage)
  job = json.loads((package_dir / 'job.json').read_text())
  images = {}
  for pool in job['pools']:
    image = image_venv.build(str(package_dir / pool['name']))
    images[pool['name']] = image
    print(f'{pool["name"]}: {"cached" if image.cached else "built"} in '
          f'{image.seconds:.0f} s')
    # The Dockerfile's pip steps, all of them, as the package gives them.
    assert image.pip_steps == [step for step in pool['docker_instructions']
                               if ' pip ' in step], pool
    assert len(image.pip_steps) == 2
    # The emulator gives the replicas the image's ENV lines, and runs them
    # in the directory that is the image's working directory.
    assert image.environment == pool['environment']
    assert image.workdir_source == str(package_dir / pool['directory'])
    # What was not reproduced: the base image's system, xmanager's user
    # and entrypoint; no system package (Launchpad's apt steps went).
    assert [step.split()[0] for step, _ in image.not_reproduced] == [
        'FROM', 'RUN', 'COPY', 'RUN', 'ENTRYPOINT'], image.not_reproduced
    assert not any('apt' in step for step, _ in image.not_reproduced)
  # The environments hold exactly the project's pins: requirements.txt's
  # but for pytest's (test-only: container_requirements leaves them out),
  # requirements-cloud.txt's, and the images' pip; nothing unpinned but
  # the setuptools that a new environment comes with.
  expected = {**_pins('requirements.txt', 'requirements-cloud.txt',
                      leave_out=('pytest', 'pytest-xdist')),
              'pip': packaging.PIP_VERSION}
  for python in {image.python for image in images.values()}:
    frozen = _frozen(python)
    assert {name: frozen.get(name) for name in expected} == expected
    assert set(frozen) - set(expected) <= {'setuptools'}, frozen
    # This project is not installed there: a replica's `agents` is the
    # container's (the image's working directory).
    assert subprocess.run([python, '-c', 'import agents'], cwd=tmp_path,
                          capture_output=True).returncode == 1

  emulator = _start_emulator(
      package_dir, '--grace_seconds=30',
      *[f'--replica_python={pool}={image.python}'
        for pool, image in images.items()])
  try:
    _wait_for(lambda: (package_dir / 'logs' / 'replicas.json').exists(), 120,
              'the emulator to start the replicas')
    (learner,) = _replicas(package_dir, 'learner')  # Its own mount's view.
    _wait_for_learner(type(package_dir)(learner['mount']) / BUCKET / 'run')
    # Every replica runs from its pool's environment: its Python, and the
    # compiled modules it loaded, from there, none from this test's.
    for replica in _replicas(package_dir):
      pool = replica['replica'].rsplit('-', 1)[0]
      prefix = images[pool].prefix
      # The replica's process, and (but for the primary's) the node's
      # under its keeper, which runs it with its own Python.
      node = (replica['pid'] if replica['node'] == 'coordinator' else
              _node_of(replica['pid']))
      for pid in {replica['pid'], node}:
        with open(f'/proc/{pid}/cmdline', 'rb') as f:
          assert f.read().split(b'\0')[0].decode() == images[pool].python
      with open(f'/proc/{node}/maps') as f:
        maps = f.read()
      assert f'{prefix}/lib/python3.10/site-packages/' in maps, replica
      assert f'{sys.prefix}/' not in maps, replica
      if replica['node'] == 'learner':
        assert re.search(re.escape(prefix) + r'/lib/python3\.10/'
                         r'site-packages/tensorflow/python/'
                         r'_pywrap_tensorflow_internal\.so', maps)
    output, _ = emulator.communicate(timeout=600)
  finally:
    helpers.kill_group(emulator)
  assert emulator.returncode == 0, output[-5000:]
  assert 'Job succeeded.' in output
  record = json.loads(helpers.bucket_text(BUCKET, 'run/stop.json'))
  assert not record['failed'], record
  assert record['reason'].startswith('reached'), record
  assert record['counts']['actor_steps'] >= 2000


# Its conditions read the run's files: every half second is enough.
_wait_for = functools.partial(helpers.wait_for, period=0.5)


@pytest.mark.slow
# One case per kind of heartbeat: Reverb's (replay, killed), Courier's (the
# counter, frozen: a frozen node never closes its connections, the harder
# case) and the actors' (all killed: the last one too). A killed or frozen
# learner is the same Courier heartbeat; both passed here, and are left out
# to keep the whole suite under 45 minutes (test_faults kills a learner
# under local_mp).
@pytest.mark.parametrize('node, signum', [
    ('replay', signal.SIGKILL), ('counter', signal.SIGSTOP),
    ('actor', signal.SIGKILL),
])
def test_a_killed_or_frozen_replica_fails_the_job(tmp_path, monkeypatch,
                                                  node, signum):
  # Without keepers (--max_node_restarts=0) and under the strict reading of
  # Vertex AI's rule (--max_replica_restarts=0), a killed replica fails the
  # job: the emulator names it and sends every replica SIGTERM; the
  # coordinator, still up, writes the stop record naming the nodes that no
  # longer answer it. A frozen replica exits never: no pid file or /proc can
  # see another machine, so the coordinator learns that it is gone from its
  # heartbeats over Courier (Reverb for replay), and fails the job itself.
  # The timeout leaves the nodes left alive room to answer on a busy
  # machine (replay was once silent for 11 s there), so that the first
  # lapse is the signalled node's.
  #
  # With actors, the first actor's environment keeps failing (on its
  # replica only): it gives up, its replica stays up (answering the
  # coordinator) and the job goes on, as under local_mp; then the other
  # actors are killed, and the record names them, not it.
  workdir = tmp_path / 'run'
  faulty = node == 'actor'
  flags = ['--heartbeat_timeout=20', '--max_node_restarts=0']
  if faulty:
    flags += [f'--env=gym:tests.faulty_envs:{REPLICA_CRASHING_ENV}',
              '--actor_max_failures=2']
  package_dir = _package(tmp_path, 'job', workdir, *flags,
                         PYTHONPATH=helpers.ROOT)
  crashing = _crashing_actor(package_dir, monkeypatch) if faulty else None
  emulator = _start_emulator(package_dir, '--grace_seconds=10',
                             '--max_replica_restarts=0')
  try:
    _wait_for_learner(workdir)
    # Actors can act before their first answer is seen.
    _wait_for(lambda: helpers.HEARD_FROM_ALL in _replica_log(package_dir,
                                                             'coordinator'),
              300, 'the coordinator\'s first answer from every node')
    if faulty:
      _wait_for(lambda: 'actors have stopped after repeated environment '
                'failures' in _replica_log(package_dir, 'coordinator'), 300,
                'the failing actor to give up')
      assert 'Actor 0 stops: 2 environment failures' in (
          package_dir / 'logs' / f'{crashing}.log').read_text()
      steps = helpers.last(workdir, 'learner', 'learner_steps')
      _wait_for(lambda: helpers.last(workdir, 'learner',
                                     'learner_steps') > steps, 300,
                'learning to go on after the actor gave up')
    pids = [r['pid'] for r in _replicas(package_dir, node)
            if r['replica'] != crashing]
    assert pids
    for pid in pids:
      os.kill(pid, signum)
    output, _ = emulator.communicate(timeout=300)
  finally:
    helpers.kill_group(emulator)
  assert emulator.returncode == 1, output[-3000:]
  record = json.loads((workdir / 'stop.json').read_text())
  assert record['failed'], record
  assert node in record['reason'], record
  # The job's end took the killed or frozen replicas with it.
  for pid in pids:
    assert not psutil.pid_exists(pid) or psutil.Process(
        pid).status() == psutil.STATUS_ZOMBIE
  coordinator = _replica_log(package_dir, 'coordinator')
  if signum == signal.SIGKILL:
    # The first killed replica failed the job, before any heartbeat lapsed.
    named = {replica['replica'] for replica in _replicas(package_dir, node)}
    failed = re.search(r'Job failed \(replica (\S+), the (\w+), killed by '
                       r'SIGKILL\)\.', output)
    assert failed and failed.group(1) in named, output[-3000:]
    assert failed.group(2) == node
    assert record['reason'].startswith('ended from outside while the '), (
        record)
    assert 'Stopping: ended from outside' in coordinator
  else:
    assert 'Job failed (primary exit 1).' in output, output[-3000:]
    assert 'Ending the job (failed).' in coordinator
  if faulty:
    # The actor that gave up stayed up, and answered to the end.
    assert f'Replica {crashing} ' not in output, output[-3000:]
    assert 'the actor 0' not in record['reason'], record
    assert record['counts']['actor_stopped_on_failures'] == 1, record


# The environment that fails on every step in one replica of an emulated
# job, and nowhere else (tests/faulty_envs.py).
REPLICA_CRASHING_ENV = 'ReplicaCrashingCartPole-v0'


def _crashing_actor(package_dir, monkeypatch) -> str:
  """Makes the environments of the job's first actor replica fail (the
  replicas inherit the test's environment); returns that replica. The
  environment's module goes into every container, as a user's own module
  would go into the image."""
  job = json.loads((package_dir / 'job.json').read_text())
  for pool in job['pools']:
    tests = package_dir / pool['directory'] / 'tests'
    tests.mkdir()
    shutil.copy(os.path.join(helpers.ROOT, 'tests', 'faulty_envs.py'), tests)
  pool = next(pool for pool in job['pools'] if 'actor' in pool['nodes'])
  replica = f'{pool["name"]}-{pool["nodes"].index("actor")}'
  monkeypatch.setenv(faulty_envs.CRASHING_REPLICA, replica)
  return replica


def _planned_small_job(tmp_path, program: str, *flags: str) -> str:
  """A small run of `program` (to --max_actor_steps=2000) packaged by
  --dry_run into <tmp_path>/job; returns the plan."""
  (tmp_path / 'home').mkdir()
  result = _run(helpers.program_command(
      program, '--dry_run', f'--package_dir={tmp_path / "job"}',
      f'--workdir={tmp_path / "run"}', '--preset=cartpole_smoke',
      '--max_actor_steps=2000', *flags, launch_type='vertex_ai'),
                tmp_path / 'home')
  assert result.returncode == 0, result.stderr[-3000:]
  plan = result.stdout
  assert re.search(r'workerpool0: 1 replica\(s\), .*: coordinator\n', plan), (
      plan)
  return plan


def _emulated_small_job(tmp_path, program: str, *flags: str) -> str:
  """`_planned_small_job`, then run by the emulator to its end, which it
  checks; returns the plan."""
  plan = _planned_small_job(tmp_path, program, *flags)
  workdir = tmp_path / 'run'
  result = _emulate(tmp_path / 'job')
  assert result.returncode == 0, result.stdout[-5000:]
  record = json.loads((workdir / 'stop.json').read_text())
  assert not record['failed'] and record['counts']['actor_steps'] >= 2000
  assert record['counts']['learner_steps'] > 0
  assert helpers.last(workdir, 'learner', 'learner_steps') > 0
  return plan


@pytest.mark.slow
def test_ape_x_dpg_runs_as_a_vertex_ai_job_too(tmp_path):
  plan = _emulated_small_job(tmp_path, 'apex_dpg', '--samples_per_insert=4')
  assert re.search(r': .*replay', plan), plan
  # The primary saved the one replay before it ended the job.
  coordinator = _replica_log(tmp_path / 'job', 'coordinator')
  assert 'Final replay checkpoint' in coordinator
  assert 'Ending the job (succeeded).' in coordinator


def test_a3c_plans_a_vertex_ai_job_without_replay(tmp_path):
  # Planned and packaged only, to keep the whole suite under 45 minutes:
  # the emulator runs the Ape-X programs' jobs here, and ran this one to its
  # end when A3C's program was made.
  plan = _planned_small_job(tmp_path, 'a3c')
  assert (tmp_path / 'job').is_dir()
  # No replay in the plan: the parameter server has the learner's place.
  assert 'replay' not in plan.split('Primary replica')[0], plan
  assert re.search(r': learner\n', plan), plan


# Google's table of gcr.io hosts and the Artifact Registry repositories that
# serve them since Container Registry's shutdown: host -> location (the
# repository is named after its host).
# https://cloud.google.com/artifact-registry/docs/transition/gcr-repositories
GCR_HOST_LOCATIONS = {'gcr.io': 'us', 'us.gcr.io': 'us',
                      'eu.gcr.io': 'europe', 'asia.gcr.io': 'asia'}


def _set_up_commands() -> str:
  """The shell block of docs/google_cloud.md's set-up section, its
  continued lines joined."""
  with open(os.path.join(helpers.ROOT, 'docs', 'google_cloud.md')) as f:
    page = f.read()
  section = page.split('## On Google Cloud: set-up', 1)[1].split('\n## ')[0]
  block = section.split('```sh\n', 1)[1].split('```', 1)[0]
  return block.replace('\\\n', ' ')


def test_the_set_up_makes_the_repository_xmanager_pushes_to(monkeypatch):
  # xmanager names the images (Launchpad's launcher gives it no name); the
  # set-up must make the Artifact Registry repository that serves that
  # host, and enable the APIs the launch calls, and not the shut-down
  # Container Registry's.
  from xmanager import xm  # pylint: disable=g-import-not-at-top
  from xmanager.cloud import auth  # pylint: disable=g-import-not-at-top
  from xmanager.cloud import build_image  # pylint: disable=g-import-not-at-top
  # The project is read from the credentials, which this machine has not.
  monkeypatch.setattr(auth, 'get_project_name', lambda: 'my-project')
  image = build_image._get_image_name(  # pylint: disable=protected-access
      xm.PythonContainer(path='/somewhere/apex', entrypoint=xm.CommandList([])))
  host, project = image.split('/')[:2]
  assert project == 'my-project', image
  commands = _set_up_commands()
  create = re.search(r'gcloud artifacts repositories create (\S+) (.*)',
                     commands)
  assert create, commands
  assert create.group(1) == host, (create.group(0), image)
  assert '--repository-format=docker' in create.group(2)
  assert f'--location={GCR_HOST_LOCATIONS[host]}' in create.group(2)
  enabled = re.search(r'gcloud services enable ([^\n]*)', commands)
  assert enabled, commands
  apis = set(enabled.group(1).split())
  assert {'aiplatform.googleapis.com', 'artifactregistry.googleapis.com',
          'cloudbuild.googleapis.com', 'storage.googleapis.com',
          'iam.googleapis.com',
          'cloudresourcemanager.googleapis.com'} <= apis, apis
  assert 'containerregistry.googleapis.com' not in commands


def _node_of(replica_pid: int) -> int:
  """The node's process under a replica's keeper (its one child)."""
  def child():
    children = psutil.Process(replica_pid).children()
    return children[0].pid if children else None
  _wait_for(child, 120, f'the node under the keeper of {replica_pid}')
  return child()


def _records(workdir, node: str, event: str) -> List[dict]:
  return [record for record in fault_records.this_launch(fault_records.read_faults(
      str(workdir))) if record.get('node') == node and
          record.get('event') == event]


@pytest.mark.slow
def test_a_replicas_node_and_a_whole_replica_come_back_and_the_job_goes_on(
    tmp_path):
  # As Vertex AI runs it: each replica but the primary runs its node under
  # a keeper. An actor replica's node killed (as the out-of-memory killer
  # kills) is started again by its keeper, and answers the coordinator
  # again; the learner's whole replica killed fails that replica, which
  # Vertex AI (the emulator) starts again in place, on the same host, and
  # the learner comes back from its checkpoint. The job goes on, and ends
  # in order on request, succeeded.
  workdir = tmp_path / 'run'
  package_dir = _package(tmp_path, 'job', workdir, '--heartbeat_timeout=20',
                         '--max_actor_steps=1000000000')
  emulator = _start_emulator(package_dir, '--grace_seconds=10')
  try:
    _wait_for_learner(workdir)
    _wait_for(lambda: helpers.HEARD_FROM_ALL in _replica_log(package_dir,
                                                             'coordinator'),
              300, 'the coordinator\'s first answer from every node')
    actor = _replicas(package_dir, 'actor')[0]
    node = _node_of(actor['pid'])
    os.kill(node, signal.SIGKILL)
    faults = lambda: [record for record in fault_records.read_faults(str(workdir))
                      if record.get('event') == 'fault']
    _wait_for(faults, 120, 'the keeper\'s record of the fault')
    (fault,) = faults()
    assert fault['cause'] == 'killed by SIGKILL' and fault['pid'] == node
    label = fault['node']
    assert label in (actor_label(0), actor_label(1))
    _wait_for(lambda: _records(workdir, label, 'recovered'), 300,
              'the actor to answer again after its fault')
    # Its replica stayed up: the same keeper, a new node under it.
    assert psutil.Process(actor['pid']).is_running()
    assert _node_of(actor['pid']) != node

    (learner,) = _replicas(package_dir, 'learner')
    steps = helpers.last(workdir, 'learner', 'learner_steps')
    os.kill(learner['pid'], signal.SIGKILL)
    starts = re.compile(r'Learner starts at step (\d+)')
    _wait_for(lambda: len(starts.findall(_log_of(package_dir, learner))) >= 2,
              300, 'the learner\'s replica to start again')
    assert int(starts.findall(_log_of(package_dir, learner))[-1]) > 0
    (again,) = _replicas(package_dir, 'learner')
    assert again['pid'] != learner['pid']
    assert again['address'] == learner['address']
    _wait_for(lambda: helpers.last(workdir, 'learner',
                                   'learner_steps') > steps, 300,
              'learning to go on past where the killed learner was')
    _wait_for(lambda: _records(workdir, 'learner', 'recovered'), 120,
              'the coordinator to see the learner answer again')
    run_manifest.write_stop_request(str(workdir), 'the test is done')
    output, _ = emulator.communicate(timeout=600)
  finally:
    helpers.kill_group(emulator)
  assert emulator.returncode == 0, output[-3000:]
  assert re.search(r'Replica \S+ \(the learner\) failed \(killed by '
                   r'SIGKILL\); started again in place \(restart 1 of 5\)',
                   output), output[-3000:]
  assert 'Job succeeded.' in output
  record = json.loads((workdir / 'stop.json').read_text())
  assert not record['failed'] and record['reason'] == 'the test is done'
  # The actor started again by its keeper, the learner with its replica.
  assert record['restarts'] == {label: 1, 'learner': 1}, record
  state = json.loads((package_dir / 'logs' / 'state.json').read_text())
  assert state['state'] == 'JOB_STATE_SUCCEEDED'


@pytest.mark.slow
def test_a_job_at_its_time_limit_is_submitted_again_and_runs_to_its_budget(
    tmp_path):
  # programs/watch.py runs the launch (here: packaged, then run by the
  # emulator); the first job reaches its time limit once the learner and
  # the counter have saved, and fails; the watch submits the run again,
  # which resumes from its checkpoints and runs to its step budget.
  workdir = tmp_path / 'run'
  limit = tmp_path / 'limit'
  (tmp_path / 'jobs').mkdir()
  (tmp_path / 'home').mkdir()
  command = [
      sys.executable, os.path.join(helpers.ROOT, 'programs', 'watch.py'),
      '--max_resubmissions=2', '--poll_seconds=1', '--',
      *helpers.module_command('emulated_launch',
                              f'--package_root={tmp_path / "jobs"}',
                              f'--time_limit_once={limit}',
                              '--grace_seconds=10', '--'),
      'apex_dqn', f'--workdir={workdir}', *EMULATED_FLAGS,
      '--max_actor_steps=3000']
  result = subprocess.run(command, cwd=helpers.ROOT, capture_output=True,
                          text=True, timeout=1200, check=False,
                          env=_environment(tmp_path / 'home'))
  output = result.stdout + result.stderr
  assert result.returncode == 0, output[-5000:]
  first = limit.read_text()
  assert 'Job failed: it reached its time limit' in output, output[-5000:]
  assert re.search(r'watch: Submitting the run again \(1 of 2\): the job '
                   r'ended JOB_STATE_FAILED \(the job reached its time '
                   r'limit', output), output[-5000:]
  assert 'watch: The run has ended: reached' in output, output[-5000:]
  record = json.loads((workdir / 'stop.json').read_text())
  assert not record['failed'] and record['counts']['actor_steps'] >= 3000
  (second,) = [path for path in (tmp_path / 'jobs').iterdir()
               if str(path) != first]
  restored = re.search(r'Learner starts at step (\d+)',
                       _replica_log(second, 'learner'))
  assert restored and int(restored.group(1)) > 0
  job = json.loads((workdir / 'cloud_job.json').read_text())
  assert job['job'] == f'emulated:{second / "logs" / "state.json"}'
