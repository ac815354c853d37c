"""What the tests share: the repository, its programs run as users run them,
a run's records, and process groups that must end with the test.

Imported by the test modules as `helpers` (pytest puts tests/ on the import path),
by tests/conftest.py, and as `tests.helpers` by the probes that tests run with
`python -m tests.<probe>` from the repository root.
"""

import csv
import io
import json
import math
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import psutil
import pytest

from launch.console.node_output import LAUNCH_HEADER

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Seconds until a program's nodes run and its learner trains: a loaded 2-core
# machine can take minutes to start a dozen TensorFlow processes. Only a
# program that never gets there fails on it.
START_TIMEOUT = 300
# Seconds a program may take to exit after Ctrl-C (SIGINT).
STOP_BOUND = 30


# --------------------------------------------------------------------------
# Cloud Storage, as the `cloud_storage` fixture emulates it.


def storage_client():
  """A Cloud Storage client of the emulator that STORAGE_EMULATOR_HOST
  names."""
  from google.cloud import storage  # pylint: disable=g-import-not-at-top
  assert os.environ.get('STORAGE_EMULATOR_HOST')
  return storage.Client()


def bucket_text(bucket: str, name: str) -> Optional[str]:
  """The text of object `name`, or None if there is none."""
  blob = storage_client().bucket(bucket).blob(name)
  return blob.download_as_bytes().decode() if blob.exists() else None


def bucket_names(bucket: str, prefix: str = '') -> List[str]:
  return [blob.name for blob in storage_client().list_blobs(bucket,
                                                             prefix=prefix)]


# --------------------------------------------------------------------------
# Commands, run as a user runs them.


def program_path(name: str) -> str:
  """programs/<name>.py, e.g. `apex_dqn`."""
  return os.path.join(ROOT, 'programs', f'{name}.py')


def script_command(name: str, *args: str) -> List[str]:
  """`python programs/<name>.py <args>`, e.g. `evaluate` or `plot`."""
  return [sys.executable, program_path(name), *args]


def program_command(name: str, *flags: str,
                    launch_type: str = 'local_mp') -> List[str]:
  """An Ape-X program (`apex_dqn`, `apex_dpg`):
  `python programs/<name>.py --lp_launch_type=<launch_type> <flags>`."""
  return script_command(name, f'--lp_launch_type={launch_type}', *flags)


def module_command(module: str, *args: str) -> List[str]:
  """`python -m tests.<module> <args>` (run from the repository root, which
  Python then puts on the path: the probe imports `agents` and `tests`)."""
  return [sys.executable, '-m', f'tests.{module}', *args]


# What a heartbeat watch (`launch.supervision.heartbeat`) logs once every
# node it watches has answered; until then a node that dies counts as
# starting, for up to 10 minutes. Fault tests wait for it before a kill.
HEARD_FROM_ALL = 'Heartbeats: every watched node has answered'
# A replay shard's node saying how many items its server starts with, in
# the shards' logs (`node_logs`): (shard, size).
SHARD_STARTS = re.compile(
    r"\[replay_(\d+)\] Replay starts with \{'priority_table': (\d+)\}")


def kill_group(process: subprocess.Popen, timeout: float = 30):
  """SIGKILL to the process group that `process` leads (started with
  start_new_session=True), then waits for `process` to exit."""
  try:
    os.killpg(process.pid, signal.SIGKILL)
  except ProcessLookupError:
    pass
  process.wait(timeout=timeout)


def wait_for(condition: Callable[[], object], timeout: float, what: str,
             period: float = 0.1):
  """`condition()`'s first true value, looked for every `period` seconds;
  the test fails once `timeout` seconds pass without one."""
  deadline = time.time() + timeout
  while time.time() < deadline:
    value = condition()
    if value:
      return value
    time.sleep(period)
  pytest.fail(f'Waited {timeout} s for {what}.')


def start_heartbeat_server(port: Optional[int] = None
                           ) -> Tuple[subprocess.Popen, int]:
  """tests/heartbeat_server.py in a session of its own, on `port` (None:
  one it picks): (its process, its port), once it serves. End it with
  `kill_group`."""
  process = held_heartbeat_server(port)
  return process, serve_held(process)


