"""A node's keeper: runs the node's process, and starts it again when it dies.

Every node but the coordinator runs under a keeper of its own. Under
local_mp Launchpad starts it in the node's place (as its "interpreter",
`local.keeper_resources`):

    python keeper.py <Launchpad's process_entry.py> <its arguments>

and on Vertex AI it is the command of each replica but the primary
(`cloud.packaging`), in the container's working directory:

    python -m launch.supervision.keeper -m process_entry --data_file=job.pkl

The keeper starts the node's process with this machine's Python and the
same arguments, environment, working directory and network namespace as
Launchpad would, so that a node started again binds the same address, is
the same node of the program (an actor keeps its index), and restores its
own newest checkpoint as a resumed run's does. The others' calls to it wait
for it and go on (docs/checkpoints.md).

When the node's process ends:

* exit 0, or any end once the program is stopping (a SIGTERM reached the
  keeper: Launchpad's stop sends it to every process of the program): the
  keeper ends with it;
* any other end (killed by a signal: SIGKILL as the out-of-memory killer
  sends it; a crash; a non-zero exit; the coordinator ending a node whose
  heartbeats went silent, which it names in `<label>.fault` first) is a
  fault: written to `<workdir>/faults/<label>.jsonl`, and the node is
  started again after a short pause, unless it has faulted `max_restarts`
  times within `window` seconds already. Then the keeper gives up: it
  writes so to its faults and to `<workdir>/nodes/<label>.failed`, which
  the coordinator's watch under local_mp reads as the node's death (the
  program stops as failed, as it did before keepers), and ends with the
  node's status. On Vertex AI the replica then fails, and Vertex AI starts
  it again in place (five times; its sixth failure fails the job).

The coordinator asks a keeper to end its node (one that froze) by naming
the cause in `<workdir>/nodes/<label>.fault` (`mark_fault`): the keeper
looks for it every second. Under local_mp the coordinator also ends the
node itself; on Vertex AI, where it cannot reach another machine's
processes, the request reaches the keeper through the workdir on Cloud
Storage.

Each writer has a file of its own under `<workdir>/faults/` (a node's
keeper, the coordinator, the launches): Cloud Storage replaces an object
whole, so two replicas appending to one would lose lines.

The node's process is told how many times it has been started again
(`RESTARTS`, 0 at first), for its seeds. It dies with the keeper
(PR_SET_PDEATHSIG), and the keeper with nothing but SIGKILL: Ctrl-C is the
launcher's (every process of the program hears it), and SIGTERM is the
program's stop.

Standard library only (with `launch.runs.faults`, which is too), and light: a
keeper per node costs a few megabytes.
The coordinator imports it to ask for a node's end (`mark_fault`); the
fault records are `launch.runs.faults`'.
"""

import base64
import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Dict, List, Optional

if not __package__:
  # Run as a file without site-packages (local_mp: `python -S keeper.py`),
  # light: the fault records' module, standard library only too, from this
  # checkout.
  sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.dirname(
      os.path.abspath(__file__)))))
from launch.runs import faults as fault_records  # pylint: disable=g-import-not-at-top,wrong-import-position

# The keeper's settings, in its environment (JSON, or in an image's
# environment its URL-safe base64: `encode_settings`): {"workdir": ...,
# "labels": [label of task 0, ...], "max_restarts": N, "window": seconds}.
SETTINGS = 'APEX_KEEPER'
# How many times this node's process has been started again (its
# environment; absent: 0).
RESTARTS = 'APEX_NODE_RESTARTS'
NODES = 'nodes'  # <workdir>/nodes/<label>.{pid,fault,failed}
# How often a keeper looks for the coordinator's request to end its node.
MARK_POLL_SECONDS = 1.0
# Pauses before a start again: the first fault's, doubled for each fault
# within the window, at most the last.
FIRST_PAUSE_SECONDS = 1.0
MAX_PAUSE_SECONDS = 30.0


def is_kept() -> bool:
  """Whether this process is a node's under a keeper."""
  return RESTARTS in os.environ


def restarts() -> int:
  """How many times this node's process has been started again (0 outside
  a keeper)."""
  return int(os.environ.get(RESTARTS, '0'))


def _node_file(workdir: str, label: str, kind: str) -> str:
  return os.path.join(workdir, NODES, f'{label}.{kind}')


