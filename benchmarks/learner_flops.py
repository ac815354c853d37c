"""The learner against the machine's arithmetic limit, in FLOPs.

For each network the presets use (Ape-X DQN's on Pong and on MinAtar, Ape-X
DPG's and D4PG's MLPs on cheetah_run):

  * FLOPs per sample of the learner's update, by hand from the networks'
    layers (2 x kernel x channels in x channels out x output pixels for a
    convolution, 2 x inputs x outputs for a dense layer; bias adds,
    activations and the optimiser's element-wise work left out) and the
    update's passes: for Ape-X DQN 3 forward passes (online on s, online
    and target on s') and the backward pass on s (weight gradients as much
    as a forward pass, input gradients as much less the first layer's):
    5F - F_first. For Ape-X DPG and D4PG, policy p and critic c: the
    critic's loss takes p and c on s' (targets) and c on s, and c's
    backward pass; the policy's takes p and c on s, c's input gradients
    (all layers: dq/da) and p's backward pass: 4Fp + 6Fc - Fp_first -
    Fc_first. Checked: one forward pass counted by hand against
    TensorFlow's profiler on its traced graph; the profiler's count of the
    whole update is given beside (it also counts gradients the runtime
    prunes, such as the first convolution's input gradient, and costs a
    convolution's input gradient by its input's size);
  * the update's rate on a batch in memory (the agent's own learner,
    `benchmarks/in_memory.py`), so GFLOP/s achieved;
  * the cores' peak in float32 and, where the CPU has bfloat16 arithmetic,
    in bfloat16: the best of a large square matrix product and the update's
    own largest dense product and first convolution, each a `tf.function`
    timed over repeats;
  * the learner's fraction of each peak.

Every case runs in this one process, the cases and the peak kernels
alternating within each repeat, so that the machine's drift hits all of
them alike. Prints a table; writes benchmarks/results/learner_flops.json.

  .venv/bin/python benchmarks/learner_flops.py            # about 4 minutes
  .venv/bin/python benchmarks/learner_flops.py --repeats=5 --seconds=10
"""

import json
import os
import subprocess
import sys
import time
from typing import Any, Dict, List, Tuple

from absl import app
from absl import flags
import numpy as np

import launch
from benchmarks import common

flags.DEFINE_integer('repeats', 3, 'Timed windows of each case and kernel.')
flags.DEFINE_float('seconds', 6.0, 'Seconds a window of updates lasts.')
flags.DEFINE_string('peaks_of', None, 'Internal: time the peak kernels of '
                    'these cases (JSON) in this process alone, print their '
                    'GFLOP/s as JSON and exit.')
flags.DEFINE_list('cases', None, 'The agents whose cases run (apex_dqn, '
                  'apex_dpg, d4pg); default: all.')
flags.DEFINE_list('dtypes', ['float32'], 'Internal: with --peaks_of.')
FLAGS = flags.FLAGS

# (label, agent, preset, environment)
CASES = (
    ('Ape-X DQN, Pong (atari_small)', 'apex_dqn', 'atari_small',
     'atari:Pong'),
    ('Ape-X DQN, MinAtar (minatar)', 'apex_dqn', 'minatar',
     'minatar:breakout'),
    ('Ape-X DPG, cheetah_run (dmc500k)', 'apex_dpg', 'dmc500k',
     'control:cheetah:run'),
    ('D4PG, cheetah_run (dmc500k)', 'd4pg', 'dmc500k', 'control:cheetah:run'),
)
SQUARE = 1024  # The square matrix product's side.


def layer_calls(network, inputs) -> List[Tuple[str, tuple, tuple]]:
  """(kind, kernel shape, output shape) of every Sonnet Conv2D and Linear
  call of one eager forward pass of `network` on `inputs`, in order."""
  import sonnet as snt  # pylint: disable=g-import-not-at-top
  calls = []
  originals = {cls: cls.__call__ for cls in (snt.Conv2D, snt.Linear)}

  def recording(cls):
    def call(self, x, *args, **kwargs):
      y = originals[cls](self, x, *args, **kwargs)
      calls.append((cls.__name__, tuple(self.w.shape), tuple(y.shape)))
      return y
    return call

  try:
    for cls in originals:
      cls.__call__ = recording(cls)
    network(*inputs)
  finally:
    for cls, original in originals.items():
      cls.__call__ = original
  return calls