def held_heartbeat_server(port: Optional[int] = None) -> subprocess.Popen:
  """tests/heartbeat_server.py on `port` (None: one it picks), set up
  (imports done) but not serving until `serve_held` (a node that starts in
  milliseconds, such as one its keeper starts again)."""
  process = subprocess.Popen(
      [sys.executable, '-m', 'tests.heartbeat_server', '--held',
       *([] if port is None else [str(port)])],
      cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
      start_new_session=True)
  line = process.stdout.readline()
  if line.strip() != 'held':
    raise RuntimeError(f'tests/heartbeat_server.py printed {line!r}')
  return process


def serve_held(process: subprocess.Popen) -> int:
  """Lets a `held_heartbeat_server` serve; its port, once it does."""
  process.stdin.write('\n')
  process.stdin.flush()
  return int(process.stdout.readline())


def run(command: Sequence[str], timeout: float,
        stderr=subprocess.STDOUT, cwd=None) -> subprocess.CompletedProcess:
  """Runs `command` from the repository root (or `cwd`) in its own session
  and returns its exit status and output (stderr merged into stdout, unless
  `stderr` is subprocess.PIPE).

  `timeout` only catches a command that hangs: the test fails with the
  output so far. Whatever is left of the process group when the command
  ends, times out or the test is interrupted, is killed.
  """
  process = subprocess.Popen(list(command), stdout=subprocess.PIPE,
                             stderr=stderr, text=True, cwd=cwd or ROOT,
                             start_new_session=True)
  try:
    stdout, errors = process.communicate(timeout=timeout)
  except subprocess.TimeoutExpired:
    kill_group(process)
    stdout, errors = process.communicate()
    pytest.fail(f'Still running after {timeout} s: {" ".join(command)}\n'
                f'{(stdout or "")[-5000:]}{(errors or "")[-3000:]}')
  finally:
    kill_group(process)  # Nodes left behind, or an interrupted test.
  return subprocess.CompletedProcess(list(command), process.returncode,
                                     stdout, errors)


def run_program(name: str, *flags: str, launch_type: str = 'local_mp',
                timeout: float = 600,
                stderr=subprocess.STDOUT) -> subprocess.CompletedProcess:
  """An Ape-X program run to its end (see `run`)."""
  return run(program_command(name, *flags, launch_type=launch_type),
             timeout, stderr)


def run_script(name: str, *args: str, timeout: float = 600,
               stderr=subprocess.STDOUT) -> subprocess.CompletedProcess:
  """programs/<name>.py (not an Ape-X program) run to its end."""
  return run(script_command(name, *args), timeout, stderr)


def run_module(module: str, *args: str, timeout: float = 600,
               stderr=subprocess.STDOUT) -> subprocess.CompletedProcess:
  """tests/<module>.py run to its end with `python -m` (see `run`)."""
  return run(module_command(module, *args), timeout, stderr)


def probe_report(output: str, prefix: str) -> Dict:
  """The JSON a probe printed on its last line starting with `prefix`."""
  lines = [line for line in output.splitlines() if line.startswith(prefix)]
  assert lines, f'no {prefix!r} line:\n{output[-5000:]}'
  return json.loads(lines[-1][len(prefix):])


# Line-buffered standard output for every process of a program, as in a
# terminal. Under local_mp, Launchpad pipes each node's output through `sed`,
# which holds it in a 4 KB buffer when it writes to a file: a node's few
# lines (the coordinator's, the replay's) would only reach the file when the
# node ends, too late for a test that waits for one of them.
_LINE_BUFFERED = (['stdbuf', '-oL', '-eL'] if shutil.which('stdbuf')
                  else [])


def cpu_has_bfloat16() -> bool:
  """Whether /proc/cpuinfo's flags name bfloat16 arithmetic (AVX512_BF16,
  AMX-BF16)."""
  with open('/proc/cpuinfo') as f:
    for line in f:
      if line.startswith('flags'):
        return bool({'avx512_bf16', 'amx_bf16'} &
                    set(line.split(':', 1)[1].split()))
  return False


