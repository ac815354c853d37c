"""Ape-X DQN and DPG (and A3C) in the style of Acme."""

import importlib
import os
from typing import Dict

# TensorFlow's switch for its oneDNN CPU kernels, read once as it starts.
ONEDNN = 'TF_ENABLE_ONEDNN_OPTS'


def onednn_setting() -> str:
  """The value of `TF_ENABLE_ONEDNN_OPTS` for the nodes: this process's
  own, or '1' (on: see `use_onednn`)."""
  return os.environ.get(ONEDNN, '1')


def use_onednn():
  """Turns on TensorFlow's oneDNN CPU kernels for the processes started
  from now on (and for this one, if TensorFlow has not started yet), unless
  `TF_ENABLE_ONEDNN_OPTS` is set already.

  TensorFlow 2.8 leaves them off on Linux (2.9 turned them on by default).
  On 2 CPU cores the atari_small learner update (batch 64) runs 1.5 times
  as fast with them, an actor's forward pass and environment steps 1.01 to
  1.04 times (`benchmarks/results/onednn.json`, docs/performance.md). The
  launcher calls this just before it starts a local_mp program's nodes, not
  at import: TensorFlow announces oneDNN on stderr as it starts, and a
  launcher's own stderr is for its errors.
  """
  os.environ[ONEDNN] = onednn_setting()


def lazy_exports(package: str, exports: Dict[str, str]):
  """A package's `__getattr__` (PEP 562) giving each name of `exports`
  (name -> module of `package`) from its module, imported when the name is
  first asked for: importing one module of the package (its config, say)
  then imports nothing else of it."""

  def __getattr__(name):  # pylint: disable=invalid-name
    if name in exports:
      module = importlib.import_module(f'{package}.{exports[name]}')
      return getattr(module, name)
    raise AttributeError(f'module {package!r} has no attribute {name!r}')

  return __getattr__
