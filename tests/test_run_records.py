"""A run's records (`launch/runs/run_manifest.py`) that are there but bad: a
`run.json`, `stop.json` or `stop_request.json` cut short, not JSON, not an
object, without a key its readers need, or of another kind or program.

Each reader is run the way users run it (a launch, `--print_config`,
`programs/stop.py`, `evaluate.py`, `plot.py`; the launcher at the end of a
run through `tests/record_probe.py`; the coordinator's own poll for stop
requests, on a real workdir), and checked for its exit status, a message
naming the bad file, and that nothing saved was lost: the bad file's bytes
are where they were or, where it was in the way, moved whole to
`<name>.invalid`; nothing else in the workdir (its checkpoints) changed.
None of them trains: every launch here is refused before a node starts.
"""

import json
import logging
import os
import re
import subprocess
import sys

import pytest

import helpers
from launch.runs import run_manifest

# A run.json as a launch writes it (the values do not matter here).
RUN = {'program': 'apex_dqn', 'env': 'gym:CartPole-v1', 'frames_per_step': 1,
       'config': {'mlp_hidden_sizes': '32', 'n_step': 3},
       'flags': {'env': 'gym:CartPole-v1', 'num_actors': 2}, 'preset': None}
RUN_TEXT = json.dumps(RUN, indent=2, sort_keys=True)
STOP = {'reason': 'reached 600 actor steps (limit 600)', 'failed': False,
        'counts': {'actor_steps': 600}}
CHECKPOINT = b'model_checkpoint_path: "ckpt-3"\n'

