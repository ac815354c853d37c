"""The wall-clock time of each test tier as a new user or CI meets it: a
fresh clone of the checkout's HEAD, then the tier's command, the virtual
environment's set-up included; with nothing else running.

  .venv/bin/python benchmarks/tier_times.py                 both tiers
  .venv/bin/python benchmarks/tier_times.py --tiers="make test"

Each tier's entry of benchmarks/results/test_tiers.json is replaced by its
new measurement: its seconds, pytest's own seconds and count of tests, and
the commit it ran, which the README shows beside the time, so that a time
measured on older code says so. A tier that fails is reported and not
recorded.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Dict, List

from absl import app
from absl import flags

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULT = os.path.join(ROOT, 'benchmarks', 'results', 'test_tiers.json')
# Each tier: its command, as the README and CI give it.
TIERS = {'make test': ['make', 'test'], 'make test-all': ['.ci/run']}

flags.DEFINE_list('tiers', list(TIERS), 'The tiers to time, of: '
                  + ', '.join(TIERS) + '.')
flags.DEFINE_string('output_dir', None, 'Where to keep each tier\'s whole '
                    'output (its slowest tests, its skips), as <tier>.log; '
                    'none: not kept.')
FLAGS = flags.FLAGS

# pytest's last line: "914 passed, 3 skipped, ... in 2779.41s (0:46:19)".
_SUMMARY = re.compile(r'^=*\s*(?P<counts>.*?) in (?P<seconds>[0-9.]+)s\b',
                      re.MULTILINE)


def summary(output: str) -> Dict[str, float]:
  """pytest's count of tests (passed, failed, skipped and errors together)
  and its own seconds, from the last summary line of `output`."""
  matches = list(_SUMMARY.finditer(output))
  if not matches:
    raise ValueError('no pytest summary line in the output')
  last = matches[-1]
  tests = sum(int(count) for count, kind in re.findall(
      r'(\d+) (passed|failed|skipped|error|errors|xfailed|xpassed)',
      last['counts']))
  return {'tests': tests, 'pytest_seconds': round(float(last['seconds']))}


def time_tier(name: str, clone: str) -> Dict[str, object]:
  """Runs tier `name` in the fresh clone `clone`: its record."""
  started = time.monotonic()
  done = subprocess.run(TIERS[name], cwd=clone, stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT, text=True, check=False)
  seconds = round(time.monotonic() - started)
  if FLAGS.output_dir:
    os.makedirs(FLAGS.output_dir, exist_ok=True)
    with open(os.path.join(FLAGS.output_dir,
                           name.replace(' ', '_') + '.log'), 'w') as f:
      f.write(done.stdout)
  if done.returncode:
    sys.stdout.write(done.stdout[-4000:])
    raise RuntimeError(f'{name} failed (exit {done.returncode}) after '
                       f'{seconds} s: not recorded')
  return {'command': ' '.join(TIERS[name]), 'seconds': seconds,
          **summary(done.stdout)}


def main(argv: List[str]) -> None:
  del argv
  unknown = set(FLAGS.tiers) - set(TIERS)
  if unknown:
    raise app.UsageError(f'--tiers: no tier {", ".join(sorted(unknown))}; '
                         f'the tiers are {", ".join(TIERS)}.')
  commit = subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], cwd=ROOT,
                          capture_output=True, text=True,
                          check=True).stdout.strip()
  with open(RESULT) as f:
    data = json.load(f)
  for name in FLAGS.tiers:
    clone = tempfile.mkdtemp(prefix='test_tiers_')
    try:
      subprocess.run(['git', 'clone', '--quiet', ROOT, clone], check=True)
      record = time_tier(name, clone)
    finally:
      shutil.rmtree(clone, ignore_errors=True)
    record['commit'] = commit
    data['tiers'][name] = record
    print(f'{name}: {record["seconds"]} s, {record["tests"]} tests, on '
          f'{commit}', flush=True)
    with open(RESULT, 'w') as f:
      json.dump(data, f, indent=2)
      f.write('\n')


if __name__ == '__main__':
  app.run(main)
