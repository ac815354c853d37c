"""Vertex AI's rules for a failed replica and a job's time limit, as the
emulator (tests/vertex_emulator.py) keeps them, and `programs/watch.py`
submitting a failed job again: on jobs of two small stand-in programs,
each replica a real process started as the emulator starts any.
(test_cloud.py runs the real program's jobs so, in its slow tier.)"""

import json
import os
import subprocess
import sys

from launch.runs import run_manifest
from tests import helpers

# The primary replica: exits 0 once the file `go` is in its directory,
# else waits (for ever: until the job ends). Each start is a line of
# `starts`.
PRIMARY = '''
import os, sys, time
with open('starts', 'a') as f:
  f.write('primary\\n')
while not os.path.exists('go'):
  time.sleep(0.1)
'''
# The other replica: a line in `starts`, then exits with 3.
FAILING = '''
with open('starts', 'a') as f:
  f.write('failing\\n')
raise SystemExit(3)
'''


def _job(tmp_path, failing: bool = True, **scheduling) -> str:
  """A packaged job: the primary (`PRIMARY`) and one replica that fails
  (`FAILING`) or waits as the primary does; its workdir <tmp_path>/run."""
  package = tmp_path / 'job'
  code = package / 'code'
  code.mkdir(parents=True)
  (code / 'primary.py').write_text(PRIMARY)
  (code / 'other.py').write_text(
      FAILING if failing else PRIMARY.replace('primary', 'other'))
  job = {'name': 'stand-in', 'workdir': str(tmp_path / 'run'),
         'pools': [{'name': 'workerpool0', 'directory': 'code',
                    'replicas': 1, 'command': 'python -m primary',
                    'environment': {}, 'nodes': ['coordinator']},
                   {'name': 'workerpool1', 'directory': 'code',
                    'replicas': 1, 'command': 'python -m other',
                    'environment': {}, 'nodes': ['actor']}]}
  if scheduling:
    job['scheduling'] = scheduling
  (package / 'job.json').write_text(json.dumps(job))
  (tmp_path / 'run').mkdir()
  return str(package)


def _emulate(package: str, *flags: str) -> subprocess.CompletedProcess:
  return helpers.run(helpers.module_command(
      'vertex_emulator', f'--package_dir={package}', '--grace_seconds=5',
      *flags), 120)


def _starts(package: str):
  with open(os.path.join(package, 'code', 'starts')) as f:
    return f.read().split()


def _state(package: str):
  with open(os.path.join(package, 'logs', 'state.json')) as f:
    return json.load(f)


def test_a_failed_replica_is_started_again_in_place_until_its_sixth_failure(
    tmp_path):
  package = _job(tmp_path)
  result = _emulate(package)
  assert result.returncode == 1, result.stdout[-3000:]
  # Vertex AI's rule: started again 5 times, then its sixth failure fails
  # the job.
  assert _starts(package).count('failing') == 6
  for restart in range(1, 6):
    assert (f'Replica workerpool1-0 (the actor) failed (exit 3); started '
            f'again in place (restart {restart} of 5).') in result.stdout
  assert ('Job failed (replica workerpool1-0, the actor, exit 3, its failure '
          '6).') in result.stdout, result.stdout[-3000:]
  assert _state(package)['state'] == 'JOB_STATE_FAILED'
  # As a submission does, the job is recorded in the run's workdir.
  record = run_manifest.read_job_record(str(tmp_path / 'run'))
  assert record['job'] == 'emulated:' + os.path.join(package, 'logs',
                                                      'state.json')


def test_the_strict_reading_fails_the_job_at_the_first_failure(tmp_path):
  package = _job(tmp_path)
  result = _emulate(package, '--max_replica_restarts=0')
  assert result.returncode == 1
  assert _starts(package).count('failing') == 1
  assert 'Job failed (replica workerpool1-0, the actor, exit 3).' in (
      result.stdout), result.stdout[-3000:]


def test_a_job_at_its_time_limit_fails(tmp_path):
  package = _job(tmp_path, failing=False, timeout_seconds=2)
  result = _emulate(package)
  assert result.returncode == 1
  assert 'Job failed: it reached its time limit (2 s).' in result.stdout
  state = _state(package)
  assert state['state'] == 'JOB_STATE_FAILED'
  assert 'time limit' in state['error']


def _watch(tmp_path, package: str, *flags: str) -> subprocess.CompletedProcess:
  """programs/watch.py over a launch that lets the primary through on its
  second job only (a script: `go` made after the first), each job with a
  time limit of 2 s."""
  launch = tmp_path / 'launch.sh'
  code = os.path.join(package, 'code')
  launch.write_text(
      f'{sys.executable} -m tests.vertex_emulator --package_dir={package} '
      f'--grace_seconds=5 --timeout_seconds=2\n'
      f'[ -e {code}/went ] || {{ touch {code}/go {code}/went; }}\n')
  # The launch command names the run's workdir (the script ignores it).
  return helpers.run([sys.executable, os.path.join(
      helpers.ROOT, 'programs', 'watch.py'), '--poll_seconds=0.2', *flags,
                      '--', 'sh', str(launch),
                      f'--workdir={tmp_path / "run"}'], 120)


def test_the_watch_submits_a_failed_job_again_until_it_succeeds(tmp_path):
  package = _job(tmp_path, failing=False)
  result = _watch(tmp_path, package, '--max_resubmissions=2')
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr
  out = result.stdout
  assert ('watch: Submitting the run again (1 of 2): the job ended '
          'JOB_STATE_FAILED (the job reached its time limit (2 s))') in out
  assert 'watch: The run has ended: the job succeeded.' in out, out
  assert _starts(package).count('primary') == 2


def test_the_watch_gives_up_past_its_resubmissions(tmp_path):
  package = _job(tmp_path, failing=False)
  result = _watch(tmp_path, package, '--max_resubmissions=0')
  assert result.returncode == 1, result.stdout[-3000:]
  assert ('watch: Not submitted again: the job ended JOB_STATE_FAILED (the '
          'job reached its time limit (2 s)), and it was submitted again 0 '
          'times (--max_resubmissions).') in result.stdout


def test_the_watch_refuses_a_launch_without_a_workdir():
  result = helpers.run([sys.executable, os.path.join(
      helpers.ROOT, 'programs', 'watch.py'), '--', 'python',
                        'programs/apex_dqn.py'], 60)
  assert result.returncode == 2
  assert 'the launch command names no --workdir' in result.stdout
