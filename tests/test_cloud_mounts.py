"""Cloud Storage FUSE's rules in the Vertex AI emulator, and the program
under them.

On Vertex AI each replica has a Cloud Storage mount of its own, which
uploads a file once it is closed; a machine that is lost takes with it what
its processes had not closed. The emulator (`tests/vertex_emulator.py`)
gives each replica a view of its own and decides from /proc which files
its processes hold open for writing:

* the rule itself, with real processes holding files open, closing them
  and being killed, against the Cloud Storage emulator;
* a packaged job whose learner replica is lost (SIGKILL): its checkpoint
  and its logs up to the last seconds are in the bucket, and a relaunch
  naming only the workdir resumes from that checkpoint.
"""

import json
import os
import re
import signal
import subprocess
import sys

import pytest
import tensorflow as tf

from tests import helpers
from tests import storage_mounts
from tests.conftest import BUCKET
from test_cloud import _dry_run
from test_cloud import _failed_at_google_cloud
from test_cloud import _launch
from test_cloud import _package
from test_cloud import _replica_log
from test_cloud import _replicas
from test_cloud import _start_emulator
from test_cloud import _wait_for
from test_cloud import EMULATED_FLAGS

# A process of a replica: writes its file (argv[1]) and holds it open until
# a line on its input, then closes it and waits for another line.
HOLDER = '''
import sys
f = open(sys.argv[1], 'w')
f.write('written before the close\\n')
f.flush()
print('open', flush=True)
sys.stdin.readline()
f.close()
print('closed', flush=True)
sys.stdin.readline()
'''


