"""FLOPs of the learner's update, counted by hand from the networks' layers
and by TensorFlow's profiler, and the kernels that time the cores' peak
(benchmarks/learner_flops.py; tests/test_learner_flops.py). No flags: a
module any test may import.
"""

import time
from typing import Any, Dict, List, Tuple

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


def forward_inputs(agent_name: str, learner, data):
  """[(role, online network, its inputs)]: the Q-network ('q'); for the
  DPG agents the policy on the observation and the critic on
  (observation, action)."""
  from agents.replay import adders  # pylint: disable=g-import-not-at-top
  networks = learner.networks
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
  forward pass of the online networks (by hand; by the profiler); and
  `layers`, the layer calls (`layer_calls`) of the last of them (the
  Q-network, or the critic)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  data = {key: value for key, value in sample.data.items()}
  forward, first, profiled = {}, {}, 0
  for role, network, inputs in forward_inputs(agent_name, learner, data):
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
  return dict(layers=calls,
              update_flops_per_sample=update_flops_by_hand(forward, first),
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