# Bad run.json files: (their bytes, what the error says is wrong).
BAD_RUN_RECORDS = {
    'truncated': (RUN_TEXT[:len(RUN_TEXT) // 2].encode(),
                  'is not valid JSON: truncated at line'),
    'empty': (b'', 'is empty'),
    'not_json': (b'program = apex_dqn\n', 'is not valid JSON: Expecting value '
                 'at line 1, column 1'),
    'not_text': (b'\x89PNG\r\n\x1a\n\x00', 'is not text'),
    'a_list': (json.dumps([RUN]).encode(), 'holds a list, not a run record'),
    'missing_keys': (json.dumps({'name': 'a tool of another project',
                                 'version': 2}).encode(),
                     "is not a run record: it lacks 'program', 'env', "
                     "'config'"),
    'program_not_a_string': (json.dumps({**RUN, 'program': 3}).encode(),
                             "is not a run record: its 'program' is a whole "
                             'number (3), not a string'),
    'a_stop_record': (json.dumps(STOP).encode(),
                      'holds a stop record (as stop.json does), not a run '
                      'record'),
}
# A launch (which would go on to train) and --print_config (which would
# print the run's values) both refuse; each bad file is tried with one.
LAUNCH_MODES = {'truncated': ('launch', 'print_config'),
                'empty': ('print_config',), 'not_json': ('launch',),
                'not_text': ('print_config',), 'a_list': ('launch',),
                'missing_keys': ('print_config',),
                'program_not_a_string': ('launch',),
                'a_stop_record': ('print_config',)}


def _files(directory) -> dict:
  """{path under `directory`: its bytes} of every file there."""
  found = {}
  for root, _, names in os.walk(directory):
    for name in names:
      path = os.path.join(root, name)
      with open(path, 'rb') as f:
        found[os.path.relpath(path, directory)] = f.read()
  return found


def _workdir(tmp_path, run_json: bytes = RUN_TEXT.encode(),
             **records: bytes):
  """A run's directory: `run_json`, a learner checkpoint, and `records`
  ({file name with '.' as '_': bytes}, e.g. stop_json=b'...')."""
  workdir = tmp_path / 'run'
  (workdir / 'checkpoints' / 'learner').mkdir(parents=True)
  (workdir / 'checkpoints' / 'learner' / 'checkpoint').write_bytes(CHECKPOINT)
  if run_json is not None:
    (workdir / 'run.json').write_bytes(run_json)
  for name, data in records.items():
    (workdir / name.replace('_json', '.json')).write_bytes(data)
  return workdir


def _check_refused(result, status: int, path, problem: str):
  output = result.stdout + (result.stderr or '')
  assert result.returncode == status, output[-3000:]
  assert f'error: {path} {problem}' in output, output[-3000:]
  assert 'Traceback' not in output, output[-3000:]


@pytest.mark.parametrize('kind, mode', [
    (kind, mode) for kind, modes in LAUNCH_MODES.items() for mode in modes])
def test_a_bad_run_json_is_refused_and_kept(tmp_path, kind, mode):
  data, problem = BAD_RUN_RECORDS[kind]
  workdir = _workdir(tmp_path, data)
  before = _files(workdir)
  if mode == 'launch':
    # Would train (briefly) if it were not refused.
    command = helpers.program_command(
        'apex_dqn', f'--workdir={workdir}', '--preset=cartpole_smoke',
        '--max_actor_steps=200', launch_type='local_mt')
  else:
    command = helpers.script_command('apex_dqn', '--print_config',
                                     f'--workdir={workdir}')
  result = helpers.run(command, timeout=300)
  _check_refused(result, 2, workdir / 'run.json', problem)
  # Not taken for a new run: nothing written over it, nothing else written.
  assert _files(workdir) == before


def test_another_programs_run_is_refused_as_differing(tmp_path):
  # A good run.json of another program: the check of what the checkpoints
  # depend on says so, as for any run that differs.
  other = {**RUN, 'program': 'a3c'}
  workdir = _workdir(tmp_path, json.dumps(other).encode())
  before = _files(workdir)
  result = helpers.run_program('apex_dqn', f'--workdir={workdir}',
                               '--preset=cartpole_smoke',
                               '--max_actor_steps=200',
                               launch_type='local_mt', timeout=300)
  assert result.returncode == 2, result.stdout[-3000:]
  assert (f"--workdir={workdir} holds a run that differs from this one in "
          "program 'a3c' (now 'apex_dqn')") in result.stdout
  assert 'Traceback' not in result.stdout
  assert _files(workdir) == before


def test_a_resuming_launch_that_changes_flags_is_recorded(tmp_path):
  config = type('Config', (), {'n_step': 3})()

  def launch(**flags):
    return run_manifest.check_or_write_manifest(
        str(tmp_path), 'apex_dqn', 'atari:Pong', 4, config, ['n_step'],
        flags=flags)

  def record():
    with open(tmp_path / 'run.json') as f:
      return json.load(f)
  assert not launch(learning_rate=1e-4, seed=1)
  assert launch(learning_rate=1e-4, seed=1)  # Resumed as it was.
  assert run_manifest.FLAG_CHANGES not in record()
  # The counter's checkpoint, as it saves it: the counts resumed from.
  counter = tmp_path / 'checkpoints' / 'counter'
  counter.mkdir(parents=True)
  (counter / 'counts.json').write_text(json.dumps(
      {'counts': {'actor_steps': 3104295, 'learner_steps': 401027.0},
       'cache': {}}))
  assert launch(learning_rate=6.25e-5, seed=1)
  assert launch(learning_rate=6.25e-5, seed=1)  # No change: not again.
  change, = record()[run_manifest.FLAG_CHANGES]
  assert change['changed'] == {'learning_rate': [1e-4, 6.25e-5]}
  assert change['counts'] == {'actor_steps': 3104295, 'learner_steps': 401027}
  assert re.fullmatch(r'\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ',
                      change['launched'])
  assert record()['flags'] == {'learning_rate': 6.25e-5, 'seed': 1}
  # A later change is added after it; a damaged counter checkpoint gives
  # no counts rather than no launch.
  (counter / 'counts.json').write_text('{"counts": ')
  assert launch(learning_rate=6.25e-5, seed=2)
  first, second = record()[run_manifest.FLAG_CHANGES]
  assert first == change
  assert second['changed'] == {'seed': [1, 2]}
  assert second['counts'] is None
  # A flag the record lacks (the run predates it) ran as its default: set
  # to that, no change; set to another value, a change from the default.
  defaults = {'atari_noop_starts': 0, 'seed': 0}

  def launch_with(**flags):
    return run_manifest.check_or_write_manifest(
        str(tmp_path), 'apex_dqn', 'atari:Pong', 4, config, ['n_step'],
        flags=flags, defaults=defaults)
  assert launch_with(learning_rate=6.25e-5, seed=2, atari_noop_starts=0)
  assert len(record()[run_manifest.FLAG_CHANGES]) == 2
  data = record()
  del data['flags']['atari_noop_starts']
  (tmp_path / 'run.json').write_text(json.dumps(data))
  assert launch_with(learning_rate=6.25e-5, seed=2, atari_noop_starts=30)
  third = record()[run_manifest.FLAG_CHANGES][2]
  assert third['changed'] == {'atari_noop_starts': [0, 30]}


def _stop(workdir, *flags):
  return helpers.run_script('stop', f'--workdir={workdir}', *flags,
                            timeout=120, stderr=subprocess.PIPE)


def test_stop_refuses_a_run_whose_run_json_is_bad(tmp_path):
  data, problem = BAD_RUN_RECORDS['truncated']
  workdir = _workdir(tmp_path, data)
  before = _files(workdir)
  result = _stop(workdir, '--timeout=0')
  _check_refused(result, 2, workdir / 'run.json', problem)
  assert _files(workdir) == before  # No request left either.


@pytest.mark.parametrize('data, problem', [
    (b'{"reason": "reached 600 actor steps", "failed": fal',
     'is not valid JSON: truncated at line 1'),
    (json.dumps({**STOP, 'failed': 'no'}).encode(),
     "is not a stop record: its 'failed' is a string (\"no\"), not true or "
     'false'),
    (json.dumps({'reason': 'stopped on request'}).encode(),
     'holds a stop request (as stop_request.json does), not a stop record'),
])
def test_stop_refuses_a_run_whose_stop_json_is_bad(tmp_path, data, problem):
  workdir = _workdir(tmp_path, stop_json=data)
  before = _files(workdir)
  result = _stop(workdir, '--timeout=0')
  _check_refused(result, 2, workdir / 'stop.json', problem)
  assert _files(workdir) == before


def test_stop_reports_a_bad_stop_json_written_while_it_waits(tmp_path,
                                                            launch):
  workdir = _workdir(tmp_path)
  waiting = launch('stop', helpers.script_command(
      'stop', f'--workdir={workdir}', '--timeout=120'))
  waiting.wait_until(lambda: (workdir / 'stop_request.json').exists(), 60,
                     'the stop request')
  bad = b'[]'
  (workdir / 'stop.json').write_bytes(bad)
  assert waiting.wait_exit(30, 'a bad stop.json') == 2, waiting.tail()
  assert (f'error: {workdir / "stop.json"} holds a list, not a stop record'
          in waiting.output()), waiting.tail()
  assert (workdir / 'stop.json').read_bytes() == bad


def test_stop_moves_a_bad_request_aside_and_asks_again(tmp_path):
  bad = b'please stop'
  workdir = _workdir(tmp_path, stop_request_json=bad)
  result = _stop(workdir, '--timeout=0', '--reason=enough')
  assert result.returncode == 0, result.stdout + result.stderr
  path = workdir / 'stop_request.json'
  assert (f'warning: {path} is not valid JSON: Expecting value at line 1, '
          f'column 1. It was moved, as it is, to {path}.invalid.'
          ) in result.stderr
  assert (workdir / 'stop_request.json.invalid').read_bytes() == bad
  assert json.loads(path.read_text()) == {'reason': 'enough'}
  assert (workdir / 'checkpoints' / 'learner' / 'checkpoint').read_bytes() \
      == CHECKPOINT


def _coordinator(workdir):
  """The program's coordinator, as it polls `workdir` for stop requests
  (its nodes are not called before a stop)."""
  from launch.supervision import coordinator  # pylint: disable=g-import-not-at-top
  return coordinator.Coordinator({'actor': [None]}, workdir=str(workdir))


def _poll(coordinator):
  """One of the coordinator's polls (a stop request is looked for every
  STOP_REQUEST_POLL_SECONDS): its reason to stop, or None."""
  coordinator._next_request_check = 0.0  # pylint: disable=protected-access
  return coordinator._reason_to_stop({}, None, 0)  # pylint: disable=protected-access


@pytest.mark.parametrize('data, problem', [
    (b'{"reason": "stop', 'is not valid JSON: truncated at line 1'),
    (b'stop', 'is not valid JSON: Expecting value at line 1, column 1'),
    (b'"stop"', 'holds a string, not a stop request'),
    (json.dumps({'why': 'enough'}).encode(),
     "is not a stop request: it lacks 'reason'"),
    (json.dumps({'reason': ['enough']}).encode(),
     "is not a stop request: its 'reason' is a list ([\"enough\"]), not a "
     'string'),
])
def test_the_coordinator_moves_a_bad_request_aside_once(tmp_path, caplog,
                                                        data, problem):
  caplog.set_level(logging.INFO)
  workdir = _workdir(tmp_path, stop_request_json=data)
  coordinator = _coordinator(workdir)
  before = _files(workdir)
  path = workdir / 'stop_request.json'
  assert _poll(coordinator) is None  # Not taken as a request to stop.
  errors = [record.getMessage() for record in caplog.records
            if record.levelno >= logging.ERROR]
  assert len(errors) == 1, errors
  assert errors[0].startswith(f'{path} {problem}'), errors
  assert f'It was moved, as it is, to {path}.invalid.' in errors[0]
  assert 'run programs/stop.py again to stop the program' in errors[0]
  # Moved whole, nothing else touched; not met again.
  after = _files(workdir)
  assert after.pop('stop_request.json.invalid') == data
  before.pop('stop_request.json')
  assert after == before
  assert _poll(coordinator) is None
  assert len([record for record in caplog.records
              if record.levelno >= logging.ERROR]) == 1
  # A request made then is taken, and removed.
  run_manifest.write_stop_request(str(workdir), 'enough')
  assert _poll(coordinator) == ('enough', False)
  assert not path.exists()
  assert (workdir / 'stop_request.json.invalid').read_bytes() == data


def test_the_coordinator_keeps_every_bad_request(tmp_path, caplog):
  # A second bad request does not replace the first one set aside.
  workdir = _workdir(tmp_path, stop_request_json=b'one')
  coordinator = _coordinator(workdir)
  assert _poll(coordinator) is None
  (workdir / 'stop_request.json').write_bytes(b'two')
  assert _poll(coordinator) is None
  assert (workdir / 'stop_request.json.invalid').read_bytes() == b'one'
  assert (workdir / 'stop_request.json.invalid.2').read_bytes() == b'two'
  assert not (workdir / 'stop_request.json').exists()
  errors = [record.getMessage() for record in caplog.records
            if record.levelno >= logging.ERROR]
  assert len(errors) == 2, errors


@pytest.mark.parametrize('stop_record, status, said', [
    # As a coordinator writes it: the launcher says why, exit 0.
    (json.dumps(STOP), 0, f'The program stopped: {STOP["reason"]}.'),
    (json.dumps({**STOP, 'failed': True}), 1,
     f'error: the program stopped because {STOP["reason"]}.'),
    # Bad: why, and whether it failed, cannot be told: exit 1, named.
    ('{"reason": "reached 600 actor steps", "fail',
     1, 'error: the program has ended, but its stop record cannot say why: '
     '{path} is not valid JSON: truncated at line 1'),
    (json.dumps({'reason': 'done'}), 1,
     'error: the program has ended, but its stop record cannot say why: '
     '{path} holds a stop request (as stop_request.json does), not a stop '
     'record'),
])
def test_the_launcher_reports_the_stop_record_it_finds(tmp_path, stop_record,
                                                       status, said):
  # An earlier launch's bad records are moved aside as the launch starts.
  earlier_record, earlier_request = b'{"reason": "earl', b'[]'
  workdir = _workdir(tmp_path, stop_json=earlier_record,
                     stop_request_json=earlier_request)
  result = helpers.run_module('record_probe', f'--workdir={workdir}',
                              f'--stop_record={stop_record}', timeout=300,
                              stderr=subprocess.PIPE)
  output = result.stdout + result.stderr
  assert result.returncode == status, output[-3000:]
  path = workdir / 'stop.json'
  assert said.format(path=path) in output, output[-3000:]
  # Where the checkpoints are, unless the program failed (as before).
  assert (f'Checkpoints are in {workdir / "checkpoints"}' in output) == (
      'stopped because' not in said), output[-3000:]
  for name, data in (('stop.json', earlier_record),
                     ('stop_request.json', earlier_request)):
    assert (f'warning: {workdir / name} ' in result.stderr and
            f'It was moved, as it is, to {workdir / name}.invalid. This '
            'launch does not read it.' in result.stderr), result.stderr
    assert (workdir / f'{name}.invalid').read_bytes() == data
  assert path.read_text() == stop_record  # Read, left as it is.
  assert not (workdir / 'stop_request.json').exists()
  assert (workdir / 'checkpoints' / 'learner' / 'checkpoint').read_bytes() \
      == CHECKPOINT


def _log_rows(path, header, rows):
  path.parent.mkdir(parents=True)
  path.write_text('\n'.join([','.join(header)] +
                            [','.join(map(str, row)) for row in rows]) + '\n')


def test_plot_and_evaluate_name_a_bad_run_json(tmp_path):
  data, problem = BAD_RUN_RECORDS['a_list']
  workdir = _workdir(tmp_path, data)
  _log_rows(workdir / 'logs' / 'actor' / 'logs.csv',
            ['actor_steps', 'episode_return', 'steps_per_second', 'walltime'],
            [[10, 9.0, 100.0, 1000.0], [20, 12.0, 100.0, 1001.0]])
  _log_rows(workdir / 'logs' / 'learner' / 'logs.csv',
            ['learner_steps', 'steps_per_second', 'walltime'],
            [[5, 50.0, 1000.5], [10, 50.0, 1001.5]])
  before = _files(workdir)
  out = tmp_path / 'curves.png'
  # plot.py reads the frames per step from run.json: a guess would be
  # four times wrong for an Atari run.
  result = helpers.run_script('plot', str(workdir), f'--out={out}',
                              timeout=300)
  _check_refused(result, 2, workdir / 'run.json', problem)
  assert not out.exists()
  result = helpers.run_script('evaluate', f'--workdir={workdir}',
                              '--episodes=1', timeout=300)
  _check_refused(result, 2, workdir / 'run.json', problem)
  assert _files(workdir) == before


def test_evaluate_names_the_run_json_of_an_unknown_program(tmp_path):
  workdir = _workdir(tmp_path, json.dumps({**RUN, 'program': 'no_such_program'}
                                          ).encode())
  result = helpers.run_script('evaluate', f'--workdir={workdir}',
                              '--episodes=1', timeout=300)
  assert result.returncode == 2, result.stdout[-3000:]
  assert (f"error: {workdir / 'run.json'}: Unknown program 'no_such_program'"
          in result.stdout), result.stdout[-3000:]


@pytest.mark.parametrize('name', [run_manifest.MANIFEST,
                                  run_manifest.STOP_RECORD,
                                  run_manifest.STOP_REQUEST])
@pytest.mark.parametrize('data, problem', [
    (b'{"reason": "x", ', 'is not valid JSON: truncated at line 1'),
    (b'  \n', 'is empty'),
    (b'\xff\xfe{}', 'is not text'),
    (b'null', 'holds null, not a'),
    (b'{}', 'is not a'),
])
def test_every_kind_of_record_is_checked_when_read(tmp_path, name, data,
                                                   problem):
  (tmp_path / name).write_bytes(data)
  with pytest.raises(run_manifest.BadRecord) as raised:
    run_manifest.read_record(str(tmp_path), name)
  message = str(raised.value)
  assert message.startswith(f'{tmp_path / name} {problem}'), message
  assert raised.value.path == str(tmp_path / name)
  assert (tmp_path / name).read_bytes() == data


@pytest.mark.parametrize('text', [RUN_TEXT, json.dumps(RUN),
                                  json.dumps(STOP, separators=(',', ':'))])
def test_a_record_cut_short_anywhere_is_said_to_be_truncated(tmp_path, text):
  # Wherever a write was cut (in a key, a string, a number, true, null),
  # the error says so rather than name the character it stopped at.
  for cut in range(1, len(text)):
    (tmp_path / 'run.json').write_text(text[:cut])
    with pytest.raises(run_manifest.BadRecord) as raised:
      run_manifest.read_record(str(tmp_path), 'run.json')
    assert raised.value.problem.startswith(
        'is not valid JSON: truncated at line '), (text[:cut], raised.value)


@pytest.mark.parametrize('name, record', [
    (run_manifest.MANIFEST, RUN),
    # Runs recorded before run.json held frames_per_step, flags and preset.
    (run_manifest.MANIFEST, {'program': 'apex_dpg', 'env': 'control:a:b',
                             'config': {}}),
    (run_manifest.STOP_RECORD, STOP),
    (run_manifest.STOP_REQUEST, {'reason': 'enough'}),
])
def test_good_records_are_read_as_written(tmp_path, name, record):
  (tmp_path / name).write_text(json.dumps(record))
  assert run_manifest.read_record(str(tmp_path), name) == record
  assert run_manifest.read_record(str(tmp_path / 'none'), name) is None


def test_bad_records_on_cloud_storage_are_moved_aside(cloud_storage):  # pylint: disable=unused-argument
  # A launch on Vertex AI clears an earlier launch's records through the
  # Cloud Storage API: a bad one is moved (by the service), not removed.
  bucket = helpers.storage_client().bucket('apex-test-bucket')
  workdir = 'gs://apex-test-bucket/run'
  bucket.blob('run/stop.json').upload_from_string(b'{"reason": "x"')
  bucket.blob('run/stop_request.json').upload_from_string(
      json.dumps({'reason': 'enough'}))
  run_manifest.remove_earlier_launch_records(workdir)
  assert sorted(helpers.bucket_names('apex-test-bucket')) == [
      'run/stop.json.invalid']
  assert helpers.bucket_text('apex-test-bucket', 'run/stop.json.invalid') == \
      '{"reason": "x"'
  # And a good run.json there reads as written; a bad one is named.
  bucket.blob('run/run.json').upload_from_string('[]')
  with pytest.raises(run_manifest.BadRecord, match=r'^gs://apex-test-bucket/'
                     r'run/run\.json holds a list, not a run record'):
    run_manifest.read_manifest(workdir)


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