def mark_fault(workdir: str, label: str, cause: str):
  """Names the cause of the fault the caller is about to bring about in
  node `label` (the coordinator, before it ends a frozen node): its keeper
  writes it as the fault's cause."""
  _write_node_file(workdir, label, 'fault', cause)


def _write_node_file(workdir: str, label: str, kind: str, text: str):
  """Whole or not at all: written beside, then renamed."""
  path = _node_file(workdir, label, kind)
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(f'{path}.tmp', 'w') as f:
    f.write(text)
  os.replace(f'{path}.tmp', path)


def _marked(workdir: str, label: str) -> bool:
  return os.path.exists(_node_file(workdir, label, 'fault'))


def _take_marked_cause(workdir: str, label: str) -> Optional[str]:
  path = _node_file(workdir, label, 'fault')
  try:
    with open(path) as f:
      cause = f.read().strip()
    os.remove(path)
    return cause or None
  except FileNotFoundError:
    return None


def gave_up(workdir: str, label: str) -> Optional[str]:
  """Why the keeper of node `label` gave up on it, or None if it has not."""
  try:
    with open(_node_file(workdir, label, 'failed')) as f:
      return f.read().strip()
  except FileNotFoundError:
    return None


def clear(workdir: str, labels: List[str]):
  """Removes the keepers' marks of an earlier launch of the run."""
  for label in labels:
    for kind in ('fault', 'failed'):
      try:
        os.remove(_node_file(workdir, label, kind))
      except FileNotFoundError:
        pass


def describe_end(status: int) -> str:
  """A process's end, from Popen's return code."""
  if status < 0:
    try:
      name = signal.Signals(-status).name
    except ValueError:
      name = f'signal {-status}'
    return f'killed by {name}'
  return f'exit status {status}'


def _exit_status(status: int) -> int:
  """The keeper's exit status for its node's end (Popen's return code): the
  node's own, or 128 + the signal that killed it, as a shell's."""
  return status if status >= 0 else 128 - status


def die_with_parent():
  """Has this process killed (SIGKILL) when its parent dies, whatever kills
  the parent (Linux; elsewhere nothing)."""
  try:
    import ctypes  # pylint: disable=g-import-not-at-top
    ctypes.CDLL('libc.so.6').prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
  except (OSError, AttributeError):
    pass


class Keeper:
  """Keeps one node's process running; see the module docstring."""

  def __init__(self, command: List[str], label: str, workdir: str,
               max_restarts: int, window: float, forward_stop: bool = False):
    self._command = command
    self._forward_stop = forward_stop
    self._label = label
    self._workdir = workdir
    self._max_restarts = max_restarts
    self._window = window
    self._stopping = threading.Event()
    self._process: Optional[subprocess.Popen] = None
    self._faults: List[float] = []  # Times of the faults in the window.

  def on_stop(self, signum, frame):
    """The program's stop (SIGTERM): no start again from now on. Launchpad
    sends it to the node's process too; with `forward_stop` (a replica's
    end, which reaches the keeper only), the keeper does."""
    del frame
    self._stopping.set()
    if self._forward_stop and self._process is not None:
      try:
        self._process.send_signal(signum)
      except ProcessLookupError:
        pass

  def _start(self, restarts: int) -> subprocess.Popen:
    env = dict(os.environ)
    env.pop(SETTINGS, None)
    env[RESTARTS] = str(restarts)
    return subprocess.Popen(self._command, env=env,
                            preexec_fn=die_with_parent)

  def _wait(self) -> int:
    """The node's process's end; ended (SIGKILL) if the coordinator asks."""
    while True:
      try:
        return self._process.wait(MARK_POLL_SECONDS)
      except subprocess.TimeoutExpired:
        pass
      if _marked(self._workdir, self._label):
        try:
          self._process.kill()
        except ProcessLookupError:
          pass

  def run(self) -> int:
    # An earlier keeper's marks of this node (Vertex AI started its replica
    # again) are not this one's.
    clear(self._workdir, [self._label])
    fault_records.append_fault(self._workdir, {'node': self._label, 'event': 'start'},
                 self._label)
    restarts = 0
    while True:
      self._process = self._start(restarts)
      status = self._wait()
      if status == 0 or self._stopping.is_set():
        return _exit_status(status)
      now = time.time()
      cause = (_take_marked_cause(self._workdir, self._label) or
               describe_end(status))
      self._faults = [t for t in self._faults if now - t < self._window]
      self._faults.append(now)
      record = {'node': self._label, 'event': 'fault', 'cause': cause,
                'pid': self._process.pid, 'restarts_before': restarts}
      if len(self._faults) > self._max_restarts:
        reason = (f'the {self._label}\'s process (pid {self._process.pid}) '
                  f'has died ({cause}), its fault {len(self._faults)} within '
                  f'{self._window:.0f} s (--max_node_restarts='
                  f'{self._max_restarts}; its log, logs/{self._label}.log, '
                  'says why)')
        fault_records.append_fault(self._workdir, {**record, 'gave_up': True},
                     self._label)
        _write_node_file(self._workdir, self._label, 'failed', reason)
        print(f'Keeper: {reason}; not started again.', flush=True)
        return _exit_status(status)
      pause = min(MAX_PAUSE_SECONDS,
                  FIRST_PAUSE_SECONDS * 2 ** (len(self._faults) - 1))
      fault_records.append_fault(self._workdir, {**record, 'gave_up': False,
                                   'pause_seconds': pause}, self._label)
      print(f'Keeper: the {self._label} (pid {self._process.pid}) has died '
            f'({cause}); starting it again in {pause:.0f} s (restart '
            f'{restarts + 1}).', flush=True)
      if self._stopping.wait(pause):
        return _exit_status(status)
      restarts += 1


