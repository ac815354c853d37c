"""A long run's page gives every policy of the run that was evaluated for
its final figure, not only the last: a run resumed after an evaluation fell
short says so, earlier tries in the order they were made, each with its own
returns worked out here from the episodes; and no path of the machine that
made the evaluation reaches the page."""

import json
import statistics

from results import long_run


def _evaluation(tmp_path, learner_steps, returns):
  """A JSON with the keys `programs/evaluate.py --output` writes (that
  module's flags are not imported here: they clash with other programs'
  in one test process)."""
  path = tmp_path / f'evaluation-{learner_steps}.json'
  path.write_text(json.dumps({
      'program': 'apex_dqn', 'env': 'atari:Pong',
      'source': ('/some/machine/runs/pong/checkpoints/learner/'
                 f'ckpt-{learner_steps}'),
      'learner_steps': learner_steps, 'epsilon': 0.0, 'seed': 0,
      'returns': returns, 'atari_evaluation': 'sticky',
      'episodes': len(returns), 'mean': statistics.mean(returns),
      'median': statistics.median(returns),
      'std': statistics.stdev(returns), 'min': min(returns),
      'max': max(returns)}))
  return str(path)


ROUNDS = [{'round': 1, 'mean_return': 17.0, 'min_return': 16.0,
           'max_return': 18.0, 'minutes': 60.0, 'actor_frames': 4000,
           'learner_steps': 100, 'actor_steps': 1000}]


def _data(final, earlier, **flags):
  return {'title': 'Pong', 'command': None, 'preset': 'atari_small',
          'flags': {'seed': 1, 'evaluation_episodes': 2,
                    'evaluation_period': 100, 'env': 'atari:Pong',
                    'atari_evaluation': 'sticky', **flags},
          'frames_per_step': 4, 'thresholds': [], 'notes': None,
          'speeds': {'actor_frames_per_second': 500.0,
                     'learner_updates_per_second': 18.0},
          'final_policy': final, 'earlier_policies': earlier}


def _page(final, earlier):
  return long_run.render('pong', _data(final, earlier), ROUNDS).split('\n')[2]


def test_the_page_gives_each_earlier_evaluation_in_order(tmp_path):
  tries = {900: [15.0, 20.0, 18.0], 500: [10.0, 12.0, 17.0]}
  final_returns = [19.0, 18.0, 21.0, 18.0]
  final = long_run._evaluated_policy(
      _evaluation(tmp_path, 1200, final_returns))
  # Given out of order, as a command line may list them.
  earlier = [long_run._evaluated_policy(_evaluation(tmp_path, s, r))
             for s, r in tries.items()]
  opening = _page(final, earlier)
  final_text = f'mean {statistics.mean(final_returns):.1f}'
  assert f'learner step 1,200), 4 episodes' in opening
  assert final_text in opening
  assert 'Before it, 2 earlier policies of the run' in opening
  before = opening.split('Before it')[1]
  positions = []
  for steps in (500, 900):
    returns = tries[steps]
    text = (f'learner step {steps:,}, 3 episodes: mean '
            f'{statistics.mean(returns):.1f} (sample sd '
            f'{statistics.stdev(returns):.1f}, median '
            f'{statistics.median(returns):g}, min {min(returns):g}, max '
            f'{max(returns):g})')
    assert text in before
    positions.append(before.index(text))
  assert positions == sorted(positions)
  assert 'machine' not in opening and 'ckpt' not in opening


def test_a_page_without_earlier_evaluations_says_nothing_of_them(tmp_path):
  final = long_run._evaluated_policy(_evaluation(tmp_path, 1200, [19.0, 18.0]))
  opening = _page(final, [])
  assert 'mean 18.5' in opening
  assert 'Before it' not in opening


def test_the_page_says_which_flags_a_resumed_launch_changed(tmp_path):
  final = long_run._evaluated_policy(_evaluation(tmp_path, 1200, [19.0, 18.0]))
  data = _data(final, [], learning_rate=6.25e-5)
  unchanged = long_run.render('pong', data, ROUNDS)
  assert 'every value the run used:' in unchanged
  assert 'resumed with changed values' not in unchanged
  # As run.json records a resuming launch that changed a flag.
  data['flag_changes'] = [{
      'launched': '2026-11-28T12:55:00Z',
      'changed': {'learning_rate': [1e-4, 6.25e-5]},
      'counts': {'actor_steps': 3104295, 'learner_steps': 401027}}]
  page = long_run.render('pong', data, ROUNDS)
  assert 'every value the run last launched with:' in page
  assert ('The run was resumed with changed values: at 401,027 learner '
          'updates and 3,104,295 actor steps (2026-11-28T12:55:00Z), '
          '`learning_rate` from 0.0001 to 6.25e-05. Before each change it '
          'used the earlier value.') in page


def test_a_status_opens_the_page_and_a_page_without_one_is_unchanged(
    tmp_path):
  final = long_run._evaluated_policy(_evaluation(tmp_path, 1200, [19.0, 18.0]))
  data = _data(final, [])
  without = long_run.render('pong', data, ROUNDS).split('\n')
  # A JSON written before the status existed has no such key.
  assert 'status' not in data
  data['status'] = 'Stopped at 2 hours, short of the budget.'
  lines = long_run.render('pong', data, ROUNDS).split('\n')
  assert lines[:4] == ['# Pong', '',
                       '**Stopped at 2 hours, short of the budget.**', '']
  assert lines[4:] == without[2:]
  assert lines[4].startswith('**One run (seed 1), so no spread over seeds.**')
