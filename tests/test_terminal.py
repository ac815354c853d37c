"""What a person sees of a local run: its status, the lines that matter, and
every node's log in the workdir.

The node output's sorting and the status are checked on lines and logs made
here; then whole programs run as people run them: in a terminal (tmux,
whose screen is read as a person reads it, and typed into), and with
standard output a file (as under CI or nohup), as processes (local_mp) and
as threads of one process (local_mt).
"""

import csv
import io
import logging
import os
import re
import shutil
import subprocess
import threading
import time
import uuid

import psutil
import pytest
from absl import logging as absl_logging

import helpers
from launch.supervision import keeper
from launch.runs import faults as fault_records
from launch.console import node_output
from launch.console import status as status_lib
from launch.console import terminal as terminal_lib

# A NaN observation every 97 steps, a crash every 1,000.
FAULTY_ENV = 'gym:tests.faulty_envs:FaultyCartPole-v0'
NAN_WARNING = r'warning: Actor \d: the observation is not finite'
SMALL_RUN = ['--preset=cartpole_smoke', '--num_actors=2']


# --------------------------------------------------------------------------
# The node output: which lines a node's log keeps, which the terminal shows.


def _stream(tmp_path, lines):
  """Feeds `lines` to a node's stream; (its log's lines, the lines shown)."""
  shown = []
  stream = node_output._Stream(str(tmp_path / 'actor_1.log'), 'actor_1',  # pylint: disable=protected-access
                               shown.append)
  for line in lines:
    stream.line(line)
  stream.close()
  logged = (tmp_path / 'actor_1.log').read_text().splitlines()
  return logged, shown


def test_a_node_log_keeps_every_line_and_the_terminal_shows_what_matters(
    tmp_path):
  lines = [
      '2026-01-02 03:04:05.678901: I tensorflow/core/util/util.cc:159] '
      'Experimental oneDNN custom operations are on.',
      'I0102 03:04:05.678901 140000 courier_utils.py:50] Binding: run',
      'W0102 03:04:06.000001 140000 nodes.py:263] Actor 1: a NaN; dropped.',
      'E0102 03:04:07.000001 140000 nodes.py:267] Actor 1: environment 0 '
      'failed: boom',
      'Traceback (most recent call last):',
      '  File "x.py", line 1, in <module>',
      'RuntimeError: boom',
      'I0102 03:04:08.000001 140000 coordinator.py:250] Stopping: done.',
      'A line the node printed.',
      'Traceback (most recent call last):',
      '  File "y.py", line 2, in f',
      'ValueError: bad value',
      'stop_watchdog: process 12 still runs 5 s after the stop request',
  ]
  logged, shown = _stream(tmp_path, lines)
  assert logged[0].startswith(node_output.LAUNCH_HEADER)
  assert logged[1:] == lines
  assert shown == [
      '[actor_1] warning: Actor 1: a NaN; dropped.',
      # Its traceback is the record's own: not shown again.
      '[actor_1] error: Actor 1: environment 0 failed: boom',
      '[actor_1] Stopping: done.',
      '[actor_1] ValueError: bad value (Traceback in logs/actor_1.log)',
      '[actor_1] stop_watchdog: process 12 still runs 5 s after the stop '
      'request',
  ]


def test_a_relaunch_appends_to_the_logs_after_a_header(tmp_path):
  _stream(tmp_path, ['first launch'])
  logged, _ = _stream(tmp_path, ['second launch'])
  assert [line for line in logged
          if not line.startswith(node_output.LAUNCH_HEADER)] == [
              'first launch', 'second launch']
  assert sum(line.startswith(node_output.LAUNCH_HEADER)
             for line in logged) == 2


def test_lines_go_to_their_nodes_log_by_launchpads_prefix(tmp_path):
  output = node_output.NodeOutput(str(tmp_path),
                                  {('replay', 0): 'replay',
                                   ('actor', 1): 'actor_1'})
  (tmp_path / 'logs').mkdir()
  shown = []
  output._show = shown.append  # pylint: disable=protected-access
  for line in [
      # As Launchpad's current_terminal decorates a node's line, here one
      # that a countdown redrew with '\r'.
      '\x1b[1;33m[replay/0] Waiting for workers to stop for 9s.\r'
      'W0102 03:04:05.000001 1400 replay_nodes.py:98] Checkpoint failed.'
      '\x1b[0;0m',
      '\x1b[1;36m[actor/1] Actor 1 stops after 10 environment steps\x1b[0;0m',
      'A line of the launcher itself',
  ]:
    output._line(line)  # pylint: disable=protected-access
  assert shown == ['[replay] warning: Checkpoint failed.']
  logs = helpers.node_logs(tmp_path)
  assert logs.splitlines() == [
      '[actor_1] Actor 1 stops after 10 environment steps',
      '[launcher] A line of the launcher itself',
      '[replay] W0102 03:04:05.000001 1400 replay_nodes.py:98] Checkpoint '
      'failed.']


