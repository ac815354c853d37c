"""Fixtures shared by the tests (helpers.py holds the plain functions).

`agents` (and `programs`, `examples`, `benchmarks`) import as the installed
project (`pip install -e .`, which `make` does); tests/ is on the import
path through pytest's own rootdir handling. The second tier of the suite
(`make test-all`) is marked `slow` (pytest.ini says what belongs there);
`make test` deselects it.
"""

import json
import os
import time

import pytest
import reverb

from agents.replay import tables
from agents.apex.config import ApeXConfig
import helpers


# The modules whose tests take longest, first, longest test first (by the
# wall seconds of the suite's last full run on 2 cores: `--durations` of
# `make test-all`, or `benchmarks/test_costs.py`); then the rest of the
# second tier; then the quick tier. pytest-xdist hands tests to its workers
# in order, and a long test handed out last would leave the other worker
# idle until it ends. A module's tests stay together (so that its module
# fixtures are made once), in their own order.
LONGEST_FIRST = (
    'test_cloud_scale.py', 'test_healing.py', 'test_learning.py',
    'test_cloud.py', 'test_d4pg_program.py', 'test_recurrent_plugin.py',
    'test_replay_shards.py', 'test_r2d2_program.py', 'test_faults.py',
    'test_cloud_mounts.py', 'test_extending.py', 'test_replay_restart.py',
    'test_private_network.py', 'test_dpg_program.py', 'test_program.py')


def pytest_collection_modifyitems(items):
  def rank(item):
    name = item.path.name
    if name in LONGEST_FIRST:
      return LONGEST_FIRST.index(name)
    return len(LONGEST_FIRST) + (item.get_closest_marker('slow') is None)
  items.sort(key=rank)  # Stable: the order within a rank is kept.


# With TEST_COSTS=<file>, each test's wall seconds and CPU seconds (its
# worker's own, and its child processes' once reaped) are added to <file> as
# a JSON line: benchmarks/test_costs.py sums them per test and module.
_COSTS = os.environ.get('TEST_COSTS')


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):  # pylint: disable=unused-argument
  if not _COSTS:
    yield
    return
  before, started = os.times(), time.monotonic()
  yield
  after = os.times()
  own = (after.user - before.user) + (after.system - before.system)
  children = ((after.children_user - before.children_user)
              + (after.children_system - before.children_system))
  with open(_COSTS, 'a') as f:
    f.write(json.dumps({'test': item.nodeid,
                        'slow': item.get_closest_marker('slow') is not None,
                        'wall': round(time.monotonic() - started, 2),
                        'cpu': round(own + children, 2)}) + '\n')


@pytest.fixture
def launch(tmp_path):
  """Starts programs in their own sessions (`helpers.Program`): call it as
  `launch(name, command)`; the output goes to <tmp_path>/<name>.out. Every
  program started so is killed, with its whole process group, when the test
  ends, however it ends."""
  started = []

  def start(name: str, command, environment=None) -> helpers.Program:
    program = helpers.Program(command, tmp_path / f'{name}.out', environment)
    started.append(program)
    return program

  yield start
  for program in started:
    program.close()


@pytest.fixture(scope='module')
def server(request):
  """A Reverb server with the project's replay table for the test module's
  environment spec `SPEC` and capacity `CAPACITY` (module attributes), with
  a minimum size of 1: whatever is written can be read back at once."""
  config = ApeXConfig(replay_capacity=request.module.CAPACITY,
                      min_replay_size=1, batch_size=1)
  server = reverb.Server([tables.make_replay_table(config,
                                                   request.module.SPEC)])
  yield server
  server.stop()


@pytest.fixture
def client(server):  # pylint: disable=redefined-outer-name
  """A client of `server`, its table empty before and after the test."""
  client = reverb.Client(f'localhost:{server.port}')
  client.reset(tables.TABLE)
  yield client
  client.reset(tables.TABLE)


BUCKET = 'apex-test-bucket'


@pytest.fixture
def cloud_storage(tmp_path):
  """A Cloud Storage emulator on this machine (gcp-storage-emulator, a real
  server of the Cloud Storage JSON API) with the empty bucket `BUCKET`:
  yields the environment variables that point clients at it (the Cloud
  Storage client honours STORAGE_EMULATOR_HOST); stopped after the test."""
  import os  # pylint: disable=g-import-not-at-top
  import subprocess  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top
  import time  # pylint: disable=g-import-not-at-top
  import portpicker  # pylint: disable=g-import-not-at-top
  import requests  # pylint: disable=g-import-not-at-top
  port = portpicker.pick_unused_port()
  address = f'http://127.0.0.1:{port}'
  server = subprocess.Popen(
      [sys.executable, '-m', 'gcp_storage_emulator', 'start',
       '--host=127.0.0.1', f'--port={port}', '--in-memory'],
      stdout=open(tmp_path / 'storage_emulator.log', 'wb'),
      stderr=subprocess.STDOUT, start_new_session=True)
  try:
    deadline = time.time() + 60
    while True:
      try:
        requests.get(f'{address}/storage/v1/b', timeout=1)
        break
      except requests.exceptions.ConnectionError:
        assert server.poll() is None, 'the storage emulator exited'
        assert time.time() < deadline, 'the storage emulator did not start'
        time.sleep(0.2)
    environment = {'STORAGE_EMULATOR_HOST': address}
    os.environ.update(environment)
    helpers.storage_client().create_bucket(BUCKET, project='test')
    yield environment
  finally:
    os.environ.pop('STORAGE_EMULATOR_HOST', None)
    helpers.kill_group(server)
