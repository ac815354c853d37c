"""A chaos soak: one run of a program under a seeded schedule of faults.

  .venv/bin/python -m benchmarks.chaos --workdir=<run> --seed=0 \\
      --fault_every=30 -- programs/apex_dqn.py --preset=cartpole \\
      --max_actor_steps=150000

starts the program as users do (`--lp_launch_type=local_mp`, in a session
of its own, its output in `<run>/output.txt`) and, once every node has
answered the coordinator's heartbeats, faults one node every
`--fault_every` seconds, as the out-of-memory killer and a hung process
would:

* SIGKILL of the process its pid file names (`<run>/nodes/<label>.pid`; of
  a replay node, its own process or its Reverb server's,
  `<label>_server.pid`);
* or SIGSTOP, held: the coordinator's heartbeats find it silent after
  `--heartbeat_timeout` seconds and end it (`launch.supervision.keeper`).

The schedule is drawn from `--seed`: the kinds of node (`--kinds`: learner,
counter, replay, actor, evaluator, and cacher in a program with variable
cachers) in a shuffled cycle, so that every kind is hit in turn; an actor
or a replay shard chosen among them at random; SIGSTOP with probability
`--freeze_share`. A node whose last fault has not yet been recovered from
(no `recovered` record in `<run>/faults/` since) is passed over for
the next kind. With `--after_checkpoints`, so is a node whose checkpoint
holds none of the run's work yet (the counter's first save can come before
any actor's counts). `--schedule` replaces the seeded schedule with one's
own, each fault once every one before it is recovered from.
`--fault_every=0` runs the program without faults (its twin).

The program ends by its own budget (or, with `--stop_after_faults=N`, by a
stop request once N faults are recovered from: `programs/stop.py`). Then,
with `--check_resume`, the run is launched again for a moment, to see that
every checkpoint it left loads (the learner's, the counter's, each replay
shard's). Written to `<run>/chaos.json` (`--summary`):

* the schedule: each fault injected (time, node, signal, pid) and whether,
  and how many seconds later, the node answered again (a fault the
  program's end came too soon after is `cut_short`, not a failure:
  `CUT_SHORT_SECONDS`);
* what each fault lost (the learner's updates, the counter's actor steps, a
  shard's items, the evaluator's episodes) beside its bound (the updates
  and counts since the newest checkpoint, the episodes of a round);
* the program's exit status, the final counts, the evaluator's last round;
* what the resumed launch restored.

Exit status 0 when the program exited 0, every fault was recovered from
(or cut short by the run's end), nothing was lost beyond its bound and
every checkpoint loaded; 1 otherwise (the summary says what failed).
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional, Sequence

from absl import app
from absl import flags
import numpy as np
import psutil

from launch.supervision import keeper

from launch.runs import faults as fault_records
from launch.runs import checkpointing
from launch.runs import loggers
from launch.runs import run_manifest

flags.DEFINE_string('workdir', None, 'The run\'s workdir (--workdir of the '
                    'program).')
flags.DEFINE_integer('seed', 0, 'Seed of the schedule of faults.')
flags.DEFINE_float('fault_every', 30.0, 'Seconds between two faults; 0: '
                   'none (the twin without faults).')
flags.DEFINE_float('freeze_share', 0.5, 'The share of faults that are '
                   'SIGSTOP (held until the coordinator ends the node) '
                   'rather than SIGKILL.')
flags.DEFINE_list('kinds', ['learner', 'counter', 'replay', 'actor',
                            'evaluator', 'cacher'],
                  'The kinds of node to fault (those the program has).')
flags.DEFINE_list('schedule', [], 'A schedule of one\'s own instead of the '
                  'seeded one: <process label>:<SIGKILL|SIGSTOP>, in order '
                  '(e.g. learner:SIGKILL,replay_server:SIGKILL), each once '
                  'the node before it has been recovered from and '
                  '--fault_every has passed.')
flags.DEFINE_bool('after_checkpoints', False, 'Fault a node only once the '
                  'checkpoint it would come back from holds some of the '
                  'run\'s work (the learner\'s parameters, the counter\'s '
                  'counts of actor steps, a replay shard\'s tables), so '
                  'that each fault tests a return from a checkpoint rather '
                  'than from the run\'s start. Needs checkpoints on '
                  '(--checkpoint_every, --replay_checkpoint_every).')
flags.DEFINE_integer('stop_after_faults', 0, 'Stop the program by a stop '
                     'request once this many faults are recovered from (0: '
                     'it ends by its own budget).')
flags.DEFINE_bool('check_resume', True, 'Launch the run again for a moment '
                  'at the end: every checkpoint must load.')
flags.DEFINE_float('resume_seconds', 20.0, 'How long the resumed launch '
                   'runs once every node has answered.')
flags.DEFINE_string('summary', None, 'Where the summary goes (default: '
                    '<workdir>/chaos.json).')
flags.DEFINE_float('timeout', 4 * 3600.0, 'Seconds after which a program '
                   'that has not ended is killed (a failed soak).')
FLAGS = flags.FLAGS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEARD_FROM_ALL = 'Heartbeats: every watched node has answered'
# What a relaunch's nodes log as they restore.
LEARNER_START = re.compile(r'Learner starts at step (\d+)')
COUNTER_START = re.compile(r'Counter starts from (\{.*\})')
REPLAY_START = re.compile(r'Replay starts with (\{.*\}|\d+) items')


def _read(path: str) -> str:
  try:
    with open(path, errors='replace') as f:
      return f.read()
  except FileNotFoundError:
    return ''


class Run:
  """The program, started in this process's group (whatever ends this
  process's group ends it too)."""

  def __init__(self, command: Sequence[str], workdir: str, output: str,
               log_offsets: Optional[Dict[str, int]] = None):
    self.workdir = workdir
    # Where each node's log was as this launch began (`log`).
    self._offsets = dict(log_offsets or {})
    os.makedirs(workdir, exist_ok=True)
    self._output = open(output, 'a')  # pylint: disable=consider-using-with
    self.process = subprocess.Popen(  # pylint: disable=consider-using-with
        list(command), stdout=self._output, stderr=subprocess.STDOUT,
        cwd=ROOT)

  def log(self, label: str) -> str:
    """Node `label`'s log, from where it was as this launch began."""
    path = os.path.join(self.workdir, 'logs', f'{label}.log')
    return _read(path)[self._offsets.setdefault(label, 0):]

  def wait_for(self, condition, timeout: float, what: str):
    deadline = time.time() + timeout
    while not condition():
      if self.process.poll() is not None:
        raise RuntimeError(f'The program exited ({self.process.returncode}) '
                           f'before {what}.')
      if time.time() > deadline:
        raise RuntimeError(f'No {what} within {timeout:.0f} s.')
      time.sleep(0.5)

  def end(self, timeout: float) -> int:
    try:
      return self.process.wait(timeout)
    except subprocess.TimeoutExpired:
      self.kill()
      return -signal.SIGKILL
    finally:
      self._output.close()

  def kill(self):
    """SIGKILL to the program's every process."""
    try:
      processes = psutil.Process(self.process.pid).children(recursive=True)
    except psutil.NoSuchProcess:
      processes = []
    for process in [self.process] + processes:
      try:
        process.kill()
      except (psutil.NoSuchProcess, ProcessLookupError):
        pass
    self.process.wait()


