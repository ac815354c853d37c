"""Watches a run's Vertex AI job, and submits the run again when it fails.

  python programs/watch.py --max_resubmissions=3 -- \
      python programs/apex_dqn.py --lp_launch_type=vertex_ai \
      --workdir=gs://<bucket>/<run> <the launch's other flags>

Runs the launch command after `--`, then follows the job it submitted
until it ends. A job that fails (a replica's sixth failure, or its time
limit, --job_timeout_hours) is submitted again with the same command: the
run resumes from its checkpoints in its workdir. A job that succeeds, or a
run that stopped in order, ends the watch with exit 0; a cancelled job, or
a failure past --max_resubmissions, with exit 1; a bad command with 2.
`launch/cloud/watching.py` says more.
"""

import sys

from absl import app
from absl import flags

from launch.cloud import watching

flags.DEFINE_integer('max_resubmissions', 3, 'How many times a failed job '
                     'is submitted again.')
flags.DEFINE_float('poll_seconds', 60.0, 'Seconds between two looks at the '
                   'job\'s state.')
FLAGS = flags.FLAGS


def main(argv):
  command = argv[1:]
  if not command:
    sys.stderr.write('error: give the launch command after --, e.g. '
                     'programs/watch.py -- python programs/apex_dqn.py '
                     '--lp_launch_type=vertex_ai --workdir=gs://<bucket>/<run>'
                     '.\n')
    sys.exit(2)
  if FLAGS.max_resubmissions < 0 or FLAGS.poll_seconds <= 0:
    sys.stderr.write('error: --max_resubmissions must be >= 0 and '
                     '--poll_seconds > 0.\n')
    sys.exit(2)
  try:
    watch = watching.Watch(command, FLAGS.max_resubmissions,
                           FLAGS.poll_seconds,
                           lambda line: print(f'watch: {line}', flush=True))
    sys.exit(watch.run())
  except ValueError as error:
    sys.stderr.write(f'error: {error}\n')
    sys.exit(2)


if __name__ == '__main__':
  app.run(main)
