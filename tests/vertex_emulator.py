"""Runs a packaged Vertex AI job on this machine, as Vertex AI would.

`--lp_launch_type=vertex_ai --dry_run --package_dir=DIR` keeps what
Launchpad's Vertex AI launcher packaged: one directory per worker pool (the
container's files: the serialised nodes `job.pkl`, Launchpad's
`process_entry.py`, this project's code) and `job.json`. This starts every
replica of every pool the way Vertex AI starts a container's command:

* `python -m process_entry --data_file=job.pkl`, in the container's working
  directory, with this machine's Python in place of the image's (the same
  pinned packages) and nothing of this repository on its path; or with
  the Python `--python` names (every replica), or `--replica_python` (a
  pool's replicas, or one replica), first on the replica's PATH as the
  image's `python` is: e.g. a virtual environment built from the pool's
  Dockerfile (`python -m tests.image_venv --pool_dir=<package_dir>/<pool>`);
* with the environment its image sets (its Dockerfile's ENV lines, as
  `job.json` records them: TensorFlow's oneDNN switch, and a GPU image's
  library path);
* with `CLUSTER_SPEC` (and `TF_CONFIG`) naming every replica's address, one
  host per replica (`--hosts`):
  - `loopback` (the default): `127.0.0.<n>:<port>`, a loopback address of
    its own. The replicas share this machine's network stack: a server
    listens on every address, so one replica could reach another at the
    wrong address and the emulation would not notice;
  - `netns`: each replica in a network namespace of its own, whose only
    link is a virtual Ethernet cable to a switch (a Linux bridge in one
    more namespace), at `10.66.<a>.<b>`, and named as on Vertex AI:
    `cmle-training-<pool>-<id>-<index>:2222`, a host name and the same
    port on every host, which only the job's namespaces resolve (a hosts
    file each). As on Vertex AI, a replica reaches another only at the
    address CLUSTER_SPEC gives it, and nothing of the job listens on this
    machine's own interfaces. Needs root (to make namespaces) and
    iproute2's `ip`;
* each replica's output in `<replica_log_dir>/<pool>-<index>.log` (Cloud
  Logging's place), and `<replica_log_dir>/replicas.json` saying which
  process runs which node at which address, with which mount;
* each replica's own Cloud Storage mount where it looks for it (Vertex
  AI: /gcs; here `<storage_dir>/<pool>-<index>`, given to it as
  APEX_CLOUD_STORAGE_MOUNT): a directory of its own, its *view* of the
  bucket. A local workdir is not under the mount: every replica reads and
  writes it as is. A workdir on Cloud Storage (gs://<bucket>/<path>) needs
  a Cloud Storage emulator on this machine (STORAGE_EMULATOR_HOST; the
  emulator never reaches Google Cloud), and each view follows Cloud
  Storage FUSE's rules (`tests/storage_mounts.py`, every `SYNC_SECONDS`):
  - the workdir's objects are copied into every view before the replicas
    start;
  - a file a replica writes reaches the bucket once none of the replica's
    processes (its process and all its descendants) holds it open for
    writing, as /proc/<pid>/fd and /proc/<pid>/fdinfo show, and the
    replica is seen still running at the next round (a process that dies
    closes its files: the kill of a machine must not pass for a close).
    A file removed or renamed in a view is deleted in the bucket (a rename:
    the new name uploaded, the old deleted);
  - what reaches the bucket, from a replica or through the API (a stop
    request from `programs/stop.py`), is copied into every running
    replica's view within about two rounds; a view's own change not yet
    uploaded (or a file held open for writing there) is left as it is;
  - when the job ends, each replica's closed files are uploaded: all of
    them for a replica that exited (its exit closed them), and for one
    killed by SIGKILL (its machine lost, whether killed during the job or
    after `--grace_seconds` at its end) only those seen closed while it
    ran. What it held open, or closed within a round of its end, is lost.

  Not emulated: Cloud Storage FUSE also uploads a file when it is synced
  (fsync), which cannot be seen from outside the process; the emulator
  takes the stricter reading, closed. Nor its caches (a new object can
  show in a mount up to a minute late: here within two rounds), its reads
  (here every object is copied into every view; Cloud Storage FUSE reads
  on demand), a write that fails, directories (objects only; an empty
  directory stays in its view), or two replicas writing one object at
  once (the last upload wins, as on Cloud Storage). A file closed within a
  round of its machine's loss is lost here, where Cloud Storage FUSE, which
  uploads as it closes, would have kept it.

As on Vertex AI, the job ends when its primary replica (the first pool's)
exits, and its state is the primary's (exit 0: succeeded). It also ends,
failed, as soon as any other replica exits with a non-zero status or is
killed by a signal (`--any_replica_fails`, on by default), naming that
replica. Either way the replicas left are sent SIGTERM, then SIGKILL after
`--grace_seconds`. The emulator exits with 0 for a succeeded job, 1 for a
failed (or cancelled) one.

What Vertex AI does with a replica's non-zero exit (Google's "Understand
the custom training service", "Restart workers during the training job"):
it restarts that replica in place, with the same host name; an exit for
one of its listed common errors is permanent and shuts the whole job down,
and a replica that fails a sixth time fails the job (after up to three
retries of the whole job). The emulator does the same: a replica that exits non-zero
(or is killed by a signal) is started again in place, at once, with the
same address, host name and Cloud Storage view, up to
`--max_replica_restarts` times (5, as Vertex AI's sixth failure fails the
job); its next failure fails the job. A replica started again keeps its
view as it was: what its killed process had written there and not yet
uploaded is uploaded later, where Cloud Storage FUSE would have lost what
was still open. `--max_replica_restarts=0` takes the strict reading, in
which a replica's first failure fails the job at once.

A job has a time limit, Vertex AI's `scheduling.timeout` (the job's
`scheduling` in job.json, from the launch's --job_timeout_hours; or
`--timeout_seconds`): reached, the job is ended as a cancelled one is
(SIGTERM to every replica, SIGKILL after `--grace_seconds`) and fails. A
test can also reach the limit at a moment of its choosing: SIGUSR1 to the
emulator.

The job's state, in Vertex AI's words (JOB_STATE_RUNNING, then
JOB_STATE_SUCCEEDED, JOB_STATE_FAILED or JOB_STATE_CANCELLED) and why, is
kept in `<replica_log_dir>/state.json` as it changes; and, as a
submission does, the job is recorded in the run's workdir
(`run_manifest.write_job_record`) under the name `emulated:<that file>`,
which `programs/watch.py` reads as it reads a Vertex AI job's state.

  python -m tests.vertex_emulator --package_dir=DIR

(from the repository root). A test tool: it is not part of the `agents`
package, and does not go into the containers.

What it cannot show: Vertex AI's machines, image builds, network, and
Cloud Storage FUSE itself (above: what of its rules is emulated).
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from typing import Dict, List, Optional, Sequence, Tuple

from absl import app
from absl import flags
import portpicker
import psutil

from launch.cloud import watching
from launch.runs import run_manifest
from launch.runs import storage
from launch.cloud.dry_run import JOB_FILE
from tests.storage_mounts import BucketMirror
from tests.storage_mounts import SYNC_SECONDS

flags.DEFINE_string('package_dir', None, 'A packaged job (--dry_run\'s '
                    '--package_dir).')
flags.DEFINE_string('replica_log_dir', None, 'Where each replica\'s output goes; '
                    'default: <package_dir>/logs.')
flags.DEFINE_float('grace_seconds', 30.0, 'Seconds between the SIGTERM and '
                   'the SIGKILL of the replicas left when the job ends.')
flags.DEFINE_string('storage_dir', None, 'Where the replicas\' Cloud '
                    'Storage mounts (Vertex AI\'s /gcs) are: replica '
                    '<pool>-<index> sees gs://<bucket>/<path> as '
                    '<storage_dir>/<pool>-<index>/<bucket>/<path>; default: '
                    '<package_dir>/gcs.')
flags.DEFINE_enum('hosts', 'loopback', ['loopback', 'netns'],
                  'How replicas get hosts of their own: loopback addresses '
                  '(127.0.0.<n>), or network namespaces joined by a virtual '
                  'switch (10.66.<a>.<b>; needs root).')
flags.DEFINE_string('job_id', 'emulated', 'The job id the replicas see '
                    '(CLOUD_ML_JOB_ID).')
flags.DEFINE_string('python', None, 'The Python that runs every replica '
                    '(the image\'s `python`); default: the emulator\'s own.')
flags.DEFINE_multi_string('replica_python', [], '<pool or replica>=<python>: '
                          'the Python of one pool\'s replicas (workerpool2) '
                          'or of one replica (workerpool2-1), over --python; '
                          'repeat for more.')
flags.DEFINE_integer('max_replica_restarts', 5, 'How many times a replica '
                     'that fails (exits non-zero, or is killed) is started '
                     'again in place before its next failure fails the job '
                     '(Vertex AI: 5); 0: its first failure fails the job.')
flags.DEFINE_float('timeout_seconds', None, 'The job\'s time limit, seconds '
                   '(default: the job\'s own, job.json\'s scheduling).')
flags.DEFINE_bool('any_replica_fails', True, 'Whether a replica other '
                  'than the primary that exits non-zero (or is killed) fails '
                  'the job at once; with --noany_replica_fails only the '
                  'primary\'s exit ends the job.')
FLAGS = flags.FLAGS


def host(n: int) -> str:
  """Replica n's (over all pools) loopback address: 127.0.0.2, 127.0.0.3,
  ..., then 127.0.1.2, ... (250 a block)."""
  return f'127.0.{n // 250}.{n % 250 + 2}'


# The port of every replica on Vertex AI (CLUSTER_SPEC's addresses).
VERTEX_AI_PORT = 2222


class LoopbackHosts:
  """Replica n at the loopback address `host(n)`, on a port of its own
  (see the module docstring)."""

  def __init__(self, replicas: List[Tuple[str, int]]):
    del replicas

  def address(self, n: int) -> str:
    return f'{host(n)}:{portpicker.pick_unused_port()}'

  def ip(self, n: int) -> str:
    return host(n)

  def command(self, n: int, command: List[str]) -> List[str]:
    del n
    return command

  def namespace(self, n: int) -> Optional[str]:
    del n
    return None  # This machine's own.

  def close(self):
    pass


class NamespaceHosts:
  """Replica n in the network namespace `namespace(n)`, at `ip(n)` on a
  virtual switch, named as Vertex AI names it (`address(n)`: host name and
  port; see the module docstring). `close` removes the namespaces, and
  with them their cables and the switch, and their host files.

  Names resolve through a hosts file per namespace,
  /etc/netns/<namespace>/hosts, which `ip netns exec` mounts over
  /etc/hosts for the command it runs: the job's names resolve inside its
  namespaces, and nowhere else on this machine.
  """

  def __init__(self, replicas: List[Tuple[str, int]],
               tag: Optional[str] = None):
    if os.geteuid() != 0 or not shutil.which('ip'):
      raise ValueError('--hosts=netns makes network namespaces, which needs '
                       'root and iproute2\'s `ip`; run as root, or use '
                       '--hosts=loopback.')
    self._tag = tag or str(os.getpid())
    self._switch = f'apex-{self._tag}-switch'
    # Vertex AI's names: cmle-training-<pool>-<job's id>-<index>.
    self._names = [f'cmle-training-{pool}-{self._tag}-{index}'
                   for pool, index in replicas]
    self._made: List[str] = []
    try:
      self._add_namespace(self._switch)
      self._ip('-n', self._switch, 'link', 'add', 'switch', 'type', 'bridge')
      self._ip('-n', self._switch, 'link', 'set', 'switch', 'up')
      hosts = ''.join(f'{self.ip(n)}\t{name}\n'
                      for n, name in enumerate(self._names))
      for n in range(len(replicas)):
        namespace = self.namespace(n)
        self._add_namespace(namespace)
        directory = os.path.join('/etc/netns', namespace)
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, 'hosts'), 'w') as f:
          f.write('127.0.0.1\tlocalhost\n::1\tlocalhost\n' + hosts)
        self._ip('link', 'add', 'eth0', 'netns', namespace, 'type', 'veth',
                 'peer', 'name', f'port{n}', 'netns', self._switch)
        self._ip('-n', self._switch, 'link', 'set', f'port{n}', 'master',
                 'switch', 'up')
        self._ip('-n', namespace, 'addr', 'add', f'{self.ip(n)}/16',
                 'dev', 'eth0')
        self._ip('-n', namespace, 'link', 'set', 'eth0', 'up')
        self._ip('-n', namespace, 'link', 'set', 'lo', 'up')
    except Exception:
      self.close()
      raise

  @staticmethod
  def _ip(*arguments: str):
    result = subprocess.run(['ip', *arguments], capture_output=True,
                            text=True, check=False)
    if result.returncode:
      raise ValueError(f'`ip {" ".join(arguments)}` failed: '
                       f'{result.stderr.strip()}')

  def _add_namespace(self, name: str):
    self._ip('netns', 'add', name)
    self._made.append(name)

  def namespace(self, n: int) -> str:
    return f'apex-{self._tag}-{n}'

  def ip(self, n: int) -> str:
    return f'10.66.{n // 250}.{n % 250 + 1}'

  def address(self, n: int) -> str:
    return f'{self._names[n]}:{VERTEX_AI_PORT}'

  def command(self, n: int, command: List[str]) -> List[str]:
    # `ip netns exec` enters the namespace, mounts its hosts file, and then
    # runs (execs) the command: the replica's process id is the command's
    # own.
    return ['ip', 'netns', 'exec', self.namespace(n), *command]

  def close(self):
    for name in reversed(self._made):
      subprocess.run(['ip', 'netns', 'del', name], capture_output=True,
                     check=False)
      shutil.rmtree(os.path.join('/etc/netns', name), ignore_errors=True)
    self._made = []


class Replica:
  """One replica: a process of its own, in a session of its own."""

  def __init__(self, pool: str, index: int, address: str, node: str):
    self.pool = pool
    self.index = index
    self.address = address
    self.node = node
    self.mount = ''  # Its view of Cloud Storage (`MountView`).
    self.process: Optional[subprocess.Popen] = None
    self.failures = 0  # Its failures so far, each started again in place.
    self.ended = False  # Seen to have exited with 0 while the job ran.

  @property
  def name(self) -> str:
    return f'{self.pool}-{self.index}'

  def start(self, directory: str, command: List[str],
            cluster: Dict[str, List[str]], log_dir: str, job_id: str,
            image_environment: Dict[str, str],
            python: Optional[str] = None):
    environment = {key: value for key, value in os.environ.items()
                   if key not in ('PYTHONPATH', 'VIRTUAL_ENV')}
    if python is not None:  # The image's `python`, first on its PATH.
      environment['PATH'] = os.path.dirname(python) + os.pathsep + \
          environment.get('PATH', '')
    environment.update(image_environment)
    task = {'type': self.pool, 'index': self.index}
    environment.update({
        'CLUSTER_SPEC': json.dumps({'cluster': cluster,
                                    'environment': 'cloud', 'task': task,
                                    'job': {'id': job_id}}),
        'TF_CONFIG': json.dumps({'cluster': cluster, 'task': task}),
        'CLOUD_ML_JOB_ID': job_id,
        storage.MOUNT_VARIABLE: self.mount,
    })
    # Appended to: a replica started again in place goes on in its log.
    log = open(os.path.join(log_dir, f'{self.name}.log'), 'ab')
    # In the emulator's process group: whoever ends the emulator's group
    # ends the job's machines too.
    self.process = subprocess.Popen(
        command, cwd=directory, env=environment, stdout=log,
        stderr=subprocess.STDOUT)
    log.close()

  def processes(self) -> Optional[List[int]]:
    """The ids of its processes ([] before it starts), None once it has
    ended."""
    if self.process is None:
      return []
    if self.process.poll() is not None:
      return None
    try:
      children = psutil.Process(self.process.pid).children(recursive=True)
    except psutil.NoSuchProcess:
      return None
    return [self.process.pid] + [child.pid for child in children]

  def signal(self, signum: int):
    if self.process and self.process.poll() is None:
      try:
        self.process.send_signal(signum)
      except ProcessLookupError:
        pass


def _command(text: str, python: str) -> List[str]:
  """The container's command, with `python` for the image's (its `exec`,
  which in the container's entrypoint.sh puts the command in the shell's
  place, has nothing to do here: the emulator starts the command itself)."""
  words = text.split()
  if words[0] == 'exec':
    words = words[1:]
  if words[0] != 'python':
    raise ValueError(f'Unexpected container command: {text}')
  return [python] + words[1:]


def pythons(job: Dict, python: Optional[str] = None,
            replica_python: Sequence[str] = ()) -> Dict[str, str]:
  """The Python of each replica (by name, `<pool>-<index>`): `python`
  (default: this emulator's), over which each `<pool or replica>=<python>`
  of `replica_python` sets a pool's or a replica's. Raises ValueError for a
  name the job has not, or a Python that does not run."""
  ids = _replica_ids(job)
  chosen = {f'{pool}-{index}': python or sys.executable
            for pool, index in ids}
  pools = {pool for pool, _ in ids}
  for given in replica_python:
    name, equals, path = given.partition('=')
    if not equals or not path:
      raise ValueError(f'--replica_python={given}: give <pool or '
                       'replica>=<python>, e.g. workerpool3=<venv>/bin/python.')
    if name in pools:
      chosen.update({replica: path for replica in chosen
                     if replica.rsplit('-', 1)[0] == name})
    elif name in chosen:
      chosen[name] = path
    else:
      raise ValueError(f'--replica_python={given}: the job has no pool or '
                       f'replica {name} (its replicas: '
                       f'{", ".join(chosen)}).')
  for path in set(chosen.values()):
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
      raise ValueError(f'{path} is not a Python this machine can run: give '
                       'a virtual environment\'s bin/python (e.g. the one '
                       '`python -m tests.image_venv --pool_dir=<pool>` '
                       'prints).')
  return chosen


def _replica_ids(job: Dict) -> List[Tuple[str, int]]:
  """(pool, index) of every replica of the job, in order."""
  return [(pool['name'], index) for pool in job['pools']
          for index in range(pool['replicas'])]


def replicas_of(job: Dict, hosts) -> List[Replica]:
  """Every replica of the job, each with an address of its own from
  `hosts` (`LoopbackHosts` or `NamespaceHosts`)."""
  nodes = {pool['name']: pool['nodes'] for pool in job['pools']}
  return [Replica(pool, index, hosts.address(n), nodes[pool][index])
          for n, (pool, index) in enumerate(_replica_ids(job))]


def exit_text(status: int) -> str:
  """A replica's exit status (Popen's: negative for a signal) in words."""
  if status < 0:
    return f'killed by {signal.Signals(-status).name}'
  return f'exit {status}'


# Vertex AI's job states (`JobState`), as the emulator's state file says them.
RUNNING = 'JOB_STATE_RUNNING'
SUCCEEDED = 'JOB_STATE_SUCCEEDED'
FAILED = 'JOB_STATE_FAILED'
CANCELLED = 'JOB_STATE_CANCELLED'
STATE_FILE = 'state.json'  # <replica_log_dir>/state.json


def write_state(log_dir: str, state: str, error: str = ''):
  """The job's state (and why it ended), whole or not at all."""
  path = os.path.join(log_dir, STATE_FILE)
  with open(f'{path}.partial', 'w') as f:
    json.dump({'state': state, 'error': error, 'time': time.time()}, f)
  os.replace(f'{path}.partial', path)