SERVER = '_server'  # A replay node's server's pid file: <label>_server.pid


def process_labels(workdir: str, kind: str) -> List[str]:
  """The pid files' labels of the program's processes of nodes of `kind`:
  a replay node's and its server's (`<label>_server`), another's own."""
  names = sorted(name[:-len('.pid')]
                 for name in os.listdir(os.path.join(workdir, keeper.NODES))
                 if name.endswith('.pid'))
  return [name for name in names if name.split('_')[0] == kind]


def node_of(label: str) -> str:
  """The node a process's label names (a server's: its replay node)."""
  return label[:-len(SERVER)] if label.endswith(SERVER) else label


def _pid(workdir: str, label: str) -> Optional[int]:
  try:
    with open(os.path.join(workdir, keeper.NODES, f'{label}.pid')) as f:
      return int(f.read())
  except (OSError, ValueError):
    return None


def _records(workdir: str) -> List[Dict[str, Any]]:
  return fault_records.this_launch(fault_records.read_faults(workdir))


class Schedule:
  """The seeded schedule: which node, and which fault, next (`fixed`: the
  processes and signals of a schedule of one's own, in order)."""

  def __init__(self, seed: int, kinds: Sequence[str], freeze_share: float,
               fixed: Sequence[str] = ()):
    self.fixed = [(entry.split(':')[0], signal.Signals[entry.split(':')[1]])
                  for entry in fixed]
    self.own = bool(self.fixed)  # A schedule of one's own: nothing more.
    self._rng = np.random.default_rng(seed)
    self._kinds = list(kinds)
    self._freeze_share = freeze_share
    self._cycle: List[str] = []

  def next_kinds(self) -> List[str]:
    """The kinds in the order to try them for the next fault: the rest of
    the current shuffled cycle, then a new cycle."""
    if not self._cycle:
      self._cycle = list(self._rng.permutation(self._kinds))
    return list(self._cycle)

  def took(self, kind: str):
    self._cycle.remove(kind)

  def choose(self, labels: Sequence[str]) -> str:
    return labels[int(self._rng.integers(len(labels)))]

  def signal(self) -> signal.Signals:
    return (signal.SIGSTOP if self._rng.random() < self._freeze_share
            else signal.SIGKILL)


