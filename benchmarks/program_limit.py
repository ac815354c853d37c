"""The whole program as users run it, against the machine's limit at its
replay ratio.

`make train`'s kind of launch: `programs/apex_dqn.py --lp_launch_type=
local_mp --preset=<preset>`, nothing pinned, every node where the operating
system puts it. Beside it, in the same run and alone on the machine, the two
bare loops of `bare_loops.py` with the preset's values, unpinned:

  A  the actor's bare loop (its K environments and batched forward pass,
     one TensorFlow thread as the program's actors): agent steps/s on a
     core;
  U  the learner's compiled update on a batch in memory, with the threads
     TensorFlow takes by default: updates/s with the whole machine.

Each agent step costs 1/A core-seconds of acting, and at the preset's
replay ratio (samples per insert s, batch b; one insert per agent step)
s/b updates, s/(b U) seconds of the whole machine. On N cores, the most
agent steps a second the machine can give at that ratio is

  limit = 1 / (1 / (A N) + s / (b U))

(no time for replay, logging or anything else). The program's figure is
its actors' agent steps/s (each from its own log's rows) and its learner's
samples/s (updates x b) over
a steady window: from `--settle` seconds after the learner's first logged
update, `--windows` windows of `--window_seconds`, the median of their
rates. The goal (docs/performance.md): program / limit >= 0.8, with the
default `--placement`. Each of `--placements` is run, one after the other
(the default and the program before placement: `tf_default`). The CPU time
each node's process took in the window is reported too: where the cores
went.

  .venv/bin/python benchmarks/program_limit.py                 # Pong
  .venv/bin/python benchmarks/program_limit.py --preset=minatar
"""

import os
import signal
import subprocess
import tempfile
import time
from typing import Dict, List, Optional, Sequence, Tuple

from absl import app
from absl import flags

from benchmarks import common

FLAGS = flags.FLAGS

LOG_EVERY = 5.0  # Seconds between the program's log rows.


def define_flags():
  """The benchmark's flags, defined when it runs as a program (not when a
  test imports its functions beside other modules' flags)."""
  flags.DEFINE_string('preset', 'atari_small', 'The Ape-X DQN preset to run.')
  flags.DEFINE_string('env', None, 'Environment (default: the preset\'s).')
  flags.DEFINE_integer('repeats', 3, 'Windows of each bare loop.')
  flags.DEFINE_float('bare_seconds', 20.0, 'Seconds of one bare-loop window.')
  flags.DEFINE_float('warmup', 5.0, 'Seconds a bare loop runs before its '
                     'windows.')
  flags.DEFINE_float('settle', 60.0, 'Seconds after the learner\'s first '
                     'logged update before the program\'s windows.')
  flags.DEFINE_integer('windows', 5, 'Windows of the program.')
  flags.DEFINE_float('window_seconds', 60.0, 'Seconds of one program window.')
  flags.DEFINE_float('start_timeout', 1200.0, 'Seconds the program may take '
                     'to log its first update (replay fills first).')
  flags.DEFINE_list('placements', ['sized', 'tf_default'], 'The program\'s '
                    '--placement values, one run each, back to back (the '
                    'first is the goal\'s: the default).')


def limit(actor_steps_per_core: float, updates_per_second: float,
          samples_per_insert: float, batch_size: int, cores: int) -> float:
  """The most agent steps/s `cores` cores give at the replay ratio: each
  step 1/A core-seconds of acting and s/(b U) seconds of the whole machine
  learning (module docstring)."""
  acting = 1.0 / (actor_steps_per_core * cores)
  learning = samples_per_insert / (batch_size * updates_per_second)
  return 1.0 / (acting + learning)


def _window_rate(rows: Sequence[Dict[str, float]], start: float, end: float,
                 column: str) -> Optional[float]:
  """`column`'s change between the first and last row inside [start, end]
  over their time (None with fewer than two rows there)."""
  inside = [row for row in rows if start <= row['walltime'] <= end]
  if len(inside) < 2 or inside[-1]['walltime'] <= inside[0]['walltime']:
    return None
  return ((inside[-1][column] - inside[0][column]) /
          (inside[-1]['walltime'] - inside[0]['walltime']))


def _windows(begin: float, seconds: float, count: int):
  return [(begin + index * seconds, begin + (index + 1) * seconds)
          for index in range(count)]


