"""A packaged worker pool's image, as a virtual environment on this machine.

xmanager builds each worker pool's image from the Dockerfile that
`--lp_launch_type=vertex_ai --dry_run --package_dir=DIR` keeps in the
pool's directory (`DIR/<pool>/Dockerfile`, beside the build's context: the
container's files). This machine has no Docker daemon and reaches no
registry, so it cannot build the image; what it can build is the image's
Python environment. `build(pool_dir)` reads the Dockerfile and carries out,
in order, the steps that shape Python:

* `FROM python:<version>-<os>`: a fresh virtual environment
  (`python -m venv`) of a Python of this machine with the base image's
  major and minor version (`python3.10` on PATH, else pyenv's);
* `RUN python -m pip ...` / `RUN pip ...`: the same pip command, the same
  arguments, run by the environment's Python in the image's working
  directory, with the image's ENV lines so far;
* `COPY <source> <destination>`: the context's files into a directory
  that stands for the image's file system (so that `-r requirements.txt`
  reads the file the image holds there), and `WORKDIR`;
* `ENV`: the image's environment (`Image.environment`).

What cannot be done here is recorded (`Image.not_reproduced`), each with
why, and `python -m tests.image_venv` prints it: the base image's operating
system and its own Python build, system packages (`apt-get`), user
accounts and file modes, xmanager's `entrypoint.sh` (which it writes at
build time and the package does not keep: it runs the pool's command,
which the emulator starts itself) and the entrypoint. Any other step is
refused before anything is built (`UntranslatableStep`, naming the step):
nothing is left out silently. pip's own configuration on this machine (its
index, find-links and cache settings) applies to the pip steps, as the
image's build would use PyPI: every requirement is pinned (`name==version`),
so both install the same releases.

The environment is kept in a cache (`CACHE_VARIABLE`, default
~/.cache/apex-image-venvs), under a key that is a hash of everything its
pip steps depend on (`cache_key`): the Dockerfile's steps up to its last
pip step, the files they copy (the requirements file), this machine's
Python and this translation's version. A cached environment is used only
when its build completed; builds of the same key wait for each other (a
lock file). Steps after the last pip step (the code, `WORKDIR`) are done
again on every build. The cache keeps the `KEEP` most recently used
environments.

  python -m tests.image_venv --pool_dir=DIR/workerpool0

prints the environment's Python (for `tests.vertex_emulator --python`) and
what was not reproduced. A test tool, like the emulator: not part of the
`agents` package.
"""

import dataclasses
import fcntl
import glob
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Tuple

# Where the built environments are kept; the variable names another place.
CACHE_VARIABLE = 'APEX_IMAGE_VENV_CACHE'
DEFAULT_CACHE = os.path.join('~', '.cache', 'apex-image-venvs')
# Changes whenever what a build does for the same Dockerfile changes: a new
# version builds anew rather than reuse an environment built otherwise.
TRANSLATION_VERSION = '1'
# The file a completed build writes last, in its cache entry.
RECORD = 'image.json'
# How many environments the cache keeps (the most recently used; each
# takes about 2.3 GB): a build removes the others that no build uses.
KEEP = 2


class UntranslatableStep(ValueError):
  """A Dockerfile step this translation cannot carry out here."""


@dataclasses.dataclass
class Step:
  line: int  # Its first line in the Dockerfile.
  instruction: str  # FROM, RUN, COPY, ...
  arguments: str  # The rest, continuation lines joined.

  @property
  def text(self) -> str:
    return f'{self.instruction} {self.arguments}'

  def refuse(self, why: str) -> UntranslatableStep:
    return UntranslatableStep(
        f'Dockerfile line {self.line}, `{self.text}`: {why}. It cannot be '
        'reproduced in a virtual environment here: add its translation to '
        'tests/image_venv.py, or change the step '
        '(launch/cloud/packaging.py writes the steps).')