def node_logs(workdir) -> str:
  """What the nodes of a local run's newest launch wrote
  (<workdir>/logs/<label>.log, after its last launch header; the launcher's
  own lines in launcher.log, under local_mt what no node's thread wrote in
  program.log), every line prefixed with its log's label (`[actor_1] ...`);
  '' before any.

  A program's terminal (`Program.output`, a run's stdout) shows its status,
  the nodes' warnings and errors and the coordinator's records; everything
  else a node says (its log rows, 'Final counts', 'Actor 0 stops after')
  is read here."""
  directory = os.path.join(str(workdir), 'logs')
  if not os.path.isdir(directory):
    return ''
  lines = []
  for name in sorted(os.listdir(directory)):
    if name.endswith('.log'):
      label = name[:-len('.log')]
      with open(os.path.join(directory, name), errors='replace') as f:
        text = f.read()
      newest = text.rfind(LAUNCH_HEADER)
      if newest >= 0:
        text = text[text.find('\n', newest) + 1:]
      lines.extend(f'[{label}] {line}' for line in text.splitlines())
  return '\n'.join(lines) + '\n' if lines else ''


def check_stopped_in_order(output: str, workdir):
  """The coordinator's ordered stop left no node waiting on one that had
  gone: the stop watchdog (which prints a node's threads before it kills
  it) never acted, Launchpad killed nothing, no process aborted on the way
  out; neither the program's `output` nor its nodes' logs say so. (A
  traceback may be a test's own: an environment made to crash.)"""
  logs = node_logs(workdir)
  for sign in ('stop_watchdog:', 'most recent call first',
               'Fatal Python error', 'did not terminate in time'):
    assert sign not in output, (sign, output[-4000:])
    assert sign not in logs, (sign, logs[-4000:])


def kill_processes(processes: Iterable[psutil.Process]):
  """SIGKILLs each of `processes` that is still there."""
  for process in processes:
    try:
      process.kill()
    except psutil.NoSuchProcess:
      pass


class Program:
  """A command started in its own session (so that its whole process group
  can be signalled, as a terminal does on Ctrl-C), its output in a file,
  line by line as in a terminal. `close` kills whatever is left of it."""

  def __init__(self, command: Sequence[str], output_path,
               environment: Optional[Dict[str, str]] = None):
    """`environment`: variables set for the command, beside this
    process's own."""
    self.command = list(command)
    # Its nodes' logs (`node_logs`), where its --workdir flag names one.
    self.workdir = next((arg[len('--workdir='):] for arg in self.command
                         if arg.startswith('--workdir=')), None)
    self.output_path = str(output_path)
    self._output = open(self.output_path, 'w')  # pylint: disable=consider-using-with
    self.process = subprocess.Popen(  # pylint: disable=consider-using-with
        _LINE_BUFFERED + self.command, stdout=self._output,
        stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True,
        env={**os.environ, **(environment or {})})
    self.pgid = self.process.pid
    self.seen: Dict[int, psutil.Process] = {}

  def output(self) -> str:
    with open(self.output_path, errors='replace') as f:
      return f.read()

  def logs(self) -> str:
    """Its nodes' logs (`node_logs`)."""
    assert self.workdir, self.command
    return node_logs(self.workdir)

  def tail(self, characters: int = 4000) -> str:
    return self.output()[-characters:]

  def note_processes(self):
    """Records the launcher and all its descendants (node processes)."""
    try:
      launcher = psutil.Process(self.process.pid)
      processes = [launcher] + launcher.children(recursive=True)
    except psutil.NoSuchProcess:
      return
    for process in processes:
      self.seen.setdefault(process.pid, process)

  def alive(self) -> List[psutil.Process]:
    """Processes seen so far that still run (zombies count as ended)."""
    alive = []
    for process in self.seen.values():
      try:
        if (process.is_running() and
            process.status() != psutil.STATUS_ZOMBIE):
          alive.append(process)
      except psutil.NoSuchProcess:
        pass
    return alive

  def wait_until(self, condition: Callable[[], object], timeout: float,
                 what: str, poll_seconds: float = 0.5):
    """Polls `condition` until it holds and returns its value. Fails if the
    program exits first, or if it never holds within `timeout` seconds (a
    bound for a program that is stuck, not a measure of its speed)."""
    deadline = time.monotonic() + timeout
    while True:
      self.note_processes()
      value = condition()
      if value:
        return value
      if self.process.poll() is not None:
        pytest.fail(f'The program exited ({self.process.returncode}) while '
                    f'waiting for {what}:\n{self.tail()}')
      if time.monotonic() > deadline:
        pytest.fail(f'No {what} within {timeout} s:\n{self.tail()}')
      time.sleep(poll_seconds)

  def wait_exit(self, timeout: float, what: str = 'its end') -> int:
    """The exit status, once the program has ended by itself."""
    try:
      return self.process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
      pytest.fail(f'Still running {timeout} s after {what}:\n{self.tail()}')

  def signal_group(self, number: int):
    os.killpg(self.pgid, number)

  def interrupt(self, stop_bound: float = STOP_BOUND) -> str:
    """Ctrl-C: SIGINT to the program's process group. Checks that it exits
    0 within `stop_bound` seconds, stopped in order, and leaves no process;
    returns its output."""
    self.note_processes()
    started = time.monotonic()
    self.signal_group(signal.SIGINT)
    returncode = self.wait_exit(stop_bound, 'SIGINT')
    took = time.monotonic() - started
    output = self.output()
    assert returncode == 0, (returncode, output[-4000:])
    check_stopped_in_order(output, self.workdir)
    assert 'The program stopped: stopped by the user (Ctrl-C).' in output, (
        output[-4000:])
    left = self.alive()
    assert not left, [(p.pid, p.cmdline()) for p in left]
    print(f'stopped by SIGINT in {took:.1f} s')
    return output

  def close(self):
    """Kills the whole process group and every process seen in it."""
    kill_processes(self.seen.values())
    try:
      kill_group(self.process)
    finally:
      self._output.close()


