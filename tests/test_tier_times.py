"""benchmarks/tier_times.py reads each tier's count of tests and pytest's
own seconds from the tier's output: pytest's summary lines, by hand;
benchmarks/test_costs.py sums the tests' costs per module."""

import pytest

from benchmarks import tier_times


def test_the_count_and_seconds_come_from_pytests_last_summary():
  output = (
      'collected 3 items\n'
      '=========== 2 passed in 1.50s ============\n'  # An earlier run.
      'FAILED? no: a later run\n'
      '= 907 passed, 7 skipped, 3 warnings in 2779.41s (0:46:19) =\n')
  assert tier_times.summary(output) == {'tests': 914,
                                        'pytest_seconds': 2779}
  # -q's summary has no rule around it; failures and errors count too.
  assert tier_times.summary(
      '1 failed, 818 passed, 1 skipped, 2 errors in 297.2s\n') == {
          'tests': 822, 'pytest_seconds': 297}
  with pytest.raises(ValueError, match='no pytest summary'):
    tier_times.summary('make: *** [Makefile:40: test] Error 2\n')


def test_test_costs_sum_each_module_and_rank_by_cpu():
  from benchmarks import test_costs  # pylint: disable=g-import-not-at-top
  costs = [{'test': 'tests/a.py::x', 'slow': True, 'wall': 10.0, 'cpu': 4.0},
           {'test': 'tests/b.py::y[1]', 'slow': False, 'wall': 2.0,
            'cpu': 3.0},
           {'test': 'tests/a.py::z', 'slow': False, 'wall': 1.5, 'cpu': 0.5},
           {'test': 'tests/b.py::y[2]', 'slow': False, 'wall': 2.0,
            'cpu': 3.5}]
  assert test_costs.by_module(costs) == {
      'tests/b.py': {'tests': 2, 'wall': 4.0, 'cpu': 6.5},
      'tests/a.py': {'tests': 2, 'wall': 11.5, 'cpu': 4.5}}
  assert list(test_costs.by_module(costs)) == ['tests/b.py', 'tests/a.py']