@dataclasses.dataclass
class Image:
  """A pool's image as far as this machine reproduces it."""
  python: str  # The environment's Python (the image's `python`).
  prefix: str  # The environment (its sys.prefix).
  base_python: str  # This machine's Python it was made from.
  environment: Dict[str, str]  # The image's ENV lines.
  workdir: str  # The image's final working directory (its path there).
  # The build context's directory whose copy that working directory is
  # (None if it is not one directory's copy).
  workdir_source: Optional[str]
  pip_steps: List[str]  # The pip steps run, as the Dockerfile gives them.
  not_reproduced: List[Tuple[str, str]]  # (step, why) of each left out.
  key: str  # The cache key.
  cached: bool  # Whether the environment came from the cache.
  seconds: float  # How long `build` took.


def parse(text: str) -> List[Step]:
  """A Dockerfile's steps (comments and blank lines left out, continued
  lines joined)."""
  steps = []
  pending, start = '', 0
  for number, line in enumerate(text.splitlines(), 1):
    stripped = line.strip()
    if not pending and (not stripped or stripped.startswith('#')):
      continue
    if not pending:
      start = number
    if stripped.endswith('\\'):
      pending += stripped[:-1] + ' '
      continue
    whole = (pending + stripped).strip()
    pending = ''
    instruction, _, arguments = whole.partition(' ')
    steps.append(Step(start, instruction.upper(), arguments.strip()))
  if pending:
    raise UntranslatableStep(f'Dockerfile line {start}: a continued line '
                             'that never ends.')
  return steps


# The base image: python:<major>.<minor>[.<patch>][-<os>].
_BASE = re.compile(r'python:(\d+)\.(\d+)(?:\.(\d+))?(?:-([a-z]+))?')
# What may not stand in a pip step run as a command here (the shell's own
# syntax: several commands, redirections, expansions).
_SHELL = re.compile(r'&&|\|\||[;|<>`$&]')
# Steps that shape the image's operating system rather than its Python:
# recorded as not reproduced, with why. Each must match the whole step.
_SYSTEM_STEPS = (
    (re.compile(r'RUN (apt-get|apt) [^;|<>`$&]*'
                r'(&& (apt-get|apt) [^;|<>`$&]*)*'),
     'system packages (apt): the base image\'s Debian, not this machine\'s'),
    (re.compile(r'RUN if ! id (\d+); then useradd [\w -]+; fi'),
     'a user account of the image\'s operating system (xmanager\'s)'),
    (re.compile(r'RUN (chown|chmod) [^;|<>`$&]+'
                r'(&& (chown|chmod) [^;|<>`$&]+)*'),
     'file owners and modes in the image'),
)
# xmanager writes entrypoint.sh into the build's context when it builds
# the image: it runs the pool's command (job.json's `command`).
_ENTRYPOINT = 'entrypoint.sh'


def _python_command(words: List[str]) -> Optional[List[str]]:
  """pip's arguments if `words` run pip (`python -m pip ...`, `pip ...`),
  else None."""
  if words and re.fullmatch(r'python(3(\.\d+)?)?', words[0]):
    if words[1:3] == ['-m', 'pip']:
      return words[3:]
    return None
  if words and re.fullmatch(r'pip(3(\.\d+)?)?', words[0]):
    return words[1:]
  return None


@dataclasses.dataclass
class _Plan:
  base: Tuple[int, int, Optional[int], Optional[str]]
  # Every step, in order: (kind, step, what to do), kind one of 'pip',
  # 'copy', 'workdir', 'env', and 'skip' (what: why it is not reproduced).
  all_steps: List[Tuple[str, Step, object]]

  @property
  def steps(self) -> List[Tuple[str, Step, object]]:
    """The steps carried out here."""
    return [entry for entry in self.all_steps if entry[0] != 'skip']

  @property
  def not_reproduced(self) -> List[Tuple[str, str]]:
    """(step, why) of each step not reproduced here."""
    return [(step.text, why) for kind, step, why in self.all_steps
            if kind == 'skip']