def run(package_dir: str, log_dir: Optional[str] = None,
        grace_seconds: float = 30.0, job_id: str = 'emulated',
        storage_dir: Optional[str] = None, hosts: str = 'loopback',
        any_replica_fails: bool = True, python: Optional[str] = None,
        replica_python: Sequence[str] = (), max_replica_restarts: int = 5,
        timeout_seconds: Optional[float] = None) -> int:
  """Runs the job until its primary replica exits (or, with
  `any_replica_fails`, until any replica fails past its restarts), each
  replica with its Python from `pythons`; returns 0 if the job succeeded, 1
  if it failed. Raises ValueError for a job it cannot run."""
  with open(os.path.join(package_dir, JOB_FILE)) as f:
    job = json.load(f)
  chosen = pythons(job, python, replica_python)
  log_dir = os.path.abspath(log_dir or os.path.join(package_dir, 'logs'))
  os.makedirs(log_dir, exist_ok=True)
  storage_dir = os.path.abspath(storage_dir or
                                os.path.join(package_dir, 'gcs'))
  if timeout_seconds is None:
    timeout_seconds = job.get('scheduling', {}).get('timeout_seconds')
  network = (NamespaceHosts if hosts == 'netns' else LoopbackHosts)(
      _replica_ids(job))
  try:
    replicas = replicas_of(job, network)
    for replica in replicas:
      replica.mount = os.path.join(storage_dir, replica.name)
      os.makedirs(replica.mount, exist_ok=True)
    mirror = None
    if storage.is_cloud(job.get('workdir')):
      by_name = {replica.name: replica for replica in replicas}
      mirror = BucketMirror(
          job['workdir'], storage_dir, list(by_name),
          lambda name: by_name[name].processes(),
          lambda name: by_name[name].process.returncode == -signal.SIGKILL)
    write_state(log_dir, RUNNING)
    if job.get('workdir'):  # As a submission records its job.
      run_manifest.write_job_record(
          job['workdir'],
          watching.EMULATED + os.path.join(log_dir, STATE_FILE))
    if mirror is not None:
      mirror.sync()
    rules = _Rules(grace_seconds, any_replica_fails, max_replica_restarts,
                   timeout_seconds)
    state, error = _run_job(job, replicas, package_dir, log_dir, job_id,
                            mirror, network, chosen, rules)
  finally:
    network.close()
  write_state(log_dir, state, error)
  return 0 if state == SUCCEEDED else 1