# --------------------------------------------------------------------------
# A run's records.


def actor_labels(num_actors: int) -> List[str]:
  """The actors' names in logs/ and nodes/ (Acme's convention: the first
  actor writes logs/actor/, the others logs/actor_<i>/)."""
  return ['actor'] + [f'actor_{i}' for i in range(1, num_actors)]


def rows_from(text: str) -> List[Dict[str, str]]:
  """The complete rows of a CSV log's text (not a row being written)."""
  if not text.endswith('\n'):
    text = text[:text.rfind('\n') + 1]
  return [row for row in csv.DictReader(io.StringIO(text))
          if None not in row.values() and '' not in row.values()]


def rows(workdir, label: str) -> List[Dict[str, str]]:
  """The complete rows of a node's CSV log (<workdir>/logs/<label>/logs.csv;
  [] before it exists), also while the node writes it."""
  path = os.path.join(str(workdir), 'logs', label, 'logs.csv')
  if not os.path.exists(path):
    return []
  with open(path) as f:
    return rows_from(f.read())


def last(workdir, label: str, column: str) -> int:
  """`column` of the node's newest complete row (0 before any)."""
  found = rows(workdir, label)
  return int(float(found[-1][column])) if found else 0


def check_private_files(workdir, directory_mode: int = 0o700,
                        file_mode: int = 0o600):
  """The workdir and everything in it have the modes of
  --workdir_access=user (by default): the user's alone."""
  checked = 0
  for directory, _, files in os.walk(workdir):
    assert stat.S_IMODE(os.stat(directory).st_mode) == directory_mode, (
        directory)
    for name in files:
      path = os.path.join(directory, name)
      if not os.path.islink(path):
        assert stat.S_IMODE(os.stat(path).st_mode) == file_mode, path
        checked += 1
  assert checked > 10, checked  # Logs, checkpoints, records, pid files.


def read_pid(path) -> Optional[int]:
  """The PID in a pid file, None before it is written."""
  if not os.path.exists(path):
    return None
  with open(path) as f:
    text = f.read().strip()
  return int(text) if text else None


def pid(workdir, label: str) -> Optional[int]:
  """The PID of a node (under local_mp), from <workdir>/nodes/<label>.pid;
  None before it is written."""
  return read_pid(os.path.join(str(workdir), 'nodes', f'{label}.pid'))


def has_tensorflow(pid: int) -> bool:
  """Whether process `pid` has imported TensorFlow's Python package (its
  bindings' library; TensorFlow's framework library alone comes with
  Courier's)."""
  with open(f'/proc/{pid}/maps') as f:
    return '_pywrap_tensorflow_internal' in f.read()


