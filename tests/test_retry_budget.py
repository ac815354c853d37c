"""`resilience.RetryBudget`, the actors' budget of environment failures:
its sliding window (a failure older than `window_seconds` no longer counts)
and its back-off (the wait before a rebuild doubles with each failure in
the window: 1 s, 2 s, 4 s, ..., at most 30 s).

Time is the budget's own `clock` argument, driven by the test, so nothing
waits. Expectations are hand-written sequences, and for a long random
sequence of failures a slow reference that recounts, at each failure, all
failures so far that lie within the window.
"""

import numpy as np
import pytest

from agents.envs import resilience


class Clock:
  """A clock that moves only when the test moves it."""

  def __init__(self, now: float = 1000.0):
    self.now = now

  def __call__(self) -> float:
    return self.now


def test_the_fifth_failure_within_the_window_exhausts_the_default_budget():
  clock = Clock()
  budget = resilience.RetryBudget(clock=clock)
  assert (budget.max_failures, budget.window_seconds) == (5, 60.0)
  answers = []
  for _ in range(5):
    answers.append(budget.record_failure())
    clock.now += 10.0  # 5 failures within 40 s.
  assert answers == [True, True, True, True, False]


def test_the_backoff_doubles_with_each_failure_up_to_30_seconds():
  clock = Clock()
  budget = resilience.RetryBudget(max_failures=100, clock=clock)
  waits = []
  for _ in range(8):
    assert budget.record_failure()
    waits.append(budget.backoff_seconds)
    clock.now += 1.0
  assert waits == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]


def test_failures_older_than_the_window_no_longer_count():
  clock = Clock(0.0)
  budget = resilience.RetryBudget(max_failures=3, window_seconds=60.0,
                                  clock=clock)
  for now in (0.0, 30.0):
    clock.now = now
    assert budget.record_failure()
  assert budget.backoff_seconds == 2.0
  # At 59.5 s the failures of 0 s and 30 s still count: a third exhausts it.
  clock.now = 59.5
  assert not budget.record_failure()

  budget = resilience.RetryBudget(max_failures=3, window_seconds=60.0,
                                  clock=clock)
  for now in (0.0, 30.0):
    clock.now = now
    budget.record_failure()
  # At 60.5 s the first is older than the window: two failures count, and
  # the back-off is that of a second failure.
  clock.now = 60.5
  assert budget.record_failure()
  assert budget.backoff_seconds == 2.0
  # Long after, one failure alone: the back-off starts again at 1 s.
  clock.now = 1000.0
  assert budget.record_failure()
  assert budget.backoff_seconds == 1.0


def test_a_steady_trickle_of_failures_never_exhausts_it():
  # One failure every 21 s: never more than 3 within 60 s, so a budget of 4
  # lasts, and the back-off settles at that of a third failure. One every
  # 15 s puts a fourth in the window (0, 15, 30, 45 s).
  clock = Clock(0.0)
  budget = resilience.RetryBudget(max_failures=4, window_seconds=60.0,
                                  clock=clock)
  waits = []
  for step in range(50):
    clock.now = 21.0 * step
    assert budget.record_failure(), step
    waits.append(budget.backoff_seconds)
  assert waits == [1.0, 2.0] + [4.0] * 48
  budget = resilience.RetryBudget(max_failures=4, window_seconds=60.0,
                                  clock=clock)
  answers = []
  for step in range(6):
    clock.now = 15.0 * step
    answers.append(budget.record_failure())
  assert answers == [True, True, True, False, False, False]


def reference(times, max_failures, window):
  """(answer, back-off) after each failure, recounted from scratch: the
  failures so far no more than `window` seconds before this one."""
  results = []
  for index, now in enumerate(times):
    count = sum(1 for then in times[:index + 1] if now - then <= window)
    results.append((count < max_failures, min(2.0**(count - 1), 30.0)))
  return results


@pytest.mark.parametrize('max_failures, window', [(5, 60.0), (3, 10.0),
                                                  (8, 300.0)])
def test_against_a_recount_of_every_failure_in_the_window(max_failures,
                                                          window):
  rng = np.random.default_rng(max_failures)
  # Bursts and lulls: gaps from a fraction of a second to several windows.
  gaps = rng.exponential(window / 4, size=400) * rng.choice(
      [0.05, 1.0, 4.0], size=400)
  times = list(np.cumsum(gaps))
  clock = Clock()
  budget = resilience.RetryBudget(max_failures, window, clock=clock)
  results = []
  for now in times:
    clock.now = now
    results.append((budget.record_failure(), budget.backoff_seconds))
  expected = reference(times, max_failures, window)
  assert results == expected
  # The sequence exercised both answers and several back-offs.
  assert {answer for answer, _ in expected} == {True, False}
  assert len({wait for _, wait in expected}) >= 3


def test_without_a_clock_it_counts_in_real_time():
  # The actors' budget (`ActorNode`) gives no clock: two failures a moment
  # apart fall within an hour of each other.
  budget = resilience.RetryBudget(max_failures=2, window_seconds=3600.0)
  assert budget.record_failure()
  assert not budget.record_failure()
  assert budget.backoff_seconds == 2.0
