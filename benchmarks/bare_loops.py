"""The baselines that the running program is measured against.

  actor:   a bare loop over K environments doing only what an actor must do:
           step the environments and run the same batched forward pass of
           the same Q-network (same `tf.function`, same batch size K). No
           n-step building, priorities, Reverb writes, parameter pulls,
           counting or logging.
  learner: the learner's same compiled update (`ApeXLearner._step`: IS
           weights, loss, optimiser step, target copies) on one batch of
           real transitions already in memory, so that no time goes to
           sampling, the network or priority writes.

Each pins itself to `--cpus` once TensorFlow has started (as the program's
nodes are pinned after they have started), prints `ready`, then runs until
killed, printing `<walltime> <work done so far>` every `--report_every`
seconds (work: environment steps or updates). `program_throughput.py` pauses
and resumes it (SIGSTOP / SIGCONT) in turn with the program's own nodes, and
reads its rate over the windows in which it ran.

  .venv/bin/python benchmarks/bare_loops.py actor --envs=16 --cpus=0
  .venv/bin/python benchmarks/bare_loops.py learner --cpus=1
"""

import dataclasses
import os
import time

from absl import app
from absl import flags
import numpy as np

import launch
from benchmarks import common

flags.DEFINE_string('env', 'atari:Pong', 'Environment.')
flags.DEFINE_integer('envs', 1, 'actor: environments stepped per batch.')
flags.DEFINE_list('cpus', [], 'CPUs to pin this process to (empty: all).')
flags.DEFINE_float('report_every', 0.25, 'Seconds between progress lines.')
flags.DEFINE_integer('batch_size', None,
                     'learner: the batch size (default: the config\'s).')
flags.DEFINE_bool('jit_compile', False, 'learner: its update compiled with '
                  'XLA (the config\'s --jit_compile).')
flags.DEFINE_enum('learner_precision', 'float32',
                  ['auto', 'float32', 'bfloat16'],
                  'learner: what its update computes in (the config\'s '
                  '--learner_precision; resolved by the CPU as the program '
                  'does).')
flags.DEFINE_string('preset', None, 'An Ape-X DQN preset whose values of the '
                    'agent\'s config (network, batch) the loop takes.')
FLAGS = flags.FLAGS


def _builder():
  from agents.envs import environments  # pylint: disable=g-import-not-at-top
  from agents.apex_dqn.builder import ApeXDQNBuilder  # pylint: disable=g-import-not-at-top
  from agents.apex_dqn.config import ApeXDQNConfig  # pylint: disable=g-import-not-at-top
  config = ApeXDQNConfig(jit_compile=FLAGS.jit_compile,
                         learner_precision=FLAGS.learner_precision)
  if FLAGS.preset is not None:
    from agents.apex_dqn.presets import PRESETS  # pylint: disable=g-import-not-at-top
    fields = {field.name for field in dataclasses.fields(ApeXDQNConfig)}
    config = dataclasses.replace(config, **{
        name: value for name, value in PRESETS[FLAGS.preset].values.items()
        if name in fields})
  if FLAGS.batch_size is not None:
    config = dataclasses.replace(config, batch_size=FLAGS.batch_size)
  return ApeXDQNBuilder(config, environments.resolve_discrete(FLAGS.env))


def _run(step):
  """Pins this process, says `ready`, then calls `step` (which returns the
  work it did) until killed, reporting progress."""
  if FLAGS.cpus:
    common.pin_process(os.getpid(), [int(cpu) for cpu in FLAGS.cpus])
  print('ready', flush=True)
  work, last_report = 0, 0.0
  while True:
    work += step()
    now = time.time()
    if now - last_report >= FLAGS.report_every:
      print(f'{now:.3f} {work}', flush=True)
      last_report = now


