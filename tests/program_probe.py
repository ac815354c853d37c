"""Runs an Ape-X program's Launchpad program under a launch type, watches its
replay table from outside while it trains, and stops it once it has seen
what it looks for.

  python -m tests.program_probe [--program=<an Ape-X program>] <flags>

(from the repository root). `--program` picks programs/apex_dqn.py (the
default), apex_c51.py, apex_dpg.py or d4pg.py; every other flag is the
program's own. Used by the program tests (test_program.py,
test_dpg_program.py, ...) as a subprocess. Prints one JSON
line: what was seen in the replay table and the counter.

The program is stopped by the probe, not by a step limit: once the table has
been looked at twice, `--probe_learner_steps` learner steps apart, and every
node has logged (the learner after an update, every actor, the evaluator an
episode of parameters the learner had updated), the probe stops it with
Launchpad's own program stopper, as the coordinator does at a step limit.
Nothing then depends on which node of the program gets somewhere first.
"""

import importlib
import json
import sys
import threading
import time

from absl import app
from absl import flags

PROGRAMS = ('apex_dqn', 'apex_c51', 'apex_dpg', 'd4pg')


def _program_name(argv) -> str:
  """The value of --program in `argv` (read before absl parses the flags,
  since the program's module defines them when it is imported)."""
  name = PROGRAMS[0]
  for index, arg in enumerate(argv[1:], start=1):
    if arg.startswith('--program='):
      name = arg[len('--program='):]
    elif arg == '--program' and index + 1 < len(argv):
      name = argv[index + 1]
  if name not in PROGRAMS:
    sys.stderr.write(f'error: --program={name} is not one of '
                     f'{", ".join(PROGRAMS)}.\n')
    sys.exit(2)
  return name


flags.DEFINE_enum('program', PROGRAMS[0], PROGRAMS, 'Which Ape-X program to '
                  'run: programs/<program>.py.')
flags.DEFINE_integer('probe_learner_steps', 30, 'Learner steps between the '
                     'two looks at the replay table.')
FLAGS = flags.FLAGS


def _priorities(client, table, num_samples):
  """key -> priority for a sample of the table's items."""
  seen = {}
  for sample in client.sample(table, num_samples=num_samples,
                              emit_timesteps=False):
    info = sample.info
    seen[int(info.key)] = float(info.priority)
  return seen


def main(_):
  # pylint: disable=g-import-not-at-top
  import launchpad as lp
  from agents.replay import tables
  from tests import helpers
  program, options, *_ = PROGRAM.build()
  replay_handle = program.groups['replay'][0].create_handle()
  counter_handle = program.groups['counter'][0].create_handle()
  report = {'program': FLAGS.program}
  stop_program = lp.make_program_stopper(FLAGS.lp_launch_type)

  def watch():
    replay_client = replay_handle.dereference()
    counter = counter_handle.dereference()
    learner_steps = lambda: counter.get_counts().get('learner_steps', 0)
    while learner_steps() < 5:
      time.sleep(0.2)
    first = _priorities(replay_client, tables.TABLE, 300)
    first_learner_steps = learner_steps()
    target = first_learner_steps + FLAGS.probe_learner_steps
    while learner_steps() < target:
      time.sleep(0.2)
    second = _priorities(replay_client, tables.TABLE, 300)
    common = set(first) & set(second)
    report.update(
        distinct_priorities=len(set(second.values())),
        sampled_items=len(second),
        common_keys=len(common),
        changed_keys=sum(first[k] != second[k] for k in common),
        learner_steps_between=learner_steps() - first_learner_steps,
        table_size=replay_client.server_info()[tables.TABLE].current_size)
    while not helpers.every_node_logged(options.workdir, options.num_actors,
                                        evaluator=options.num_evaluators > 0):
      time.sleep(0.2)
    print('PROBE: seen all it looks for; stopping the program', flush=True)
    stop_program()

  watcher = threading.Thread(target=watch, daemon=True)
  manager = lp.launch(program, launch_type=FLAGS.lp_launch_type)
  watcher.start()
  manager.wait()
  watcher.join(timeout=1.0)
  print('PROBE ' + json.dumps(report), flush=True)


if __name__ == '__main__':
  # Before anything else is imported: the program's module moves a local
  # launch into a network of its own while this process has one thread, and
  # defines the program's flags.
  PROGRAM = importlib.import_module(f'programs.{_program_name(sys.argv)}')
  app.run(main)
