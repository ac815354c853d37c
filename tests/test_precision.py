"""The learner's precision (agents/networks/precision.py): which one a CPU gets, what
computing in bfloat16 changes in a network, and how far a learner's new
priorities in bfloat16 stay from float32's on the same batch.

A network in bfloat16 is checked against float64 numpy: its error must be
bfloat16's (8 bits of mantissa), not float32's, and its products bfloat16
operations in the traced graph. The learners' updates run under XLA (`jit_compile`), the one way
TensorFlow 2.8 runs a bfloat16 convolution on any x86 CPU, with or without
bfloat16 arithmetic.
"""

import dataclasses

import numpy as np
import pytest
import sonnet as snt
import tensorflow as tf

from agents.networks import precision
from agents import registry
from agents.apex_dqn.config import ApeXDQNConfig
from benchmarks import in_memory
from agents.envs import environments
import helpers

ZEN4 = ('fpu sse2 avx avx2 avx512f avx512bw avx512_bf16 avx512_vnni').split()
SAPPHIRE_RAPIDS = 'fpu sse2 avx2 avx512f amx_bf16 amx_tile amx_int8'.split()
SKYLAKE = 'fpu sse2 avx avx2 avx512f avx512bw avx512vl'.split()
MILAN = 'fpu sse2 avx avx2 fma'.split()


def test_cpu_flags_read_from_cpuinfo_text():
  x86 = ('processor\t: 0\nvendor_id\t: AuthenticAMD\n'
         'flags\t\t: fpu avx2 avx512_bf16\n\nprocessor\t: 1\n'
         'flags\t\t: fpu\n')
  assert precision.cpu_flags(x86) == ['fpu', 'avx2', 'avx512_bf16']
  arm = 'processor\t: 0\nFeatures\t: fp asimd bf16\n'
  assert precision.cpu_flags(arm) == ['fp', 'asimd', 'bf16']
  assert precision.cpu_flags('') == []


@pytest.mark.parametrize('flags,native', [
    (ZEN4, ['avx512_bf16']), (SAPPHIRE_RAPIDS, ['amx_bf16']),
    (SKYLAKE, []), (MILAN, [])])
def test_auto_takes_bfloat16_only_where_the_cpu_multiplies_it(flags, native):
  assert precision.bfloat16_flags(flags) == native
  computes_in, why = precision.resolve('auto', flags)
  if native:
    assert computes_in == 'bfloat16'
    assert native[0] in why and 'float32' in why  # The weights' precision.
  else:
    assert computes_in == 'float32'
    assert 'no bfloat16 arithmetic' in why and '--learner_precision=auto' in why
    assert not why.startswith('warning')


def test_asked_for_bfloat16_without_it_runs_float32_and_warns():
  computes_in, why = precision.resolve('bfloat16', MILAN)
  assert computes_in == 'float32'
  assert why.startswith('warning: --learner_precision=bfloat16')
  assert 'avx512_bf16' in why and 'computes in float32' in why
  assert precision.resolve('bfloat16', ZEN4)[0] == 'bfloat16'
  assert precision.resolve('float32', ZEN4)[0] == 'float32'


def test_a_precision_out_of_range_is_refused_naming_the_flag():
  with pytest.raises(ValueError, match='--learner_precision=.bf16.*auto'):
    precision.resolve('bf16', ZEN4)
  with pytest.raises(ValueError, match='--learner_precision=.half.'):
    dataclasses.replace(ApeXDQNConfig(), learner_precision='half').validate()


def test_this_machine_gets_what_its_cpuinfo_says():
  expected = 'bfloat16' if helpers.cpu_has_bfloat16() else 'float32'
  assert precision.resolve('auto')[0] == expected


class TwoLayers(snt.Module):
  """A small MLP as the agents' networks are made: input cast to the
  compute dtype, output back to float32."""

  def __init__(self):
    super().__init__()
    self.hidden = snt.Linear(16)
    self.out = snt.Linear(3)

  def __call__(self, x):
    h = tf.nn.relu(self.hidden(precision.cast_input(x)))
    return precision.to_float32(self.out(h))


def _two_layers(seed: int) -> TwoLayers:
  rng = np.random.default_rng(seed)
  net = TwoLayers()
  net(tf.zeros([1, 5]))
  for variable in net.variables:
    variable.assign(rng.normal(size=variable.shape).astype(np.float32))
  return net