def plan(dockerfile: str, context: str) -> _Plan:
  """What `build` does for each step of `dockerfile` (context: the build's
  context directory); raises UntranslatableStep for a step it cannot do,
  before anything is done."""
  with open(dockerfile) as f:
    steps = parse(f.read())
  if not steps or steps[0].instruction != 'FROM':
    raise UntranslatableStep(f'{dockerfile}: the first step is not FROM.')
  done = []
  base = None
  for step in steps:
    if step.instruction == 'FROM':
      if base is not None:
        raise step.refuse('a second FROM (a multi-stage build)')
      match = _BASE.fullmatch(step.arguments)
      if not match:
        raise step.refuse('the base image is not an official python:<version> '
                          'image, whose Python this translation takes')
      major, minor, patch, system = match.groups()
      base = (int(major), int(minor), int(patch) if patch else None, system)
      done.append(('skip', step, 'the base image\'s operating system '
                      f'({system or "its default"}) and its own Python build '
                      'and packages: here, a virtual environment of this '
                      'machine\'s Python of the same version'))
    elif step.instruction == 'RUN':
      if step.arguments.startswith('['):
        raise step.refuse('a RUN in exec (JSON) form')
      try:
        words = shlex.split(step.arguments)
      except ValueError as error:
        raise step.refuse(f'its quoting does not parse ({error})') from error
      pip = _python_command(words)
      if pip is not None:
        if _SHELL.search(step.arguments):
          raise step.refuse('a pip step with shell syntax (several commands, '
                            'redirections or expansions)')
        if not pip or pip[0] != 'install':
          raise step.refuse('a pip command other than `pip install`')
        done.append(('pip', step, pip))
        continue
      for pattern, why in _SYSTEM_STEPS:
        if pattern.fullmatch(step.text):
          done.append(('skip', step, why))
          break
      else:
        raise step.refuse('a RUN step that is neither `pip install` nor a '
                          'known step of the image\'s operating system')
    elif step.instruction == 'COPY':
      words = step.arguments.split()
      if step.arguments.startswith('[') or any(
          word.startswith('--') for word in words) or len(words) < 2:
        raise step.refuse('a COPY with options, in JSON form, or without a '
                          'destination')
      sources, destination = words[:-1], words[-1]
      if sources == [_ENTRYPOINT]:
        done.append(('skip', step, 'xmanager writes entrypoint.sh when it '
                        'builds the image (it runs the pool\'s command); the '
                        'package does not keep it, and the emulator runs '
                        'that command itself'))
        continue
      for source in sources:
        path = os.path.normpath(os.path.join(context, source))
        if not path.startswith(os.path.normpath(context) + os.sep) and \
            path != os.path.normpath(context):
          raise step.refuse(f'{source} is outside the build\'s context')
        if not os.path.exists(path) or any(c in source for c in '*?['):
          raise step.refuse(f'{source} is not in the build\'s context '
                            f'({context})')
      done.append(('copy', step, (sources, destination)))
    elif step.instruction == 'WORKDIR':
      if '$' in step.arguments:
        raise step.refuse('a WORKDIR with a variable')
      done.append(('workdir', step, step.arguments))
    elif step.instruction == 'ENV':
      done.append(('env', step, _environment_of(step)))
    elif step.instruction in ('ENTRYPOINT', 'CMD'):
      done.append(('skip', step, 'the image\'s entrypoint: the emulator '
                      'starts the pool\'s command (job.json) itself'))
    else:
      raise step.refuse(f'{step.instruction} is not translated')
  return _Plan(base, done)


def _environment_of(step: Step) -> Dict[str, str]:
  """An ENV step's variables (`KEY="value" ...`, or `KEY value`)."""
  try:
    words = shlex.split(step.arguments)
  except ValueError as error:
    raise step.refuse(f'its quoting does not parse ({error})') from error
  if '$' in step.arguments:
    raise step.refuse('an ENV value with a variable (not expanded here)')
  if words and '=' not in words[0]:
    return {words[0]: ' '.join(words[1:])}
  pairs = {}
  for word in words:
    key, equals, value = word.partition('=')
    if not equals or not key:
      raise step.refuse(f'`{word}` is not KEY=value')
    pairs[key] = value
  return pairs