# Seconds a node's newest checkpoint has stood before the node may be
# faulted (`--after_checkpoints`): the coordinator's heartbeat (once a
# second) has heard of it by then, so that the node's last answer before
# the fault names it.
SAVED_SETTLE_SECONDS = 3.0


class SavedWork:
  """Since when each node's checkpoint has held work
  (`checkpointing.holds_work`)."""

  def __init__(self, workdir: str):
    self._workdir = workdir
    self._since: Dict[str, float] = {}

  def settled(self, node: str) -> bool:
    if node not in self._since and checkpointing.holds_work(self._workdir,
                                                            node):
      self._since[node] = time.time()
    return time.time() - self._since.get(node, float('inf')) >= (
        SAVED_SETTLE_SECONDS)


def _recovered(records, label: str, since: float) -> Optional[Dict]:
  for record in records:
    if (record.get('event') == 'recovered' and record['node'] == label and
        record['time'] >= since):
      return record
  return None


def _keep(workdir: str, injected: List[Dict[str, Any]]):
  """The faults injected so far, in `<run>/chaos_faults.json` (kept if
  this tool is stopped before its summary)."""
  with open(os.path.join(workdir, 'chaos_faults.json.tmp'), 'w') as f:
    json.dump(injected, f, indent=1)
  os.replace(os.path.join(workdir, 'chaos_faults.json.tmp'),
             os.path.join(workdir, 'chaos_faults.json'))


def inject(run: Run, schedule: Schedule, kinds: Sequence[str],
           fault_every: float, stop_after: int,
           after_checkpoints: bool = False) -> List[Dict[str, Any]]:
  """Faults nodes until the program ends (or, with `stop_after`, until
  that many faults are recovered from, then asks it to stop); with
  `after_checkpoints`, each node once its checkpoint holds work
  (`SavedWork`)."""
  injected: List[Dict[str, Any]] = []
  saved = SavedWork(run.workdir)
  ready = lambda node: not after_checkpoints or saved.settled(node)
  next_time = time.time() + fault_every
  stop_asked = False
  while run.process.poll() is None:
    time.sleep(0.5)
    records = _records(run.workdir)
    pending = {fault['node'] for fault in injected
               if not _recovered(records, fault['node'], fault['time'])}
    if stop_after and len(injected) >= stop_after:
      if not stop_asked and not pending:
        subprocess.run([sys.executable, 'programs/stop.py',
                        f'--workdir={run.workdir}'], cwd=ROOT, check=True,
                       stdout=subprocess.DEVNULL)
        stop_asked = True
      continue
    if time.time() < next_time:
      continue
    if schedule.own:
      if not schedule.fixed:
        continue
      # In order: each fault once every one before it is recovered from.
      label, number = schedule.fixed[0]
      pid = _pid(run.workdir, label)
      if pending or pid is None or not ready(node_of(label)):
        continue
      schedule.fixed.pop(0)
      os.kill(pid, number)
      injected.append({'time': round(time.time(), 3), 'node': node_of(label),
                       'process': label, 'kind': label.split('_')[0],
                       'signal': number.name, 'pid': pid})
      print(f'chaos: {number.name} to the {label} (pid {pid})', flush=True)
      _keep(run.workdir, injected)
      next_time = time.time() + fault_every
      continue
    for kind in schedule.next_kinds():
      labels = [label for label in process_labels(run.workdir, kind)
                if node_of(label) not in pending and ready(node_of(label))]
      if kind not in kinds or not labels:
        continue
      label = schedule.choose(labels)
      pid = _pid(run.workdir, label)
      if pid is None:
        continue
      number = schedule.signal()
      schedule.took(kind)
      try:
        os.kill(pid, number)
      except ProcessLookupError:
        continue
      injected.append({'time': round(time.time(), 3), 'node': node_of(label),
                       'process': label, 'kind': kind,
                       'signal': number.name, 'pid': pid})
      print(f'chaos: {number.name} to the {label} (pid {pid})', flush=True)
      _keep(run.workdir, injected)
      break
    next_time += fault_every
  return injected


