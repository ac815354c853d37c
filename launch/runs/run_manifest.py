"""A run's records: what made it, `<workdir>/run.json` (program,
environment, frames per agent step, the config values its checkpoints
depend on, every flag value and the preset it last launched with, and each
flag a resuming launch changed, with the counts it resumed from), and
why its latest launch stopped, `<workdir>/stop.json`. The workdir may be
local or on Cloud Storage (`launch.runs.storage`).

Every record is read through `read_record`, which checks it is what its
readers take it for: a record that is there but is not (cut short, not
JSON, another kind of record or another program's file) is a `BadRecord`
naming the file, what is wrong and what to do. A launch that took a damaged
run.json for no run.json would start a new run over the old one's
checkpoints; a launcher that took a damaged stop.json for none would exit 0
for a run that may have failed. Nothing here overwrites or removes such a
file: where one is in the way, it is moved aside, bytes as they are, to
`<name>.invalid` (`set_aside`).

Standard library only (for a local workdir), so that tools reading runs
(plot.py) need no TensorFlow."""

import json
import re
import sys
import time
from typing import Any, Dict, NamedTuple, Optional, Sequence

from launch.runs import faults as fault_records
from launch.runs import storage

MANIFEST = 'run.json'
# Why the program's latest launch stopped, when it stopped itself (a limit
# reached, or a failure): written by its coordinator, read by its launcher
# (whose exit status it decides) and by scripts reading runs.
STOP_RECORD = 'stop.json'
# A request to stop the running launch in order, from outside it
# (`programs/stop.py`): read, then removed, by the program's coordinator.
STOP_REQUEST = 'stop_request.json'
# The cloud job of the latest submission (Vertex AI's resource name):
# written as the job is submitted, read by `programs/watch.py`.
JOB_RECORD = 'cloud_job.json'
CHECKPOINTS = 'checkpoints'  # <workdir>/checkpoints/<part>/
# The counter's counts: <workdir>/checkpoints/counter/counts.json.
COUNTS_FILE = 'counts.json'
# Where a record that cannot be read is moved aside: <name>.invalid (then
# <name>.invalid.2, ...: an earlier one is never overwritten).
SET_ASIDE = '.invalid'


class BadRecord(ValueError):
  """A record that is there but cannot be read as what it should be. Its
  message names the file (`path`), says what is wrong with it (`problem`)
  and what to do (`fix`)."""

  def __init__(self, path: str, problem: str, fix: str):
    super().__init__(f'{path} {problem}. {fix}')
    self.path = path
    self.problem = problem
    self.fix = fix


class _Kind(NamedTuple):
  """What a record must hold ({key: its JSON types}), what it may hold,
  and what to do about one that is bad."""
  name: str
  required: Dict[str, tuple]
  optional: Dict[str, tuple]
  fix: str


_KINDS = {
    # Runs recorded before run.json held `frames_per_step`, `flags` and
    # `preset` lack them; every run.json has the first three.
    MANIFEST: _Kind(
        'a run record',
        {'program': (str,), 'env': (str,), 'config': (dict,)},
        {'frames_per_step': (int,), 'flags': (dict,),
         'preset': (str, type(None))},
        'It records what made the run\'s checkpoints and how to resume '
        'them: restore it (from a backup, or by hand after another run\'s '
        'run.json), or move the run elsewhere and choose a new --workdir. It '
        'was left as it is.'),
    STOP_RECORD: _Kind(
        'a stop record',
        {'reason': (str,), 'failed': (bool,), 'counts': (dict,)},
        {'restarts': (dict,), 'ended_from_outside': (bool,)},
        'It should say why the run\'s latest launch stopped (the program '
        'writes it whole, so a bad one was written by something else; the '
        'run\'s output says why too): move it away, or launch the run again, '
        f'which moves it to {STOP_RECORD}{SET_ASIDE}. It was left as it is.'),
    STOP_REQUEST: _Kind(
        'a stop request', {'reason': (str,)}, {},
        'Run programs/stop.py again to ask the program to stop.'),
    JOB_RECORD: _Kind(
        'a job record', {'job': (str,), 'submitted': (float, int)}, {},
        'It names the cloud job the run\'s latest submission made (the '
        'launch writes it whole): find the job on its console page, move '
        'the file away, and submit the run again.'),
}

_JSON_TYPES = {dict: 'an object', list: 'a list', str: 'a string',
               bool: 'true or false', int: 'a whole number',
               float: 'a number', type(None): 'null'}