def test_under_local_mt_a_nodes_threads_write_to_its_log(tmp_path,
                                                        monkeypatch):
  # The nodes are threads of one process: what a node's thread writes, and
  # a thread it starts, goes to the node's log; other threads' lines, as
  # they are.
  output = node_output.NodeOutput(str(tmp_path), {}, threads=True)
  (tmp_path / 'logs').mkdir()
  shown = []
  output._show = shown.append  # pylint: disable=protected-access
  monkeypatch.setattr(threading.Thread, 'start',
                      node_output._started_as_its_starters(  # pylint: disable=protected-access
                          threading.Thread.start))
  others = io.StringIO()
  stream = node_output._NodeThreadsLines(others, output._log)  # pylint: disable=protected-access
  handler = logging.StreamHandler(stream)
  handler.setFormatter(absl_logging.PythonFormatter())
  logger = logging.getLogger('test_terminal.node')
  logger.addHandler(handler)
  monkeypatch.setattr(logger, 'propagate', False)

  def learner():
    node_output.name_node_thread('learner')
    print('Learner starts', end='', file=stream)
    # A thread of the learner's, as a replay shard's reader is.
    reader = threading.Thread(target=logger.warning, args=('A shard is slow.',))
    reader.start()
    reader.join()
    print(' at step 0.', file=stream)

  node = threading.Thread(target=learner, name='learner')
  node.start()
  node.join()
  logger.removeHandler(handler)
  print('A line of the launcher itself', file=stream)
  assert others.getvalue() == 'A line of the launcher itself\n'
  assert shown == ['[learner] warning: A shard is slow.']
  logs = helpers.node_logs(tmp_path).splitlines()
  assert logs[1:] == ['[learner] Learner starts at step 0.'], logs
  assert re.match(r'\[learner\] W\d{4} .*\] A shard is slow\.$', logs[0])


# --------------------------------------------------------------------------
# The status, read from logs written here.


def _write_rows(workdir, label, rows):
  directory = workdir / 'logs' / label
  directory.mkdir(parents=True, exist_ok=True)
  with open(directory / 'logs.csv', 'w', newline='') as f:
    writer = csv.DictWriter(f, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)


def test_the_status_reads_each_group_from_the_logs(tmp_path):
  now = time.time()
  _write_rows(tmp_path, 'actor', [
      {'actor_steps': 900, 'actor_episodes': 9, 'episode_return': 10.0,
       'steps_per_second': 40.0, 'walltime': now - 20},
      {'actor_steps': 1000, 'actor_episodes': 10, 'episode_return': 20.0,
       'steps_per_second': 50.0, 'walltime': now - 10}])
  _write_rows(tmp_path, 'actor_1', [
      {'actor_steps': 1200, 'actor_episodes': 12, 'episode_return': 40.0,
       'steps_per_second': 30.0, 'walltime': now - 5}])
  _write_rows(tmp_path, 'learner', [
      {'actor_steps': 1100, 'learner_steps': 300, 'loss': 0.25,
       'steps_per_second': 12.5, 'walltime': now - 5}])
  # Two rounds of 2 episodes and one episode of a third round.
  _write_rows(tmp_path, 'evaluator', [
      {'evaluator_episodes': episode, 'episode_return': value,
       'walltime': now - 7230 + episode}
      for episode, value in ((1, 1.0), (2, 3.0), (3, 100.0), (4, 300.0),
                             (5, 7.0))])
  status = status_lib.RunStatus(str(tmp_path), ['actor', 'actor_1'],
                                evaluation_episodes=2, max_actor_steps=5000)
  lines = {line.name: line.figures for line in status.lines()}
  assert lines['actors'] == ['1,200 steps', '80.0/s', '12 episodes',
                             'return 30 (2 of 2 logged)']
  assert lines['learner'] == ['300 updates', '12.5/s', 'loss 0.25']
  assert lines['evaluator'][0] == 'return 200 (2 episodes)'
  assert lines['evaluator'][1] == '2h00m ago'  # Its last episode's end.
  assert lines['run'][-1] == str(tmp_path)
  plain = terminal_lib.plain(status.lines())
  assert plain.startswith('status: actors 1,200 steps, 80.0/s, 12 episodes')


