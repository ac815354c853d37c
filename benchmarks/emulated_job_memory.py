"""Measures what an emulated Vertex AI job of many replicas costs this
machine: its memory, over all its processes, and its start-up time.

The job: Ape-X DQN's `cartpole_smoke` preset (tiny networks) packaged by
Launchpad's Vertex AI launcher (`--lp_launch_type=vertex_ai --dry_run
--package_dir=...`) with `--actors` actors, 2 variable cachers and 2
replay shards, run by the emulator (`python -m tests.vertex_emulator`),
every replica a process of its own that imports what its node needs
(TensorFlow for every node but the coordinator), to `--max_actor_steps`.

Every second, each replica's process (from the emulator's
`logs/replicas.json`) is read in /proc: its proportional set size (PSS:
each page shared by n processes counted 1/n in each, so that the sum over
the job's processes is what the job takes of the machine's memory) and its
resident set size (RSS: every page it maps counted whole, so that the sum
over-counts the pages the replicas share, such as TensorFlow's libraries).
Printed and written:

* the job's peak: the largest sum over its replicas of one sample's PSS
  (and of RSS, for comparison);
* per node kind (coordinator, replay, counter, learner, cacher, actor,
  evaluator): the median, over the samples taken once every node answers
  (below) while every replica was up, and over the kind's replicas, of a
  replica's PSS and RSS;
* start-up: seconds from the emulator's start to the coordinator's first
  answer from every node it watches (its "Heartbeats: every watched node
  has answered" line), and to the job's end; the CPU seconds all replicas
  had used by that first answer, and the machine's load average as the job
  started (the wall-clock seconds follow whatever else runs here; the CPU
  seconds do not).

  .venv/bin/python benchmarks/emulated_job_memory.py
  .venv/bin/python benchmarks/emulated_job_memory.py --actors=26 --repeats=1

Prints a table and writes `benchmarks/results/emulated_job_memory.json`.
"""

import collections
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from typing import Dict, List, Optional

from absl import app
from absl import flags

from benchmarks import common

MIB = 2**20


def _cpu_seconds(pid: int) -> Optional[float]:
  """The CPU time (user and system) the process has used; None for a
  process that has gone."""
  try:
    with open(f'/proc/{pid}/stat') as f:
      fields = f.read().rsplit(')', 1)[1].split()
  except OSError:
    return None
  return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


def _status_kib(pid: int) -> Optional[Dict[str, int]]:
  """The process's PSS and RSS (KiB) from /proc/<pid>/smaps_rollup; None for
  a process that has gone."""
  found = {}
  try:
    with open(f'/proc/{pid}/smaps_rollup') as f:
      for line in f:
        parts = line.split()
        if len(parts) == 3 and parts[2] == 'kB' and parts[0] in ('Rss:',
                                                                 'Pss:'):
          found[parts[0][:-1].lower()] = int(parts[1])
  except (OSError, ValueError):
    return None
  return found if len(found) == 2 else None


