"""A bigger emulated Vertex AI job: 18 replicas on this machine.

The packaged job (`--lp_launch_type=vertex_ai --dry_run`) of Ape-X DQN's
`cartpole_smoke` preset with 10 actors, 2 variable cachers and 2 replay
shards, plus the learner, the counter, the evaluator and the coordinator:
18 replicas, each a process of its own importing what its node needs, run
by the emulator (`tests/vertex_emulator.py`) with its workdir on Cloud
Storage (the `cloud_storage` fixture). Its memory is sampled as it runs
(`benchmarks/emulated_job_memory.py` measures a job of 34 replicas, 26 of
them actors, in detail; a test of that size took 10 minutes of a loaded
machine, and no check here needs more than 18).

The job runs twice on the same workdir. A job that ends at its step limit
may end before every one of 10 actors has stepped (the limit counts all
actors' steps together, and the replicas start over minutes on 2 cores),
so the first job has none and is stopped from outside (`programs/stop.py`)
once every actor has played an episode, every cacher has answered and the
learner has updated. The second is the same run scaled down, as a user
shrinks a job to save money: 2 actors and one cacher, still 2 replay shards
(the shard count is fixed by the checkpoints). It resumes from what the
first left in the bucket and runs to a step limit past the first job's
count, where the coordinator ends it as succeeded. (Resuming at the same
scale is tests/test_cloud.py's packaged-job test, with fewer replicas.)
"""

import json
import re
import subprocess
import time

import pytest

from benchmarks.emulated_job_memory import JobMemory
from tests import helpers
from tests.conftest import BUCKET
from tests.test_cloud import EMULATED_FLAGS
from tests.test_cloud import _emulate
from tests.test_cloud import _failed_at_google_cloud
from tests.test_cloud import _launch
from tests.test_cloud import _log_of
from tests.test_cloud import _package
from tests.test_cloud import _replica_log
from tests.test_cloud import _replicas
from tests.test_cloud import _start_emulator
from tests.test_cloud import _wait_for
from tests.test_cloud import check_resumed

ACTORS = 10
# 10 actors, 2 variable cachers, 2 replay shards.
BIG = (f'--num_actors={ACTORS}', '--variable_cachers=2', '--replay_shards=2')
# The second job: the same run scaled down.
SMALL_ACTORS = 2
SMALL = (f'--num_actors={SMALL_ACTORS}', '--variable_cachers=1',
         '--replay_shards=2')
# The nodes of one replica each, besides actors, cachers and shards.
OTHERS = ('coordinator', 'counter', 'learner', 'evaluator')
# How long 18 replicas may take to start and act on a loaded 2-core machine
# (each imports TensorFlow; under load the start alone took 8 minutes).
START_TIMEOUT = 1500
# The second job's steps past the first's: many episodes of each actor.
LIMIT_STEPS = 3000


def _memory_total() -> int:
  """This machine's memory, in bytes (/proc/meminfo's MemTotal)."""
  with open('/proc/meminfo') as f:
    for line in f:
      if line.startswith('MemTotal:'):
        return int(line.split()[1]) * 1024
  raise AssertionError('no MemTotal in /proc/meminfo')


def _every_node_has_acted(package_dir) -> bool:
  """Whether, in the replicas' own output (Cloud Logging's place), every
  actor has logged an episode of its own, each cacher has answered an
  actor, and the learner has updated."""
  for replica in _replicas(package_dir):
    log = _log_of(package_dir, replica)
    if replica['node'] == 'actor' and 'Episode Return = ' not in log:
      return False
    if replica['node'] == 'cacher' and not re.search(
        r'\[Cacher \d\] .*Parameter Answers = [1-9]', log):
      return False
    if replica['node'] == 'learner' and not re.search(
        r'\[Learner\] .*Learner Steps = [1-9]', log):
      return False
  return True


def _acted_or_ended(package_dir, emulator) -> bool:
  """`_every_node_has_acted`, failing the test at once where the job has
  ended before it (its coordinator stopping, or the emulator gone), with
  what said so, instead of waiting out the start's timeout."""
  if _every_node_has_acted(package_dir):
    return True
  coordinator = [replica for replica in _replicas(package_dir)
                 if replica['node'] == 'coordinator']
  said = [line for replica in coordinator
          for line in _log_of(package_dir, replica).splitlines()
          if 'Stopping: ' in line]
  ended = emulator.poll() is not None
  if said or ended:
    # The emulator says why it ended the job (a replica's failures, a
    # signal, the time limit) once it has: it ends the replicas left within
    # its grace period.
    try:
      output, _ = emulator.communicate(timeout=120)
      emulator_said = f'exited ({emulator.returncode}): {output[-3000:]}'
    except subprocess.TimeoutExpired:
      emulator_said = 'still ran 120 s later.'
    pytest.fail('The job ended before every node had acted: '
                f'{said[-1] if said else "its coordinator said nothing"}; '
                f'the emulator {emulator_said}')
  return False


def _bucket_rows(label: str):
  """The rows of node `label`'s CSV log in the bucket."""
  text = helpers.bucket_text(BUCKET, f'run/logs/{label}/logs.csv')
  return helpers.rows_from(text) if text else []


