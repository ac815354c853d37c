"""Runs a packaged Vertex AI job on this machine, as Vertex AI would.

`--lp_launch_type=vertex_ai --dry_run --package_dir=DIR` keeps what
Launchpad's Vertex AI launcher packaged: one directory per worker pool (the
container's files: the serialised nodes `job.pkl`, Launchpad's
`process_entry.py`, this project's code) and `job.json`. This starts every
replica of every pool the way Vertex AI starts a container's command:

* `python -m process_entry --data_file=job.pkl`, in the container's working
  directory, with this machine's Python in place of the image's (the same
  pinned packages) and nothing of this repository on its path;
* with `CLUSTER_SPEC` (and `TF_CONFIG`) naming every replica's address, one
  host per replica: `127.0.0.<n>:<port>`, a loopback address of its own;
* each replica's output in `<replica_log_dir>/<pool>-<index>.log` (Cloud
  Logging's place), and `<replica_log_dir>/replicas.json` saying which
  process runs which node at which address.

As on Vertex AI, the job ends when its primary replica (the first pool's)
exits: the others are sent SIGTERM, then SIGKILL after `--grace_seconds`, and
the job's state is the primary's (exit 0: succeeded). The emulator exits
with 0 for a succeeded job, 1 for a failed one.

  python -m agents.distributed.vertex_emulator --package_dir=DIR

What it cannot show: Vertex AI's machines, image builds, network and Cloud
Storage (the run's workdir is a directory of this machine, shared by every
replica, where Vertex AI's containers share a Cloud Storage bucket).
"""

import json
import os
import signal
import subprocess
import sys
import time
from typing import Dict, List, Optional

from absl import app
from absl import flags
import portpicker

from agents.distributed.cloud import JOB_FILE

flags.DEFINE_string('package_dir', None, 'A packaged job (--dry_run\'s '
                    '--package_dir).')
flags.DEFINE_string('replica_log_dir', None, 'Where each replica\'s output goes; '
                    'default: <package_dir>/logs.')
flags.DEFINE_float('grace_seconds', 30.0, 'Seconds between the SIGTERM and '
                   'the SIGKILL of the replicas left when the job ends.')
flags.DEFINE_string('job_id', 'emulated', 'The job id the replicas see '
                    '(CLOUD_ML_JOB_ID).')
FLAGS = flags.FLAGS


def host(n: int) -> str:
  """Replica n's (over all pools) loopback address: 127.0.0.2, 127.0.0.3,
  ..., then 127.0.1.2, ... (250 a block)."""
  return f'127.0.{n // 250}.{n % 250 + 2}'


class Replica:
  """One replica: a process of its own, in a session of its own."""

  def __init__(self, pool: str, index: int, address: str, node: str):
    self.pool = pool
    self.index = index
    self.address = address
    self.node = node
    self.process: Optional[subprocess.Popen] = None

  @property
  def name(self) -> str:
    return f'{self.pool}-{self.index}'

  def start(self, directory: str, command: List[str],
            cluster: Dict[str, List[str]], log_dir: str, job_id: str):
    environment = {key: value for key, value in os.environ.items()
                   if key != 'PYTHONPATH'}
    task = {'type': self.pool, 'index': self.index}
    environment.update({
        'CLUSTER_SPEC': json.dumps({'cluster': cluster, 'task': task,
                                    'job': {'id': job_id}}),
        'TF_CONFIG': json.dumps({'cluster': cluster, 'task': task}),
        'CLOUD_ML_JOB_ID': job_id,
    })
    log = open(os.path.join(log_dir, f'{self.name}.log'), 'wb')
    # In the emulator's process group: whoever ends the emulator's group
    # ends the job's machines too.
    self.process = subprocess.Popen(
        command, cwd=directory, env=environment, stdout=log,
        stderr=subprocess.STDOUT)
    log.close()

  def signal(self, signum: int):
    if self.process and self.process.poll() is None:
      try:
        self.process.send_signal(signum)
      except ProcessLookupError:
        pass


def _command(text: str) -> List[str]:
  """The container's command, with this machine's Python."""
  words = text.split()
  if words[0] != 'python':
    raise ValueError(f'Unexpected container command: {text}')
  return [sys.executable] + words[1:]


def replicas_of(job: Dict) -> List[Replica]:
  """Every replica of the job, each with an address of its own."""
  replicas = []
  for pool in job['pools']:
    for index in range(pool['replicas']):
      address = f'{host(len(replicas))}:{portpicker.pick_unused_port()}'
      replicas.append(Replica(pool['name'], index, address,
                              pool['nodes'][index]))
  return replicas


def run(package_dir: str, log_dir: Optional[str] = None,
        grace_seconds: float = 30.0, job_id: str = 'emulated') -> int:
  """Runs the job until its primary replica exits; returns 0 if the job
  succeeded, 1 if it failed."""
  with open(os.path.join(package_dir, JOB_FILE)) as f:
    job = json.load(f)
  log_dir = log_dir or os.path.join(package_dir, 'logs')
  os.makedirs(log_dir, exist_ok=True)
  replicas = replicas_of(job)
  cluster: Dict[str, List[str]] = {}
  for replica in replicas:
    cluster.setdefault(replica.pool, []).append(replica.address)
  pools = {pool['name']: pool for pool in job['pools']}
  print(f'Job "{job["name"]}": {len(replicas)} replicas in '
        f'{len(pools)} pools; their output in {log_dir}', flush=True)
  for replica in replicas:
    pool = pools[replica.pool]
    replica.start(os.path.join(package_dir, pool['directory']),
                  _command(pool['command']), cluster, log_dir, job_id)
  with open(os.path.join(log_dir, 'replicas.json'), 'w') as f:
    json.dump([{'replica': replica.name, 'node': replica.node,
                'address': replica.address, 'pid': replica.process.pid}
               for replica in replicas], f, indent=2)
  primary = replicas[0]
  stop = {'signal': None}

  def on_signal(signum, frame):
    del frame
    stop['signal'] = signum  # Cancel the job: as Vertex AI does, SIGTERM.

  previous = {signum: signal.signal(signum, on_signal)
              for signum in (signal.SIGINT, signal.SIGTERM)}
  try:
    while primary.process.poll() is None and stop['signal'] is None:
      time.sleep(0.2)
  finally:
    for signum, handler in previous.items():
      signal.signal(signum, handler)
    for replica in replicas:
      replica.signal(signal.SIGTERM)
    deadline = time.time() + grace_seconds
    while (time.time() < deadline and
           any(replica.process.poll() is None for replica in replicas)):
      time.sleep(0.2)
    for replica in replicas:
      replica.signal(signal.SIGKILL)
    for replica in replicas:
      replica.process.wait()
  if stop['signal'] is not None:
    print('Job cancelled.', flush=True)
    return 1
  status = primary.process.returncode
  state = 'succeeded' if status == 0 else f'failed (primary exit {status})'
  print(f'Job {state}.', flush=True)
  return 0 if status == 0 else 1


def main(argv):
  del argv
  if not FLAGS.package_dir or not os.path.isfile(
      os.path.join(FLAGS.package_dir, JOB_FILE)):
    sys.stderr.write('error: --package_dir must name a packaged job (a '
                     f'directory with {JOB_FILE}): package one with '
                     '--lp_launch_type=vertex_ai --dry_run --package_dir=DIR.\n')
    sys.exit(2)
  sys.exit(run(FLAGS.package_dir, FLAGS.replica_log_dir, FLAGS.grace_seconds,
               FLAGS.job_id))


if __name__ == '__main__':
  app.run(main)
