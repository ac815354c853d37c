"""A run's cloud job watched, and submitted again when it fails.

Vertex AI restarts a replica that fails in place, five times; its sixth
failure fails the whole job, and so does the job's time limit
(`--job_timeout_hours`, Vertex AI's `scheduling.timeout`). A run that
outlives such an end is submitted again from its workdir, where it resumes
from its checkpoints as any launch with that `--workdir` does:

  python programs/watch.py --max_resubmissions=3 -- \\
      python programs/apex_dqn.py --lp_launch_type=vertex_ai \\
      --workdir=gs://<bucket>/<run> <the launch's other flags>

`watch` runs the launch command, reads the job it submitted from the
run's job record (`run_manifest.JOB_RECORD`, which the submission writes),
and polls the job's state until it ends:

* JOB_STATE_SUCCEEDED, or a stop record that says the run stopped in
  order (its budget, or `programs/stop.py`): done, exit 0;
* JOB_STATE_CANCELLED: a person (or `gcloud ai custom-jobs cancel`) ended
  it, and no one is overruled: exit 1;
* JOB_STATE_FAILED (a replica's sixth failure, the time limit), or
  JOB_STATE_EXPIRED: the command runs again, up to `max_resubmissions`
  times; then exit 1.

A job's state comes from Vertex AI (`aiplatform.CustomJob.get`), or, for a
job the Vertex AI emulator among the tests runs (a name starting
`emulated:`), from the state file it names.
"""

import json
import subprocess
import time
from typing import Callable, List, Optional, Sequence, Tuple

from launch.runs import run_manifest

SUCCEEDED = 'JOB_STATE_SUCCEEDED'
CANCELLED = 'JOB_STATE_CANCELLED'
# The ends after which the run is submitted again.
FAILED = ('JOB_STATE_FAILED', 'JOB_STATE_EXPIRED')
ENDED = (SUCCEEDED, CANCELLED, *FAILED)
# The name of a job the Vertex AI emulator runs (tests/vertex_emulator.py
# records it so): this, then the path of its state file.
EMULATED = 'emulated:'


def workdir_of(command: Sequence[str]) -> str:
  """The `--workdir` the launch command names; ValueError without one."""
  for index, word in enumerate(command):
    if word.startswith('--workdir='):
      return word.split('=', 1)[1]
    if word == '--workdir' and index + 1 < len(command):
      return command[index + 1]
  raise ValueError('the launch command names no --workdir: give the run\'s '
                   '(gs://<bucket>/<run>), which every submission resumes.')


def job_state(job: str) -> Tuple[str, str]:
  """The job's state (Vertex AI's JobState name) and its error, if any."""
  if job.startswith(EMULATED):
    try:
      with open(job[len(EMULATED):]) as f:
        state = json.load(f)
    except (OSError, ValueError):
      return 'JOB_STATE_PENDING', ''  # Being written.
    return state['state'], state.get('error', '')
  from google.cloud import aiplatform  # pylint: disable=g-import-not-at-top
  custom_job = aiplatform.CustomJob.get(job)
  error = custom_job.error.message if custom_job.error else ''
  return custom_job.state.name, error


class Watch:
  """Submits the launch `command` and submits it again after a failure;
  see the module docstring. `say` prints a line; `state_of` reads a job's
  state (`job_state`)."""

  def __init__(self, command: List[str], max_resubmissions: int,
               poll_seconds: float = 60.0,
               say: Callable[[str], None] = print,
               state_of: Callable[[str], Tuple[str, str]] = job_state):
    self._command = command
    self._workdir = workdir_of(command)
    self._max_resubmissions = max_resubmissions
    self._poll_seconds = poll_seconds
    self._say = say
    self._state_of = state_of

  def _submit(self) -> str:
    """Runs the launch command; the job it submitted. ValueError if the
    launch failed or recorded no job."""
    started = time.time()
    status = subprocess.run(self._command, check=False).returncode
    if status:
      raise ValueError(f'the launch command exited with status {status}; '
                       'its output says why.')
    record = run_manifest.read_job_record(self._workdir)
    if record is None or record['submitted'] < started - 1.0:
      raise ValueError(f'the launch recorded no new job in {self._workdir} '
                       f'({run_manifest.JOB_RECORD}): is it a '
                       '--lp_launch_type=vertex_ai launch without --dry_run?')
    return record['job']

  def _wait(self, job: str) -> Tuple[str, str]:
    while True:
      state, error = self._state_of(job)
      if state in ENDED:
        return state, error
      time.sleep(self._poll_seconds)

  def _stopped_in_order(self) -> Optional[str]:
    """Why the run stopped itself in order, if it did (not a failure, nor
    an end from outside, which its job's end was)."""
    record = run_manifest.read_stop_record(self._workdir)
    if (record is not None and not record['failed'] and
        not record.get('ended_from_outside')):
      return record['reason']
    return None

  def run(self) -> int:
    """Watches to the run's end; 0 if it ended in order, 1 if not."""
    resubmissions = 0
    while True:
      job = self._submit()
      self._say(f'Watching job {job} (submission {resubmissions + 1}).')
      state, error = self._wait(job)
      stopped = self._stopped_in_order()
      if state == SUCCEEDED or stopped:
        self._say(f'The run has ended: {stopped or "the job succeeded"}.')
        return 0
      ended = f'the job ended {state}' + (f' ({error})' if error else '')
      if state not in FAILED:
        self._say(f'Not submitted again: {ended}.')
        return 1
      if resubmissions >= self._max_resubmissions:
        self._say(f'Not submitted again: {ended}, and it was submitted '
                  f'again {resubmissions} times (--max_resubmissions).')
        return 1
      resubmissions += 1
      self._say(f'Submitting the run again ({resubmissions} of '
                f'{self._max_resubmissions}): {ended}; it resumes from its '
                f'checkpoints in {self._workdir}.')
