"""results/minatar_bf16.py: the page of Ape-X DQN's learner in bfloat16
beside float32 on MinAtar, rendered from synthetic JSON (one game x 3
seeds each way) against figures worked out here (means, Welch's t-test from
scipy, the verdicts), and the checks that keep a float32 run or a CPU
without bfloat16 off the page."""

import numpy as np
import pytest
from scipy import stats

from results import minatar
from results import minatar_bf16
from test_results_minatar import REFERENCE
from test_results_minatar import _data
from test_results_minatar import _table

FLOAT32 = {'breakout': [10.5, 15.2, 10.8]}


def _page_data(bf16):
  data = _data(bf16)
  float32 = {game: [{'seed': seed, 'matched_mean': value,
                     'learner_updates': 124_000 + seed}
                    for seed, value in enumerate(values)]
             for game, values in FLOAT32.items()}
  data.update(float32=float32, beside_float32=minatar.beside(
      data['games'], float32, REFERENCE))
  return data


def test_level_with_float32_says_no_difference():
  bf16 = {'breakout': [11.0, 14.0, 12.0]}
  page = minatar_bf16.render(_page_data(bf16))
  row = _table(page, '| game |')['breakout']
  assert row['float32 (results/minatar.md)'] == (
      f'{np.mean(FLOAT32["breakout"]):.1f} ± '
      f'{np.std(FLOAT32["breakout"], ddof=1):.1f}')
  p = stats.ttest_ind(bf16['breakout'], FLOAT32['breakout'],
                      equal_var=False).pvalue
  cell = row['bfloat16 less float32, 95% CI, Welch\'s p']
  assert cell.startswith(
      f'{np.mean(bf16["breakout"]) - np.mean(FLOAT32["breakout"]):.1f} ')
  assert f'Welch\'s p = {p:.2f}: no difference shown' in cell
  assert 'no difference shown.' in page
  assert 'float32 124,000, 124,001, 124,002' in page


def test_far_below_float32_says_behind():
  bf16 = {'breakout': [2.0, 2.5, 3.0]}
  data = _page_data(bf16)
  page = minatar_bf16.render(data)
  cell = _table(page, '| game |')['breakout'][
      'bfloat16 less float32, 95% CI, Welch\'s p']
  assert cell.endswith('bfloat16 behind float32')
  assert data['beside_float32']['high'] < 0
  assert 'bfloat16 behind.' in page


def test_a_run_whose_learner_computed_in_float32_is_refused(tmp_path):
  (tmp_path / 'output.txt').write_text(
      'warning: --learner_precision=bfloat16, but this CPU has no bfloat16 '
      'arithmetic (no avx512_bf16 or amx_bf16 flag), only an emulation of '
      'it: the learner computes in float32.\n')
  assert minatar_bf16.learner_precision(str(tmp_path)) == 'float32'
  (tmp_path / 'output.txt').write_text(
      'The learner computes in bfloat16, its weights, optimiser state and '
      'priorities in float32 (--learner_precision=bfloat16; this CPU has '
      'avx512_bf16).\n')
  assert minatar_bf16.learner_precision(str(tmp_path)) == 'bfloat16'


def test_a_cpu_without_bfloat16_is_refused_before_any_run():
  with pytest.raises(SystemExit, match='no avx512_bf16 or amx_bf16 flag'):
    minatar_bf16.check_cpu(['sse2', 'avx2', 'avx512f'])
  minatar_bf16.check_cpu(['avx2', 'avx512_bf16'])  # Passes.
