"""A Launchpad program launched by the programs' own launcher
(`launch.supervision.launcher.launch`, under local_mt) whose coordinator
only writes `--stop_record` as the run's stop.json and ends: what the
launcher does with the stop record it finds at the end of a run, without
training one. Its coordinator is a plain Python node (no server). Used by
test_run_records.py as a subprocess:

  python -m tests.record_probe --workdir=<dir> --stop_record='<text>'

(from the repository root).
"""

import os

import launchpad as lp
from absl import app
from absl import flags

from launch.runs import run_manifest
from launch.supervision import launcher
from launch.options import RunOptions

flags.DEFINE_string('workdir', None, 'The run\'s directory.')
flags.DEFINE_string('stop_record', None, 'What the coordinator writes to '
                    'stop.json, as it is.')
FLAGS = flags.FLAGS


def _coordinator(workdir: str, text: str):
  with open(os.path.join(workdir, run_manifest.STOP_RECORD), 'w') as f:
    f.write(text)


def main(_):
  program = lp.Program(name='record_probe')
  with program.group('coordinator'):
    program.add_node(lp.PyNode(_coordinator, FLAGS.workdir,
                               FLAGS.stop_record))
  launcher.launch(program, RunOptions(workdir=FLAGS.workdir,
                                      launch_type='local_mt'), 'apex_dqn')


if __name__ == '__main__':
  flags.mark_flags_as_required(['workdir', 'stop_record'])
  app.run(main)