def _task_id(arguments: List[str]) -> int:
  for index, argument in enumerate(arguments):
    if argument == '--lp_task_id':
      return int(arguments[index + 1])
    if argument.startswith('--lp_task_id='):
      return int(argument.split('=', 1)[1])
  raise SystemExit('keeper: no --lp_task_id among the node\'s arguments')


def _replica_index() -> int:
  """This replica's index in its worker pool (Vertex AI's CLUSTER_SPEC)."""
  try:
    return int(json.loads(os.environ['CLUSTER_SPEC'])['task']['index'])
  except (KeyError, ValueError, TypeError) as error:
    raise SystemExit('keeper: neither --lp_task_id among the node\'s '
                     f'arguments nor a CLUSTER_SPEC naming its task ({error})'
                     ) from error


def settings(workdir: str, max_restarts: int,
             window: float) -> Optional[Dict]:
  """The keepers' settings for a run in `workdir` (SETTINGS, with each
  node group's `labels` added), or None for no keepers."""
  if max_restarts <= 0:
    return None
  return {'workdir': workdir, 'max_restarts': max_restarts, 'window': window}


def encode_settings(given: Dict) -> str:
  """`given` as an image's ENV line carries it: xmanager writes
  `ENV KEY="value"`, and Docker takes a value's quotes (and expands its
  `$`), so JSON would not survive; URL-safe base64 of it has neither."""
  return base64.urlsafe_b64encode(json.dumps(given).encode()).decode()


def read_settings(text: str) -> Dict:
  """The keeper's settings from its environment's SETTINGS: JSON, or
  `encode_settings`' base64 of it."""
  if text.lstrip().startswith('{'):
    return json.loads(text)
  return json.loads(base64.urlsafe_b64decode(text.encode()))


def _node_workdir(workdir: str) -> str:
  """The workdir as this process reaches it: gs://<bucket>/<path> under
  the replica's Cloud Storage mount (`launch.runs.storage`)."""
  if not workdir.startswith('gs://'):
    return workdir
  from launch.runs import storage  # pylint: disable=g-import-not-at-top
  return storage.node_path(workdir)


def main(arguments: List[str]) -> int:
  given = read_settings(os.environ[SETTINGS])
  local = any(argument.startswith('--lp_task_id') for argument in arguments)
  label = given['labels'][_task_id(arguments) if local else
                          _replica_index()]
  # Launchpad's stop under local_mp reaches every process itself; a
  # replica's end reaches the keeper only.
  keeper = Keeper([sys.executable] + arguments, label,
                  _node_workdir(given['workdir']), given['max_restarts'],
                  given['window'], forward_stop=not local)
  signal.signal(signal.SIGTERM, keeper.on_stop)
  signal.signal(signal.SIGINT, signal.SIG_IGN)
  return keeper.run()


if __name__ == '__main__':
  sys.exit(main(sys.argv[1:]))