def test_the_status_takes_the_evaluators_round_by_its_name(tmp_path):
  # A relaunch restored the evaluator's count from an older checkpoint, so
  # counts repeat; a stop cut the second round short. The rows name their
  # round, and the newest complete one is the third (returns 5 and 7), not
  # whatever the counts would group.
  now = time.time()
  rows = []
  for started, episode, value in ((100.0, 1, 1.0), (100.0, 2, 3.0),
                                  (200.0, 3, 100.0),
                                  (300.0, 3, 5.0), (300.0, 4, 7.0),
                                  (400.0, 5, 50.0)):
    rows.append({'evaluator_episodes': episode, 'episode_return': value,
                 'round_started': now - 1000 + started,
                 'walltime': now - 60 + episode})
  # The oldest rows were logged before rows named their round.
  rows.insert(0, {'evaluator_episodes': 0, 'episode_return': 9.0,
                  'round_started': '', 'walltime': now - 70})
  _write_rows(tmp_path, 'evaluator', rows)
  status = status_lib.RunStatus(str(tmp_path), ['actor'],
                                evaluation_episodes=2)
  lines = {line.name: line.figures for line in status.lines()}
  assert lines['evaluator'][0] == 'return 6 (2 episodes)'


def test_the_run_line_counts_this_launchs_restarts_by_node(tmp_path):
  status = status_lib.RunStatus(str(tmp_path), ['actor'])
  assert 'restarts' not in ' '.join(
      {line.name: line.figures for line in status.lines()}['run'])
  # An earlier launch's fault, then this launch's: the keepers' records
  # (launch/supervision/keeper.py). A fault given up on is no restart.
  fault_records.append_fault(str(tmp_path), {'node': 'counter', 'event': 'fault'},
                      'counter')
  fault_records.launched(str(tmp_path))
  for node, gave_up in (('learner', False), ('actor_1', False),
                        ('learner', False), ('evaluator', True)):
    fault_records.append_fault(str(tmp_path), {'node': node, 'event': 'fault',
                                        'gave_up': gave_up}, node)
  run = {line.name: line.figures for line in status.lines()}['run']
  assert run[-2:] == ['3 restarts (actor_1 1, learner 2)', str(tmp_path)]


def test_a_program_of_workers_without_replay_or_evaluator(tmp_path):
  status = status_lib.RunStatus(str(tmp_path), ['actor'], members='workers')
  names = [line.name for line in status.lines()]
  assert names == ['workers', 'learner', 'run']


# --------------------------------------------------------------------------
# Whole programs, in a terminal and into a file.


class _Tmux:
  """A shell in a terminal of its own (a tmux server of this test's, a
  fixed size), read as a person reads its screen, typed into."""

  def __init__(self, tmp_path):
    self._socket = f'test-{uuid.uuid4().hex[:12]}'
    self._seen = {}
    subprocess.run(
        ['tmux', '-L', self._socket, '-f', '/dev/null', 'new-session', '-d',
         '-x', '150', '-y', '45', '-c', helpers.ROOT,
         f'env -i PATH={os.environ["PATH"]} HOME={tmp_path} '
         'TERM=xterm-256color '
         'PS1="shell$ " bash --norc --noprofile'], check=True)
    self.shell = int(self._tmux('display-message', '-p', '#{pane_pid}'))

  def _tmux(self, *args) -> str:
    return subprocess.run(['tmux', '-L', self._socket, *args], check=True,
                          capture_output=True, text=True).stdout.strip()

  def type(self, *keys: str):
    self._tmux('send-keys', *keys)

  def screen(self) -> str:
    """What the screen shows, with the lines scrolled off it."""
    return self._tmux('capture-pane', '-p', '-J', '-S', '-200')

  def cursor_shown(self) -> bool:
    return self._tmux('display-message', '-p', '#{cursor_flag}') == '1'

  def note_processes(self):
    try:
      for process in psutil.Process(self.shell).children(recursive=True):
        self._seen.setdefault(process.pid, process)
    except psutil.NoSuchProcess:
      pass

  def alive(self):
    return [process for process in self._seen.values()
            if process.is_running() and
            process.status() != psutil.STATUS_ZOMBIE]

  def wait_until(self, condition, timeout: float, what: str):
    """Polls the screen until `condition(screen)` holds; its value. A bound
    for a program that is stuck, not a measure of its speed."""
    deadline = time.monotonic() + timeout
    while True:
      self.note_processes()
      screen = self.screen()
      value = condition(screen)
      if value:
        return value
      assert time.monotonic() < deadline, f'no {what}:\n{screen}'
      time.sleep(0.5)

  def close(self):
    helpers.kill_processes(self._seen.values())
    subprocess.run(['tmux', '-L', self._socket, 'kill-server'], check=False,
                   capture_output=True)


def _actor_steps(screen: str):
  """The actors' steps on the status's newest actors line, or None."""
  found = re.findall(r'^actors +([\d,]+) steps', screen, re.MULTILINE)
  return int(found[-1].replace(',', '')) if found else None