def _json_type(value) -> str:
  return _JSON_TYPES.get(type(value), type(value).__name__)


# What a JSON text cut short in a value may end in, after the last
# complete token: part of a literal, or of a number.
_LITERALS = ('true', 'false', 'null', 'NaN', 'Infinity', '-Infinity')
_NUMBER_TAIL = re.compile(r'-|\.|[eE][-+]?')


def _json_problem(text: str, error: json.JSONDecodeError) -> str:
  """What is wrong with `text`, which is not JSON: a file cut short (the
  usual damage: a disk filled, a copy interrupted) is said to be, rather
  than named by the character JSON stopped at."""
  if not text.strip():
    return 'is empty'
  end = text.rstrip()
  rest = end[error.pos:]
  if (not rest or error.msg.startswith('Unterminated string') or
      _NUMBER_TAIL.fullmatch(rest) or
      any(literal.startswith(rest) for literal in _LITERALS)):
    return (f'is not valid JSON: truncated at line {end.count(chr(10)) + 1} '
            '(the text ends before the JSON does)')
  return (f'is not valid JSON: {error.msg} at line {error.lineno}, column '
          f'{error.colno}')


def _describe(value) -> str:
  if isinstance(value, bool) or value is None:
    return json.dumps(value)
  return f'{_json_type(value)} ({json.dumps(value)[:60]})'


def _record_problem(record, name: str, others: bool = True
                    ) -> Optional[str]:
  """What makes `record` (parsed JSON) not a record of the kind `name`;
  `others`: whether to say which other kind it is, if it is one."""
  kind = _KINDS[name]
  if not isinstance(record, dict):
    return f'holds {_json_type(record)}, not {kind.name} (a JSON object)'
  missing = [key for key in kind.required if key not in record]
  if missing:
    for other_name, other in _KINDS.items():
      if (others and other_name != name and
          _record_problem(record, other_name, others=False) is None):
        return f'holds {other.name} (as {other_name} does), not {kind.name}'
    return (f'is not {kind.name}: it lacks '
            f'{", ".join(repr(key) for key in missing)} ({kind.name} holds '
            f'{", ".join(repr(key) for key in kind.required)})')
  for key, types in {**kind.required, **kind.optional}.items():
    if key not in record:
      continue
    value = record[key]
    # JSON's true and false are Python's bools, which are also ints.
    if not isinstance(value, types) or (
        isinstance(value, bool) and bool not in types):
      wanted = ' or '.join(_JSON_TYPES[t] for t in types)
      return (f'is not {kind.name}: its {key!r} is {_describe(value)}, not '
              f'{wanted}')
  if name == MANIFEST and record.get('frames_per_step', 1) < 1:
    return (f'is not {kind.name}: its \'frames_per_step\' is '
            f'{record["frames_per_step"]}, not 1 or more')
  return None


def read_record(workdir: str, name: str) -> Optional[Dict[str, Any]]:
  """The record `name` (MANIFEST, STOP_RECORD or STOP_REQUEST) of
  `workdir`, or None if there is no such file.

  Raises:
    BadRecord: the file is there but is not such a record.
    OSError: the file could not be read (a caller that polls tries again).
  """
  path = storage.join(workdir, name)
  try:
    text = storage.read_text(path)
  except UnicodeDecodeError as error:
    raise BadRecord(path, f'is not text (byte {error.start} is not UTF-8), '
                    f'not {_KINDS[name].name}', _KINDS[name].fix) from None
  if text is None:
    return None
  try:
    record = json.loads(text)
  except json.JSONDecodeError as error:
    raise BadRecord(path, _json_problem(text, error),
                    _KINDS[name].fix) from None
  problem = _record_problem(record, name)
  if problem is not None:
    raise BadRecord(path, problem, _KINDS[name].fix)
  return record


def set_aside(error: BadRecord, what_next: str) -> BadRecord:
  """Moves the bad record of `error` aside, bytes as they are, to the
  first free `<path>.invalid[.<n>]`, so that it is neither lost nor met
  again; returns the error to report, saying where it went and
  `what_next`."""
  candidates = [f'{error.path}{SET_ASIDE}'] + [
      f'{error.path}{SET_ASIDE}.{number}' for number in range(2, 100)]
  try:
    moved = next((path for path in candidates if not storage.exists(path)),
                 None)
    if moved is None:
      raise OSError(f'{candidates[0]} to {candidates[-1]} are all taken')
    storage.move(error.path, moved)
  except FileNotFoundError:  # Another reader moved it first.
    return BadRecord(error.path, error.problem,
                     f'It has been moved or removed meanwhile. {what_next}')
  except OSError as os_error:
    return BadRecord(error.path, error.problem,
                     f'It could not be moved aside ({os_error}); move or '
                     f'remove it. {what_next}')
  return BadRecord(error.path, error.problem,
                   f'It was moved, as it is, to {moved}. {what_next}')