def test_bfloat16_scope_computes_in_bfloat16_and_keeps_float32_state():
  net = _two_layers(0)
  x = np.random.default_rng(1).normal(size=(8, 5)).astype(np.float32)
  seen = []

  @tf.function
  def forward_and_gradient():
    with precision.scope('bfloat16', [net]):
      with tf.GradientTape() as tape:
        y = net(x)
        loss = tf.reduce_sum(y)
      variables = net.trainable_variables
      seen.extend(variables)
      return y, tape.gradient(loss, variables)

  full = net(x).numpy().astype(np.float64)  # Outside the scope: float32.
  y, gradients = forward_and_gradient()
  # The state the optimiser sees is the float32 variables themselves.
  assert len(seen) == 4 and all(
      isinstance(v, tf.Variable) and v.dtype == tf.float32 for v in seen)
  assert all(g is not None and g.dtype == tf.float32 for g in gradients)
  assert y.dtype == tf.float32
  # Both layers' products are bfloat16 operations in the traced graph.
  graph = forward_and_gradient.get_concrete_function().graph
  products = [op for op in graph.get_operations() if op.type == 'MatMul']
  forward = [op for op in products if op.outputs[0].dtype == tf.bfloat16]
  assert len(forward) >= 2, [(op.name, op.outputs[0].dtype) for op in products]
  # Against float64 (numpy): a bfloat16 error (8 bits of mantissa), not a
  # float32 one (24 bits: about 1e-7 of the outputs' scale).
  w1, b1 = net.hidden.w.numpy(), net.hidden.b.numpy()
  w2, b2 = net.out.w.numpy(), net.out.b.numpy()
  exact = np.maximum(x.astype(np.float64) @ w1 + b1, 0) @ w2 + b2
  scale = np.abs(exact).mean()
  assert np.abs(full - exact).max() / scale < 1e-5
  error = np.abs(y.numpy() - exact).max() / scale
  assert 1e-4 < error < 0.05, error
  # Outside the scope, the same network computes in float32 again.
  np.testing.assert_allclose(net(x).numpy(), full, rtol=1e-6)


def test_float32_scope_changes_nothing():
  net = _two_layers(2)
  x = np.ones((2, 5), np.float32)
  before = net(x).numpy()
  with precision.scope('float32', [net]):
    np.testing.assert_array_equal(net(x).numpy(), before)


def test_networks_not_built_in_float32_are_refused():
  net = snt.Linear(3)
  net(tf.zeros([1, 5], tf.float64))  # Variables made in float64.
  with pytest.raises(ValueError, match='built in float32'):
    with precision.scope('bfloat16', [net]):
      pass


# --------------------------------------------------------------------------
# The learners: new priorities in bfloat16 against float32's, same batch.
# --------------------------------------------------------------------------


# (agent, preset, environment, continuous, XLA)
LEARNERS = [
    ('apex_dqn', 'minatar', 'minatar:breakout', False, True),
    ('apex_c51', 'minatar', 'minatar:breakout', False, True),
    ('apex_dpg', 'dmc500k', 'control:cheetah:run', True, False),
    ('d4pg', 'dmc500k', 'control:cheetah:run', True, False),
]
# The tolerance: the 99th percentile of |p_bf16 - p_f32| over the batch's
# mean priority. bfloat16 keeps 8 bits of mantissa (a relative rounding of
# at most 2^-9, about 0.2%, per operand and per layer's output).
TOLERANCE_P99 = 0.03


@pytest.mark.slow
@pytest.mark.parametrize('name,preset,env,continuous,jit', LEARNERS)
def test_priorities_in_bfloat16_stay_near_float32s(name, preset, env,
                                                   continuous, jit):
  agent = registry.get(name)
  config = in_memory.config_of(agent, preset, jit_compile=jit)
  environment = (environments.resolve_continuous(env) if continuous
                 else environments.resolve_discrete(env))
  sample = in_memory.batch(environment, config.batch_size)
  full = in_memory.learner(agent, config, environment, sample, 'float32')
  half = in_memory.learner(agent, config, environment, sample, 'bfloat16')
  for source, destination in zip(full.networks, half.networks):
    for a, b in zip(source.variables, destination.variables):
      b.assign(a)
  full.step()
  half.step()
  p32 = full.last_update['priorities']
  p16 = half.last_update['priorities']
  difference = np.abs(p16 - p32) / p32.mean()
  assert np.percentile(difference, 99) <= TOLERANCE_P99, difference
  assert not np.array_equal(p16, p32)  # bfloat16 did compute them.
  # Weights and optimiser state stay float32 after a bfloat16 update.
  assert all(v.dtype == tf.float32 for net in half.networks
             for v in net.variables)