def replay_checkpoints(workdir, label: str = 'replay',
                       complete: bool = True) -> List[str]:
  """The names of a replay node's Reverb checkpoints in
  <workdir>/checkpoints/<label>: those with their DONE marker, or (complete
  False) every one begun, finished or not."""
  directory = os.path.join(str(workdir), 'checkpoints', label)
  if not os.path.isdir(directory):
    return []
  return sorted(name for name in os.listdir(directory)
                if not complete or
                os.path.exists(os.path.join(directory, name, 'DONE')))


def wait_for_a_new_replay_checkpoint(program, workdir, label: str = 'replay'):
  """Waits for a complete replay checkpoint begun after this call: one that
  holds what the table held now. (One already there, or being written, may
  be older than the items the caller has seen the learner use.)"""
  before = set(replay_checkpoints(workdir, label, complete=False))
  program.wait_until(
      lambda: set(replay_checkpoints(workdir, label)) - before,
      START_TIMEOUT, f'a {label} checkpoint begun after this point')


def every_node_logged(workdir, num_actors: int, evaluator: bool = True
                      ) -> bool:
  """Whether the learner has logged a row after an update, every actor a
  row, and the evaluator (if any) an episode of parameters the learner had
  updated: what a run must have done before it is stopped, when a test
  checks every node's logs. No node waits for another to log, so a test
  waits for this rather than assume it of a run stopped by a step limit."""
  if last(workdir, 'learner', 'learner_steps') <= 0:
    return False
  if not all(rows(workdir, label) for label in actor_labels(num_actors)):
    return False
  return not evaluator or any(int(row['learner_steps']) > 0
                              for row in rows(workdir, 'evaluator'))


# The columns of every program's logs (the learner's, and those of each
# episode's row of the actors and the evaluator).
LEARNER_COLUMNS = ('actor_steps', 'learner_steps', 'loss', 'steps_per_second')
EPISODE_COLUMNS = ('actor_steps', 'learner_steps', 'episode_return',
                   'steps_per_second')


def check_tensorboard(workdir, label: str):
  """The node wrote TensorBoard events (<workdir>/tensorboard/<label>/)."""
  events = os.listdir(os.path.join(str(workdir), 'tensorboard', label))
  assert any(name.startswith('events.out.tfevents') for name in events), (
      label, events)


def check_learner_logs(workdir, columns: Sequence[str] = (),
                       losses: Sequence[str] = ('loss',)):
  """The learner logged rows (also to TensorBoard) with its columns and
  the program's `columns`, after updates, with finite `losses`."""
  learner = rows(workdir, 'learner')
  assert learner, 'the learner logged nothing'
  for column in LEARNER_COLUMNS + tuple(columns):
    assert column in learner[0], column
  assert int(learner[-1]['learner_steps']) > 0
  for loss in losses:
    assert all(math.isfinite(float(row[loss])) for row in learner), loss
  check_tensorboard(workdir, 'learner')


def check_episode_logs(workdir, label: str) -> List[Dict[str, str]]:
  """An actor's or the evaluator's rows: some, with the episode columns, and
  TensorBoard events. Returns the rows."""
  found = rows(workdir, label)
  assert found, f'{label} logged nothing'
  for column in EPISODE_COLUMNS:
    assert column in found[0], (label, column)
  check_tensorboard(workdir, label)
  return found


def actors_rows(workdir, num_actors: int) -> Dict[str, List[Dict[str, str]]]:
  """{actor: its rows} of the actors that logged an episode, of a run that
  ended at a step limit: at least one did. Which ones did depends on the
  machine, not the program: on a busy one an actor can start after the
  others have played the whole budget."""
  found = {label: rows(workdir, label) for label in actor_labels(num_actors)}
  found = {label: rows_of for label, rows_of in found.items() if rows_of}
  assert found, 'no actor logged an episode'
  return found


def check_every_node_logs(workdir, num_actors: int):
  """Every node's logs, of a run stopped once `every_node_logged`: the
  learner's, each actor's and the evaluator's, which reports after the
  learner has updated the parameters."""
  check_learner_logs(workdir)
  for label in actor_labels(num_actors):
    check_episode_logs(workdir, label)
  evaluator = check_episode_logs(workdir, 'evaluator')
  assert any(int(row['learner_steps']) > 0 for row in evaluator), evaluator


