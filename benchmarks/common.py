"""What every benchmark shares: the machine's description, medians of
repeated measurements, CPU pinning, the bare loops (`bare_loops.py`) and
writing results.

Every benchmark prints a table and writes `benchmarks/results/<name>.json`
with the machine it ran on, its settings and its measured figures.
"""

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, 'benchmarks', 'results')
PYTHON = sys.executable


def machine() -> Dict[str, Any]:
  """Cores, CPU model, memory and software of this machine."""
  model = platform.processor() or 'unknown'
  try:
    with open('/proc/cpuinfo') as f:
      for line in f:
        if line.startswith('model name'):
          model = line.split(':', 1)[1].strip()
          break
  except OSError:
    pass
  memory_gib = None
  try:
    with open('/proc/meminfo') as f:
      for line in f:
        if line.startswith('MemTotal'):
          memory_gib = round(int(line.split()[1]) / 2**20, 1)
          break
  except OSError:
    pass
  return {
      'cores': os.cpu_count(),
      'cpu_model': model,
      'memory_gib': memory_gib,
      'python': platform.python_version(),
      'platform': platform.platform(),
  }


def serve_replay(env_name, capacity, min_replay_size, port_queue, stop_event):
  """A replay server with the program's own table (in a child process):
  puts its port on `port_queue` and serves until `stop_event` is set."""
  import reverb  # pylint: disable=g-import-not-at-top
  from agents.envs import environments  # pylint: disable=g-import-not-at-top
  from agents.apex_dqn.builder import ApeXDQNBuilder  # pylint: disable=g-import-not-at-top
  from agents.apex_dqn.config import ApeXDQNConfig  # pylint: disable=g-import-not-at-top
  environment = environments.resolve_discrete(env_name)
  config = ApeXDQNConfig(replay_capacity=capacity,
                         min_replay_size=min_replay_size)
  builder = ApeXDQNBuilder(config, environment)
  server = reverb.Server(builder.make_replay_tables())
  port_queue.put(server.port)
  stop_event.wait()
  server.stop()


def median(values: Iterable[float]) -> float:
  values = list(values)
  return statistics.median(values) if values else float('nan')


def pin_process(pid: int, cpus: Sequence[int]):
  """Pins every thread of process `pid` to `cpus` (Linux)."""
  try:
    threads = os.listdir(f'/proc/{pid}/task')
  except OSError:
    threads = [str(pid)]
  for thread in threads:
    try:
      os.sched_setaffinity(int(thread), set(cpus))
    except OSError:
      pass  # The thread ended meanwhile.


def start_bare_loop(kind: str, *flags_: str,
                    env: Optional[Dict[str, str]] = None) -> subprocess.Popen:
  """`bare_loops.py <kind> <flags>` (`env`: its environment), returned once
  it says it is ready; its progress lines ('<walltime> <work>') follow on
  its stdout."""
  process = subprocess.Popen(  # pylint: disable=consider-using-with
      [PYTHON, os.path.join(ROOT, 'benchmarks', 'bare_loops.py'), kind,
       *flags_],
      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
      cwd=ROOT, env=env)
  for line in process.stdout:
    if line.strip() == 'ready':
      return process
  raise RuntimeError(f'{process.args} exited with {process.wait()}.')


def bare_rates(lines: Sequence[str], windows: Sequence[Tuple[float, float]],
               margin: float = 1.0) -> List[float]:
  """Work per second of a bare loop in each of `windows`, from its progress
  lines ('<walltime> <work>'), leaving out `margin` seconds at each end."""
  points = [tuple(map(float, line.split())) for line in lines
            if len(line.split()) == 2]
  rates = []
  for begin, end in windows:
    inside = [(t, w) for t, w in points
              if begin + margin <= t <= end - margin]
    if len(inside) >= 2 and inside[-1][0] > inside[0][0]:
      rates.append((inside[-1][1] - inside[0][1]) /
                   (inside[-1][0] - inside[0][0]))
  return rates


def define_setting_repeats():
  """The flags of a benchmark that alternates settings of a bare loop:
  --repeats, --seconds measured in each, --warmup left out before."""
  from absl import flags  # pylint: disable=g-import-not-at-top
  flags.DEFINE_integer('repeats', 3, 'Repeats of each case and setting.')
  flags.DEFINE_float('seconds', 20.0, 'Seconds measured in each repeat.')
  flags.DEFINE_float('warmup', 3.0,
                     'Seconds left out after the loop says it is ready.')


def bare_loop_rate(kind: str, *flags_: str, warmup: float, seconds: float,
                   env: Optional[Dict[str, str]] = None) -> float:
  """Work per second of `bare_loops.py <kind> <flags>` (`env`: its
  environment) over `seconds`, after `warmup` seconds from when it says it
  is ready."""
  process = start_bare_loop(kind, *flags_, '--report_every=0.5', env=env)
  ready = time.time()
  try:
    time.sleep(warmup + seconds)
  finally:
    process.kill()
  lines = process.communicate()[0].splitlines()
  rate, = bare_rates(lines, [(ready + warmup, ready + warmup + seconds)],
                     margin=0.0)
  return rate


def write_result(name: str, result: Dict[str, Any]) -> str:
  """Writes `result` (with the machine) to benchmarks/results/<name>.json."""
  os.makedirs(RESULTS, exist_ok=True)
  path = os.path.join(RESULTS, f'{name}.json')
  payload = {'benchmark': name, 'machine': machine(), **result}
  with open(f'{path}.tmp', 'w') as f:
    json.dump(payload, f, indent=2, sort_keys=False, default=float)
    f.write('\n')
  os.replace(f'{path}.tmp', path)
  return path


def read_result(name: str) -> Dict[str, Any]:
  """A result written earlier by `write_result`, or {} if there is none."""
  path = os.path.join(RESULTS, f'{name}.json')
  if not os.path.exists(path):
    return {}
  with open(path) as f:
    return json.load(f)


def print_table(title: str, header: Sequence[str], rows: List[Sequence[Any]]):
  """A plain fixed-width table on stdout."""
  cells = [[str(h) for h in header]] + [
      [f'{c:,.2f}' if isinstance(c, float) else str(c) for c in row]
      for row in rows
  ]
  widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
  print(f'\n{title}')
  for index, row in enumerate(cells):
    print('  '.join(cell.rjust(width) for cell, width in zip(row, widths)))
    if index == 0:
      print('  '.join('-' * width for width in widths))
  sys.stdout.flush()
