"""The learner's update compiled with XLA (`--jit_compile`) against
TensorFlow's own kernels.

On a 2-core machine the learner's update rate sets a run's pace
(`samples_per_insert` ties the actors to it), so a cheaper update is more
frames an hour. This measures the learner's same compiled step on a batch in
memory (`bare_loops.py learner`, the program's own code) with
`--jit_compile` off and on, the two alternating in every repeat so that a
machine's drift hits both alike, for each network the presets use; and the
seconds from the process's start to its first update (XLA compiles then).
Prints the median rate and every repeat, the ratio on/off, and writes
benchmarks/results/learner_xla.json.

  .venv/bin/python benchmarks/learner_xla.py   # about 6 minutes
  .venv/bin/python benchmarks/learner_xla.py --repeats=5 --seconds=30
"""

import time

from absl import app
from absl import flags

from benchmarks import common

flags.DEFINE_list('envs', ['atari:Pong', 'minatar:breakout'],
                  'Environments (each sets the network), one case each.')
flags.DEFINE_integer('batch_size', 64, 'The learner\'s batch (64: the '
                     'atari_small and minatar presets).')
common.define_setting_repeats()
FLAGS = flags.FLAGS

SETTINGS = (False, True)  # --jit_compile: off, on.


def _start_seconds(args) -> float:
  """Seconds from the start of `bare_loops.py <args>` to its first update
  done (it says `ready` after it)."""
  begin = time.time()
  common.start_bare_loop(*args).kill()
  return time.time() - begin


def main(argv):
  del argv
  cases = {env: ['learner', f'--env={env}', f'--batch_size={FLAGS.batch_size}']
           for env in FLAGS.envs}
  rates = {case: {setting: [] for setting in SETTINGS} for case in cases}
  starts = {case: {setting: [] for setting in SETTINGS} for case in cases}
  for repeat in range(FLAGS.repeats):
    for case, args in cases.items():
      for setting in SETTINGS:
        flag = f'--jit_compile={setting}'
        starts[case][setting].append(_start_seconds([*args, flag]))
        rate = common.bare_loop_rate(*args, flag, warmup=FLAGS.warmup,
                                     seconds=FLAGS.seconds)
        rates[case][setting].append(rate)
        print(f'repeat {repeat}: {case}, XLA {"on" if setting else "off"}: '
              f'{rate:.1f} updates/s, first update after '
              f'{starts[case][setting][-1]:.1f} s', flush=True)
  rows, result = [], {}
  for case in cases:
    off, on = (common.median(rates[case][s]) for s in SETTINGS)
    start_off, start_on = (common.median(starts[case][s]) for s in SETTINGS)
    rows.append([case, off, on, on / off, start_off, start_on,
                 ' '.join(f'{r:.1f}' for r in rates[case][False]),
                 ' '.join(f'{r:.1f}' for r in rates[case][True])])
    result[case] = {'off': rates[case][False], 'on': rates[case][True],
                    'median_off': off, 'median_on': on, 'ratio': on / off,
                    'start_seconds_off': starts[case][False],
                    'start_seconds_on': starts[case][True]}
  common.print_table(
      f'The learner\'s update without and with XLA (updates/s, batch '
      f'{FLAGS.batch_size}; seconds to the first update); medians of '
      f'{FLAGS.repeats}',
      ['case', 'off', 'on', 'on/off', 'start off', 'start on', 'off, each',
       'on, each'], rows)
  common.write_result('learner_xla', {
      'batch_size': FLAGS.batch_size, 'seconds': FLAGS.seconds,
      'repeats': FLAGS.repeats, 'cases': result})


if __name__ == '__main__':
  app.run(main)
