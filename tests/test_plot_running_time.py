"""A resumed run's curves against running time: the pause between two
launches (a day here) is left out of its hours, of its evaluation rounds'
minutes and of its rate panels; a short silence inside a launch is not.
Its evaluation rounds are told apart by the round their rows name, so that
a round a stop cut short shifts no later one."""

import csv
import json
import os

import numpy as np
import pytest

from launch.runs import curves as curves_lib
from launch.runs import loggers
from results import long_run

START = 1_700_000_000.0  # Any wall time.
DAY = 86_400.0


def _write_log(workdir, label, rows):
  path = os.path.join(workdir, 'logs', label, 'logs.csv')
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, 'w', newline='') as f:
    writer = csv.DictWriter(f, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)


def _write_manifest(workdir, evaluation_episodes):
  with open(os.path.join(workdir, 'run.json'), 'w') as f:
    json.dump({'program': 'apex_dqn', 'env': 'gym:CartPole-v1',
               'frames_per_step': 1, 'config': {},
               'flags': {'evaluation_episodes': evaluation_episodes,
                         'log_every': 10}}, f)


def _resumed_run(workdir, silence=0.0):
  """Two launches of 600 s each (rows every 10 s), the second a day after
  the first; inside the first, from 300 s, `silence` seconds without a row.
  The actors log 50 steps/s in the first launch and 70 in the second; the
  evaluator ends an episode every 100 s of each launch."""
  first = [START + t for t in np.arange(0.0, 600.0, 10.0)]
  first = [t + silence if t - START >= 300.0 else t for t in first]
  second = [START + silence + DAY + t for t in np.arange(0.0, 600.0, 10.0)]
  _write_log(workdir, 'learner', [
      {'walltime': t, 'steps_per_second': 5.0, 'learner_steps': i}
      for i, t in enumerate(first + second)])
  _write_log(workdir, 'actor', [
      {'walltime': t, 'steps_per_second': rate, 'actor_steps': i}
      for i, (t, rate) in enumerate(
          [(t, 50.0) for t in first] + [(t, 70.0) for t in second])])
  _write_log(workdir, 'evaluator', [
      {'walltime': t, 'episode_return': float(i), 'actor_steps': 100 * i,
       'learner_steps': i}
      for i, t in enumerate(first[10::10] + second[10::10])])


def test_the_pause_between_launches_is_left_out_of_the_hours(tmp_path):
  _resumed_run(str(tmp_path))
  curves = curves_lib.run_curves(str(tmp_path), smoothing=1)
  # The first launch's rows run from 0 to 590 s; the second's first row
  # follows the first's last, and the gap between them (a day and 10 s) is
  # left out whole.
  expected = [100, 200, 300, 400, 500, 590 + 100, 590 + 200, 590 + 300,
              590 + 400, 590 + 500]
  np.testing.assert_allclose(curves['hours'] * 3600.0, expected)
  np.testing.assert_allclose(curves['learner_hours'][-1] * 3600.0, 590 + 590)
  # The actors' rate: 50 steps/s in the first 590 s, 70 in the second
  # launch, never the interpolation across the day between them.
  hours, rates = curves['actor_hours'], curves['actor_frames_per_second']
  assert hours[-1] * 3600.0 == pytest.approx(1180.0)
  assert set(np.round(rates[(hours * 3600.0 < 580.0)], 6)) == {50.0}
  assert set(np.round(rates[(hours * 3600.0 > 600.0)], 6)) == {70.0}


def test_a_silence_shorter_than_a_pause_is_running_time(tmp_path):
  _resumed_run(str(tmp_path), silence=curves_lib.PAUSE_SECONDS - 60.0)
  curves = curves_lib.run_curves(str(tmp_path), smoothing=1)
  silence = curves_lib.PAUSE_SECONDS - 60.0
  # Episodes after the silence (300 s on) carry it; the day does not count.
  expected = [100, 200, 300 + silence, 400 + silence, 500 + silence]
  expected += [590 + silence + 100 * k for k in range(1, 6)]
  np.testing.assert_allclose(curves['hours'] * 3600.0, expected)


def test_evaluation_rounds_count_minutes_of_running_time(tmp_path):
  _resumed_run(str(tmp_path))
  _write_manifest(str(tmp_path), evaluation_episodes=5)
  curves = curves_lib.run_curves(str(tmp_path), smoothing=1)
  rounds = long_run.evaluation_rounds(str(tmp_path), curves['clock'])
  # Rounds of 5 episodes: the first ends at 500 s, the second at 590 + 500.
  assert [r['minutes'] * 60.0 for r in rounds] == pytest.approx(
      [500.0, 1090.0])
  assert [r['mean_return'] for r in rounds] == [2.0, 7.0]


def test_rounds_are_split_by_name_then_by_count():
  nan = float('nan')
  # Unnamed rows (older logs) in chunks of 3, the last chunk short; named
  # rounds: one whole, one cut short, one whole again.
  started = [nan] * 7 + [10.0] * 3 + [20.0] * 2 + [30.0] * 3
  assert loggers.split_rounds(started, 3) == [
      [0, 1, 2], [3, 4, 5], [7, 8, 9], [12, 13, 14]]
  assert loggers.split_rounds([None, None, 5.0, 5.0], 2) == [[0, 1], [2, 3]]
  assert loggers.split_rounds([], 2) == []


def test_a_round_cut_short_by_a_stop_shifts_no_later_round(tmp_path):
  # Rounds of 3: the second launch's first round was cut after 2 episodes.
  returns = [1.0, 2.0, 3.0, 10.0, 20.0, 4.0, 5.0, 6.0]
  started = [100.0] * 3 + [200.0] * 2 + [300.0] * 3
  _write_log(str(tmp_path), 'evaluator', [
      {'walltime': START + 10 * i, 'episode_return': value,
       'actor_steps': 100 * i, 'learner_steps': 7 * i,
       loggers.ROUND_STARTED: key, loggers.ROUND_LEARNER_STEPS: key / 10}
      for i, (value, key) in enumerate(zip(returns, started))])
  _write_manifest(str(tmp_path), evaluation_episodes=3)
  curves = curves_lib.run_curves(str(tmp_path), smoothing=1)
  rounds = long_run.evaluation_rounds(str(tmp_path), curves['clock'])
  assert [r['mean_return'] for r in rounds] == [2.0, 5.0]
  # Each round's spread: the sample deviation of 1, 2, 3 and of 4, 5, 6.
  assert [r['std_return'] for r in rounds] == [1.0, 1.0]
  assert [r['episodes'] for r in rounds] == [3, 3]
  # The parameters evaluated: the learner's step as each round began.
  assert [r['learner_steps'] for r in rounds] == [10, 30]
  assert [r['actor_steps'] for r in rounds] == [0, 500]