def actor_loop():
  """Steps the environments with the batched forward pass."""
  from launch import nodes  # pylint: disable=g-import-not-at-top
  from launch.machine import placement  # pylint: disable=g-import-not-at-top
  # The same threads as the program's actor.
  placement.use_tf_threads(nodes.ActingNode.tf_threads_per_process)
  builder = _builder()
  network = builder.make_network()
  spec = builder.environment.spec.observations
  q_function = tf.function(network, input_signature=[
      tf.TensorSpec((None, *spec.shape), tf.as_dtype(spec.dtype))])
  environments = [builder.environment.make_environment(seed=seed)
                  for seed in range(FLAGS.envs)]
  timesteps = [environment.reset() for environment in environments]

  def step():
    observations = np.stack([t.observation for t in timesteps])
    actions = np.argmax(q_function(observations).numpy(), axis=-1)
    for index, environment in enumerate(environments):
      timestep = environment.step(np.int32(actions[index]))
      timesteps[index] = (environment.reset() if timestep.last()
                          else timestep)
    return len(environments)

  step()  # Traces the forward pass.
  _run(step)


def _batch_in_memory(builder):
  """One batch of real transitions, shaped as the learner's dataset gives."""
  import reverb  # pylint: disable=g-import-not-at-top
  from agents.replay import adders  # pylint: disable=g-import-not-at-top
  size = builder.config.batch_size
  environment = builder.environment.make_environment(seed=0)
  num_actions = builder.environment.spec.actions.num_values
  rng = np.random.default_rng(0)
  observations = [environment.reset().observation]
  while len(observations) < size + builder.config.n_step:
    timestep = environment.step(np.int32(rng.integers(num_actions)))
    observations.append(timestep.observation)
    if timestep.last():
      observations.append(environment.reset().observation)
  observations = np.stack(observations)
  data = {
      adders.OBSERVATION: observations[:size],
      adders.ACTION: rng.integers(num_actions, size=size).astype(np.int32),
      adders.N_STEP_RETURN: rng.normal(size=size).astype(np.float32),
      adders.DISCOUNT: np.full(size, builder.config.discount**3, np.float32),
      adders.NEXT_OBSERVATION: observations[builder.config.n_step:][:size],
  }
  table_size = 100_000
  priorities = rng.uniform(0.1, 2.0, size)
  info = reverb.SampleInfo(
      key=tf.constant(np.arange(size), tf.uint64),
      probability=tf.constant(priorities / priorities.sum() * size /
                              table_size, tf.float64),
      table_size=tf.fill([size], tf.constant(table_size, tf.int64)),
      priority=tf.constant(priorities, tf.float64))
  return reverb.ReplaySample(info=info, data=data)


def learner_loop():
  """Runs the compiled update on in-memory batches."""
  builder = _builder()
  sample = _batch_in_memory(builder)
  dataset = tf.data.Dataset.from_tensors(sample).repeat()
  # The builder's own learner, with the in-memory batches in place of replay.
  from agents.networks import precision  # pylint: disable=g-import-not-at-top
  computes_in, why = precision.resolve(builder.config.learner_precision)
  print(why, flush=True)
  builder.replay_learner_arguments = lambda *unused: dict(
      iterator=iter(dataset), replay_client=None,
      importance_sampling_exponent=(
          builder.config.importance_sampling_exponent),
      jit_compile=builder.config.jit_compile, precision=computes_in)
  learner = builder.make_learner(None)
  learner.step()  # Traces the update.

  def step():
    learner.step()
    return 1

  _run(step)


def main(argv):
  kind = argv[1] if len(argv) > 1 else 'actor'
  {'actor': actor_loop, 'learner': learner_loop}[kind]()


if __name__ == '__main__':
  # Before TensorFlow starts: the oneDNN setting of the program's nodes. And
  # before absl runs `main`: a Sonnet optimizer whose state is created inside
  # the learner's tf.function fails ("defined in a graph which is out of
  # scope") when TensorFlow is first imported from inside `app.run`. The
  # functions above use this module-level `tf`.
  launch.use_onednn()
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  app.run(main)