def _bound(record: Dict[str, Any], options: Dict[str, Any]
           ) -> Dict[str, Optional[int]]:
  """What a fault may lose (docs/checkpoints.md), from the node's last
  answer before it: the updates and counts since the newest checkpoint,
  a round's episodes."""
  before = record.get('answered_before_fault') or {}
  bound = {}
  if 'updates' in before:
    bound['updates'] = before['updates'] - before['updates_checkpointed']
  if 'actor_steps' in before and 'actor_steps_saved' in before:
    bound['actor_steps'] = before['actor_steps'] - before['actor_steps_saved']
  if 'round_episodes' in before:
    bound['round_episodes'] = options.get('evaluation_episodes')
  return bound


# A fault that has not been recovered from when the program stops is cut
# short by the run's end (not a failure to recover) if it came within this
# many seconds, beyond --heartbeat_timeout, of the program's end: the
# longest a kill's return took in results/chaos.md is under 20 s.
CUT_SHORT_SECONDS = 60.0


def summarize(workdir: str, injected: List[Dict[str, Any]],
              status: int, ended: float) -> Dict[str, Any]:
  """The soak's figures (see the module docstring); `ended`: when the
  program's process ended."""
  records = _records(workdir)
  manifest = run_manifest.read_record(workdir, run_manifest.MANIFEST) or {}
  options = manifest.get('flags', {})
  faults = []
  for fault in injected:
    recovered = _recovered(records, fault['node'], fault['time'])
    entry = dict(fault)
    kept = [record for record in records if record.get('event') == 'fault'
            and record.get('pid') == fault['pid']]
    entry['seen_by_keeper'] = bool(kept)
    entry['cause'] = kept[0]['cause'] if kept else None
    window = CUT_SHORT_SECONDS + float(options.get('heartbeat_timeout', 30))
    if not recovered and ended - fault['time'] < window:
      entry['cut_short'] = True  # By the run's end: see CUT_SHORT_SECONDS.
    if recovered:
      entry['recovery_seconds'] = round(recovered['time'] - fault['time'], 1)
      entry['lost'] = recovered['lost']
      entry['bound'] = _bound(recovered, options)
      entry['within_bound'] = all(
          bound is None or recovered['lost'].get(key, 0) <= bound
          for key, bound in entry['bound'].items())
    faults.append(entry)
  stop = run_manifest.read_stop_record(workdir) or {}
  return {
      'faults': faults,
      'injected': len(faults),
      'recovered': sum('recovery_seconds' in fault for fault in faults),
      'cut_short': sum(bool(fault.get('cut_short')) for fault in faults),
      'within_bound': all(fault.get('within_bound', False)
                          for fault in faults if 'recovery_seconds' in fault),
      'exit_status': status,
      'stop': stop,
      'evaluation': last_round(workdir, options.get('evaluation_episodes')),
  }


