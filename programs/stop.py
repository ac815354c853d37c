"""Stops a running program in order, from anywhere that reaches its workdir.

  python programs/stop.py --workdir=gs://<bucket>/<run>   # a Vertex AI job
  python programs/stop.py --workdir=<run>                 # a local run

It leaves a stop request in the workdir (`stop_request.json`), which the
program's coordinator looks for every 2 s (on Vertex AI through the job's
Cloud Storage mount, which may show a new file up to a minute late). The
coordinator then stops the program as Ctrl-C does: the actors and the
evaluator, then the learner's final checkpoint, then replay's and the
counter's; on Vertex AI the job then ends as succeeded. This command waits
for the stop record (`stop.json`) that the coordinator writes as it begins
that stop, and prints it; exit status 0 once the program is stopping, 1 if
it stopped as failed or did not take the request within --timeout (the
request then stays for the program to take when it runs), 2 if the workdir
holds no run or a bad record (`run.json`, `stop.json`: named, and left as
they are).
"""

import os
import sys
import time

from absl import app
from absl import flags

from launch.runs import run_manifest
from launch.runs import storage

flags.DEFINE_string('workdir', None, 'The run to stop: its directory, or '
                    'gs://<bucket>/<path> for a Vertex AI job.')
flags.DEFINE_string('reason', 'stopped on request (programs/stop.py)',
                    'Why, as the run\'s stop.json will say.')
flags.DEFINE_float('timeout', 900.0, 'Seconds to wait for the program\'s '
                   'stop; 0: do not wait.')
FLAGS = flags.FLAGS

POLL_SECONDS = 2.0


def _fail(message: str, status: int):
  sys.stderr.write(f'error: {message}\n')
  sys.exit(status)


def main(argv):
  if len(argv) > 1:
    _fail(f'unexpected arguments {argv[1:]}; pass --workdir=<run>.', 2)
  if not FLAGS.workdir:
    _fail('pass --workdir=<the run to stop> (a directory, or '
          'gs://<bucket>/<path>).', 2)
  if FLAGS.timeout < 0:
    _fail(f'--timeout must be >= 0, got {FLAGS.timeout}.', 2)
  workdir = FLAGS.workdir.rstrip('/') or '/'
  if not storage.is_cloud(workdir):
    workdir = os.path.abspath(os.path.expanduser(workdir))
  try:
    manifest = run_manifest.read_manifest(workdir)
    record = run_manifest.read_stop_record(workdir)
    if record is not None:
      print(f'The run in {workdir} has already stopped: {record["reason"]}.')
      return
    run_manifest.write_stop_request(workdir, FLAGS.reason)
  except ValueError as error:
    _fail(str(error), 2)
  print(f'Asked the {manifest.get("program", "")} program of {workdir} to '
        'stop in order.', flush=True)
  if not FLAGS.timeout:
    return
  deadline = time.time() + FLAGS.timeout
  while time.time() < deadline:
    try:
      record = run_manifest.read_stop_record(workdir)
    except run_manifest.BadRecord as error:
      _fail(str(error), 2)
    if record is not None:
      if record.get('failed'):
        _fail(f'the program stopped because {record["reason"]}.', 1)
      print(f'The program is stopping: {record["reason"]}. Its final '
            'checkpoints follow, then it ends.')
      return
    time.sleep(POLL_SECONDS)
  _fail(f'the program has not taken the request within '
        f'{FLAGS.timeout:.0f} s: is it running? The request stays in {workdir} for it to take when it '
        'runs (a new launch removes it).', 1)


if __name__ == '__main__':
  app.run(main)
