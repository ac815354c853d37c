"""The house's layout, as docs/architecture.md and the packages' docstrings
state it, read from the code's own imports (ast: nothing is imported).

* The agents import nothing of the launch package.
* The top of agents/ holds only what every agent uses: at most 8 modules.
* The top of launch/ holds only the program-graph core; every other module
  is in a room (a subpackage) whose docstring names each of its modules.
* The rooms import what their docstrings allow: runs/ and machine/ nothing
  else of launch/, offline/ only runs/.
"""

import ast
import os

import pytest

from tests import helpers

LAUNCH_CORE = {'__init__', 'program', 'node_groups', 'nodes', 'replay_nodes',
               'worker_nodes', 'variable_cache', 'options', 'entry'}
# Each room: the parts of launch/ (beside itself) it may import.
ROOM_IMPORTS = {'runs': set(), 'machine': set(), 'offline': {'runs'}}


def modules(folder: str):
  """(path relative to the root, its dotted name) of every module under
  `folder`."""
  for directory, subdirectories, files in os.walk(
      os.path.join(helpers.ROOT, folder)):
    subdirectories[:] = [name for name in subdirectories
                         if name != '__pycache__']
    for name in sorted(files):
      if name.endswith('.py'):
        path = os.path.relpath(os.path.join(directory, name), helpers.ROOT)
        dotted = path[:-3].replace(os.sep, '.')
        yield path, dotted[:-len('.__init__')] if name == '__init__.py' \
            else dotted


def imported(path: str):
  """Every module `path` imports, anywhere in it (inside functions too),
  as dotted names: `from a import b` gives a and a.b."""
  with open(os.path.join(helpers.ROOT, path)) as f:
    tree = ast.parse(f.read())
  names = set()
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      names.update(alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
      names.add(node.module)
      names.update(f'{node.module}.{alias.name}' for alias in node.names)
  return names


def test_the_agents_import_nothing_of_the_launch_package():
  for path, _ in modules('agents'):
    launch = sorted(name for name in imported(path)
                    if name == 'launch' or name.startswith('launch.'))
    assert not launch, (path, launch)


def test_the_top_of_agents_holds_at_most_eight_modules():
  top = sorted(name for name in os.listdir(os.path.join(helpers.ROOT,
                                                        'agents'))
               if name.endswith('.py') and name != '__init__.py')
  assert len(top) <= 8, top


def test_the_top_of_launch_holds_only_the_core():
  top = {name[:-3] for name in os.listdir(os.path.join(helpers.ROOT,
                                                       'launch'))
         if name.endswith('.py')}
  assert top == LAUNCH_CORE


def _rooms():
  launch = os.path.join(helpers.ROOT, 'launch')
  return sorted(name for name in os.listdir(launch)
                if os.path.isdir(os.path.join(launch, name)) and
                name != '__pycache__')


@pytest.mark.parametrize('room', _rooms())
def test_every_room_of_launch_says_what_it_holds(room):
  path = os.path.join(helpers.ROOT, 'launch', room, '__init__.py')
  with open(path) as f:
    docstring = ast.get_docstring(ast.parse(f.read()))
  assert docstring, f'launch/{room}/__init__.py has no docstring'
  held = sorted(name[:-3] for name in os.listdir(os.path.dirname(path))
                if name.endswith('.py') and name != '__init__.py')
  missing = [name for name in held if name not in docstring]
  # A room of many modules may name them by role (cloud/: "one module per
  # role"); the small ones name each.
  if len(held) <= 8:
    assert not missing, (room, missing)


@pytest.mark.parametrize('room, allowed', sorted(ROOM_IMPORTS.items()))
def test_a_room_imports_only_what_its_docstring_allows(room, allowed):
  for path, _ in modules(os.path.join('launch', room)):
    for name in imported(path):
      if not name.startswith('launch.'):
        continue
      part = name.split('.')[1]
      assert part == room or part in allowed, (path, name)