def _works(python: str, version: Tuple[int, int]) -> bool:
  """Whether `python` runs, is of `version` and has venv (a pyenv shim of
  an unselected version does not run)."""
  try:
    return subprocess.run(
        [python, '-c', 'import sys, venv; assert sys.version_info[:2] == '
         f'{tuple(version)!r}'], capture_output=True, timeout=60).returncode == 0
  except (OSError, subprocess.TimeoutExpired):
    return False


def find_python(major: int, minor: int, patch: Optional[int]) -> str:
  """This machine's Python of `major`.`minor` (the patch release `patch`
  if there is one): `python<major>.<minor>` on PATH, else pyenv's. Raises
  ValueError saying what to install."""
  candidates = []
  on_path = shutil.which(f'python{major}.{minor}')
  if on_path:
    candidates.append(on_path)
  pyenv = shutil.which('pyenv')
  if pyenv:
    root = subprocess.run([pyenv, 'root'], capture_output=True, text=True,
                          check=False).stdout.strip()
    if root:
      candidates += sorted(glob.glob(os.path.join(
          root, 'versions', f'{major}.{minor}*', 'bin', 'python')))
  works = [c for c in candidates if _works(c, (major, minor))]
  if not works:
    raise ValueError(
        f'the image\'s Python {major}.{minor} was not found on this machine '
        f'(python{major}.{minor} on PATH, or pyenv\'s); install it, e.g. '
        f'`pyenv install {major}.{minor}`.')
  if patch is not None:
    exact = [c for c in works if f'/{major}.{minor}.{patch}/' in c or
             _version(c) == (major, minor, patch)]
    if exact:
      return exact[0]
  return works[0]


def _version(python: str) -> Tuple[int, ...]:
  out = subprocess.run(
      [python, '-c', 'import sys; print(*sys.version_info[:3])'],
      capture_output=True, text=True, check=True).stdout
  return tuple(int(part) for part in out.split())


def _copied_files(context: str, sources: List[str]) -> List[Tuple[str, str]]:
  """The context's files that copying `sources` takes: (path, its name
  within what is copied), sorted."""
  files = []
  for source in sources:
    path = os.path.join(context, source)
    if os.path.isdir(path):
      for directory, _, names in os.walk(path):
        files += [(os.path.join(directory, name), os.path.relpath(
            os.path.join(directory, name), path)) for name in names]
    else:
      files.append((path, os.path.basename(path)))
  return sorted(files)


def cache_key(context: str, the_plan: _Plan, python: str) -> str:
  """A hash of what the environment's pip steps depend on: this
  translation's version, this machine's Python, and every step up to the
  last pip step, a COPY by what it copies (each file's name within it and
  content) and where to, not by its source's name (Launchpad names the
  code's directory anew for each package)."""
  digest = hashlib.sha256()
  digest.update(f'{TRANSLATION_VERSION}\n'.encode())
  digest.update(f'{os.path.realpath(python)} {_version(python)}\n'.encode())
  last_pip = max((n for n, (kind, _, _) in enumerate(the_plan.all_steps)
                  if kind == 'pip'), default=-1)
  for kind, step, what in the_plan.all_steps[:last_pip + 1]:
    if kind == 'copy':
      digest.update(f'COPY to {what[1]}:\n'.encode())
      for path, name in _copied_files(context, what[0]):
        with open(path, 'rb') as f:
          digest.update(name.encode() + b'\0' + hashlib.sha256(
              f.read()).digest())
    else:
      digest.update(step.text.encode() + b'\n')
  return digest.hexdigest()


def _image_path(root: str, path: str) -> str:
  """Where the image's absolute `path` is under `root`."""
  return os.path.join(root, os.path.normpath(path).lstrip('/'))


