"""Modules of a user's own code that register environment suites
(`agents.envs.suites`) or agents (`agents.registry`): a program imports
them, as its `--plugins` flag names them, before it resolves its
environment.

A plug-in is imported by name, from the Python path or from the current
directory (as `python -m` would find it, and as Launchpad's processes find
theirs). Every process that needs its registrations gets them: the
launcher imports it here; a node's process imports it when it unpickles
what the plug-in made (the environment spec holds the suite, whose
functions are the plug-in's); a resumed run and `programs/evaluate.py` read
its name from the run's record; and a Vertex AI job's containers hold a
copy of it (`launch.cloud.packaging`).
"""

import importlib
import os
import sys
from typing import List, Tuple

# The plug-ins this process imported, in order (`launch.cloud.packaging`
# copies them into a Vertex AI job's containers).
_IMPORTED: List[str] = []


def names(plugins: str) -> Tuple[str, ...]:
  """The module names of a `--plugins` value (comma-separated)."""
  return tuple(name.strip() for name in plugins.split(',') if name.strip())


def import_plugins(plugins: str) -> List[str]:
  """Imports each module `plugins` names; returns their names.

  Raises:
    ValueError: a module cannot be imported, naming it, why, and where it
      was looked for.
  """
  modules = names(plugins)
  if modules and os.getcwd() not in sys.path and '' not in sys.path:
    sys.path.append(os.getcwd())
  for name in modules:
    try:
      importlib.import_module(name)
    except ImportError as error:
      raise ValueError(
          f'--plugins={plugins}: cannot import {name!r} ({error}). Name a '
          'module of the current directory or the Python path (PYTHONPATH), '
          'as you would to `import` it.') from error
    if name not in _IMPORTED:
      _IMPORTED.append(name)
  return list(modules)


def load(name: str):
  """The attribute named `module:attribute` (a builder, a network factory,
  a torso, as the registries name them), its module imported."""
  module, _, attribute = name.partition(':')
  return getattr(importlib.import_module(module), attribute)


def imported() -> List[str]:
  """The plug-ins this process imported through `import_plugins`."""
  return list(_IMPORTED)