def check_probe_report(seen: Dict, probe_learner_steps: int = 30):
  """What tests/program_probe.py saw in the replay table, twice,
  `probe_learner_steps` learner steps apart."""
  assert seen['learner_steps_between'] >= probe_learner_steps, seen
  # Actor-side priorities: items enter with different priorities...
  assert seen['distinct_priorities'] > seen['sampled_items'] // 2, seen
  # ... and the learner rewrites the priorities of the items it trained on.
  assert seen['common_keys'] > 0, seen
  assert seen['changed_keys'] > 0, seen


def run_to_step_limit(name: str, workdir, flags: Sequence[str], limit: int,
                      launch_type: str = 'local_mp') -> str:
  """An Ape-X program run until `--max_actor_steps=<limit>` stops it, with
  a samples-per-insert rate limit: the actors cannot take their steps
  without the learner's updates, so the learner has trained by then. Checks
  that it stopped cleanly (exit 0, in order: `check_stopped_in_order`);
  returns its output."""
  result = run_program(name, f'--workdir={workdir}', *flags,
                       f'--max_actor_steps={limit}', '--samples_per_insert=4',
                       launch_type=launch_type)
  assert result.returncode == 0, result.stdout[-5000:]
  check_stopped_in_order(result.stdout, workdir)
  return result.stdout


def interrupt_once_every_node_logged(program: Program, workdir,
                                     num_actors: int) -> str:
  """Ctrl-C (`Program.interrupt`) once `every_node_logged`; the output."""
  program.wait_until(lambda: every_node_logged(workdir, num_actors),
                     START_TIMEOUT, 'a log row of every node')
  return program.interrupt()


def own_actor_steps(workdir) -> Dict[int, int]:
  """{actor id: its own environment steps}, from the line each actor logs
  when it stops (`node_logs`; of a run launched once)."""
  found = re.findall(r'Actor (\d+) stops after (\d+) environment steps',
                     node_logs(workdir))
  steps = {int(actor): int(count) for actor, count in found}
  assert len(steps) == len(found), found  # One line per actor.
  return steps


def final_counts(workdir) -> Dict[str, int]:
  """The counter's counts at its final save (its 'Final counts' line in
  `node_logs`; of a run launched once)."""
  logs = node_logs(workdir)
  found = re.findall(r'Final counts: (\{.*?\})', logs)
  assert len(found) == 1, logs[-5000:]
  return json.loads(found[0])


def check_stopped_at_step_limit(workdir, limit: int, episode_length: int,
                                num_actors: int = 2):
  """The coordinator stopped the program at its step limit (it polls once a
  second; actors send their counts once a second), and the last counts (the
  learner's final row, after the stop) exceed it by no more than a few
  seconds of acting at the actors' logged rates. Actors count an episode's
  steps when it ends, and their open episodes' as they stop: up to an
  episode (at most `episode_length`) each on top.

  What a step limit does not guarantee is that every actor had logged (or
  even started) before it: an actor without a log row may have added all of
  its own steps (from its 'stops after' line in its log) on top.
  """
  with open(os.path.join(str(workdir), 'stop.json')) as f:
    stop = json.load(f)
  assert stop['failed'] is False, stop
  stopped_at = stop['counts']['actor_steps']
  assert stop['reason'] == (f'reached {stopped_at} actor steps (limit '
                            f'{limit})')
  own = own_actor_steps(workdir)
  rate, unlogged = 0.0, 0
  for actor_id, label in enumerate(actor_labels(num_actors)):
    logged = rows(workdir, label)
    if logged:
      rate += max(float(row['steps_per_second']) for row in logged)
    else:
      unlogged += own.get(actor_id, 0)
  episodes = num_actors * episode_length
  assert limit <= stopped_at <= limit + episodes + 3 * rate + unlogged, (
      stopped_at, rate, unlogged)
  final = max(int(row['actor_steps']) for row in rows(workdir, 'learner'))
  assert final <= stopped_at + episodes + 5 * rate + unlogged, (
      final, stopped_at, rate, unlogged)
