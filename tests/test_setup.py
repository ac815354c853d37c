"""scripts/setup_venv.sh (`make venv`) on a machine without Python 3.10 and
with uv: it runs from a copy of the script and the files it reads, on a
`PATH` of only the tools it needs, with a `HOME` of its own (no pyenv, no
uv but the fake one a test puts there); nothing is installed or downloaded,
and the checkout's .venv is not touched."""

import os
import shutil
import subprocess
import sys

import pytest

import helpers

# What the script runs before it has a Python: bash (its `#!/usr/bin/env
# bash`) and these.
TOOLS = ('bash', 'dirname', 'cat', 'sha256sum', 'cut', 'rm')
FILES = ('requirements.txt', 'requirements-cloud.txt', 'pyproject.toml')


@pytest.fixture
def machine(tmp_path):
  """(checkout, bin, environment): a copy of the script and what it reads,
  and a `PATH` of `bin` alone, which holds the tools, and a `python3.10`
  that is no working 3.10 (as a pyenv shim of a version not selected)."""
  checkout, bin_dir, home = (tmp_path / name
                             for name in ('checkout', 'bin', 'home'))
  (checkout / 'scripts').mkdir(parents=True)
  shutil.copy2(os.path.join(helpers.ROOT, 'scripts', 'setup_venv.sh'),
               checkout / 'scripts')
  for name in FILES:
    shutil.copy2(os.path.join(helpers.ROOT, name), checkout)
  bin_dir.mkdir()
  home.mkdir()
  for tool in TOOLS:
    found = shutil.which(tool)
    if found is None:
      pytest.skip(f'no {tool} here')
    (bin_dir / tool).symlink_to(found)
  _executable(bin_dir / 'python3.10', '#!/bin/sh\nexit 1\n')
  return checkout, bin_dir, {'PATH': str(bin_dir), 'HOME': str(home),
                             'LANG': 'C.UTF-8'}


def _executable(path, text):
  path.write_text(text)
  path.chmod(0o755)


def _fake_uv(bin_dir, log, found=None):
  """A `uv` that logs each call (its UV_PYTHON_DOWNLOADS and arguments) and
  answers `uv python find` with `found`, or as uv does when it finds none
  (exit 2)."""
  answer = f'echo "{found}"\n  exit 0' if found else 'exit 2'
  _executable(bin_dir / 'uv', f'''#!/bin/sh
echo "UV_PYTHON_DOWNLOADS=$UV_PYTHON_DOWNLOADS $*" >> "{log}"
if [ "$1 $2" = "python find" ]; then
  {answer}
fi
exit 2
''')


def _run(checkout, environment, *arguments):
  return subprocess.run([str(checkout / 'scripts' / 'setup_venv.sh'),
                         *arguments],
                        env=environment, capture_output=True, text=True,
                        timeout=60, check=False)


def _base_python310():
  """A Python 3.10 that is not a virtual environment's: the one this
  checkout's .venv was made from."""
  path = os.path.join(sys.base_prefix, 'bin', 'python3.10')
  if sys.version_info[:2] != (3, 10) or not os.access(path, os.X_OK):
    pytest.skip('no base Python 3.10 beside the running one')
  return path


def test_without_python310_it_says_how_to_install_one(machine):
  checkout, _, environment = machine
  run = _run(checkout, environment)
  assert run.returncode == 1, run
  assert not (checkout / '.venv').exists()
  assert run.stdout == ''
  lines = run.stderr.splitlines()
  assert lines[0] == (
      'setup_venv: no Python 3.10 found (python3.10 on PATH: not a working '
      '3.10; pyenv: not installed; uv: not installed)'), run.stderr
  for what in ('pipx install uv', 'uv python install 3.10',
               'conda create -n apex python=3.10', 'conda activate apex',
               'pyenv install 3.10'):
    assert what in run.stderr, (what, run.stderr)
  # apt only where it still packages 3.10, and said so.
  (apt,) = [index for index, line in enumerate(lines)
            if 'apt-get install python3.10' in line]
  assert 'Ubuntu 22.04 only' in lines[apt - 1], run.stderr


def test_with_uv_but_no_python310_it_names_the_one_command(machine, tmp_path):
  checkout, bin_dir, environment = machine
  log = tmp_path / 'uv.log'
  _fake_uv(bin_dir, log)
  run = _run(checkout, environment)
  assert run.returncode == 1, run
  assert not (checkout / '.venv').exists()
  assert run.stderr.splitlines()[0].endswith('uv: found no 3.10)'), run.stderr
  assert '`uv python install 3.10` installs one' in run.stderr
  # uv was asked only to look: never to download.
  assert log.read_text().splitlines() == [
      'UV_PYTHON_DOWNLOADS=never python find --system 3.10']


def test_it_uses_the_python310_uv_finds(machine, tmp_path):
  checkout, bin_dir, environment = machine
  python = _base_python310()
  log = tmp_path / 'uv.log'
  _fake_uv(bin_dir, log, found=python)
  run = _run(checkout, environment, '--which-python')
  assert run.returncode == 0, run
  assert run.stdout.splitlines() == [
      f'setup_venv: using Python 3.10 at {python} (uv)'], run
  assert not (checkout / '.venv').exists()
  assert log.read_text().splitlines() == [
      'UV_PYTHON_DOWNLOADS=never python find --system 3.10']
  # On PATH, python3.10 comes first, uv is not asked.
  (bin_dir / 'python3.10').unlink()
  (bin_dir / 'python3.10').symlink_to(python)
  run = _run(checkout, environment, '--which-python')
  assert run.stdout.splitlines() == [
      f'setup_venv: using Python 3.10 at {bin_dir / "python3.10"} (PATH)'], run
  assert len(log.read_text().splitlines()) == 1


def test_a_python_uv_finds_that_is_not_310_is_not_used(machine, tmp_path):
  checkout, bin_dir, environment = machine
  _fake_uv(bin_dir, tmp_path / 'uv.log', found=str(bin_dir / 'python3.10'))
  run = _run(checkout, environment, '--which-python')
  assert run.returncode == 1, run
  assert run.stderr.splitlines()[0].endswith('uv: found no 3.10)'), run.stderr
