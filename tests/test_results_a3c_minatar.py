"""results/a3c_minatar.py: A3C's MinAtar runs beside Young & Tian's AC(λ).

The published curve is interpolated between its readings by hand here; the
page is made from an a3c_default page's data written here, whose runs'
figures are chosen so that each cell of the page is known beforehand."""

import json

import numpy as np
import pytest

from results import a3c_minatar
from results import pages
from results import run


def test_ac_lambda_between_its_readings_is_linear():
  # Breakout: 9.9 at 1M frames and 12.4 at 1.5M; halfway, their mean.
  assert a3c_minatar.ac_lambda_at('breakout', 1_000_000) == 9.9
  assert a3c_minatar.ac_lambda_at('breakout', 1_250_000) == pytest.approx(
      (9.9 + 12.4) / 2)
  # Space Invaders: a fifth of the way from 2M (105.9) to 3M (141.4).
  assert a3c_minatar.ac_lambda_at('space_invaders', 2_200_000) == (
      pytest.approx(105.9 + 0.2 * (141.4 - 105.9)))
  with pytest.raises(ValueError, match='outside the readings'):
    a3c_minatar.ac_lambda_at('breakout', 6_000_000)


def _row(seed, final, sampled):
  return {'seed': seed, 'final_mean': final, 'final_std': 1.5,
          'training_episodes': {'mean_return': sampled, 'episodes': 100,
                                'from_steps': 950_000},
          'best_round': {'mean_return': final + 2.0, 'actor_steps': 800_000},
          'last_round': {'mean_return': final, 'actor_steps': 990_000},
          'kept': True, 'learned': True, 'actor_steps': 1_000_000,
          'wall_clock_minutes': 25.0}


# An a3c_default page's data: two MinAtar games of 3 seeds beside CartPole,
# which this page leaves out.
DEFAULT = {
    'configuration': {'t_max': 20, 'popart': True, 'bounded_mean': True},
    'final_episodes': 30,
    'steps': {'cartpole': 200_000, 'breakout': 1_000_000,
              'space_invaders': 1_000_000},
    'envs': {'cartpole': 'gym:CartPole-v1', 'breakout': 'minatar:breakout',
             'space_invaders': 'minatar:space_invaders'},
    'random': {'cartpole': {'mean': 22.0, 'std': 11.0},
               'breakout': {'mean': 0.5, 'std': 0.7},
               'space_invaders': {'mean': 2.9, 'std': 1.8}},
    'tasks': {'cartpole': [_row(0, 500.0, 480.0)],
              'breakout': [_row(0, 6.0, 5.0), _row(1, 8.0, 7.0),
                           _row(2, 10.0, 9.0)],
              'space_invaders': [_row(0, 40.0, 30.0), _row(1, 50.0, 35.0),
                                 _row(2, 60.0, 40.0)]},
}


@pytest.fixture
def page(tmp_path, monkeypatch):
  monkeypatch.setattr(a3c_minatar, 'RESULTS', str(tmp_path))
  monkeypatch.setattr(run, 'RESULTS', str(tmp_path))
  (tmp_path / 'a3c_default.json').write_text(json.dumps(DEFAULT))
  a3c_minatar.main([])
  data = json.loads((tmp_path / 'a3c_minatar.json').read_text())
  return data, (tmp_path / 'a3c_minatar.md').read_text()


def test_each_game_beside_ac_lambda_at_the_same_frames(page):
  data, text = page
  assert list(data['games']) == ['breakout', 'space_invaders']
  assert 'arXiv:1903.03176' in text and 'commit 4241f24' in text
  # The workers' last 100 episodes: mean ± sample sd over the seeds, each
  # seed, then AC(0.8) at 1M frames and at 4.95M.
  sd = np.std([5.0, 7.0, 9.0], ddof=1)
  assert (f'| Breakout | 7.0 ± {sd:.1f} | [5.0, 9.0] | 5.0 | 7.0 | 9.0 | '
          '9.9 | 17.7 |') in text
  assert '| Space Invaders | 35.0 ± 5.0 |' in text
  assert '| 51.8 | 185.1 |' in text
  # The final policies, greedy, beside the random policy.
  assert '| Breakout | 8.0 ± 2.0 |' in text and '| 0.5 ± 0.7 |' in text
  assert 'not the published curves\' protocol' in text
  assert 'CartPole' not in text
  assert ('where they depart from the paper: `--t_max=20` (paper: 5), '
          '`--popart=True` (paper: False)),') in text  # No Gaussian's.


def test_the_page_is_made_again_from_its_json(page, monkeypatch):
  data, text = page
  monkeypatch.setattr(pages, 'load', lambda name: data)
  assert pages.render(a3c_minatar.ANALYSIS) == text


def test_without_minatar_runs_it_says_what_to_run():
  default = dict(DEFAULT, tasks={'cartpole': DEFAULT['tasks']['cartpole']})
  with pytest.raises(ValueError, match='--tasks=breakout,space_invaders'):
    a3c_minatar.collect(default)
