"""The learner's arithmetic: float32, or bfloat16 where the CPU has it.

With `--learner_precision=bfloat16` the learner's forward and backward
passes compute in bfloat16 (8 bits of mantissa, float32's range) while its
weights, optimiser state, targets, losses and priorities stay float32: inside
`scope`, every floating variable of the given networks is read as a bfloat16
copy (the gradient flows back through the cast to the float32 variable), the
torsos cast their inputs to `compute_dtype()`, and each network casts its
outputs back to float32 (`to_float32`) before any loss is computed. This is
mixed precision in the usual sense (Micikevicius et al. 2018; Kalamkar et
al. 2019 for bfloat16, which needs no loss scaling: its exponent is
float32's). Actors and the evaluator always compute in float32.

bfloat16 pays only where the CPU multiplies it natively: x86 CPUs with
AVX512_BF16 (AMD Zen 4 and later; Intel Cooper Lake) or AMX-BF16 (Intel
Sapphire Rapids and later). Elsewhere it is emulated, not native, and
TensorFlow 2.8 cannot run a bfloat16 convolution at all on a CPU without
AVX512 unless XLA compiles it; so 'auto' chooses bfloat16 only where one of
those flags is in /proc/cpuinfo, and a request for bfloat16 on a CPU
without them runs in float32 and says so (`resolve`).

Nothing here imports TensorFlow at import time: configs check the flag
before anything starts.
"""

import contextlib
import threading
from typing import Iterable, List, Optional, Tuple

PRECISIONS = ('auto', 'float32', 'bfloat16')
# /proc/cpuinfo flags of native bfloat16 arithmetic.
BFLOAT16_FLAGS = ('avx512_bf16', 'amx_bf16')
CPUINFO = '/proc/cpuinfo'

_state = threading.local()


def cpu_flags(cpuinfo: Optional[str] = None) -> List[str]:
  """The flags of the first processor in `cpuinfo` (the text of
  /proc/cpuinfo; read from the machine if None); [] where there is none
  (not Linux, or no flags line)."""
  if cpuinfo is None:
    try:
      with open(CPUINFO) as f:
        cpuinfo = f.read()
    except OSError:
      return []
  for line in cpuinfo.splitlines():
    key, _, value = line.partition(':')
    if key.strip() in ('flags', 'Features'):
      return value.split()
  return []


def bfloat16_flags(flags: Optional[Iterable[str]] = None) -> List[str]:
  """Which of `BFLOAT16_FLAGS` the CPU (or `flags`) has."""
  have = set(cpu_flags() if flags is None else flags)
  return [flag for flag in BFLOAT16_FLAGS if flag in have]


def resolve(requested: str,
            flags: Optional[Iterable[str]] = None) -> Tuple[str, str]:
  """(the precision the learner computes in, 'float32' or 'bfloat16'; a
  sentence saying why) for `--learner_precision=requested` on a CPU with
  `flags` (this machine's if None)."""
  if requested not in PRECISIONS:
    raise ValueError(f'--learner_precision={requested!r} is out of range: '
                     f'it must be one of {", ".join(PRECISIONS)}.')
  if requested == 'float32':
    return 'float32', 'The learner computes in float32 (--learner_precision).'
  native = bfloat16_flags(flags)
  if native:
    return 'bfloat16', (
        f'The learner computes in bfloat16, its weights, optimiser state and '
        f'priorities in float32 (--learner_precision={requested}; this CPU '
        f'has {" and ".join(native)}).')
  if requested == 'auto':
    return 'float32', (
        'The learner computes in float32: this CPU has no bfloat16 '
        f'arithmetic (no {" or ".join(BFLOAT16_FLAGS)} flag; '
        '--learner_precision=auto).')
  return 'float32', (
      'warning: --learner_precision=bfloat16, but this CPU has no bfloat16 '
      f'arithmetic (no {" or ".join(BFLOAT16_FLAGS)} flag), only an '
      'emulation of it: the learner computes in float32.')


def compute_dtype():
  """The dtype networks compute in here: float32 outside `scope`."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return getattr(_state, 'dtype', None) or tf.float32


def cast_input(x):
  """`x` (an observation, an action) in the dtype networks compute in."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return tf.cast(x, compute_dtype())


def to_float32(x):
  """A network's output, back in float32 for losses and actions."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return tf.cast(x, tf.float32)


@contextlib.contextmanager
def scope(precision: str, networks: Iterable[object]):
  """Within it, `networks` (Sonnet modules, their variables already made in
  float32) compute in `precision`: each floating variable a module of
  theirs (or a submodule) reads from itself as an attribute (`self.w`) is a
  copy in that dtype, and `compute_dtype()` is that dtype (for the torsos'
  input casts). Their `variables` and `trainable_variables` are still the
  float32 variables, for the gradients and the optimiser. Made for tracing
  a `tf.function` (the update), whose graph keeps the casts. With 'float32'
  it changes nothing."""
  if precision == 'float32':
    yield
    return
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  dtype = tf.dtypes.as_dtype(precision)
  networks = list(networks)
  modules = list(networks)
  for network in networks:
    modules.extend(network.submodules)
    for variable in network.variables:
      if variable.dtype.is_floating and variable.dtype != tf.float32:
        raise ValueError(
            f'{variable.name} is {variable.dtype.name}: the networks must be '
            'built in float32 before they compute in another precision.')
  previous = getattr(_state, 'dtype', None)
  _state.dtype = dtype
  try:
    with _variables_read_as(dtype, modules):
      yield
  finally:
    _state.dtype = previous


@contextlib.contextmanager
def _variables_read_as(dtype, modules: List[object]):
  """Patches the classes of `modules` so that, for those instances only, an
  attribute holding a floating `tf.Variable` reads as its cast to `dtype`
  (the gradient flows back through the cast to the variable). Attributes
  holding anything else (`__dict__` too, which Sonnet walks for
  `trainable_variables`) read as they are."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  instances = {id(module) for module in modules}
  patched = []
  for cls in {type(module) for module in modules}:
    own = cls.__dict__.get('__getattribute__')
    original = cls.__getattribute__

    def getattribute(obj, name, original=original):
      value = original(obj, name)
      if (isinstance(value, tf.Variable) and value.dtype.is_floating and
          id(obj) in instances):
        return tf.cast(value, dtype)
      return value

    cls.__getattribute__ = getattribute
    patched.append((cls, own))
  try:
    yield
  finally:
    for cls, own in patched:
      if own is None:
        del cls.__getattribute__
      else:
        cls.__getattribute__ = own
