"""Runs programs/apex_dqn.py's program under a Launchpad launch type and
watches its replay table from outside while it trains.

Used by test_program.py as a subprocess (Launchpad stops a program by
signalling its launcher process). Takes the program's own flags and prints
one JSON line: what was seen in the replay table and the counter.
"""

import json
import os
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, 'programs'))
sys.path.insert(0, ROOT)

import apex_dqn  # pylint: disable=g-import-not-at-top,wrong-import-position
import launchpad as lp  # pylint: disable=wrong-import-position
from absl import app  # pylint: disable=wrong-import-position
from absl import flags  # pylint: disable=wrong-import-position

from agents import replay  # pylint: disable=wrong-import-position

flags.DEFINE_integer('probe_learner_steps', 30, 'Learner steps between the '
                     'two looks at the replay table.')
FLAGS = flags.FLAGS


def _priorities(client, num_samples):
  """key -> priority for a sample of the table's items."""
  seen = {}
  for sample in client.sample(replay.TABLE, num_samples=num_samples,
                              emit_timesteps=False):
    info = sample.info
    seen[int(info.key)] = float(info.priority)
  return seen


def main(_):
  program, _, _ = apex_dqn.build()
  replay_handle = program.groups['replay'][0].create_handle()
  counter_handle = program.groups['counter'][0].create_handle()
  report = {}

  def watch():
    replay_client = replay_handle.dereference()
    counter = counter_handle.dereference()
    learner_steps = lambda: counter.get_counts().get('learner_steps', 0)
    while learner_steps() < 5:
      time.sleep(0.2)
    first = _priorities(replay_client, 300)
    target = learner_steps() + FLAGS.probe_learner_steps
    while learner_steps() < target:
      time.sleep(0.2)
    second = _priorities(replay_client, 300)
    common = set(first) & set(second)
    report.update(
        distinct_priorities=len(set(second.values())),
        sampled_items=len(second),
        common_keys=len(common),
        changed_keys=sum(first[k] != second[k] for k in common),
        table_size=replay_client.server_info()[replay.TABLE].current_size)

  watcher = threading.Thread(target=watch, daemon=True)
  launch_type = FLAGS.lp_launch_type
  manager = lp.launch(program, launch_type=launch_type)
  watcher.start()
  manager.wait()
  watcher.join(timeout=1.0)
  print('PROBE ' + json.dumps(report), flush=True)


if __name__ == '__main__':
  app.run(main)
