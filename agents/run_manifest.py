"""A run's records: what made it, `<workdir>/run.json` (program,
environment, frames per agent step, the config values its checkpoints
depend on, and every flag value and the preset it last launched with), and
why its latest launch stopped, `<workdir>/stop.json`. The workdir may be
local or on Cloud Storage (`agents.storage`).
Standard library only (for a local workdir), so that tools reading runs
(plot.py) need no TensorFlow."""

import json
from typing import Any, Dict, Optional, Sequence

from agents import storage

MANIFEST = 'run.json'
# Why the program's latest launch stopped, when it stopped itself (a limit
# reached, or a failure): written by its coordinator, read by its launcher
# (whose exit status it decides) and by scripts reading runs.
STOP_RECORD = 'stop.json'
# A request to stop the running launch in order, from outside it
# (`programs/stop.py`): read, then removed, by the program's coordinator.
STOP_REQUEST = 'stop_request.json'
CHECKPOINTS = 'checkpoints'  # <workdir>/checkpoints/<part>/


def _manifest(program: str, env_name: str, frames_per_step: int, config,
              fields: Sequence[str]) -> Dict[str, Any]:
  return {'program': program, 'env': env_name,
          'frames_per_step': frames_per_step,
          'config': {name: getattr(config, name) for name in fields}}


def check_or_write_manifest(workdir: str, program: str, env_name: str,
                            frames_per_step: int, config,
                            fields: Sequence[str],
                            flags: Optional[Dict[str, Any]] = None,
                            preset: Optional[str] = None,
                            write: bool = True) -> bool:
  """Refuses a workdir holding another run; records this run in a new one,
  and this launch's `flags` (every flag's value) and `preset` in either
  (unless `write` is False: a plan only checks).

  Returns True when the workdir holds a compatible run to resume.

  Raises:
    ValueError: the workdir holds a run of another program or environment,
      or one whose config differs in a value its checkpoints depend on
      (`fields`), or checkpoints without a record of what made them.
  """
  path = storage.join(workdir, MANIFEST)
  wanted = _manifest(program, env_name, frames_per_step, config, fields)
  text = storage.read_text(path)
  if text is not None:
    found = json.loads(text)
    differences = []
    for key in ('program', 'env'):
      if found.get(key) != wanted[key]:
        differences.append(f'{key} {found.get(key)!r} (now {wanted[key]!r})')
    for name, value in wanted['config'].items():
      if found.get('config', {}).get(name, value) != value:
        differences.append(
            f'--{name}={found["config"][name]!r} (now {value!r})')
    if differences:
      raise ValueError(
          f'--workdir={workdir} holds a run that differs from this one in '
          f'{", ".join(differences)}; its checkpoints cannot be resumed with '
          'these flags. Pass the same values (or only --workdir) to resume '
          'it, or choose a new --workdir.')
    if write:
      _write_json(path, {**found, 'flags': flags or {}, 'preset': preset})
    return True
  if storage.holds_files(storage.join(workdir, CHECKPOINTS)):
    raise ValueError(
        f'--workdir={workdir} holds checkpoints but no {MANIFEST} saying what '
        'made them; choose a new --workdir.')
  if write:
    _write_json(path, {**wanted, 'flags': flags or {}, 'preset': preset})
  return False


def _write_json(path: str, data: Dict[str, Any]):
  """Whole or not at all: a reader never sees a half-written file."""
  storage.write_text(path, json.dumps(data, indent=2, sort_keys=True))


def read_manifest(workdir: str) -> Dict[str, Any]:
  """The run's `run.json`: program, environment, checkpointed config."""
  text = storage.read_text(storage.join(workdir, MANIFEST))
  if text is None:
    raise ValueError(
        f'{workdir} is not a run directory: it has no {MANIFEST}'
        ' (written when a program starts with --workdir). Pass the --workdir '
        'of a run, or --checkpoint=<a policy snapshot directory>.')
  return json.loads(text)


# For runs recorded before run.json held `frames_per_step`: the only
# environments then acting on more than one frame per step were Atari games,
# with the frame skip of `environments.ATARI_FRAME_SKIP` (a test checks the
# two agree; that module needs TensorFlow and gymnasium, this one nothing).
_UNRECORDED_FRAMES_PER_STEP = {'atari': 4}


def frames_per_step(workdir: str) -> int:
  """Environment frames per agent step (Atari's frame skip) of the run in
  `workdir`: as recorded, else from its environment's kind; 1 when there is
  no manifest."""
  try:
    manifest = read_manifest(workdir)
  except ValueError:
    return 1
  if 'frames_per_step' in manifest:
    return int(manifest['frames_per_step'])
  kind = str(manifest.get('env', '')).partition(':')[0]
  return _UNRECORDED_FRAMES_PER_STEP.get(kind, 1)


def write_stop_record(workdir: str, reason: str, failed: bool,
                      counts: Dict[str, int]):
  _write_json(storage.join(workdir, STOP_RECORD),
              {'reason': reason, 'failed': failed, 'counts': counts})


def read_stop_record(workdir: str) -> Optional[Dict[str, Any]]:
  """The stop record, or None if there is none (or none readable)."""
  try:
    text = storage.read_text(storage.join(workdir, STOP_RECORD))
    return None if text is None else json.loads(text)
  except (OSError, ValueError):
    return None


def remove_earlier_launch_records(workdir: str):
  """Before a launch: an earlier launch's stop record says nothing of it,
  and a stop request made to an earlier launch is not for it."""
  storage.remove(storage.join(workdir, STOP_RECORD))
  storage.remove(storage.join(workdir, STOP_REQUEST))


def write_stop_request(workdir: str, reason: str):
  _write_json(storage.join(workdir, STOP_REQUEST), {'reason': reason})


def take_stop_request(workdir: str) -> Optional[str]:
  """The reason of a stop request, which is removed; None if there is none
  (or none readable yet)."""
  path = storage.join(workdir, STOP_REQUEST)
  try:
    text = storage.read_text(path)
    reason = None if text is None else str(json.loads(text)['reason'])
  except (OSError, ValueError, KeyError, TypeError):
    return None
  storage.remove(path)
  return reason