def forward_flops_by_hand(calls) -> int:
  """FLOPs of one sample's forward pass from its layers' calls."""
  total = 0
  for kind, kernel, output in calls:
    if kind == 'Conv2D':
      height, width, channels_in, channels_out = kernel
      total += 2 * height * width * channels_in * channels_out * (
          output[1] * output[2])
    else:
      total += 2 * kernel[0] * kernel[1]
  return total


def profiled_flops(function, *specs) -> int:
  """TensorFlow's profiler's count of the float operations of the graph of
  `function` traced for `specs`."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tensorflow.python.profiler import model_analyzer  # pylint: disable=g-import-not-at-top
  from tensorflow.python.profiler import option_builder  # pylint: disable=g-import-not-at-top
  graph = tf.function(function).get_concrete_function(*specs).graph
  options = option_builder.ProfileOptionBuilder(
      option_builder.ProfileOptionBuilder.float_operation()
  ).with_empty_output().build()
  return int(model_analyzer.profile(graph, options=options).total_float_ops)


def _spec(value):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return tf.TensorSpec(value.shape, tf.as_dtype(value.dtype))


def _forward_inputs(agent_name: str, learner, data):
  """[(role, online network, its inputs)]: the Q-network ('q'); for the
  DPG agents the policy on the observation and the critic on
  (observation, action)."""
  from agents.replay import adders  # pylint: disable=g-import-not-at-top
  from benchmarks import in_memory  # pylint: disable=g-import-not-at-top
  networks = in_memory.networks(learner)
  observation = data[adders.OBSERVATION]
  if agent_name in ('apex_dpg', 'd4pg'):
    policy, _, critic, _ = networks
    return [('policy', policy, (observation,)),
            ('critic', critic, (observation, data[adders.ACTION]))]
  return [('q', networks[0], (observation,))]


def update_flops_by_hand(forward: Dict[str, int], first: Dict[str, int]
                         ) -> int:
  """FLOPs of one sample's update from each role's forward pass and first
  layer's FLOPs (the passes: the module docstring)."""
  if 'q' in forward:
    return 5 * forward['q'] - first['q']
  return (4 * forward['policy'] + 6 * forward['critic'] - first['policy'] -
          first['critic'])


def count(agent_name: str, learner, sample, batch: int) -> Dict[str, Any]:
  """The FLOPs of one sample's update (by hand; by the profiler) and of one
  forward pass of the online networks (by hand; by the profiler)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  data = {key: value for key, value in sample.data.items()}
  forward, first, profiled = {}, {}, 0
  for role, network, inputs in _forward_inputs(agent_name, learner, data):
    calls = layer_calls(network, [value[:1] for value in inputs])
    forward[role] = forward_flops_by_hand(calls)
    first[role] = forward_flops_by_hand(calls[:1])
    profiled += profiled_flops(lambda *x, network=network: network(*x),
                               *[_spec(value) for value in inputs])
  update = profiled_flops(
      learner._update,  # pylint: disable=protected-access
      {key: _spec(value) for key, value in data.items()},
      tf.TensorSpec([batch], tf.float32))
  by_hand = sum(forward.values())
  return dict(update_flops_per_sample=update_flops_by_hand(forward, first),
              update_flops_per_sample_profiled=update / batch,
              forward_flops_per_sample_by_hand=by_hand,
              forward_flops_per_sample_profiled=profiled / batch,
              forward_profiled_over_hand=profiled / batch / by_hand)


def kernels(dtype: str, cases: Dict[str, Dict[str, Any]]):
  """{name: (callable, FLOPs a call)}: the square product, and each case's
  largest dense product and first convolution at its batch, in `dtype`."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  tf_dtype = tf.as_dtype(dtype)
  rng = np.random.default_rng(0)

  def tensor(*shape):
    return tf.cast(tf.constant(rng.normal(size=shape).astype(np.float32)),
                   tf_dtype)

  made = {}
  a, b = tensor(SQUARE, SQUARE), tensor(SQUARE, SQUARE)
  made[f'matmul {SQUARE}x{SQUARE}'] = (
      tf.function(lambda: tf.matmul(a, b)), 2 * SQUARE ** 3)
  for case in cases.values():
    batch = case['batch']
    dense = max((c for c in case['layers'] if c[0] == 'Linear'),
                key=lambda c: c[1][0] * c[1][1])
    inputs, outputs = dense[1]
    x, w = tensor(batch, inputs), tensor(inputs, outputs)
    made[f'matmul {batch}x{inputs}x{outputs}'] = (
        tf.function(lambda x=x, w=w: tf.matmul(x, w)),
        2 * batch * inputs * outputs)
    convolutions = [c for c in case['layers'] if c[0] == 'Conv2D']
    if convolutions:
      kernel, output = tuple(convolutions[0][1]), convolutions[0][2]
      stride = case['first_stride']
      height = (output[1] - 1) * stride + kernel[0]
      width = (output[2] - 1) * stride + kernel[1]
      images, filters = tensor(batch, height, width, kernel[2]), tensor(*kernel)
      made[f'conv {batch}x{height}x{width}x{kernel[2]} * {kernel}'] = (
          tf.function(lambda i=images, f=filters, s=stride: tf.nn.conv2d(
              i, f, s, 'VALID')),
          2 * batch * int(np.prod(kernel)) * output[1] * output[2])
  return made


