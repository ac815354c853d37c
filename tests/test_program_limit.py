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


def _actor_log(start, end, rate):
  """An actor's rows every 5 s from `start` to `end`, each with its steps/s
  since the row before (`rate(t)` over that interval)."""
  return [{'walltime': float(t), 'steps_per_second': float(rate(t))}
          for t in range(start, end + 1, 5)]


def test_agent_steps_are_summed_from_each_actors_own_rate():
  # Two actors: one at 40 steps/s throughout, one at 10 until t = 160 and
  # 30 after (its row at 165 covers 160-165). Windows 100-160 and 160-220:
  # 40 + 10 = 50, then 40 + 30 = 70.
  steady = _actor_log(100, 225, lambda t: 40)
  faster = _actor_log(100, 225, lambda t: 10 if t <= 160 else 30)
  assert program_limit.summed_window_rates(
      [steady, faster], 100.0, 60.0, 2) == pytest.approx([50.0, 70.0])
  # The steps each row adds are its rate times its interval: 11 rows after
  # the first, 5 s each at 40 steps/s.
  counted = program_limit.counted_steps(steady[:12])
  assert counted[0]['steps'] == 0.0
  assert counted[-1]['steps'] == pytest.approx(11 * 5 * 40)


def test_a_window_where_an_actor_did_not_log_is_left_out():
  # The second actor's rows stop at t = 150: the second window has none of
  # its rows, so it is not counted as a slow window but left out.
  steady = _actor_log(100, 225, lambda t: 40)
  stopped = _actor_log(100, 150, lambda t: 20)
  assert program_limit.summed_window_rates(
      [steady, stopped], 100.0, 60.0, 2) == pytest.approx([60.0])
  assert program_limit.summed_window_rates([], 100.0, 60.0, 2) == []
