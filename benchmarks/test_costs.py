"""What each test costs the machine: its wall seconds and CPU seconds,
summed per module, from a run of the suite with TEST_COSTS set
(tests/conftest.py writes one JSON line a test):

  TEST_COSTS=<file> make test-all
  .venv/bin/python benchmarks/test_costs.py --costs=<file>

The suite runs its tests two at a time on a 2-core machine, so its length is
about its CPU seconds over 2 where the CPU is the limit: a module's CPU
seconds say what it costs the suite, whatever else the machine did, where
its wall seconds change with the load. CPU seconds count a test's pytest
worker and the processes it started once they have ended and been waited
for (a program's nodes are, by their launcher); a process left running
after its test is not counted.
"""

import collections
import json
from typing import Dict, List

from absl import app
from absl import flags

flags.DEFINE_string('costs', None, 'The JSON lines TEST_COSTS wrote.',
                    required=True)
flags.DEFINE_integer('top', 30, 'How many of the costliest tests to list.')
FLAGS = flags.FLAGS


def read(path: str) -> List[Dict]:
  with open(path) as f:
    return [json.loads(line) for line in f if line.strip()]


def by_module(costs: List[Dict]) -> Dict[str, Dict[str, float]]:
  """{module: {'tests', 'wall', 'cpu'}}, costliest CPU first."""
  sums = collections.defaultdict(lambda: {'tests': 0, 'wall': 0.0, 'cpu': 0.0})
  for cost in costs:
    module = sums[cost['test'].split('::')[0]]
    module['tests'] += 1
    module['wall'] += cost['wall']
    module['cpu'] += cost['cpu']
  return dict(sorted(sums.items(), key=lambda item: -item[1]['cpu']))


def main(argv):
  del argv
  costs = read(FLAGS.costs)
  total_cpu = sum(cost['cpu'] for cost in costs)
  total_wall = sum(cost['wall'] for cost in costs)
  print(f'{len(costs)} tests: {total_wall:.0f} wall seconds (summed over '
        f'workers), {total_cpu:.0f} CPU seconds')
  for tier, slow in (('quick tier', False), ('slow tier', True)):
    tier_costs = [cost for cost in costs if cost['slow'] == slow]
    print(f'  {tier}: {len(tier_costs)} tests, '
          f'{sum(c["wall"] for c in tier_costs):.0f} wall s, '
          f'{sum(c["cpu"] for c in tier_costs):.0f} CPU s')
  print(f'\n{"module":48} {"tests":>5} {"wall s":>8} {"CPU s":>8} {"share":>6}')
  for module, sums in by_module(costs).items():
    print(f'{module:48} {sums["tests"]:5d} {sums["wall"]:8.0f} '
          f'{sums["cpu"]:8.0f} {sums["cpu"] / total_cpu:6.1%}')
  print(f'\nThe {FLAGS.top} costliest tests (CPU seconds):')
  for cost in sorted(costs, key=lambda c: -c['cpu'])[:FLAGS.top]:
    print(f'{cost["cpu"]:8.0f} {cost["wall"]:8.0f}  {cost["test"]}')


if __name__ == '__main__':
  app.run(main)