def time_kernel(function, seconds: float) -> float:
  """Calls per second of `function` over about `seconds` (after one call)."""
  function().numpy()
  calls, begin = 0, time.perf_counter()
  while time.perf_counter() - begin < seconds:
    result = function()
    calls += 1
  result.numpy()
  return calls / (time.perf_counter() - begin)


def peak_rates(shapes: str, dtypes: List[str]) -> Dict[str, Dict[str, float]]:
  """{dtype: {kernel: GFLOP/s}}, timed by this script in a new process
  (`--peaks_of`)."""
  output = subprocess.run(
      [sys.executable, os.path.abspath(__file__), f'--peaks_of={shapes}',
       f'--seconds={FLAGS.seconds}', f'--dtypes={",".join(dtypes)}'],
      check=True, stdout=subprocess.PIPE, text=True).stdout
  return json.loads(output.strip().splitlines()[-1])


def time_peaks():
  """`--peaks_of`: prints {dtype: {kernel: GFLOP/s}} as one JSON line."""
  cases = json.loads(FLAGS.peaks_of)
  measured = {}
  for dtype in FLAGS.dtypes:
    measured[dtype] = {
        name: time_kernel(function, FLAGS.seconds / 2) * flops / 1e9
        for name, (function, flops) in kernels(dtype, cases).items()}
  print(json.dumps(measured))