def window_rates(rows: Sequence[Dict[str, float]], begin: float,
                 seconds: float, count: int, column: str) -> List[float]:
  """`column`'s rate (per second of walltime) in each of `count` windows of
  `seconds` from `begin`, from log rows (each with `walltime`): the change
  between the first and last row inside the window over their time."""
  rates = [_window_rate(rows, start, end, column)
           for start, end in _windows(begin, seconds, count)]
  return [rate for rate in rates if rate is not None]


def counted_steps(rows: Sequence[Dict[str, float]]) -> List[Dict[str, float]]:
  """An actor's log rows with `steps`: the environment steps it took since
  its first row, from each row's `steps_per_second` (its own steps since
  the row before, over that time). The counter's `actor_steps` cannot
  serve: an actor adds an episode's steps to it only as the episode ends,
  in lumps of thousands on Atari."""
  counted, steps = [], 0.0
  for index, row in enumerate(rows):
    if index:
      steps += row['steps_per_second'] * (row['walltime'] -
                                          rows[index - 1]['walltime'])
    counted.append({'walltime': row['walltime'], 'steps': steps})
  return counted


def summed_window_rates(logs: Sequence[Sequence[Dict[str, float]]],
                        begin: float, seconds: float,
                        count: int) -> List[float]:
  """All actors' agent steps/s in each window (`window_rates`'s), from
  their own rows (`counted_steps`). A window counts only where every actor
  logged at least twice in it: one that did not would be missing, not
  slow."""
  counted = [counted_steps(rows) for rows in logs]
  rates = []
  for start, end in _windows(begin, seconds, count):
    each = [_window_rate(rows, start, end, 'steps') for rows in counted]
    if counted and all(rate is not None for rate in each):
      rates.append(sum(each))
  return rates


def _preset() -> Dict[str, object]:
  from agents.apex_dqn import presets  # pylint: disable=g-import-not-at-top
  values = dict(presets.PRESETS[FLAGS.preset].values)
  if FLAGS.env:
    values['env'] = FLAGS.env
  return values


def bare_rates(values: Dict[str, object]) -> Tuple[List[float], List[float]]:
  """The actor's bare loop's and the in-memory update's rates, unpinned,
  alone, `--repeats` windows each."""
  shared = [f'--env={values["env"]}', f'--preset={FLAGS.preset}']
  actor = [common.bare_loop_rate(
      'actor', *shared, f'--envs={values.get("envs_per_actor", 1)}',
      warmup=FLAGS.warmup, seconds=FLAGS.bare_seconds)
           for _ in range(FLAGS.repeats)]
  learner = [common.bare_loop_rate(
      'learner', *shared, warmup=FLAGS.warmup, seconds=FLAGS.bare_seconds)
             for _ in range(FLAGS.repeats)]
  return actor, learner


def _rows(workdir: str, label: str = 'learner') -> List[Dict[str, float]]:
  from launch.runs import curves  # pylint: disable=g-import-not-at-top
  log = curves.read_log(workdir, label)
  count = len(log.get('walltime', ()))
  return [{key: float(values[index]) for key, values in log.items()}
          for index in range(count)]


def _actor_rows(workdir: str) -> List[List[Dict[str, float]]]:
  from launch.runs import curves  # pylint: disable=g-import-not-at-top
  return [_rows(workdir, label) for label in curves.actor_labels(workdir)]


def _cpu_seconds(pid: int) -> float:
  """User and system CPU seconds of process `pid` and its waited-for
  children (0 if it is gone)."""
  from launch.supervision import local  # pylint: disable=g-import-not-at-top
  fields = local.proc_stat(pid)  # From the state on: utime is the 12th.
  if fields is None:
    return 0.0
  ticks = sum(int(value) for value in fields[11:15])
  return ticks / os.sysconf('SC_CLK_TCK')


def _node_pids(workdir: str) -> Dict[str, int]:
  directory = os.path.join(workdir, 'nodes')
  pids = {}
  for name in sorted(os.listdir(directory)):
    if name.endswith('.pid'):
      with open(os.path.join(directory, name)) as f:
        text = f.read().strip()
      if text:
        pids[name[:-len('.pid')]] = int(text)
  return pids


