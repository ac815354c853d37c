"""What the Atari learner's update leaves on the table, one change at a
time against the same run's baseline.

Ape-X DQN's learner on Pong (`atari_small`: batch 64), its update on a
batch in memory (`benchmarks/in_memory.py`), each variant a learner of its
own in this one process, all of them timed in turn within every repeat
(windows of `--seconds`), so that the machine's drift hits them alike:

  baseline           the update as the program runs it
  batch 32, 128      the batch halved and doubled: at a fixed replay ratio
                     (samples per insert) what counts is samples a second
  online passes as one   the online network's passes on s and s' made one
                     call on the 2 x 64 frames (the same arithmetic, larger
                     products)
  no target pass     the target network's forward pass on s' left out (the
                     online network evaluates the bootstrap action): what
                     that pass costs, not a change to make
  float frames       the frames fed as float32, so the torso's uint8 cast
                     is not made: what the conversion costs
  optimizer step fused  the clipping and RMSProp step compiled by XLA
                     into a few fused loops (the learner's
                     `fuse_optimizer_step=True`, off by default)

Where the CPU has bfloat16 arithmetic, every variant runs twice, its
learner computing in float32 and in bfloat16 (`--learner_precision`), each
against the baseline of its own precision.

Not here: XLA (`benchmarks/learner_xla.py` times it, each setting in a
process of its own: in this one, an XLA update beside the other learners
failed to find its compiled function), and thread pools, which TensorFlow
fixes as it starts (`launch.machine.placement` sets the program's nodes' own). Prints each variant's
median samples learned a second and its ratio to the baseline's; writes
benchmarks/results/learner_options.json.

  .venv/bin/python benchmarks/learner_options.py   # about 12 minutes
"""

import dataclasses

from absl import app
from absl import flags

import launch
from benchmarks import common

flags.DEFINE_integer('repeats', 3, 'Timed windows of each variant.')
flags.DEFINE_float('seconds', 8.0, 'Seconds a window lasts.')
FLAGS = flags.FLAGS

PRESET, ENV = 'atari_small', 'atari:Pong'


def variants():
  """{name: (config changes, learner class or None, float frames)}."""
  # pylint: disable=g-import-not-at-top
  import tensorflow as tf
  from agents.apex_dqn.learning import ApeXDQNLearner
  from agents.replay import adders
  # pylint: enable=g-import-not-at-top

  class OnePass(ApeXDQNLearner):
    """The online network's passes on s and s' as one call."""

    def _q_values(self, transitions):
      observations = tf.concat([transitions[adders.OBSERVATION],
                                transitions[adders.NEXT_OBSERVATION]], 0)
      q_tm1, q_t_selector = tf.split(self._network(observations), 2)
      return q_tm1, q_t_selector, self._target_network(
          transitions[adders.NEXT_OBSERVATION])

  class NoTargetPass(ApeXDQNLearner):
    """Measurement only: the online network evaluates the bootstrap."""

    def _q_values(self, transitions):
      q_t = self._network(transitions[adders.NEXT_OBSERVATION])
      return self._network(transitions[adders.OBSERVATION]), q_t, q_t

  class Fused(ApeXDQNLearner):
    """The optimiser's step compiled by XLA."""

    def __init__(self, **kwargs):
      super().__init__(fuse_optimizer_step=True, **kwargs)

  return {
      'baseline': ({}, None, False),
      'batch 32': ({'batch_size': 32}, None, False),
      'batch 128': ({'batch_size': 128}, None, False),
      'online passes as one': ({}, OnePass, False),
      'no target pass': ({}, NoTargetPass, False),
      'float frames': ({}, None, True),
      'optimizer step fused': ({}, Fused, False),
  }


def label(name: str, dtype: str) -> str:
  """A variant's name in the results: its own in float32, with its
  precision after a comma otherwise."""
  return name if dtype == 'float32' else f'{name}, {dtype}'


def main(argv):
  del argv
  # pylint: disable=g-import-not-at-top
  import numpy as np
  from agents import registry
  from agents.envs import environments
  from agents.networks import precision
  from agents.replay import adders
  from benchmarks import in_memory
  # pylint: enable=g-import-not-at-top
  agent = registry.get('apex_dqn')
  environment = environments.resolve_discrete(ENV)
  native = precision.bfloat16_flags()
  dtypes = ['float32'] + (['bfloat16'] if native else [])
  learners, batches, baselines = {}, {}, {}
  for (name, (changes, learner_class, float_frames)), dtype in (
      (variant, dtype) for dtype in dtypes
      for variant in variants().items()):
    baselines[label(name, dtype)] = label('baseline', dtype)
    name = label(name, dtype)
    config = in_memory.config_of(agent, PRESET, **changes)
    sample = in_memory.batch(environment, config.batch_size)
    if float_frames:
      data = dict(sample.data)
      for key in (adders.OBSERVATION, adders.NEXT_OBSERVATION):
        data[key] = data[key].astype(np.float32)
      sample = sample._replace(data=data)
    learners[name] = in_memory.learner(agent, config, environment, sample,
                                       precision=dtype,
                                       learner_class=learner_class)
    batches[name] = config.batch_size
    learners[name].step()  # Traces the update.
    in_memory.time_updates(learners[name], 2.0)  # Warm-up.
  samples = {name: [] for name in learners}
  for repeat in range(FLAGS.repeats):
    for name, learner in learners.items():
      samples[name].append(in_memory.time_updates(learner, FLAGS.seconds)
                           * batches[name])
    print(f'repeat {repeat}: ' + ', '.join(
        f'{name} {values[-1]:.0f}' for name, values in samples.items()) +
          ' samples/s', flush=True)
  result, rows = {}, []
  for name, values in samples.items():
    baseline = common.median(samples[baselines[name]])
    median = common.median(values)
    result[name] = dict(batch=batches[name], samples_per_second=values,
                        median_samples_per_second=median,
                        ratio_to_baseline=median / baseline)
    rows.append([name, batches[name], f'{median:.0f}',
                 f'{median / baseline:.2f}'])
  common.print_table(
      f'Ape-X DQN\'s update on {ENV} ({PRESET}), samples learned a second '
      f'(medians of {FLAGS.repeats} windows)',
      ['variant', 'batch', 'samples/s', 'of the baseline'], rows)
  path = common.write_result('learner_options', dict(
      env=ENV, preset=PRESET, repeats=FLAGS.repeats, seconds=FLAGS.seconds,
      cpu_bfloat16_flags=native, variants=result))
  print(f'wrote {path}')


if __name__ == '__main__':
  launch.use_onednn()  # Before TensorFlow starts: the nodes' setting.
  # And before `app.run`: a nested XLA function (the fused optimiser step)
  # fails in a process that first imports TensorFlow inside it.
  import tensorflow  # pylint: disable=g-import-not-at-top,unused-import
  app.run(main)
