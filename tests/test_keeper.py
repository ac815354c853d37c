"""The node keeper (launch/supervision/keeper.py) with real processes: a stand-in node
(a small script that writes its pid, as a node does, and waits) is started
under a keeper the way Launchpad starts one (`keeper.py <script> <its
arguments> --lp_task_id N`), and killed, frozen out, stopped, or left to
end by itself."""

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from launch.supervision import keeper

from launch.runs import faults as fault_records
from tests import helpers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KEEPER = os.path.join(ROOT, 'launch', 'supervision', 'keeper.py')
WAIT_SECONDS = 60

# The stand-in node: writes `<nodes>/<label>.pid` (as every node does as it
# starts) and its restart number, each whole before it can be seen (a
# reader that finds a file finds all of it), then sleeps, or ends with the
# status in the file `exit` of its directory, if there is one.
NODE = '''
import os, sys, time
directory, label = sys.argv[1], sys.argv[2]
def write_whole(path, text):
  with open(path + '.tmp', 'w') as f:
    f.write(text)
  os.replace(path + '.tmp', path)
write_whole(os.path.join(directory, 'nodes', label + '.pid'),
            str(os.getpid()))
write_whole(os.path.join(directory, 'restarts-%d' % os.getpid()),
            os.environ.get('APEX_NODE_RESTARTS', 'unset'))
path = os.path.join(directory, 'exit')
if os.path.exists(path):
  sys.exit(int(open(path).read()))
time.sleep(3600)
'''


def _wait(condition, what: str):
  return helpers.wait_for(condition, WAIT_SECONDS, what, period=0.05)


class _Kept:
  """A stand-in node `label` (task 1 of its group) under a keeper."""

  def __init__(self, directory, max_restarts: int = 2,
               window: float = 3600.0, label: str = 'actor_1',
               replica: bool = False):
    self.directory = str(directory)
    self.label = label
    os.makedirs(os.path.join(self.directory, 'nodes'), exist_ok=True)
    script = os.path.join(self.directory, 'node.py')
    with open(script, 'w') as f:
      f.write(NODE)
    settings = {'workdir': self.directory, 'labels': ['actor', label],
                'max_restarts': max_restarts, 'window': window}
    env = dict(os.environ, **{keeper.SETTINGS: json.dumps(settings)})
    if replica:
      # A Vertex AI replica's: `python -m launch.supervision.keeper <its command>`, in
      # a directory that holds the code, the node its task in CLUSTER_SPEC.
      env['CLUSTER_SPEC'] = json.dumps({'task': {'type': 'workerpool1',
                                                 'index': 1}})
      self.process = subprocess.Popen(
          [sys.executable, '-m', 'launch.supervision.keeper', script, self.directory,
           label], env=env, cwd=ROOT)
    else:
      self.process = subprocess.Popen(
          [sys.executable, '-S', KEEPER, script, self.directory, label,
           '--lp_task_id', '1'], env=env)

  def pid(self):
    try:
      with open(os.path.join(self.directory, 'nodes',
                             f'{self.label}.pid')) as f:
        return int(f.read())
    except (FileNotFoundError, ValueError):
      return None

  def new_pid(self, old):
    """The node's pid once its process is another than `old`'s."""
    return _wait(lambda: self.pid() not in (None, old) and self.pid(),
                 f'a process other than {old}')

  def restarts_told(self, pid) -> str:
    path = os.path.join(self.directory, f'restarts-{pid}')
    _wait(lambda: os.path.exists(path), f'{path}')
    with open(path) as f:
      return f.read()

  def faults(self):
    return [record for record in fault_records.read_faults(self.directory)
            if record.get('event') == 'fault']

  def close(self):
    if self.process.poll() is None:
      for process in psutil.Process(self.process.pid).children(
          recursive=True):
        process.kill()
      self.process.kill()
    self.process.wait()
    pid = self.pid()  # A node left by a keeper that has ended.
    try:
      process = psutil.Process(pid) if pid is not None else None
      if process is not None and 'node.py' in ' '.join(process.cmdline()):
        process.kill()
    except psutil.NoSuchProcess:
      pass