def program_rates(values: Dict[str, object], placement: str,
                  extra: Sequence[str] = ()) -> Dict[str, object]:
  """The program's agent steps/s and updates/s in its windows, and each
  node's share of a core over them, launched with `--placement` and the
  flags `extra`."""
  workdir = tempfile.mkdtemp(prefix='program_limit_')
  # From the repository's root (cwd): the command it records names no
  # path of this machine's.
  command = [common.PYTHON, os.path.join('programs', 'apex_dqn.py'),
             '--lp_launch_type=local_mp', f'--workdir={workdir}',
             f'--preset={FLAGS.preset}', f'--env={values["env"]}',
             f'--log_every={LOG_EVERY:g}', f'--placement={placement}',
             *extra]
  process = subprocess.Popen(  # pylint: disable=consider-using-with
      command, cwd=common.ROOT, stdout=subprocess.DEVNULL,
      stderr=subprocess.DEVNULL, start_new_session=True)
  try:
    deadline = time.time() + FLAGS.start_timeout
    first = None
    while first is None:
      if process.poll() is not None:
        raise RuntimeError(f'{" ".join(command)} exited with '
                           f'{process.returncode} before its first update.')
      if time.time() > deadline:
        raise RuntimeError('The program logged no update within '
                           f'{FLAGS.start_timeout:.0f} s.')
      time.sleep(LOG_EVERY)
      updated = [row for row in _rows(workdir) if row['learner_steps'] > 0]
      first = updated[0]['walltime'] if updated else None
    begin = first + FLAGS.settle
    end = begin + FLAGS.windows * FLAGS.window_seconds
    time.sleep(max(0.0, begin - time.time()))
    pids = _node_pids(workdir)
    before = {label: _cpu_seconds(pid) for label, pid in pids.items()}
    time.sleep(max(0.0, end - time.time()) + 2 * LOG_EVERY)
    after = {label: _cpu_seconds(pid) for label, pid in pids.items()}
  finally:
    os.killpg(process.pid, signal.SIGINT)
    try:
      process.wait(timeout=120)
    except subprocess.TimeoutExpired:
      os.killpg(process.pid, signal.SIGKILL)
  rows = _rows(workdir)
  seconds = FLAGS.windows * FLAGS.window_seconds
  return {
      'command': ' '.join(command[1:]).replace(workdir, '<workdir>'),
      'agent_steps_per_second': summed_window_rates(
          _actor_rows(workdir), begin, FLAGS.window_seconds, FLAGS.windows),
      'updates_per_second': window_rates(
          rows, begin, FLAGS.window_seconds, FLAGS.windows, 'learner_steps'),
      'cores_by_node': {label: (after[label] - before[label]) / seconds
                        for label in pids},
  }


def main(argv):
  del argv
  values = _preset()
  cores = len(os.sched_getaffinity(0))
  actor, learner = bare_rates(values)
  batch = int(values['batch_size'])
  ratio = float(values['samples_per_insert'])
  a, u = common.median(actor), common.median(learner)
  machine_limit = limit(a, u, ratio, batch, cores)
  programs = {}
  for placement in FLAGS.placements:
    program = program_rates(values, placement)
    steps = common.median(program['agent_steps_per_second'])
    updates = common.median(program['updates_per_second'])
    programs[placement] = {
        **program, 'median_agent_steps_per_second': steps,
        'median_samples_per_second': updates * batch,
        'ratio_to_limit': steps / machine_limit}
  default = programs[FLAGS.placements[0]]
  result = {
      'preset': FLAGS.preset, 'env': values['env'], 'cores': cores,
      'samples_per_insert': ratio, 'batch_size': batch,
      'bare_actor_steps_per_second': actor,
      'in_memory_updates_per_second': learner,
      'limit_agent_steps_per_second': machine_limit,
      'limit_samples_per_second': machine_limit * ratio,
      'placements': FLAGS.placements, 'programs': programs,
      'ratio_to_limit': default['ratio_to_limit'],
      'goal_ratio_at_least_0.8': default['ratio_to_limit'] >= 0.8,
  }
  name = f'program_limit_{FLAGS.preset}'
  path = common.write_result(name, result)
  rows = [['bare actor loop, steps/s on a core', a],
          ['in-memory update, updates/s', u],
          ['limit at the replay ratio, agent steps/s', machine_limit]]
  for placement, program in programs.items():
    rows += [[f'--placement={placement}: agent steps/s',
              program['median_agent_steps_per_second']],
             [f'--placement={placement}: samples learned/s',
              program['median_samples_per_second']],
             [f'--placement={placement}: program / limit',
              program['ratio_to_limit']]]
  common.print_table(
      f'The program as users run it ({FLAGS.preset}, {values["env"]}, '
      f'{cores} cores), medians', ['figure', 'value'], rows)
  for placement, program in programs.items():
    common.print_table(f'Cores each node took (--placement={placement})',
                       ['node', 'cores'],
                       sorted(program['cores_by_node'].items()))
  print(f'\n{path}')


if __name__ == '__main__':
  define_flags()
  app.run(main)