def _copy(context: str, root: str, workdir: str, sources: List[str],
          destination: str, origins: Dict[str, str]):
  """Docker's COPY of `sources` (in `context`) to `destination` (relative
  to `workdir`) in the image under `root`; `origins` records which context
  directory each copied directory is."""
  target = os.path.normpath(os.path.join(workdir, destination))
  into = destination.endswith('/') or len(sources) > 1
  for source in sources:
    path = os.path.join(context, source)
    if os.path.isdir(path):
      # A directory's contents go into the destination.
      shutil.copytree(path, _image_path(root, target), dirs_exist_ok=True)
      origins[target] = os.path.normpath(path)
    else:
      final = (os.path.join(target, os.path.basename(source))
               if into or os.path.isdir(_image_path(root, target)) else target)
      os.makedirs(os.path.dirname(_image_path(root, final)), exist_ok=True)
      shutil.copyfile(path, _image_path(root, final))


def _base_environment(prefix: str) -> Dict[str, str]:
  """The environment of the pip steps: this one's, without what points
  Python elsewhere, with the environment's Python first on PATH (the
  image's `python`)."""
  environment = {key: value for key, value in os.environ.items()
                 if key not in ('PYTHONPATH', 'PYTHONHOME', 'VIRTUAL_ENV',
                                'PYTHONSTARTUP', 'PYTHONUSERBASE')}
  environment['PATH'] = os.path.join(prefix, 'bin') + os.pathsep + \
      environment.get('PATH', '')
  return environment


def _run_steps(the_plan: _Plan, context: str, root: str, prefix: str,
               run_pip: bool, log) -> Tuple[str, Dict[str, str],
                                            Dict[str, str], List[str]]:
  """Carries out the plan's steps (the pip steps only if `run_pip`);
  returns the final working directory, the ENV lines, the copies'
  origins and the pip steps."""
  workdir, environment, origins, pip_steps = '/', {}, {}, []
  for kind, step, what in the_plan.steps:
    if kind == 'copy':
      _copy(context, root, workdir, what[0], what[1], origins)
    elif kind == 'workdir':
      workdir = os.path.normpath(os.path.join(workdir, what))
      os.makedirs(_image_path(root, workdir), exist_ok=True)
    elif kind == 'env':
      environment.update(what)
    elif kind == 'pip':
      pip_steps.append(step.text)
      if not run_pip:
        continue
      command = [os.path.join(prefix, 'bin', 'python'), '-m', 'pip', *what]
      log.write(f'$ {step.text}\n')
      log.flush()
      result = subprocess.run(
          command, cwd=_image_path(root, workdir), stdout=log,
          stderr=subprocess.STDOUT,
          env={**_base_environment(prefix), **environment}, check=False)
      if result.returncode:
        raise RuntimeError(
            f'Dockerfile line {step.line}, `{step.text}`, failed here '
            f'(exit {result.returncode}); its output is in {log.name}.')
  return workdir, environment, origins, pip_steps


def cache_dir() -> str:
  return os.path.expanduser(os.environ.get(CACHE_VARIABLE) or DEFAULT_CACHE)