@pytest.fixture
def kept(tmp_path):
  started = []

  def start(**kwargs):
    started.append(_Kept(tmp_path, **kwargs))
    return started[-1]
  yield start
  for one in started:
    one.close()


def test_a_killed_node_is_started_again_as_the_same_node(kept):
  node = kept()
  first = node.new_pid(None)
  assert node.restarts_told(first) == '0'
  os.kill(first, signal.SIGKILL)
  second = node.new_pid(first)
  # The same command (its label is its argument), told it is a restart.
  assert node.restarts_told(second) == '1'
  faults = node.faults()
  assert len(faults) == 1, faults
  assert faults[0]['node'] == 'actor_1'
  assert faults[0]['cause'] == 'killed by SIGKILL'
  assert faults[0]['pid'] == first and faults[0]['restarts_before'] == 0
  assert faults[0]['gave_up'] is False
  assert keeper.gave_up(node.directory, 'actor_1') is None
  assert node.process.poll() is None
  # Its parent is the keeper, whose own parent this test is.
  assert psutil.Process(second).ppid() == node.process.pid


def test_the_cause_named_before_the_kill_is_the_faults_cause(kept):
  node = kept()
  first = node.new_pid(None)
  keeper.mark_fault(node.directory, 'actor_1', 'frozen: test')
  os.kill(first, signal.SIGKILL)
  node.new_pid(first)
  assert [fault['cause'] for fault in node.faults()] == ['frozen: test']
  # Taken: the next fault has its own cause.
  assert not os.path.exists(os.path.join(node.directory, 'nodes',
                                         'actor_1.fault'))


def test_past_max_restarts_within_the_window_the_keeper_gives_up(kept):
  node = kept(max_restarts=2)
  pid = node.new_pid(None)
  for _ in range(2):
    os.kill(pid, signal.SIGKILL)
    pid = node.new_pid(pid)
  os.kill(pid, signal.SIGKILL)
  # The third fault within the window: not started again.
  assert node.process.wait(WAIT_SECONDS) == 128 + signal.SIGKILL
  faults = node.faults()
  assert [fault['gave_up'] for fault in faults] == [False, False, True]
  assert [fault['restarts_before'] for fault in faults] == [0, 1, 2]
  reason = keeper.gave_up(node.directory, 'actor_1')
  assert reason.startswith(f"the actor_1's process (pid {pid}) has died "
                           '(killed by SIGKILL), its fault 3 within'), reason
  assert '--max_node_restarts=2' in reason
  # Each pause doubles the last.
  assert [fault.get('pause_seconds') for fault in faults] == [1.0, 2.0,
                                                               None]


def test_faults_older_than_the_window_do_not_count(kept):
  node = kept(max_restarts=1, window=1.0)
  pid = node.new_pid(None)
  for _ in range(3):  # Each more than the window after the last.
    started = time.time()
    os.kill(pid, signal.SIGKILL)
    pid = node.new_pid(pid)
    time.sleep(max(0.0, 1.5 - (time.time() - started)))
  assert node.process.poll() is None
  assert [fault['gave_up'] for fault in node.faults()] == [False] * 3


def test_a_node_that_ends_by_itself_or_at_the_programs_stop_stays_ended(
    kept, tmp_path):
  # The program's stop: Launchpad sends SIGTERM to the keeper and to the
  # node; the node's end is then not a fault.
  node = kept()
  pid = node.new_pid(None)
  node.process.send_signal(signal.SIGTERM)
  os.kill(pid, signal.SIGTERM)
  assert node.process.wait(WAIT_SECONDS) == 128 + signal.SIGTERM
  assert node.faults() == []
  assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == (
      psutil.STATUS_ZOMBIE)

  # Exit 0 (a node whose work is done) ends its keeper with it.
  with open(tmp_path / 'exit', 'w') as f:
    f.write('0')
  node = kept(label='evaluator')
  node.new_pid(None)
  assert node.process.wait(WAIT_SECONDS) == 0
  assert node.faults() == []


