"""Ctrl-C of `make train`, typed at a terminal as a user would, and a
second host's attempts on the run's ports while it trains.

The terminal is a pseudo-terminal: the Ctrl-C character reaches the
foreground process group as SIGINT, with `make` and every process of the
program in the terminal's session.
"""

import os
import pty
import threading
import time

import psutil
import pytest

import helpers
import second_host
from helpers import ROOT
from helpers import rows

START_SECONDS = 300  # Until the learner trains while the actors act.
STOP_SECONDS = 60  # Until `make` exits after the Ctrl-C.


class _Terminal:
  """`make` in a pseudo-terminal, its output read as it comes."""

  def __init__(self, *argv):
    self.pid, self._fd = pty.fork()
    if self.pid == 0:  # The child: the session leader of the terminal.
      os.chdir(ROOT)
      os.execvp(argv[0], list(argv))
    self._output = []
    self._reader = threading.Thread(target=self._read, daemon=True)
    self._reader.start()

  def _read(self):
    while True:
      try:
        data = os.read(self._fd, 65536)
      except OSError:  # The terminal closed: every process of it is gone.
        return
      if not data:
        return
      self._output.append(data)

  def output(self) -> str:
    return b''.join(self._output).decode(errors='replace')

  def type(self, text: bytes):
    os.write(self._fd, text)

  def wait(self, timeout: float):
    """The exit status of `make`, or None if it still runs after
    `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
      pid, status = os.waitpid(self.pid, os.WNOHANG)
      if pid:
        self._reader.join(timeout=10)
        return os.waitstatus_to_exitcode(status)
      time.sleep(0.2)
    return None

  def session(self):
    """The processes still running in the terminal's session (zombies
    count as ended)."""
    left = []
    for process in psutil.process_iter():
      try:
        if (os.getsid(process.pid) == self.pid and
            process.status() != psutil.STATUS_ZOMBIE):
          left.append(process)
      except (ProcessLookupError, psutil.Error):
        pass
    return left

  def kill(self):
    for process in self.session():
      try:
        process.kill()
      except psutil.Error:
        pass


def _attack_from_a_second_host(terminal: _Terminal, tmp_path):
  report, ports = second_host.attack_processes(
      [process.pid for process in terminal.session()],
      str(tmp_path / 'marker'))
  assert len(ports) >= 6, ports  # Replay, counter, learner, 2 actors, ...
  assert not [entry for entry in report['connected'] if entry[1] in ports], (
      report, ports)
  assert not report['ran'], report


@pytest.mark.slow
def test_ctrl_c_of_make_train_exits_0_in_order(tmp_path):
  workdir = tmp_path / 'run'
  terminal = _Terminal(
      'make', '-s', 'train',
      f'TRAIN_FLAGS=--preset=cartpole_smoke --workdir={workdir}')
  try:
    # Under load: the learner has logged updates while the actors act.
    deadline = time.monotonic() + START_SECONDS
    while not (os.path.exists(workdir / 'logs' / 'learner' / 'logs.csv') and
               len(rows(workdir, 'learner')) >= 3 and
               int(rows(workdir, 'learner')[-1]['learner_steps']) > 0):
      assert time.monotonic() < deadline, terminal.output()[-4000:]
      assert terminal.wait(0) is None, terminal.output()[-4000:]
      time.sleep(0.5)
    # No port of the run accepts another host (docs/security.md).
    _attack_from_a_second_host(terminal, tmp_path)
    terminal.type(b'\x03')
    status = terminal.wait(STOP_SECONDS)
    output = terminal.output()
    assert status is not None, f'still running:\n{output[-4000:]}'
    assert status == 0, (status, output[-4000:])
    left = terminal.session()
    assert not left, [(p.pid, p.cmdline()) for p in left]
  finally:
    terminal.kill()
  # A normal stop: no node killed by the stop watchdog (which prints every
  # thread of the node first), no Launchpad kill, no crash, no make error.
  helpers.check_stopped_in_order(output, workdir)
  for sign in ('Traceback', 'make: ***'):
    assert sign not in output, (sign, output[-4000:])
  assert 'The program stopped: stopped by the user (Ctrl-C).' in output
  assert f'Checkpoints are in {workdir}/checkpoints' in output