def _warn(message: str):
  sys.stderr.write(f'warning: {message}\n')
  sys.stderr.flush()


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
                            write: bool = True,
                            defaults: Optional[Dict[str, Any]] = None) -> bool:
  """Refuses a workdir holding another run; records this run in a new one,
  and this launch's `flags` (every flag's value) and `preset` in either
  (unless `write` is False: a plan only checks). A flag the run's record
  lacks (it predates the flag) had its value in `defaults` before.

  Returns True when the workdir holds a compatible run to resume.

  Raises:
    ValueError: the workdir holds a run of another program or environment,
      or one whose config differs in a value its checkpoints depend on
      (`fields`), or checkpoints without a record of what made them.
    BadRecord: its run.json is not a run record (it is left as it is).
  """
  path = storage.join(workdir, MANIFEST)
  wanted = _manifest(program, env_name, frames_per_step, config, fields)
  found = read_record(workdir, MANIFEST)
  if found is not None:
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
      record = {**found, 'flags': flags or {}, 'preset': preset}
      change = _flag_change(workdir, {**(defaults or {}),
                                      **found.get('flags', {})}, flags or {})
      if change is not None:
        record[FLAG_CHANGES] = found.get(FLAG_CHANGES, []) + [change]
      _write_json(path, record)
    return True
  if storage.holds_files(storage.join(workdir, CHECKPOINTS)):
    raise ValueError(
        f'--workdir={workdir} holds checkpoints but no {MANIFEST} saying what '
        'made them; choose a new --workdir.')
  if write:
    _write_json(path, {**wanted, 'flags': flags or {}, 'preset': preset})
  return False


# run.json's list of the resuming launches that changed a flag's value: a
# page made from the run then says which values held when, not only the
# last launch's.
FLAG_CHANGES = 'flag_changes'


def _flag_change(workdir: str, before: Dict[str, Any],
                 now: Dict[str, Any]) -> Optional[Dict[str, Any]]:
  """{'launched': UTC time, 'changed': {flag: [before, now]}, 'counts': the
  counter's saved counts it resumes from, or None} if this launch changes
  a flag the last one recorded; else None."""
  changed = {name: [before[name], value] for name, value in sorted(now.items())
             if name in before and before[name] != value}
  if not changed:
    return None
  return {'launched': time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime()),
          'changed': changed, 'counts': saved_counts(workdir)}


def read_saved_counter(workdir: str) -> Optional[Dict[str, Any]]:
  """The state the run's counter last saved in its checkpoint
  (`COUNTS_FILE`, in `checkpointing.CheckpointedCounter.save`'s form), None
  if it saved none there. `workdir` may be a bucket's (`storage`). Raises
  ValueError if the file is not JSON."""
  text = storage.read_text(storage.join(workdir, CHECKPOINTS, 'counter',
                                        COUNTS_FILE))
  return json.loads(text) if text is not None else None


def saved_counts(workdir: str) -> Optional[Dict[str, int]]:
  """The counts in the counter's checkpoint, None if it has none (or one
  this cannot read)."""
  try:
    state = read_saved_counter(workdir)
    counts = state['counts'] if state is not None else None
  except (OSError, ValueError, KeyError, TypeError):
    return None
  return ({name: int(value) for name, value in sorted(counts.items())}
          if isinstance(counts, dict) else None)


def _write_json(path: str, data: Dict[str, Any]):
  """Whole or not at all: a reader never sees a half-written file."""
  storage.write_text(path, json.dumps(data, indent=2, sort_keys=True))


def read_manifest(workdir: str) -> Dict[str, Any]:
  """The run's `run.json`: program, environment, checkpointed config.
  Raises ValueError if there is none, BadRecord if it is not a run
  record."""
  manifest = read_record(workdir, MANIFEST)
  if manifest is None:
    raise ValueError(
        f'{workdir} is not a run directory: it has no {MANIFEST}'
        ' (written when a program starts with --workdir). Pass the --workdir '
        'of a run, or --checkpoint=<a policy snapshot directory>.')
  return manifest