def test_a_failing_exit_is_a_fault_named_by_its_status(kept, tmp_path):
  with open(tmp_path / 'exit', 'w') as f:
    f.write('3')
  node = kept(max_restarts=1)
  assert node.process.wait(WAIT_SECONDS) == 3
  assert [(fault['cause'], fault['gave_up']) for fault in node.faults()] == [
      ('exit status 3', False), ('exit status 3', True)]


def test_the_node_dies_with_its_keeper(kept):
  node = kept()
  pid = node.new_pid(None)
  node.process.kill()
  node.process.wait()
  _, alive = psutil.wait_procs([psutil.Process(pid)], timeout=WAIT_SECONDS)
  assert not alive


def test_faults_of_this_launch_count_as_restarts(tmp_path):
  workdir = str(tmp_path)
  # A run of before kept every record in one file.
  with open(tmp_path / fault_records.ONE_FILE, 'w') as f:
    f.write(json.dumps({'time': 1.0, 'node': 'actor_1', 'event': 'fault',
                        'gave_up': False}) + '\n')
  fault_records.append_fault(workdir, {'node': 'learner', 'event': 'fault',
                                'gave_up': False}, 'learner')
  fault_records.launched(workdir)
  for node, gave_up in (('learner', False), ('actor_1', False),
                        ('learner', False), ('counter', True)):
    fault_records.append_fault(workdir, {'node': node, 'event': 'fault',
                                  'gave_up': gave_up}, node)
  fault_records.append_fault(workdir, {'node': 'learner', 'event': 'recovered'},
                      'coordinator')
  with open(tmp_path / fault_records.FAULTS / 'learner.jsonl', 'a') as f:
    f.write('{"node": "cut sh')  # A line a crash cut short.
  assert fault_records.restarts_by_node(workdir) == {'learner': 2, 'actor_1': 1}
  # Every writer's, in the order they were written.
  records = fault_records.read_faults(workdir)
  assert [(record.get('node'), record['event']) for record in records] == [
      ('actor_1', 'fault'), ('learner', 'fault'), (None, 'launch'),
      ('learner', 'fault'), ('actor_1', 'fault'), ('learner', 'fault'),
      ('counter', 'fault'), ('learner', 'recovered')]
  assert sorted(os.listdir(tmp_path / fault_records.FAULTS)) == [
      'actor_1.jsonl', 'coordinator.jsonl', 'counter.jsonl', 'launch.jsonl',
      'learner.jsonl']


def test_a_keeper_ends_its_node_when_the_coordinator_asks(kept):
  # On Vertex AI the coordinator cannot reach another machine's process: it
  # names the cause in the workdir, and the node's keeper ends the node.
  node = kept()
  first = node.new_pid(None)
  keeper.mark_fault(node.directory, 'actor_1', 'frozen: asked')
  second = node.new_pid(first)
  assert node.restarts_told(second) == '1'
  assert [fault['cause'] for fault in node.faults()] == ['frozen: asked']
  assert not psutil.pid_exists(first) or psutil.Process(first).status() == (
      psutil.STATUS_ZOMBIE)


def test_a_replicas_keeper_keeps_its_task_and_passes_the_replicas_end_on(
    kept):
  # A replica's keeper (launch.supervision.keeper as a module, in the container's
  # directory) keeps the node of its task in CLUSTER_SPEC (index 1:
  # actor_1), and its records go to that node's file.
  node = kept(replica=True)
  first = node.new_pid(None)
  os.kill(first, signal.SIGKILL)
  second = node.new_pid(first)
  assert [(fault['node'], fault['cause']) for fault in node.faults()] == [
      ('actor_1', 'killed by SIGKILL')]
  assert os.listdir(os.path.join(node.directory, fault_records.FAULTS)) == [
      'actor_1.jsonl']
  # Vertex AI ends a replica with SIGTERM to its command, the keeper: the
  # keeper passes it on to the node, and does not start it again.
  node.process.send_signal(signal.SIGTERM)
  assert node.process.wait(WAIT_SECONDS) == 128 + signal.SIGTERM
  assert not psutil.pid_exists(second) or psutil.Process(
      second).status() == psutil.STATUS_ZOMBIE
  assert len(node.faults()) == 1
