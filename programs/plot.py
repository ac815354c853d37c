"""Learning curves and speeds of one or more runs, the way the paper plots
them (and, as its App. F asks, with the speed of every part alongside).

  python programs/plot.py <workdir> [<workdir> ...] --out=curves.png
  python programs/plot.py runs/a runs/b --labels=prioritised,uniform

Four panels, one line per run, read from each run's CSV logs: the
returns against actor steps (--frames: environment frames) and against
wall-clock, the actors' frames/s and the learner's updates/s
(`launch/runs/curves.py` says how each is made).
"""

import sys

from absl import app
from absl import flags

from launch.runs import curves

flags.DEFINE_string('out', 'curves.png', 'The PNG file to write.')
flags.DEFINE_list('labels', [], 'One label per run (default: the run '
                  "directories' names).")
flags.DEFINE_integer('smoothing', 10, 'Episodes in the running mean of the '
                     'returns.')
flags.DEFINE_bool('frames', False, 'Returns against environment frames '
                  '(agent steps times the frame skip: 4 on Atari) instead of '
                  'actor steps.')
FLAGS = flags.FLAGS


def main(argv):
  workdirs = argv[1:]
  if not workdirs:
    sys.stderr.write('error: name at least one run directory: '
                     'programs/plot.py <workdir> [<workdir> ...] '
                     '--out=curves.png\n')
    sys.exit(2)
  try:
    curves.plot(workdirs, FLAGS.labels, FLAGS.out, FLAGS.smoothing, FLAGS.frames)
  except ValueError as error:
    sys.stderr.write(f'error: {error}\n')
    sys.exit(2)
  print(f'Wrote {FLAGS.out}')


if __name__ == '__main__':
  app.run(main)
