"""Ape-X DQN and DPG (and A3C) in the style of Acme: the agents, their
replay, environments and networks. It imports nothing of the launch package
(`launch`), which turns its builders into programs."""

import importlib
from typing import Dict

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