class JobMemory:
  """Samples the memory of an emulated job's replicas, once a second, in a
  thread of its own, from when the emulator has written
  `<package_dir>/logs/replicas.json` until `stop()`.

  `samples`: one {replica: (node, pss bytes, rss bytes)} per second, of the
  replicas up then; `times`: when each was taken (time.time()).
  """

  def __init__(self, package_dir: str, period: float = 1.0):
    self._path = os.path.join(str(package_dir), 'logs', 'replicas.json')
    self._period = period
    self._stop = threading.Event()
    self.samples: List[Dict[str, tuple]] = []
    self.times: List[float] = []
    self.replicas: List[dict] = []
    self._thread = threading.Thread(target=self._run, daemon=True)
    self._thread.start()

  def _run(self):
    while not self._stop.is_set() and not self.replicas:
      try:
        with open(self._path) as f:
          self.replicas = json.load(f)
      except (OSError, ValueError):  # Not yet written, or being written.
        self._stop.wait(0.2)
    while not self._stop.is_set():
      sample = {}
      for replica in self.replicas:
        status = _status_kib(replica['pid'])
        if status is not None:
          sample[replica['replica']] = (replica['node'], status['pss'] * 1024,
                                        status['rss'] * 1024)
      if sample:
        self.samples.append(sample)
        self.times.append(time.time())
      self._stop.wait(self._period)

  def stop(self):
    self._stop.set()
    self._thread.join(timeout=30)

  def peak(self, index: int = 1) -> int:
    """The largest sum over the replicas of one sample's PSS (index 1) or
    RSS (index 2), in bytes."""
    return max((sum(value[index] for value in sample.values())
                for sample in self.samples), default=0)

  def by_kind(self, since: float = 0.0) -> Dict[str, Dict[str, float]]:
    """Per node kind: its replicas, and the medians of a replica's PSS and
    RSS (bytes) over the samples taken from `since` (time.time()) on in
    which every replica was up."""
    full = [sample for sample, when in zip(self.samples, self.times)
            if when >= since and len(sample) == len(self.replicas)]
    values = collections.defaultdict(lambda: ([], []))
    for sample in full:
      for node, pss, rss in sample.values():
        values[node][0].append(pss)
        values[node][1].append(rss)
    counts = collections.Counter(replica['node'] for replica in self.replicas)
    return {node: {'replicas': counts[node],
                   'median_pss_bytes': common.median(pss),
                   'median_rss_bytes': common.median(rss)}
            for node, (pss, rss) in values.items()}


flags.DEFINE_integer('actors', 26, 'Actors: with the learner, 2 cachers, 2 '
                     'replay shards, the counter, the coordinator and the '
                     'evaluator, a job of actors + 8 replicas.')
flags.DEFINE_integer('max_actor_steps', 5000, 'The job\'s step limit.')
flags.DEFINE_integer('repeats', 1, 'Jobs run (medians over them).')
flags.DEFINE_float('timeout', 1800.0, 'Seconds a job may take.')
FLAGS = flags.FLAGS

HEARD_FROM_ALL = 'Heartbeats: every watched node has answered'


def _coordinator_log(package_dir: str) -> str:
  with open(os.path.join(package_dir, 'logs', 'replicas.json')) as f:
    (coordinator,) = [r for r in json.load(f) if r['node'] == 'coordinator']
  with open(os.path.join(package_dir, 'logs',
                         f'{coordinator["replica"]}.log')) as f:
    return f.read()


def _one_job(directory: str) -> Dict:
  package_dir = os.path.join(directory, 'job')
  workdir = os.path.join(directory, 'run')
  home = os.path.join(directory, 'home')
  os.makedirs(home)
  environment = dict(os.environ, HOME=home, NO_GCE_CHECK='True')
  subprocess.run(
      [common.PYTHON, os.path.join(common.ROOT, 'programs', 'apex_dqn.py'),
       '--lp_launch_type=vertex_ai', '--dry_run',
       f'--package_dir={package_dir}', f'--workdir={workdir}',
       '--preset=cartpole_smoke', '--samples_per_insert=4',
       f'--num_actors={FLAGS.actors}', '--variable_cachers=2',
       '--replay_shards=2', f'--max_actor_steps={FLAGS.max_actor_steps}'],
      cwd=common.ROOT, env=environment, check=True, capture_output=True,
      timeout=600)
  start = time.time()
  emulator = subprocess.Popen(
      [common.PYTHON, '-m', 'tests.vertex_emulator',
       f'--package_dir={package_dir}'], cwd=common.ROOT,
      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
      start_new_session=True)
  memory = JobMemory(package_dir)
  load = os.getloadavg()[0]
  started = None
  try:
    while emulator.poll() is None and time.time() - start < FLAGS.timeout:
      if started is None and memory.replicas and HEARD_FROM_ALL in \
          _coordinator_log(package_dir):
        started = time.time()
        cpu = sum(_cpu_seconds(replica['pid']) or 0.0
                  for replica in memory.replicas)
      time.sleep(1.0)
    ended = time.time() - start
  finally:
    memory.stop()
    if emulator.poll() is None:
      os.killpg(emulator.pid, 9)
    output = emulator.communicate()[0]
  if 'Job succeeded.' not in output or started is None:
    raise RuntimeError('The job did not succeed with every node answering:'
                       f'\n{output[-3000:]}')
  return {'replicas': len(memory.replicas),
          'peak_pss_bytes': memory.peak(1), 'peak_rss_bytes': memory.peak(2),
          'by_kind': memory.by_kind(since=started),
          'seconds_to_every_node_answering': started - start,
          'cpu_seconds_to_every_node_answering': cpu,
          'load_average_at_start': load, 'seconds_to_end': ended}


