"""Where the learner's update spends its CPU time, by kind of operation, in
float32 and (where the CPU has it) bfloat16.

The agent's own update on a batch in memory (`benchmarks/in_memory.py`, as
`learner_flops.py` times it), traced by TensorFlow's profiler over
`--updates` updates after a warm-up; every operation's time on the
runtime's compute threads is summed (so CPU milliseconds an update, over
all threads: more than the update's wall-clock where operations ran side by
side) and put in a kind:

  convolution  forward and both gradients (oneDNN's fused kernels)
  matmul       dense layers' products, forward and gradients
  cast         dtype conversions: the input frames' uint8, and in bfloat16
               the variables' and gradients' copies
  elementwise  the optimiser's step, gradient clipping, activations'
               gradients, the loss, the input's scaling
  other        the rest (reductions, gathers, the runtime's own)

It shows what bfloat16 speeds up (the kernels) and what it cannot (the
element-wise work on float32 weights and state, the casts it adds).
Writes benchmarks/results/learner_profile.json.

  .venv/bin/python benchmarks/learner_profile.py     # Pong, atari_small
  .venv/bin/python benchmarks/learner_profile.py --preset=minatar \\
      --env=minatar:breakout
"""

import collections
import glob
import os
import shutil
import tempfile
from typing import Dict

from absl import app
from absl import flags

import launch
from benchmarks import common

flags.DEFINE_string('preset', 'atari_small', 'The Ape-X DQN preset.')
flags.DEFINE_string('env', 'atari:Pong', 'Environment.')
flags.DEFINE_integer('updates', 30, 'Updates traced by the profiler.')
FLAGS = flags.FLAGS

KINDS = ('convolution', 'matmul', 'cast', 'elementwise', 'other')
ELEMENTWISE = {'Mul', 'AddV2', 'Add', 'Sub', 'Square', 'Rsqrt', 'Sqrt',
               'RealDiv', 'ReluGrad', 'Relu', 'L2Loss', 'AssignSubVariableOp',
               'AssignVariableOp', 'AssignAddVariableOp', 'AddN', 'Neg',
               'Maximum', 'Minimum', 'Abs', 'SquaredDifference', 'BiasAdd',
               'BiasAddGrad', 'Select', 'SelectV2', 'Sign', 'Pow',
               'ZerosLike', 'OnesLike', 'Fill'}


def kind(op_type: str) -> str:
  """The kind of an operation, by its type (the kernel's name)."""
  if 'Conv2D' in op_type:
    return 'convolution'
  if 'MatMul' in op_type:
    return 'matmul'
  if op_type == 'Cast':
    return 'cast'
  if op_type in ELEMENTWISE:
    return 'elementwise'
  return 'other'


def op_times(logdir: str, updates: int) -> Dict[str, float]:
  """CPU milliseconds an update by operation type, from the profiler's
  trace in `logdir`: each event on a compute thread is one operation
  ('<name>:<type>'); the executor's own events ('ExecutorState::Process',
  which holds the others, and the like) are left out."""
  from tensorflow.core.profiler.protobuf import xplane_pb2  # pylint: disable=g-import-not-at-top
  path, = glob.glob(os.path.join(logdir, '**', '*.xplane.pb'),
                    recursive=True)
  space = xplane_pb2.XSpace()
  with open(path, 'rb') as f:
    space.ParseFromString(f.read())
  times = collections.Counter()
  for plane in space.planes:
    for line in plane.lines:
      if not line.name.startswith('tf_Compute'):
        continue
      for event in line.events:
        name = plane.event_metadata[event.metadata_id].name
        if ':' not in name or '::' in name or name.startswith('Executor'):
          continue
        times[name.rsplit(':', 1)[1]] += event.duration_ps / 1e9 / updates
  return dict(times)


def profile(learner, updates: int) -> Dict[str, float]:
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  logdir = tempfile.mkdtemp(prefix='learner_profile_')
  try:
    tf.profiler.experimental.start(logdir)
    for _ in range(updates):
      learner.step()
    tf.profiler.experimental.stop()
    return op_times(logdir, updates)
  finally:
    shutil.rmtree(logdir, ignore_errors=True)


def main(argv):
  del argv
  from agents import registry  # pylint: disable=g-import-not-at-top
  from agents.envs import environments  # pylint: disable=g-import-not-at-top
  from agents.networks import precision  # pylint: disable=g-import-not-at-top
  from benchmarks import in_memory  # pylint: disable=g-import-not-at-top
  native = precision.bfloat16_flags()
  dtypes = ['float32'] + (['bfloat16'] if native else [])
  agent = registry.get('apex_dqn')
  environment = environments.resolve_discrete(FLAGS.env)
  config = in_memory.config_of(agent, FLAGS.preset)
  sample = in_memory.batch(environment, config.batch_size)
  result = {}
  for dtype in dtypes:
    learner = in_memory.learner(agent, config, environment, sample,
                                precision=dtype)
    learner.step()
    in_memory.time_updates(learner, 3.0)  # Warm-up.
    by_type = profile(learner, FLAGS.updates)
    by_kind = {name: 0.0 for name in KINDS}
    for op_type, milliseconds in by_type.items():
      by_kind[kind(op_type)] += milliseconds
    result[dtype] = dict(
        cpu_ms_per_update=sum(by_type.values()), by_kind=by_kind,
        by_type=dict(sorted(by_type.items(), key=lambda item: -item[1])),
        updates_per_second=in_memory.time_updates(learner, 5.0))
  rows = [[name] + [f'{result[dtype]["by_kind"][name]:.1f}'
                    for dtype in dtypes] for name in KINDS]
  rows.append(['all'] + [f'{result[dtype]["cpu_ms_per_update"]:.1f}'
                         for dtype in dtypes])
  if native:
    for row in rows:
      row.append(f'{float(row[1]) / float(row[2]):.2f}x')
  common.print_table(
      f'CPU ms an update by kind ({FLAGS.preset}, {FLAGS.env}, batch '
      f'{config.batch_size})', ['kind', *dtypes] +
      (['float32 / bfloat16'] if native else []), rows)
  if not native:
    print('bfloat16: not profiled, this CPU has no bfloat16 arithmetic.')
  path = common.write_result('learner_profile', dict(
      preset=FLAGS.preset, env=FLAGS.env, batch=config.batch_size,
      updates=FLAGS.updates, cpu_bfloat16_flags=native,
      onednn=os.environ.get(launch.ONEDNN), precisions=result))
  print(f'wrote {path}')


if __name__ == '__main__':
  launch.use_onednn()  # Before TensorFlow starts: the nodes' setting.
  import tensorflow  # pylint: disable=g-import-not-at-top,unused-import
  app.run(main)
