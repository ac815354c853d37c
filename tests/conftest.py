"""Fixtures shared by the tests (helpers.py holds the plain functions).

The repository root is on sys.path through pytest.ini (`pythonpath = .`),
tests/ through pytest's own rootdir handling. The second tier of the suite
(`make test-all`) is marked `slow` (pytest.ini says what belongs there);
`make test` deselects it.
"""

import pytest
import reverb

from agents import replay
from agents.config import ApeXConfig
import helpers


@pytest.fixture
def launch(tmp_path):
  """Starts programs in their own sessions (`helpers.Program`): call it as
  `launch(name, command)`; the output goes to <tmp_path>/<name>.out. Every
  program started so is killed, with its whole process group, when the test
  ends, however it ends."""
  started = []

  def start(name: str, command) -> helpers.Program:
    program = helpers.Program(command, tmp_path / f'{name}.out')
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
  server = reverb.Server([replay.make_replay_table(config,
                                                   request.module.SPEC)])
  yield server
  server.stop()


@pytest.fixture
def client(server):  # pylint: disable=redefined-outer-name
  """A client of `server`, its table empty before and after the test."""
  client = reverb.Client(f'localhost:{server.port}')
  client.reset(replay.TABLE)
  yield client
  client.reset(replay.TABLE)
