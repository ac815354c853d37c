"""results/a3c_diagnosis.py: the rule by which a run keeps what it
learned, and the learner log's windows, against values worked out here."""

import csv

import numpy as np
import pytest

from results import a3c_diagnosis


def _rounds(*returns):
  return [{'actor_steps': 10_000 * (index + 1), 'mean_return': value}
          for index, value in enumerate(returns)]


@pytest.mark.parametrize('returns, floor, ceiling, kept', [
    ((475.0, 500.0, 87.1), 0.0, 500.0, False),  # The CartPole run.
    ((475.0, 500.0, 451.0), 0.0, 500.0, True),  # 49 below 500: within 50.
    ((475.0, 500.0, 449.0), 0.0, 500.0, False),
    ((-100.0, -76.6, -236.0), -500.0, 0.0, False),  # The Acrobot.
    ((-100.0, -80.0, -120.0), -500.0, 0.0, True),  # 40 below: within 42.
    ((-100.0, -80.0, -123.0), -500.0, 0.0, False),
    # A best near the floor: 10% of the range (50) is the tolerance.
    ((-480.0, -470.0, -500.0), -500.0, 0.0, True),
    ((-480.0, -440.0, -495.0), -500.0, 0.0, False),
])
def test_a_run_keeps_within_a_tenth_of_its_best(returns, floor, ceiling, kept):
  result = a3c_diagnosis.keeps(_rounds(*returns), floor, ceiling)
  assert result['kept'] == kept
  assert result['best']['mean_return'] == max(returns)
  assert result['final']['mean_return'] == returns[-1]
  # Learned: the best is 10% of the range or more above the floor.
  assert result['learned'] == (max(returns) - floor >= 0.1 * (ceiling - floor))


def test_a_flat_runs_gap_is_the_best_of_n_normal_rounds_against_the_last():
  assert a3c_diagnosis.flat_run_gap(1) == 0.0  # The last is the best.
  # Two rounds: max(Z1 - Z2, 0) / sqrt(2) is max(N(0, 1), 0), whose 95%
  # quantile is the normal's, 1.645.
  assert a3c_diagnosis.flat_run_gap(2) == pytest.approx(1.645, abs=0.03)
  # More rounds, a higher best: the gap grows with the rounds' count.
  assert (a3c_diagnosis.flat_run_gap(2) < a3c_diagnosis.flat_run_gap(10) <
          a3c_diagnosis.flat_run_gap(30))


def test_a_lost_runs_gap_is_measured_in_its_rounds_standard_errors():
  rounds = _rounds(5.0, 11.0, 9.0)
  for row, spread in zip(rounds, (1.0, 4.0, 3.0)):
    row.update(std_return=spread, episodes=10)
  result = a3c_diagnosis.keeps(rounds, 0.0, 20.0, final_mean=10.2)
  # 11 - 9 = 2 over sqrt(4**2 / 10 + 3**2 / 10) = sqrt(2.5).
  assert result['gap_errors'] == pytest.approx(2.0 / np.sqrt(2.5))
  assert result['flat_gap'] == a3c_diagnosis.flat_run_gap(3)
  # Margin 1.1 below 11: the last round (9) is out, the final policy in.
  assert not result['kept'] and result['final_policy_kept']
  assert not a3c_diagnosis.keeps(rounds, 0.0, 20.0,
                                 final_mean=9.8)['final_policy_kept']
  # Rounds that do not say their spread: no gap.
  assert 'gap_errors' not in a3c_diagnosis.keeps(_rounds(5.0, 11.0, 9.0),
                                                 0.0, 20.0)


def test_windows_are_medians_of_the_learner_log(tmp_path):
  workdir = tmp_path / 'run'
  (workdir / 'logs' / 'learner').mkdir(parents=True)
  rows = [{'actor_steps': 2_500 * i, 'entropy': float(i),
           'staleness': '' if i == 0 else 3.0, 'walltime': 100.0 + i}
          for i in range(9)]  # 0 to 20,000 actor steps.
  with open(workdir / 'logs' / 'learner' / 'logs.csv', 'w', newline='') as f:
    writer = csv.DictWriter(f, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
  windows = a3c_diagnosis.windows(str(workdir))
  # Rows 0-3 are below 10,000, rows 4-7 below 20,000, row 8 at 20,000.
  assert [w['from_steps'] for w in windows] == [0, 10_000, 20_000]
  assert [w['rows'] for w in windows] == [4, 4, 1]
  assert [w['entropy'] for w in windows] == [np.median([0, 1, 2, 3]),
                                             np.median([4, 5, 6, 7]), 8.0]
  assert windows[0]['staleness'] == 3.0  # The empty cell is left out.
  assert windows[0]['update_norm'] is None  # A column the log lacks.


def test_worker_returns_are_each_windows_episodes_across_workers(tmp_path):
  workdir = tmp_path / 'run'
  # Two workers' episodes: (actor steps at the episode's end, return).
  episodes = {'actor': [(4_000, 10.0), (12_000, 30.0)],
              'actor_1': [(9_999, 20.0), (10_000, 50.0), (25_000, 7.0)]}
  for label, rows in episodes.items():
    (workdir / 'logs' / label).mkdir(parents=True)
    with open(workdir / 'logs' / label / 'logs.csv', 'w', newline='') as f:
      writer = csv.writer(f)
      writer.writerow(['actor_steps', 'episode_return'])
      writer.writerows(rows)
  returns = a3c_diagnosis.worker_returns(str(workdir))
  # 0-9,999: 10 and 20; 10,000-19,999: 30 and 50; none in the next; 7.
  assert returns == [
      {'from_steps': 0, 'mean_return': 15.0, 'episodes': 2},
      {'from_steps': 10_000, 'mean_return': 40.0, 'episodes': 2},
      {'from_steps': 20_000, 'mean_return': 7.0, 'episodes': 1}]
  assert a3c_diagnosis.worker_returns(str(tmp_path / 'unbanked')) == []


def test_the_last_worker_episodes_are_the_latest_by_clock_over_workers(
    tmp_path):
  workdir = tmp_path / 'run'
  # (wall-clock, actor steps, return): worker 0 logs at 1, 3, 5 s and
  # worker 1 at 2 and 4 s, each with the count of steps it saw then.
  episodes = {'actor': [(1.0, 100, 10.0), (3.0, 300, 30.0), (5.0, 500, 50.0)],
              'actor_1': [(2.0, 210, 20.0), (4.0, 420, 40.0)]}
  for label, rows in episodes.items():
    (workdir / 'logs' / label).mkdir(parents=True)
    with open(workdir / 'logs' / label / 'logs.csv', 'w', newline='') as f:
      writer = csv.writer(f)
      writer.writerow(['walltime', 'actor_steps', 'episode_return'])
      writer.writerows(rows)
  # The last three by the clock: 30 (3 s), 40 (4 s), 50 (5 s).
  assert a3c_diagnosis.last_worker_episodes(str(workdir), count=3) == {
      'mean_return': 40.0, 'episodes': 3, 'from_steps': 300.0}
  assert a3c_diagnosis.last_worker_episodes(str(workdir))['episodes'] == 5
  assert a3c_diagnosis.last_worker_episodes(str(tmp_path / 'none')) is None