@pytest.mark.slow  # Runs a packaged job of 18 replicas, twice.
def test_a_job_of_18_replicas_stops_on_request_then_resumes_to_its_limit(
    tmp_path, cloud_storage):
  workdir = f'gs://{BUCKET}/run'
  flags = (*EMULATED_FLAGS, *BIG)
  assert _failed_at_google_cloud(_launch(
      tmp_path, workdir, *flags, '--max_actor_steps=none', **cloud_storage))
  package_dir = _package(tmp_path, 'first', workdir, '--max_actor_steps=none',
                         *BIG, **cloud_storage)
  job = json.loads((package_dir / 'job.json').read_text())
  assert sum(pool['replicas'] for pool in job['pools']) == ACTORS + 8

  started = time.time()
  emulator = _start_emulator(package_dir, '--grace_seconds=30')
  memory = JobMemory(package_dir)
  try:
    _wait_for(lambda: (memory.replicas and
                       _acted_or_ended(package_dir, emulator)),
              START_TIMEOUT, 'every actor\'s episode, an answer of each '
              'cacher and the learner\'s update', period=2.0)
    acted = time.time() - started
    result = helpers.run_script('stop', f'--workdir={workdir}', timeout=900)
    output, _ = emulator.communicate(timeout=900)
  finally:
    memory.stop()
    helpers.kill_group(emulator)
  assert result.returncode == 0, result.stdout[-3000:]
  assert 'The program is stopping: stopped on request (programs/stop.py)' \
      in result.stdout
  assert emulator.returncode == 0, output[-3000:]
  assert 'Job succeeded.' in output

  # Every replica on a host of its own; each node kind as many as asked.
  replicas = _replicas(package_dir)
  assert len({r['address'].split(':')[0] for r in replicas}) == len(
      replicas) == ACTORS + 8
  kinds = [r['node'] for r in replicas]
  assert (kinds.count('actor'), kinds.count('cacher'),
          kinds.count('replay')) == (ACTORS, 2, 2)
  assert all(kinds.count(node) == 1 for node in OTHERS)
  # Within this machine's memory, with room for the rest of what runs on
  # it: the job's peak, the sum of its processes' proportional set sizes,
  # sampled every second with every replica up.
  assert len(memory.replicas) == ACTORS + 8
  assert any(len(sample) == ACTORS + 8 for sample in memory.samples)
  peak = memory.peak()
  print(f'{ACTORS + 8} replicas: every node acted after {acted:.0f} s; peak PSS '
        f'{peak / 2**30:.2f} GiB of {_memory_total() / 2**30:.1f} GiB')
  assert peak < _memory_total() / 2, (peak, _memory_total())

  record = json.loads(helpers.bucket_text(BUCKET, 'run/stop.json'))
  assert record['reason'] == 'stopped on request (programs/stop.py)', record
  assert not record['failed'], record
  # In the bucket, once the job has ended: every actor's CSV log has
  # episodes, both cachers answered actors, the learner sampled both
  # shards and updated, and every stateful node left its checkpoint.
  for label in helpers.actor_labels(ACTORS):
    rows = _bucket_rows(label)
    assert rows and int(rows[-1]['actor_steps']) > 0, label
  for cacher in ('cacher_0', 'cacher_1'):
    rows = _bucket_rows(cacher)
    assert rows and int(rows[-1]['parameter_answers']) > 0, (cacher, rows)
  learner = _bucket_rows('learner')
  assert learner and int(learner[-1]['learner_steps']) > 0
  for shard in range(2):
    assert sum(int(row[f'shard_{shard}_samples']) for row in learner) > 0
  names = helpers.bucket_names(BUCKET, 'run/checkpoints/')
  for label in ('learner', 'counter', 'replay_0', 'replay_1'):
    assert any(name.startswith(f'run/checkpoints/{label}/')
               for name in names), (label, names)
  coordinator = _replica_log(package_dir, 'coordinator')
  for shard in range(2):
    assert f'Final replay_{shard} checkpoint' in coordinator

  # The second job, scaled down: resumed from the checkpoints in the
  # bucket, it runs to a step limit past the first job's count. The launch
  # clears the first job's stop record, as a user's relaunch does.
  first = record['counts']
  limit = first['actor_steps'] + LIMIT_STEPS
  assert _failed_at_google_cloud(_launch(
      tmp_path, workdir, *EMULATED_FLAGS, *SMALL, f'--max_actor_steps={limit}',
      **cloud_storage))
  package_dir = _package(tmp_path, 'second', workdir,
                         f'--max_actor_steps={limit}', *SMALL, **cloud_storage)
  job = json.loads((package_dir / 'job.json').read_text())
  assert sum(pool['replicas'] for pool in job['pools']) == SMALL_ACTORS + 7
  result = _emulate(package_dir, timeout=START_TIMEOUT)
  assert result.returncode == 0, result.stdout[-5000:]
  assert 'Job succeeded.' in result.stdout
  kinds = [r['node'] for r in _replicas(package_dir)]
  assert (kinds.count('actor'), kinds.count('cacher'),
          kinds.count('replay')) == (SMALL_ACTORS, 1, 2)
  check_resumed(package_dir, shards=2)
  # Only the second job's actors stepped past the first job's count.
  for label in helpers.actor_labels(SMALL_ACTORS):
    rows = _bucket_rows(label)
    assert int(rows[-1]['actor_steps']) > first['actor_steps'], label
  record = json.loads(helpers.bucket_text(BUCKET, 'run/stop.json'))
  assert not record['failed'], record
  assert record['reason'].startswith('reached'), record
  assert record['counts']['actor_steps'] >= limit, (record, first)
  assert record['counts']['learner_steps'] > first['learner_steps'], (
      record, first)
  coordinator = _replica_log(package_dir, 'coordinator')
  for shard in range(2):
    assert f'Final replay_{shard} checkpoint' in coordinator
  assert 'Ending the job (succeeded).' in coordinator