def main(argv):
  del argv
  jobs = []
  for repeat in range(FLAGS.repeats):
    directory = tempfile.mkdtemp(prefix='emulated_job_memory_')
    try:
      jobs.append(_one_job(directory))
    finally:
      shutil.rmtree(directory, ignore_errors=True)
    print(f'Job {repeat + 1} of {FLAGS.repeats}: {jobs[-1]["replicas"]} '
          f'replicas, peak PSS {jobs[-1]["peak_pss_bytes"] / MIB:,.0f} MiB',
          flush=True)
  kinds = jobs[0]['by_kind']
  rows = []
  for node in kinds:
    pss = common.median(job['by_kind'][node]['median_pss_bytes']
                        for job in jobs)
    rss = common.median(job['by_kind'][node]['median_rss_bytes']
                        for job in jobs)
    rows.append([node, kinds[node]['replicas'], pss / MIB, rss / MIB,
                 kinds[node]['replicas'] * pss / MIB])
  summary = {
      'replicas': jobs[0]['replicas'],
      'peak_pss_bytes': common.median(job['peak_pss_bytes'] for job in jobs),
      'peak_rss_bytes': common.median(job['peak_rss_bytes'] for job in jobs),
      'seconds_to_every_node_answering': common.median(
          job['seconds_to_every_node_answering'] for job in jobs),
      'cpu_seconds_to_every_node_answering': common.median(
          job['cpu_seconds_to_every_node_answering'] for job in jobs),
      'load_average_at_start': common.median(
          job['load_average_at_start'] for job in jobs),
      'seconds_to_end': common.median(job['seconds_to_end'] for job in jobs),
  }
  common.print_table(
      f'An emulated job of {summary["replicas"]} replicas: per replica, '
      'medians (MiB)',
      ['node', 'replicas', 'PSS', 'RSS', 'PSS, all its replicas'], rows)
  print(f'\nPeak of the whole job: PSS {summary["peak_pss_bytes"] / MIB:,.0f}'
        f' MiB (RSS summed: {summary["peak_rss_bytes"] / MIB:,.0f} MiB); '
        f'every node answering after '
        f'{summary["seconds_to_every_node_answering"]:.0f} s ('
        f'{summary["cpu_seconds_to_every_node_answering"]:.0f} CPU seconds '
        f'over all replicas; load average '
        f'{summary["load_average_at_start"]:.1f} at the start), job ended '
        f'after {summary["seconds_to_end"]:.0f} s.')
  path = common.write_result('emulated_job_memory', {
      'settings': {'actors': FLAGS.actors, 'variable_cachers': 2,
                   'replay_shards': 2,
                   'max_actor_steps': FLAGS.max_actor_steps,
                   'repeats': FLAGS.repeats,
                   'program': 'apex_dqn --preset=cartpole_smoke '
                              '--samples_per_insert=4, vertex_ai --dry_run '
                              'packaging, tests.vertex_emulator '
                              '(--hosts=loopback)'},
      'summary': summary, 'jobs': jobs,
  })
  print(f'\nWrote {path}')


if __name__ == '__main__':
  app.run(main)