@pytest.mark.slow
@pytest.mark.skipif(shutil.which('tmux') is None, reason='needs tmux')
def test_a_person_watches_a_run_in_a_terminal_and_stops_it(tmp_path):
  workdir = tmp_path / 'run'
  terminal = _Tmux(tmp_path)
  try:
    command = ' '.join(helpers.program_command(
        'apex_dqn', f'--workdir={workdir}', *SMALL_RUN))
    terminal.type(command, 'Enter')
    # The status's counts rise as the run goes.
    first = terminal.wait_until(lambda screen: _actor_steps(screen),
                                helpers.START_TIMEOUT, 'actor steps')
    terminal.wait_until(lambda screen: (_actor_steps(screen) or 0) > first,
                        helpers.START_TIMEOUT, 'more actor steps')
    screen = terminal.screen()
    assert f'{workdir}/logs/<node>.log' in screen, screen
    for group in ('learner', 'replay', 'evaluator', 'run'):
      assert re.search(rf'^{group} ', screen, re.MULTILINE), (group, screen)
    # One status, redrawn in place: its lines appear once on the screen.
    assert len(re.findall(r'^actors ', screen, re.MULTILINE)) == 1, screen
    # No node's raw lines, nor TensorFlow's start-up.
    for noise in ('Binding:', 'oneDNN', 'Courier server', '[learner/0]'):
      assert noise not in screen, (noise, screen)
    terminal.type('C-c')
    screen = terminal.wait_until(
        lambda screen: re.search(r'resumes the run\.\n+shell\$ *$', screen)
        and screen, helpers.START_TIMEOUT, 'the stop and a shell prompt')
    assert 'The program stopped: stopped by the user (Ctrl-C).' in screen
    assert 'Stopping: the actors and the evaluator' in screen
    assert terminal.cursor_shown()
    terminal.type('echo "exit status $?"', 'Enter')
    terminal.wait_until(lambda screen: 'exit status 0' in screen, 30,
                        'the exit status')
    _, left = psutil.wait_procs(terminal.alive(), timeout=helpers.STOP_BOUND)
    assert not left, [(p.pid, p.cmdline()) for p in left]
    helpers.check_stopped_in_order(screen, workdir)
  finally:
    terminal.close()
  assert 'Binding:' in (workdir / 'logs' / 'learner.log').read_text()


@pytest.mark.slow
@pytest.mark.parametrize('launch_type', ['local_mp', 'local_mt'])
def test_into_a_file_the_status_is_a_line_and_warnings_name_their_node(
    tmp_path, launch, launch_type):
  # Under local_mt the nodes are threads of one process, whose lines are
  # sorted by thread: the same logs and lines as local_mp's.
  workdir = tmp_path / 'run'
  program = launch('run', helpers.program_command(
      'apex_dqn', f'--workdir={workdir}', *SMALL_RUN, f'--env={FAULTY_ENV}',
      launch_type=launch_type), {'PYTHONPATH': helpers.ROOT})

  def status_steps():
    found = re.findall(r'^status: actors ([\d,]+) steps', program.output(),
                       re.MULTILINE)
    return int(found[-1].replace(',', '')) if found else None

  first = program.wait_until(status_steps, helpers.START_TIMEOUT,
                             'a status line with actor steps')
  program.wait_until(lambda: (status_steps() or 0) > first,
                     helpers.START_TIMEOUT, 'a status line with more steps')
  # A NaN observation every 97 steps: each actor's warning, one line with
  # its node's name.
  program.wait_until(
      lambda: re.search(rf'^\[actor(_1)?\] {NAN_WARNING}', program.output(),
                        re.MULTILINE),
      helpers.START_TIMEOUT, "an actor's warning")
  output = program.interrupt()
  lines = output.splitlines()
  assert lines[1].endswith(f'logs in {workdir}'), lines[:3]
  assert f'{workdir}/logs/<node>.log' in lines[2], lines[:3]
  # No control characters: plain lines, not a display redrawn.
  assert '\x1b' not in output and '\r' not in output
  for noise in ('Binding:', 'oneDNN', 'Courier server'):
    assert noise not in output, (noise, output[-3000:])
  # Every node's whole log is in the workdir.
  for label in ['coordinator', 'counter', 'replay', 'learner', 'evaluator',
                *helpers.actor_labels(2)]:
    assert (workdir / 'logs' / f'{label}.log').stat().st_size > 0, label
  logs = program.logs()
  assert re.search(r'^\[learner\] .*Binding:', logs, re.MULTILINE)
  for label in helpers.actor_labels(2):
    assert re.search(rf'^\[{label}\] W.*observation is not finite', logs,
                     re.MULTILINE), label
  # No node's own line is left to the launcher's log (local_mp) or to the
  # process's (local_mt).
  assert not re.search(r'^\[(launcher|program)\] .*(Binding:|not finite)',
                       logs, re.MULTILINE), logs[-3000:]
