"""Runs an Ape-X program the way users start it and reads what it logs.

`ProgramRun` launches `programs/<agent>.py --lp_launch_type=local_mp` in its
own process group, finds its nodes' processes through `<workdir>/nodes/`,
can pin them to CPUs, samples their memory, reads the rates that the nodes
write to their CSV logs, and stops the program with Ctrl-C as a user would.
"""

import csv
import glob
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Sequence

import psutil

from benchmarks import common


class ProgramRun:
  """One launched program; use as a context manager."""

  def __init__(self, agent: str, flags: Sequence[str], name: str = 'run'):
    self._workdir = tempfile.mkdtemp(prefix=f'apex_bench_{name}_')
    self._command = [
        common.PYTHON, os.path.join(common.ROOT, 'programs', f'{agent}.py'),
        '--lp_launch_type=local_mp', f'--workdir={self._workdir}', *flags
    ]
    self._log_path = os.path.join(self._workdir, 'program.out')
    self._process: Optional[subprocess.Popen] = None

  @property
  def workdir(self) -> str:
    return self._workdir

  def __enter__(self) -> 'ProgramRun':
    # The program runs in its own session (so that it can be stopped as a
    # group): a benchmark killed by SIGTERM must still stop it on the way
    # out, or it would go on loading the machine.
    signal.signal(signal.SIGTERM, lambda *unused: sys.exit(143))
    self._log = open(self._log_path, 'w')
    self._process = subprocess.Popen(
        self._command, stdout=self._log, stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL, cwd=common.ROOT, start_new_session=True)
    return self

  def __exit__(self, *unused_exc):
    self.stop()
    self._log.close()
    shutil.rmtree(self._workdir, ignore_errors=True)

  def check_running(self):
    if self._process.poll() is not None:
      with open(self._log_path) as f:
        tail = f.read()[-3000:]
      raise RuntimeError(f'The program exited with {self._process.returncode}'
                         f':\n{tail}')

  def node_pids(self) -> Dict[str, int]:
    """Label -> PID of every node process that has started (and the replay
    server's own process)."""
    pids = {}
    for path in glob.glob(os.path.join(self._workdir, 'nodes', '*.pid')):
      try:
        with open(path) as f:
          pids[os.path.basename(path)[:-len('.pid')]] = int(f.read())
      except (OSError, ValueError):
        continue
    return pids

  def wait_for_nodes(self, labels: Sequence[str], timeout: float = 180.0):
    deadline = time.time() + timeout
    while not set(labels) <= set(self.node_pids()):
      self.check_running()
      if time.time() > deadline:
        raise TimeoutError(f'Nodes {sorted(set(labels) - set(self.node_pids()))}'
                           f' did not start within {timeout:.0f} s.')
      time.sleep(0.5)

  def pin(self, cpus_by_label: Dict[str, Sequence[int]],
          other_cpus: Sequence[int]):
    """Pins each listed node to its CPUs and every other process of the
    program (launcher, other nodes, replay server) to `other_cpus`."""
    pinned = set()
    for label, pid in self.node_pids().items():
      if label in cpus_by_label:
        common.pin_process(pid, cpus_by_label[label])
        pinned.add(pid)
    for process in [psutil.Process(self._process.pid),
                    *psutil.Process(self._process.pid).children(
                        recursive=True)]:
      if process.pid not in pinned:
        common.pin_process(process.pid, other_cpus)

  def rss_bytes(self) -> Dict[str, int]:
    """Resident memory of every node process now, by label."""
    result = {}
    for label, pid in self.node_pids().items():
      try:
        result[label] = psutil.Process(pid).memory_info().rss
      except psutil.Error:
        continue
    return result

  def rows(self, label: str) -> List[Dict[str, float]]:
    """The rows node `label` has logged so far (logs/<label>/logs.csv)."""
    path = os.path.join(self._workdir, 'logs', label, 'logs.csv')
    if not os.path.exists(path):
      return []
    with open(path) as f:
      rows = []
      for row in csv.DictReader(f):
        try:
          rows.append({k: float(v) for k, v in row.items() if v != ''})
        except ValueError:
          continue
      return rows

  def wait_for(self, predicate, timeout: float, what: str):
    deadline = time.time() + timeout
    while not predicate():
      self.check_running()
      if time.time() > deadline:
        raise TimeoutError(f'{what} within {timeout:.0f} s.')
      time.sleep(0.5)

  def stop(self, timeout: float = 60.0):
    """Ctrl-C to the whole program, as in a terminal; kill if it hangs."""
    if self._process is None or self._process.poll() is not None:
      return
    try:
      os.killpg(self._process.pid, signal.SIGINT)
      self._process.wait(timeout)
    except subprocess.TimeoutExpired:
      os.killpg(self._process.pid, signal.SIGKILL)
      self._process.wait()
    except ProcessLookupError:
      pass