def main(argv):
  del argv
  if FLAGS.peaks_of:
    time_peaks()
    return
  from agents import precision  # pylint: disable=g-import-not-at-top
  from agents import registry  # pylint: disable=g-import-not-at-top
  from agents.envs import environments  # pylint: disable=g-import-not-at-top
  from benchmarks import in_memory  # pylint: disable=g-import-not-at-top
  native = precision.bfloat16_flags()
  dtypes = ['float32'] + (['bfloat16'] if native else [])
  cases, learners = {}, {}
  for label, name, preset, env in CASES:
    if FLAGS.cases and name not in FLAGS.cases:
      continue
    agent = registry.get(name)
    config = in_memory.config_of(agent, preset)
    continuous = name in ('apex_dpg', 'd4pg')
    environment = (environments.resolve_continuous(env) if continuous
                   else environments.resolve_discrete(env))
    sample = in_memory.batch(environment, config.batch_size)
    learner = in_memory.learner(agent, config, environment, sample)
    learner.step()  # Traces the update.
    _, network, inputs = _forward_inputs(name, learner, sample.data)[-1]
    layers = layer_calls(network, [value[:1] for value in inputs])
    first = [module for module in network.submodules
             if type(module).__name__ == 'Conv2D']
    cases[label] = dict(
        agent=name, preset=preset, env=env, batch=config.batch_size,
        layers=layers, first_stride=(int(np.ravel(first[0].stride)[0]) if first else None),
        **count(name, learner, sample, config.batch_size))
    learners[label] = learner
    print(f'{label}: {cases[label]["update_flops_per_sample"] / 1e6:.1f} '
          'MFLOP a sample\'s update by hand ('
          f'{cases[label]["update_flops_per_sample_profiled"] / 1e6:.1f} '
          'by the profiler); one forward pass '
          f'{cases[label]["forward_flops_per_sample_by_hand"] / 1e6:.2f} '
          'MFLOP by hand, '
          f'{cases[label]["forward_flops_per_sample_profiled"] / 1e6:.2f} '
          'by the profiler', flush=True)
  rates = {label: [] for label in cases}
  kernel_rates = {dtype: {} for dtype in dtypes}
  for label, learner in learners.items():
    in_memory.time_updates(learner, 2.0)  # Warm-up.
  shapes = json.dumps({label: dict(batch=case['batch'], layers=case['layers'],
                                   first_stride=case['first_stride'])
                       for label, case in cases.items()})
  for repeat in range(FLAGS.repeats):
    for label, learner in learners.items():
      rates[label].append(in_memory.time_updates(learner, FLAGS.seconds))
    # The kernels in a process of their own, from the cases' shapes.
    for dtype, measured in peak_rates(shapes, dtypes).items():
      for name, gflops in measured.items():
        kernel_rates[dtype].setdefault(name, []).append(gflops)
    print(f'repeat {repeat}: ' + ', '.join(
        f'{label.split(" (")[0]} {rates[label][-1]:.1f} updates/s'
        for label in cases), flush=True)
  peaks = {}
  for dtype, measured in kernel_rates.items():
    medians = {name: common.median(values)
               for name, values in measured.items()}
    best = max(medians, key=medians.get)
    peaks[dtype] = dict(gflops=medians[best], kernel=best,
                        kernels={name: dict(median_gflops=medians[name],
                                            gflops=measured[name])
                                 for name in measured})
  rows = []
  for label, case in cases.items():
    updates = common.median(rates[label])
    achieved = updates * case['batch'] * case['update_flops_per_sample'] / 1e9
    case.update(updates_per_second=rates[label],
                median_updates_per_second=updates,
                samples_per_second=updates * case['batch'],
                achieved_gflops=achieved,
                fraction_of_peak={dtype: achieved / peak['gflops']
                                  for dtype, peak in peaks.items()})
    del case['layers']
    rows.append([label, f'{case["update_flops_per_sample"] / 1e6:.1f}',
                 f'{case["forward_profiled_over_hand"]:.3f}',
                 f'{updates:.1f}', f'{achieved:.1f}',
                 f'{case["fraction_of_peak"]["float32"]:.2f}',
                 (f'{case["fraction_of_peak"]["bfloat16"]:.2f}' if native
                  else 'no bf16')])
  common.print_table(
      'The learner against the cores\' peak (medians of '
      f'{FLAGS.repeats} windows)',
      ['case', 'MFLOP/sample', 'forward: profiler/hand', 'updates/s',
       'GFLOP/s', 'of f32 peak', 'of bf16 peak'], rows)
  for dtype, peak in peaks.items():
    print(f'{dtype} peak: {peak["gflops"]:.1f} GFLOP/s ({peak["kernel"]})')
  if not native:
    print('bfloat16 peak: not measured, this CPU has no bfloat16 arithmetic '
          f'(no {" or ".join(precision.BFLOAT16_FLAGS)} flag).')
  path = common.write_result('learner_flops', dict(
      machine=common.machine(), cpu_bfloat16_flags=native,
      repeats=FLAGS.repeats, seconds=FLAGS.seconds, cases=cases,
      peaks=peaks, bfloat16_peak_measured=bool(native),
      onednn=os.environ.get(launch.ONEDNN)))
  print(f'wrote {path}')


if __name__ == '__main__':
  launch.use_onednn()  # Before TensorFlow starts: the nodes' setting.
  app.run(main)
