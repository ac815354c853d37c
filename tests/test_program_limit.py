"""benchmarks/program_limit.py: the machine's limit at a replay ratio, and
the program's rates over windows of its log, against values worked out by
hand."""

import pytest

from benchmarks import program_limit


def test_the_limit_adds_acting_on_each_core_to_learning_on_all():
  # The figures the benchmark starts from on Pong: a bare actor loop of
  # 700 steps/s on a core, 20 updates of 64 a second with both cores, 8
  # samples per insert. A step costs 1/1400 s of the machine acting and
  # 8 / (64 * 20) = 1/160 s learning: 1 / (1/1400 + 1/160) = 143.6 steps/s.
  assert program_limit.limit(700.0, 20.0, 8.0, 64, 2) == pytest.approx(
      1 / (1 / 1400 + 1 / 160))
  assert program_limit.limit(700.0, 20.0, 8.0, 64, 2) == pytest.approx(
      143.59, abs=0.01)
  # Without learning, the cores' acting alone; more cores, a higher limit.
  assert program_limit.limit(700.0, 1e12, 8.0, 64, 2) == pytest.approx(1400)
  assert (program_limit.limit(700.0, 20.0, 8.0, 64, 16) >
          program_limit.limit(700.0, 20.0, 8.0, 64, 2))


def test_window_rates_are_changes_over_time_within_each_window():
  # A row every 5 s from t = 100: 90 steps/s until t = 160, 120 after.
  rows, steps = [], 0.0
  for t in range(100, 225, 5):
    rows.append({'walltime': float(t), 'actor_steps': steps})
    steps += 5 * (90 if t < 160 else 120)
  rates = program_limit.window_rates(rows, 100.0, 60.0, 2, 'actor_steps')
  assert rates == pytest.approx([90.0, 120.0])
  # A window past the last row has no rate.
  assert program_limit.window_rates(rows, 300.0, 60.0, 1, 'actor_steps') == []
