"""results/minatar_c51.py: Ape-X C51's MinAtar page, rendered from a
synthetic JSON of five games x 3 seeds (tests/test_results_minatar.py's),
against figures worked out here: the IQM over games by trimming by hand,
the goal's verdict by the interval, and the difference to Ape-X DQN's
runs."""

import numpy as np
from scipy import stats

from results import minatar
from results import minatar_c51
from test_results_minatar import REFERENCE
from test_results_minatar import _data
from test_results_minatar import _table

# Every game at 1.5 to 1.7 times Young & Tian's DQN; Ape-X DQN's at 1.0.
SCALE = {0: 1.5, 1: 1.6, 2: 1.7}
MATCHED = {game: [REFERENCE[game][0] * SCALE[seed] for seed in range(3)]
           for game in REFERENCE}


def _page_data(matched):
  data = _data(matched)
  apex = {game: [{'seed': seed, 'matched_mean': REFERENCE[game][0]}
                 for seed in range(3)] for game in REFERENCE}
  data.update(apex_dqn=apex, goal=minatar_c51.GOAL,
              apex_dqn_iqm=[1.0, 1.0, 1.0],
              beside_apex_dqn=minatar.beside(
                  data['games'], apex, REFERENCE))
  return data


def test_each_game_beside_theirs_and_apex_dqn():
  page = minatar_c51.render(_page_data(MATCHED))
  rows = _table(page, '| game |')
  assert list(rows) == sorted(REFERENCE)
  for game, values in MATCHED.items():
    row = rows[game]
    assert row['Ape-X C51, epsilon 0.1'] == (
        f'{np.mean(values):.1f} ± {np.std(values, ddof=1):.1f}')
    assert row['Ape-X DQN (mean of its seeds)'] == f'{REFERENCE[game][0]:.1f}'


def test_the_goal_and_the_difference_to_apex_dqn():
  data = _page_data(MATCHED)
  page = minatar_c51.render(data)
  # 15 ratios, five each of 1.5, 1.6 and 1.7: the IQM (scipy's trimmed
  # mean, as rliable's) cuts 3 from each end, leaving two 1.5s, five 1.6s
  # and two 1.7s: 1.60.
  ratios = [SCALE[seed] for seed in range(3)] * 5
  assert stats.trim_mean(ratios, 0.25) == np.mean([1.5] * 2 + [1.6] * 5 +
                                                  [1.7] * 2)
  assert 'the IQM of each run\'s matched return over Young & Tian\'s DQN ' \
         'at 1M frames is 1.60' in page
  assert ('Against the goal of 1.3x Young & Tian\'s DQN: met: the whole '
          'interval is at or above it') in page
  beside = data['beside_apex_dqn']
  assert abs(beside['difference'] - 0.6) < 1e-9
  assert beside['low'] > 0
  assert 'Ape-X C51 ahead.' in page


def test_a_goal_not_met():
  low = {game: [value * 0.7 for value in values]
         for game, values in MATCHED.items()}
  page = minatar_c51.render(_page_data(low))
  assert ('Against the goal of 1.3x Young & Tian\'s DQN: not met: the '
          'whole interval is below it') in page
