"""Runs programs/apex_dqn.py's program under test_mt (every node a thread of
this process) and reports what the actors did: the batch sizes of their
forward passes, how many transitions each adder wrote, and each actor's
epsilons. Used by test_vector_actors.py:

  python -m tests.vector_probe --lp_launch_type=test_mt <program flags>

(from the repository root). The probe stops the program itself, with
Launchpad's own program stopper, once every adder has written, the learner
has logged a row after an update, every actor a row, and the actors have
taken `--probe_actor_steps` steps: a step limit would not wait for any of
these.
"""

import collections
import json
import threading
import time

import launchpad as lp
from absl import app
from absl import flags

from agents.apex import actors
from agents.replay import adders
from agents.apex_dqn import actor as dqn_actor
from programs import apex_dqn
from tests import helpers

flags.DEFINE_integer('probe_actor_steps', 4000, 'Actor steps (all actors '
                     'together, as the counter counts them) to log before '
                     'the probe stops the program.')
FLAGS = flags.FLAGS

lock = threading.Lock()
batch_sizes = collections.Counter()
writers = collections.Counter()
epsilons = []

select_actions = actors.ApeXActor.select_actions


def recording_select_actions(self, observations):
  with lock:
    batch_sizes[len(observations)] += 1
  return select_actions(self, observations)


actors.ApeXActor.select_actions = recording_select_actions

adder_init = adders.NStepPrioritizedAdder.__init__


def recording_adder_init(self, *args, **kwargs):
  priority_fn = kwargs['priority_fn']

  def recording_priority_fn(**batch):
    with lock:
      writers[id(self)] += len(batch['actions'])
    return priority_fn(**batch)

  kwargs['priority_fn'] = recording_priority_fn
  adder_init(self, *args, **kwargs)


adders.NStepPrioritizedAdder.__init__ = recording_adder_init

init = dqn_actor.ApeXDQNActor.__init__


def recording_init(self, *args, **kwargs):
  init(self, *args, **kwargs)
  with lock:
    epsilons.append(self._epsilons.tolist())  # pylint: disable=protected-access


dqn_actor.ApeXDQNActor.__init__ = recording_init


def _seen_enough(options) -> bool:
  num_writers = options.num_actors * options.envs_per_actor
  with lock:
    written = len(writers) == num_writers and min(writers.values()) > 0
  logged = max((helpers.last(options.workdir, label, 'actor_steps')
                for label in ['learner'] + helpers.actor_labels(
                    options.num_actors)), default=0)
  return (written and logged >= FLAGS.probe_actor_steps and
          helpers.every_node_logged(options.workdir, options.num_actors,
                                    evaluator=options.num_evaluators > 0))


def main(_):
  program, options, *_ = apex_dqn.build()
  stop_program = lp.make_program_stopper(FLAGS.lp_launch_type)

  def watch():
    while not _seen_enough(options):
      time.sleep(0.2)
    print('VECTOR_PROBE: seen all it looks for; stopping the program',
          flush=True)
    stop_program()

  manager = lp.launch(program, launch_type=FLAGS.lp_launch_type)
  threading.Thread(target=watch, daemon=True).start()
  manager.wait()
  with lock:
    print('VECTOR_PROBE ' + json.dumps({
        'batch_sizes': dict(batch_sizes), 'writers': list(writers.values()),
        'epsilons': epsilons}), flush=True)


if __name__ == '__main__':
  app.run(main)