class _Rules:
  """How the job ends (see the module docstring)."""

  def __init__(self, grace_seconds: float, any_replica_fails: bool,
               max_replica_restarts: int, timeout_seconds: Optional[float]):
    self.grace_seconds = grace_seconds
    self.any_replica_fails = any_replica_fails
    self.max_replica_restarts = max_replica_restarts
    self.timeout_seconds = timeout_seconds or None


def _run_job(job, replicas: List[Replica], package_dir: str, log_dir: str,
             job_id: str, mirror: Optional[BucketMirror], network,
             chosen: Dict[str, str], rules: _Rules) -> Tuple[str, str]:
  """`run`, once the job's hosts and storage are ready: the job's end
  state, and why it failed."""
  cluster: Dict[str, List[str]] = {}
  for replica in replicas:
    cluster.setdefault(replica.pool, []).append(replica.address)
  pools = {pool['name']: pool for pool in job['pools']}
  print(f'Job "{job["name"]}": {len(replicas)} replicas in '
        f'{len(pools)} pools; their output in {log_dir}', flush=True)

  def start(n: int, replica: Replica):
    pool = pools[replica.pool]
    python = chosen[replica.name]
    replica.start(os.path.join(package_dir, pool['directory']),
                  network.command(n, _command(pool['command'], python)),
                  cluster, log_dir, job_id, pool['environment'],
                  None if python == sys.executable else python)

  for n, replica in enumerate(replicas):
    start(n, replica)
  _write_replicas(log_dir, replicas, network, chosen)
  primary = replicas[0]
  stop = {'signal': None}
  error = ''  # Why the job failed, once it has.
  started = time.time()

  def on_signal(signum, frame):
    del frame
    stop['signal'] = signum  # Cancel the job: as Vertex AI does, SIGTERM.

  previous = {signum: signal.signal(signum, on_signal)
              for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)}
  try:
    synced = time.time()
    while stop['signal'] is None and not error:
      time.sleep(0.2)
      for n, replica in enumerate(replicas):
        status = replica.process.poll()
        if status is None or (replica is primary and status == 0):
          continue
        if not status or (replica is not primary and
                          not rules.any_replica_fails):
          if not replica.ended:
            replica.ended = True
            print(f'Replica {replica.name} (the {replica.node}) exited '
                  f'while the job ran ({exit_text(status)}).', flush=True)
          continue
        if replica.failures >= rules.max_replica_restarts:
          error = ('primary ' if replica is primary else
                   f'replica {replica.name}, the {replica.node}, ')
          error += exit_text(status) + (
              f', its failure {replica.failures + 1}' if replica.failures
              else '')
          break
        replica.failures += 1
        print(f'Replica {replica.name} (the {replica.node}) failed '
              f'({exit_text(status)}); started again in place (restart '
              f'{replica.failures} of {rules.max_replica_restarts}).',
              flush=True)
        start(n, replica)
        _write_replicas(log_dir, replicas, network, chosen)
      if primary.process.poll() == 0:
        break
      if (rules.timeout_seconds is not None and
          time.time() - started >= rules.timeout_seconds):
        stop['signal'] = 'timeout'
      if mirror is not None and time.time() - synced >= SYNC_SECONDS:
        mirror.sync()
        synced = time.time()
  finally:
    for signum, handler in previous.items():
      signal.signal(signum, handler)
    _end_replicas(replicas, rules.grace_seconds, mirror, synced)
    if mirror is not None:
      print(f'{mirror.sync(final=True)} objects written or deleted in '
            f'{job["workdir"]} at the job\'s end.', flush=True)
  if stop['signal'] in ('timeout', signal.SIGUSR1):
    limit = (f'{rules.timeout_seconds:g} s' if stop['signal'] == 'timeout'
             else 'reached on request, SIGUSR1')
    print(f'Job failed: it reached its time limit ({limit}).', flush=True)
    return FAILED, f'the job reached its time limit ({limit})'
  if stop['signal'] is not None:
    print('Job cancelled.', flush=True)
    return CANCELLED, 'cancelled'
  if error:
    print(f'Job failed ({error}).', flush=True)
    return FAILED, error
  status = primary.process.returncode
  if status == 0:
    print('Job succeeded.', flush=True)
    return SUCCEEDED, ''
  print(f'Job failed (primary {exit_text(status)}).', flush=True)
  return FAILED, f'primary {exit_text(status)}'