def frames_per_step(workdir: str) -> int:
  """Environment frames per agent step (Atari's frame skip) of the run in
  `workdir`: as recorded, else from its environment's kind; 1 when there is
  no manifest (BadRecord when there is a bad one: a guess would be wrong
  fourfold on Atari)."""
  manifest = read_record(workdir, MANIFEST)
  if manifest is None:
    return 1
  if 'frames_per_step' in manifest:
    return int(manifest['frames_per_step'])
  # A run recorded before run.json held it: its suite's (Atari's frame
  # skip). The suites' modules need gymnasium: imported only here.
  from agents.envs import suites  # pylint: disable=g-import-not-at-top
  kind = str(manifest.get('env', '')).partition(':')[0]
  return suites.get(kind).frames_per_step if kind in suites.names() else 1


def write_stop_record(workdir: str, reason: str, failed: bool,
                      counts: Dict[str, int],
                      restarts: Optional[Dict[str, int]] = None,
                      outside: bool = False):
  """`restarts`: {node: times started again in this launch}, if any were
  (`launch.supervision.keeper`; each fault is in `<workdir>/faults/`); `outside`: the
  program was ended from outside (a cloud job's end), not stopped by its
  coordinator."""
  record = {'reason': reason, 'failed': failed, 'counts': counts}
  if restarts:
    record['restarts'] = restarts
  if outside:
    record['ended_from_outside'] = True
  _write_json(storage.join(workdir, STOP_RECORD), record)


def read_stop_record(workdir: str) -> Optional[Dict[str, Any]]:
  """The stop record, or None if there is none (or none readable now: a
  storage hiccup, which whoever polls tries again). Raises BadRecord for a
  bad one: its reader cannot tell whether the run failed."""
  try:
    return read_record(workdir, STOP_RECORD)
  except (OSError, storage.Unreachable):
    return None


def remove_earlier_launch_records(workdir: str):
  """Before a launch: an earlier launch's stop record says nothing of it,
  and a stop request made to an earlier launch is not for it. A bad one
  (not known to be an earlier launch's) is moved aside, with a warning,
  rather than removed."""
  for name in (STOP_RECORD, STOP_REQUEST):
    try:
      read_record(workdir, name)
    except BadRecord as error:
      _warn(str(set_aside(error, 'This launch does not read it.')))
      continue
    except OSError:
      pass  # Unreadable, not bad: removed, as it always was.
    storage.remove(storage.join(workdir, name))


def write_job_record(workdir: str, job: str):
  """Records the cloud job just submitted for the run (its name), and the
  launch in the nodes' faults' records (`launch.supervision.keeper`), whose counts
  start again with each launch."""
  _write_json(storage.join(workdir, JOB_RECORD),
              {'job': job, 'submitted': round(time.time(), 3)})
  # The launch's own file of the faults' records: read and written whole
  # (Cloud Storage has no appending), by the launches only.
  path = storage.join(workdir, fault_records.FAULTS, f'{fault_records.LAUNCHES}.jsonl')
  line = json.dumps({'time': round(time.time(), 3), 'event': 'launch'})
  storage.write_text(path, (storage.read_text(path) or '') + line + '\n')


def read_job_record(workdir: str) -> Optional[Dict[str, Any]]:
  """The run's latest job record ({'job', 'submitted'}), or None."""
  return read_record(workdir, JOB_RECORD)


def write_stop_request(workdir: str, reason: str):
  """Asks the running launch to stop; a bad request already there (which
  its coordinator would set aside) is moved aside first, with a warning,
  rather than overwritten."""
  try:
    read_record(workdir, STOP_REQUEST)
  except BadRecord as error:
    _warn(str(set_aside(error, 'This request replaces it.')))
  _write_json(storage.join(workdir, STOP_REQUEST), {'reason': reason})


def take_stop_request(workdir: str) -> Optional[str]:
  """The reason of a stop request, which is removed; None if there is none
  (or none readable now: the next poll tries again).

  Raises:
    BadRecord: there was a bad one. It is not taken as a request (a file
      that is not one is not known to ask for a stop, and a stop on a
      guess would cut a run short), but moved aside (nothing is lost, and
      the next poll does not meet it again); the error says where.
  """
  try:
    request = read_record(workdir, STOP_REQUEST)
  except BadRecord as error:
    raise set_aside(error, 'It was not taken as a request to stop: '
                    'run programs/stop.py again to stop the program.'
                    ) from None
  except OSError:
    return None
  if request is None:
    return None
  storage.remove(storage.join(workdir, STOP_REQUEST))
  return request['reason']