def last_round(workdir: str, per_round: Optional[int]) -> Dict[str, Any]:
  """The evaluator's last complete round: its mean return, episodes and
  the learner step it played."""
  path = os.path.join(workdir, 'logs', 'evaluator', 'logs.csv')
  if not per_round or not os.path.exists(path):
    return {}
  import csv  # pylint: disable=g-import-not-at-top
  with open(path) as f:
    rows = list(csv.DictReader(f))
  rounds = loggers.split_rounds(
      [float(row[loggers.ROUND_STARTED]) if row.get(loggers.ROUND_STARTED)
       else None for row in rows], per_round)
  if not rounds:
    return {}
  last = [rows[index] for index in rounds[-1]]
  returns = [float(row['episode_return']) for row in last]
  return {'mean_return': float(np.mean(returns)), 'episodes': len(returns),
          'learner_steps': last[0].get(loggers.ROUND_LEARNER_STEPS)}


def check_resume(command: Sequence[str], workdir: str,
                 seconds: float) -> Dict[str, Any]:
  """Launches the run again until every node has answered and `seconds`
  more, then stops it (a run that has reached its budget stops by
  itself): what each node restored, from its log."""
  labels = ['learner', 'counter', 'coordinator'] + process_labels(
      workdir, 'replay')
  offsets = {label: len(_read(os.path.join(workdir, 'logs', f'{label}.log')))
             for label in labels}
  run = Run(command, workdir, os.path.join(workdir, 'resume_output.txt'),
            offsets)
  try:
    deadline = time.time() + 600
    while (run.process.poll() is None and time.time() < deadline and
           HEARD_FROM_ALL not in run.log('coordinator')):
      time.sleep(0.5)
    if run.process.poll() is None:
      time.sleep(seconds)
  finally:
    if run.process.poll() is None:  # Ctrl-C: the launcher's ordered stop.
      run.process.send_signal(signal.SIGINT)
    status = run.end(120)
  replay = []
  for label in process_labels(workdir, 'replay'):
    replay += REPLAY_START.findall(run.log(label))
  learner = LEARNER_START.findall(run.log('learner'))
  counter = COUNTER_START.findall(run.log('counter'))
  return {'exit_status': status,
          'learner_starts_at': int(learner[0]) if learner else None,
          'counter_starts_from': counter[0] if counter else None,
          'replay_starts_with': replay}


def main(argv):
  command = [sys.executable] + argv[1:] + ['--lp_launch_type=local_mp',
                                           f'--workdir={FLAGS.workdir}']
  workdir = os.path.abspath(FLAGS.workdir)
  run = Run(command, workdir, os.path.join(workdir, 'output.txt'))
  injected = []
  try:
    run.wait_for(lambda: HEARD_FROM_ALL in run.log('coordinator'), 600,
                 'every node\'s first answer')
    if FLAGS.fault_every > 0:
      injected = inject(run, Schedule(FLAGS.seed, FLAGS.kinds,
                                      FLAGS.freeze_share, FLAGS.schedule),
                        FLAGS.kinds, FLAGS.fault_every,
                        FLAGS.stop_after_faults, FLAGS.after_checkpoints)
  except BaseException:
    run.kill()
    raise
  finally:
    status = run.end(FLAGS.timeout)
    ended = time.time()
  summary = summarize(workdir, injected, status, ended)
  summary['command'] = argv[1:]
  summary['seed'] = FLAGS.seed
  summary['schedule'] = FLAGS.schedule
  summary['fault_every'] = FLAGS.fault_every
  ok = (status == 0 and summary['within_bound'] and
        summary['recovered'] + summary['cut_short'] == summary['injected'])
  if FLAGS.check_resume:
    summary['resume'] = check_resume(command, workdir, FLAGS.resume_seconds)
    resume = summary['resume']
    ok = ok and (resume['exit_status'] == 0 and
                 resume['learner_starts_at'] is not None and
                 resume['counter_starts_from'] is not None and
                 bool(resume['replay_starts_with']))
  summary['ok'] = ok
  path = FLAGS.summary or os.path.join(workdir, 'chaos.json')
  with open(path, 'w') as f:
    json.dump(summary, f, indent=1, sort_keys=True)
  print(f'chaos: {summary["injected"]} faults injected, '
        f'{summary["recovered"]} recovered from, {summary["cut_short"]} cut '
        f'short by the run\'s end; program exit {status}; '
        f'{"ok" if ok else "FAILED"} ({path})')
  return 0 if ok else 1


if __name__ == '__main__':
  flags.mark_flag_as_required('workdir')
  app.run(main)
