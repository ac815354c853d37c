"""A Vertex AI launch whose job the emulator runs: what `programs/watch.py`
runs as its launch command in the tests.

  python -m tests.emulated_launch --package_root=DIR [--time_limit_once=F] \
      -- <program> <its flags, with --workdir>

packages the program as a launch with --dry_run does (into a new directory
under DIR), then runs the packaged job with `tests.vertex_emulator`, which
records the job in the run's workdir as a submission does. The real
launch returns once the job is submitted; this one once the emulated job
has ended: the watch then finds it ended.

With `--time_limit_once=F`, and no file F yet: once the learner has saved
a checkpoint and the counter its counts, F is made and the job reaches its
time limit (the emulator's SIGUSR1), as a job whose `scheduling.timeout`
falls then would. A test thus has a job end at its limit at a moment that
does not depend on how fast the machine is.
"""

import os
import signal
import subprocess
import sys
import tempfile
import time

from absl import app
from absl import flags

from tests import helpers

flags.DEFINE_string('package_root', None, 'Where the packaged jobs go.')
flags.DEFINE_string('time_limit_once', None, 'A file: if it is not there, '
                    'the job reaches its time limit once the learner and '
                    'the counter have saved, and the file is made.')
flags.DEFINE_float('grace_seconds', 30.0, 'The emulator\'s --grace_seconds.')
FLAGS = flags.FLAGS


def _saved(workdir: str) -> bool:
  """Whether the learner has saved a checkpoint, and the counter counts."""
  counts = os.path.join(workdir, 'checkpoints', 'counter', 'counts.json')
  learner = os.path.join(workdir, 'checkpoints', 'learner', 'checkpoint')
  return os.path.exists(counts) and os.path.exists(learner)


def main(argv):
  program, *program_flags = argv[1:]
  workdir = next(flag.split('=', 1)[1] for flag in program_flags
                 if flag.startswith('--workdir='))
  package_dir = tempfile.mkdtemp(prefix='job-', dir=FLAGS.package_root)
  packaged = subprocess.run(helpers.program_command(
      program, '--dry_run', f'--package_dir={package_dir}', *program_flags,
      launch_type='vertex_ai'), check=False)
  if packaged.returncode:
    sys.exit(packaged.returncode)
  emulator = subprocess.Popen(helpers.module_command(
      'vertex_emulator', f'--package_dir={package_dir}',
      f'--grace_seconds={FLAGS.grace_seconds}'))
  limit = FLAGS.time_limit_once
  if limit and not os.path.exists(limit):
    while emulator.poll() is None and not _saved(workdir):
      time.sleep(0.5)
    if emulator.poll() is None:
      with open(limit, 'w') as f:
        f.write(package_dir)
      emulator.send_signal(signal.SIGUSR1)
  status = emulator.wait()
  # As a submission: 0 once the job was submitted, whatever its end.
  sys.exit(2 if status == 2 else 0)


if __name__ == '__main__':
  flags.mark_flag_as_required('package_root')
  app.run(main)