def build(pool_dir: str) -> Image:
  """The image of the pool in `pool_dir` (its Dockerfile and build
  context), as a virtual environment: built, or taken from the cache.
  Raises UntranslatableStep for a step it cannot carry out, ValueError when
  this machine lacks the Python, RuntimeError when a pip step fails."""
  started = time.time()
  context = os.path.abspath(pool_dir)
  dockerfile = os.path.join(context, 'Dockerfile')
  if not os.path.isfile(dockerfile):
    raise ValueError(f'{pool_dir} has no Dockerfile: give a worker pool\'s '
                     'directory of a packaged job (--dry_run '
                     '--package_dir=DIR keeps DIR/workerpool<n>/Dockerfile).')
  the_plan = plan(dockerfile, context)
  major, minor, patch, _ = the_plan.base
  base_python = find_python(major, minor, patch)
  not_reproduced = list(the_plan.not_reproduced)
  here = _version(base_python)
  if patch is not None and here != (major, minor, patch):
    not_reproduced.append((
        f'FROM python:{major}.{minor}.{patch}',
        f'this machine\'s Python is {".".join(map(str, here))}, not '
        f'{major}.{minor}.{patch}'))
  key = cache_key(context, the_plan, base_python)
  entry = os.path.join(cache_dir(), key[:24])
  prefix = os.path.join(entry, 'venv')
  os.makedirs(cache_dir(), exist_ok=True)
  with open(entry + '.lock', 'w') as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)  # Until this build's end.
    cached = _complete(entry, key)
    if not cached:
      shutil.rmtree(entry, ignore_errors=True)
      os.makedirs(entry)
      made = subprocess.run([base_python, '-m', 'venv', prefix],
                            capture_output=True, text=True, check=False)
      if made.returncode:
        raise RuntimeError(
            f'`{base_python} -m venv {prefix}` failed: '
            f'{made.stderr.strip()[-2000:]}; on Debian/Ubuntu install '
            f'python{major}.{minor}-venv.')
    root = tempfile.mkdtemp(prefix='image-root-')
    try:
      with open(os.path.join(entry, 'build.log'), 'a') as log:
        workdir, environment, origins, pip_steps = _run_steps(
            the_plan, context, root, prefix, not cached, log)
    finally:
      shutil.rmtree(root, ignore_errors=True)
    image = Image(
        python=os.path.join(prefix, 'bin', 'python'), prefix=prefix,
        base_python=base_python, environment=environment, workdir=workdir,
        workdir_source=origins.get(workdir), pip_steps=pip_steps,
        not_reproduced=not_reproduced, key=key, cached=cached, seconds=0.0)
    if not cached:
      with open(os.path.join(entry, RECORD), 'w') as f:
        json.dump({'key': key, 'dockerfile': dockerfile,
                   'pip_steps': pip_steps,
                   'not_reproduced': not_reproduced}, f, indent=2)
    os.utime(os.path.join(entry, RECORD))  # Used now.
  _prune(entry)
  image.seconds = time.time() - started
  return image


def _used(entry: str) -> float:
  """When the cache's `entry` was last used (made, for an incomplete
  one)."""
  for path in (os.path.join(entry, RECORD), entry):
    try:
      return os.path.getmtime(path)
    except OSError:
      continue
  return 0.0


def _prune(current: str):
  """Removes the cache's entries but the `KEEP` most recently used (and
  `current`), each only if no build holds it."""
  entries = sorted((path for path in glob.glob(os.path.join(cache_dir(), '*'))
                    if os.path.isdir(path)), key=_used, reverse=True)
  for entry in entries[KEEP:]:
    if entry == current:
      continue
    with open(entry + '.lock', 'w') as lock:
      try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
      except BlockingIOError:
        continue  # In use: left for a later build.
      shutil.rmtree(entry, ignore_errors=True)


def _complete(entry: str, key: str) -> bool:
  """Whether `entry` holds a completed build of `key` whose Python runs."""
  try:
    with open(os.path.join(entry, RECORD)) as f:
      if json.load(f).get('key') != key:
        return False
  except (OSError, ValueError):
    return False
  python = os.path.join(entry, 'venv', 'bin', 'python')
  return subprocess.run([python, '-c', 'pass'], capture_output=True,
                        check=False).returncode == 0


def describe(image: Image) -> str:
  lines = [f'Python: {image.python} ({"from the cache" if image.cached else "built"}'
           f' in {image.seconds:.0f} s, from {image.base_python})',
           f'Working directory: {image.workdir}',
           'Environment: ' + (', '.join(f'{k}={v}' for k, v in
                                        image.environment.items()) or 'none'),
           'pip steps run:'] + [f'  {step}' for step in image.pip_steps]
  lines.append('Not reproduced here:')
  lines += [f'  {step}: {why}' for step, why in image.not_reproduced]
  return '\n'.join(lines)


def main(argv: List[str]) -> int:
  import argparse  # pylint: disable=g-import-not-at-top
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--pool_dir', required=True,
                      help='A worker pool\'s directory of a packaged job.')
  arguments = parser.parse_args(argv)
  try:
    image = build(arguments.pool_dir)
  except (ValueError, RuntimeError) as error:
    sys.stderr.write(f'error: {error}\n')
    return 2
  print(describe(image))
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv[1:]))
