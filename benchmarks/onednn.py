"""TensorFlow's oneDNN CPU kernels on and off (`TF_ENABLE_ONEDNN_OPTS`).

TensorFlow 2.8 leaves oneDNN off on Linux; the launcher turns it on for a
local_mp program's nodes (`launch.use_onednn`). This measures why: the learner's compiled update
on an in-memory batch and an actor's batched forward pass with environment
steps (`bare_loops.py learner` and `actor`, the program's own code), each
with oneDNN off (0) and on (1), the two alternating in every repeat so that
a machine's drift hits both alike. The learner uses every core (as the
program's learner does), the actor one (as each actor does). Prints the
median rate and every repeat, and the ratio on/off, and writes
benchmarks/results/onednn.json.

  .venv/bin/python benchmarks/onednn.py   # about 12 minutes
  .venv/bin/python benchmarks/onednn.py --repeats=5 --seconds=30
"""

import os

from absl import app
from absl import flags

from benchmarks import common

flags.DEFINE_string('env', 'atari:Pong', 'Environment.')
flags.DEFINE_integer('batch_size', 64,
                     'The learner\'s batch (64: the atari_small preset).')
flags.DEFINE_list('envs', ['1', '16'],
                  'Environments per actor forward pass, one case each.')
common.define_setting_repeats()
FLAGS = flags.FLAGS

SETTINGS = ('0', '1')  # TF_ENABLE_ONEDNN_OPTS: off, on.


def _rate(args, setting: str) -> float:
  """Work per second of `bare_loops.py <args>` with oneDNN `setting`."""
  return common.bare_loop_rate(
      *args, warmup=FLAGS.warmup, seconds=FLAGS.seconds,
      env=dict(os.environ, TF_ENABLE_ONEDNN_OPTS=setting))


def main(argv):
  del argv
  cases = {'learner': ['learner', f'--env={FLAGS.env}',
                       f'--batch_size={FLAGS.batch_size}']}
  for envs in FLAGS.envs:
    cases[f'actor, {envs} env'] = ['actor', f'--env={FLAGS.env}',
                                   f'--envs={envs}', '--cpus=0']
  rates = {case: {setting: [] for setting in SETTINGS} for case in cases}
  for repeat in range(FLAGS.repeats):
    for case, args in cases.items():
      for setting in SETTINGS:
        rate = _rate(args, setting)
        rates[case][setting].append(rate)
        print(f'repeat {repeat}: {case}, oneDNN {setting}: {rate:.1f}/s',
              flush=True)
  rows, result = [], {}
  for case in cases:
    off, on = (common.median(rates[case][s]) for s in SETTINGS)
    rows.append([case, off, on, on / off,
                 ' '.join(f'{r:.1f}' for r in rates[case]['0']),
                 ' '.join(f'{r:.1f}' for r in rates[case]['1'])])
    result[case] = {'off': rates[case]['0'], 'on': rates[case]['1'],
                    'median_off': off, 'median_on': on, 'ratio': on / off}
  common.print_table(
      f'oneDNN off and on, {FLAGS.env} (learner: updates/s, batch '
      f'{FLAGS.batch_size}; actor: environment steps/s); medians of '
      f'{FLAGS.repeats}',
      ['case', 'off', 'on', 'on/off', 'off, each', 'on, each'], rows)
  common.write_result('onednn', {
      'env': FLAGS.env, 'batch_size': FLAGS.batch_size,
      'seconds': FLAGS.seconds, 'repeats': FLAGS.repeats, 'cases': result})


if __name__ == '__main__':
  app.run(main)