def _write_replicas(log_dir: str, replicas: List[Replica], network,
                    chosen: Dict[str, str]):
  """`<log_dir>/replicas.json`: which process runs which node where."""
  # Written beside, then renamed: a reader never sees half of it.
  with open(os.path.join(log_dir, 'replicas.json.partial'), 'w') as f:
    json.dump([{'replica': replica.name, 'node': replica.node,
                'address': replica.address, 'ip': network.ip(n),
                'pid': replica.process.pid,
                'namespace': network.namespace(n), 'mount': replica.mount,
                'python': chosen[replica.name]}
               for n, replica in enumerate(replicas)], f, indent=2)
  os.replace(os.path.join(log_dir, 'replicas.json.partial'),
             os.path.join(log_dir, 'replicas.json'))


def _end_replicas(replicas: List[Replica], grace_seconds: float,
                  mirror: Optional[BucketMirror], synced: float):
  """SIGTERM to every replica left, SIGKILL after `grace_seconds`."""
  for replica in replicas:
    replica.signal(signal.SIGTERM)
  deadline = time.time() + grace_seconds
  while (time.time() < deadline and
         any(replica.process.poll() is None for replica in replicas)):
    time.sleep(0.2)
    # What a stopping replica closes goes up as it would on Vertex AI,
    # even if the replica is killed later.
    if mirror is not None and time.time() - synced >= SYNC_SECONDS:
      mirror.sync()
      synced = time.time()
  for replica in replicas:
    replica.signal(signal.SIGKILL)
  for replica in replicas:
    replica.process.wait()


def main(argv):
  del argv
  if not FLAGS.package_dir or not os.path.isfile(
      os.path.join(FLAGS.package_dir, JOB_FILE)):
    sys.stderr.write('error: --package_dir must name a packaged job (a '
                     f'directory with {JOB_FILE}): package one with '
                     '--lp_launch_type=vertex_ai --dry_run --package_dir=DIR.\n')
    sys.exit(2)
  try:
    status = run(FLAGS.package_dir, FLAGS.replica_log_dir,
                 FLAGS.grace_seconds, FLAGS.job_id, FLAGS.storage_dir,
                 FLAGS.hosts, FLAGS.any_replica_fails, FLAGS.python,
                 FLAGS.replica_python, FLAGS.max_replica_restarts,
                 FLAGS.timeout_seconds)
  except ValueError as error:
    sys.stderr.write(f'error: {error}\n')
    sys.exit(2)
  sys.exit(status)


if __name__ == '__main__':
  app.run(main)