class _Machine:
  """A replica's machine: one process that holds a file of its view open
  (`HOLDER`), or none (`path` None: a process that only waits)."""

  def __init__(self, path=None):
    code = HOLDER if path else 'import sys\nsys.stdin.readline()\n'
    self.process = subprocess.Popen(
        [sys.executable, '-c', code] + ([path] if path else []),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    if path:
      assert self.process.stdout.readline() == 'open\n'

  def close_file(self):
    self.process.stdin.write('\n')
    self.process.stdin.flush()
    assert self.process.stdout.readline() == 'closed\n'

  def processes(self):
    return None if self.process.poll() is not None else [self.process.pid]

  def killed(self) -> bool:
    return self.process.returncode == -signal.SIGKILL

  def end(self):
    if self.process.poll() is None:
      self.process.kill()
    self.process.wait()


def _bucket(prefix='run/'):
  return {name: helpers.bucket_text(BUCKET, name)
          for name in helpers.bucket_names(BUCKET, prefix)}


@pytest.mark.slow  # Kills a process (a replica's machine lost).
def test_a_file_reaches_the_bucket_once_closed_and_not_if_its_machine_is_lost(
    tmp_path, cloud_storage):
  del cloud_storage  # The bucket's emulator, which the mirror reaches.
  storage_dir = str(tmp_path / 'gcs')
  names = ['a', 'b', 'c']
  views = {name: os.path.join(storage_dir, name, BUCKET, 'run')
           for name in names}
  for view in views.values():
    os.makedirs(view)
  # Replica a holds its log open; b only reads; c is lost with its file open.
  machines = {'a': _Machine(os.path.join(views['a'], 'log.csv')),
              'b': _Machine(),
              'c': _Machine(os.path.join(views['c'], 'lost.csv'))}
  try:
    mirror = storage_mounts.BucketMirror(
        f'gs://{BUCKET}/run', storage_dir, names,
        lambda name: machines[name].processes(),
        lambda name: machines[name].killed())
    # A file c closed while it ran, seen so at two rounds.
    with open(os.path.join(views['c'], 'kept.csv'), 'w') as f:
      f.write('closed\n')
    for _ in range(3):
      mirror.sync()
    assert _bucket() == {'run/kept.csv': 'closed\n'}
    # Held open for writing by a running process: not uploaded, round
    # after round; once closed, uploaded, and copied into the other views.
    machines['a'].close_file()
    mirror.sync()
    mirror.sync()
    assert _bucket()['run/log.csv'] == 'written before the close\n'
    with open(os.path.join(views['b'], 'log.csv')) as f:
      assert f.read() == 'written before the close\n'
    # A file closed again before the next round (a log's rows): each
    # version seen closed goes up, one round later.
    often = os.path.join(views['a'], 'often.csv')
    with open(often, 'w') as f:
      f.write('row 1\n')
    mirror.sync()
    with open(often, 'a') as f:
      f.write('row 2\n')
    mirror.sync()
    assert _bucket()['run/often.csv'] == 'row 1\n'
    mirror.sync()
    assert _bucket()['run/often.csv'] == 'row 1\nrow 2\n'
    # c's machine is lost with lost.csv open: its kill closes the file,
    # which is then not uploaded, neither by a round nor at the job's end.
    machines['c'].process.kill()
    machines['c'].process.wait()
    mirror.sync()
    assert 'run/lost.csv' not in _bucket()
    # A rename (a checkpoint written beside, then renamed): the new name
    # uploaded, the old deleted, in the bucket and in every other view.
    beside = os.path.join(views['a'], 'checkpoint.tmp')
    with open(beside, 'w') as f:
      f.write('step 1\n')
    mirror.sync()
    mirror.sync()
    assert 'run/checkpoint.tmp' in _bucket()
    assert os.path.exists(os.path.join(views['b'], 'checkpoint.tmp'))
    os.replace(beside, os.path.join(views['a'], 'checkpoint'))
    mirror.sync()
    assert 'run/checkpoint.tmp' not in _bucket()
    assert _bucket()['run/checkpoint'] == 'step 1\n'
    assert not os.path.exists(os.path.join(views['b'], 'checkpoint.tmp'))
    with open(os.path.join(views['b'], 'checkpoint')) as f:
      assert f.read() == 'step 1\n'
    # An object written through the API (programs/stop.py's request)
    # reaches every view; one replica's removal removes it everywhere.
    helpers.storage_client().bucket(BUCKET).blob(
        'run/stop_request.json').upload_from_string('{}')
    mirror.sync()
    for name in ('a', 'b'):
      assert os.path.exists(os.path.join(views[name], 'stop_request.json'))
    os.remove(os.path.join(views['b'], 'stop_request.json'))
    mirror.sync()
    assert 'run/stop_request.json' not in _bucket()
    assert not os.path.exists(os.path.join(views['a'], 'stop_request.json'))
    # The job's end: a and b exit; what they closed goes up, c's lost file
    # does not.
    for name in ('a', 'b'):
      machines[name].process.stdin.close()
      machines[name].process.wait()
    with open(os.path.join(views['b'], 'written_at_the_end.csv'), 'w') as f:
      f.write('closed at exit\n')
    mirror.sync(final=True)
    bucket = _bucket()
    assert bucket['run/written_at_the_end.csv'] == 'closed at exit\n'
    assert 'run/lost.csv' not in bucket
    assert os.path.exists(os.path.join(views['c'], 'lost.csv'))
  finally:
    for machine in machines.values():
      machine.end()


def _view(replica: dict) -> str:
  """The run's directory in a replica's view of the bucket."""
  return os.path.join(replica['mount'], BUCKET, 'run')


def _learner_checkpoint_step(directory) -> int:
  """The learner step of the newest checkpoint in a directory of learner
  checkpoints."""
  prefix = tf.train.latest_checkpoint(str(directory))
  assert prefix, os.listdir(directory)
  return int(tf.train.load_checkpoint(prefix).get_tensor(
      'num_steps/.ATTRIBUTES/VARIABLE_VALUE'))


def _download(prefix: str, directory) -> None:
  """The bucket's objects under `prefix` into `directory`."""
  bucket = helpers.storage_client().bucket(BUCKET)
  for name in helpers.bucket_names(BUCKET, prefix):
    path = os.path.join(str(directory), name[len(prefix):])
    os.makedirs(os.path.dirname(path), exist_ok=True)
    bucket.blob(name).download_to_filename(path)


def _bucket_rows(label: str):
  text = helpers.bucket_text(BUCKET, f'run/logs/{label}/logs.csv')
  return helpers.rows_from(text) if text else []


@pytest.mark.slow  # Runs the packaged job twice.
def test_a_lost_learner_leaves_its_checkpoint_and_logs_and_the_run_resumes(
    tmp_path, cloud_storage):
  # The learner checkpoints at its first update, then not for an hour: the
  # checkpoint in its view when it is killed is its first.
  workdir = f'gs://{BUCKET}/run'
  flags = ('--max_actor_steps=none', '--checkpoint_every=3600')
  assert _failed_at_google_cloud(_launch(tmp_path, workdir, *EMULATED_FLAGS,
                                         *flags, **cloud_storage))
  package_dir = _package(tmp_path, 'first', workdir, *flags, **cloud_storage)
  # The strict reading: the replica's first failure fails the job.
  emulator = _start_emulator(package_dir, '--grace_seconds=30',
                             '--max_replica_restarts=0')
  try:
    _wait_for(lambda: (package_dir / 'logs' / 'replicas.json').exists(), 120,
              'the emulator to start the replicas')
    (learner,) = _replicas(package_dir, 'learner')
    view = _view(learner)
    index = os.path.join(view, 'checkpoints', 'learner', 'checkpoint')
    actor_views = [_view(replica)
                   for replica in _replicas(package_dir, 'actor')]
    actors = helpers.actor_labels(len(actor_views))
    _wait_for(lambda: os.path.exists(index) and
              helpers.last(view, 'learner', 'learner_steps') > 0 and
              all(any(helpers.rows(actor_view, label)
                      for actor_view in actor_views) for label in actors),
              300, 'the learner\'s first checkpoint and logged update, and '
              'every actor\'s first logged episode')
    # While the job runs, what the learner closed reaches the bucket: its
    # checkpoint, and its log rows so far.
    written = helpers.rows(view, 'learner')
    with open(index) as f:
      newest = f.read()
    _wait_for(lambda: helpers.bucket_text(
        BUCKET, 'run/checkpoints/learner/checkpoint') == newest and
              len(_bucket_rows('learner')) >= len(written), 120,
              'the learner\'s checkpoint and rows in the bucket')
    os.kill(learner['pid'], signal.SIGKILL)
    output, _ = emulator.communicate(timeout=300)
  finally:
    helpers.kill_group(emulator)
  assert emulator.returncode == 1, output[-3000:]
  assert re.search(rf'Job failed \(replica {learner["replica"]}, the '
                   r'learner, killed by SIGKILL\)', output), output[-3000:]
  record = json.loads(helpers.bucket_text(BUCKET, 'run/stop.json'))
  assert record['failed'] and 'learner' in record['reason'], record
  # The checkpoint: the newest in the learner's view is the bucket's.
  with open(index) as f:
    assert f.read() == newest
  saved = tmp_path / 'saved'
  _download('run/checkpoints/learner/', saved)
  step = _learner_checkpoint_step(saved)
  assert step == _learner_checkpoint_step(os.path.dirname(index)) > 0
  # The learner's rows: the bucket has every row the learner had written
  # when the bucket was seen to hold them, and only rows it wrote.
  kept, wrote = _bucket_rows('learner'), helpers.rows(view, 'learner')
  assert kept == wrote[:len(kept)] and len(kept) >= len(written), (
      len(kept), len(written), len(wrote))
  print(f'learner rows: {len(wrote)} written, {len(kept)} in the bucket, '
        f'the last {float(wrote[-1]["walltime"]) - float(kept[-1]["walltime"]):.1f} '
        's apart')
  # The actors stopped when the job ended, closing their logs: every row
  # is in the bucket (each actor's own view has its log in full).
  for label in actors:
    wrote = max((helpers.rows(view, label) for view in actor_views), key=len)
    assert wrote and _bucket_rows(label) == wrote, label

  # A relaunch naming only the workdir, as a user relaunches: the job it
  # would submit, planned from the run's record.
  result, package_dir, _ = _dry_run(tmp_path, package_dir=tmp_path / 'second',
                                    workdir=workdir, **cloud_storage)
  assert result.returncode == 0, result.stderr[-3000:]
  assert f'This plan resumes the run in {workdir}' in result.stdout
  emulator = _start_emulator(package_dir, '--grace_seconds=30')
  try:
    _wait_for(lambda: (package_dir / 'logs' / 'replicas.json').exists() and
              'Learner starts at step' in _replica_log(package_dir,
                                                       'learner'), 300,
              'the relaunched learner to start')
    started = re.search(r'Learner starts at step (\d+)',
                        _replica_log(package_dir, 'learner'))
  finally:
    helpers.kill_group(emulator)  # The emulator and its replicas.
  assert int(started.group(1)) == step
