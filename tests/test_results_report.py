"""results/run.py's speed-up table (the A3C paper's Table 2 question) against
figures worked out by hand."""

from results import run


def _row(minutes, steps, frames_per_second):
  return dict(minutes_to_threshold=minutes, steps_to_threshold=steps,
              actor_frames_per_second=frames_per_second)


def test_speedup_is_time_to_threshold_over_the_first_settings():
  spec = dict(threshold=400, settings={'1 worker': [], '2 workers': [],
                                       '4 workers': []},
              speedup=dict(source='paper', values=[1.0, 2.1, 3.7]))
  figures = {
      # Medians over the seeds that reached 400: 12 min and 100K steps.
      '1 worker': [_row(10.0, 90_000, 150.0), _row(12.0, 100_000, 160.0),
                   _row(14.0, 110_000, 140.0)],
      # 4 min (median of 3, 4, 5); 120K steps; 2.5x the frames per second.
      '2 workers': [_row(3.0, 110_000, 370.0), _row(4.0, 120_000, 380.0),
                    _row(5.0, 130_000, 375.0)],
      # Two seeds never reached 400: the median is the one that did.
      '4 workers': [_row(None, None, 500.0), _row(6.0, 200_000, 520.0),
                    _row(None, None, 480.0)],
  }
  lines = run.speedup_table(spec, figures)
  rows = {line.split(' | ')[0].lstrip('| '): line.strip(' |').split(' | ')
          for line in lines if line.startswith('| ') and 'worker' in line}
  # speed-up = 12 / t; frames/s ratio = mean fps / 150; data = 100K / steps;
  # then how many of the setting's seeds reached 400.
  assert rows['1 worker'][1:] == ['1.00', '1', '1.00', '1.00', '3/3']
  assert rows['2 workers'][1:] == ['3.00', '2.1', '2.50', '0.83', '3/3']
  assert rows['4 workers'][1:] == ['2.00', '3.7', '3.33', '0.50', '1/3']
  # The text says that the medians leave out the seeds that never reached
  # it, and which way that biases them.
  assert 'biased fast' in lines[0]


def test_a_setting_that_never_reached_the_threshold_says_so():
  spec = dict(threshold=400, settings={'1 worker': [], '8 workers': []},
              speedup=dict(source='paper', values=[1.0, 6.9]))
  figures = {'1 worker': [_row(12.0, 100_000, 150.0)],
             '8 workers': [_row(None, None, 300.0)]}
  line = [l for l in run.speedup_table(spec, figures)
          if l.startswith('| 8 workers')][0]
  assert line == ('| 8 workers | not reached | 6.9 | 2.00 | not reached | '
                  '0/1 |')
