"""Launching a program and waiting for it: Ctrl-C, the end, the exit status.

A Ctrl-C asks the program's coordinator for its ordered stop (actors and
evaluator first, then the learner's final checkpoint, then replay and the
counter), so that no node is left waiting on one that has gone; a second
Ctrl-C stops every node at once, as Launchpad does. The launcher then says
why the program stopped and where its checkpoints are, and exits 0, or 1
if the coordinator stopped the program as failed (`<workdir>/stop.json`).

Under local_mp the launcher watches the coordinator by heartbeats, as the
coordinator watches the other nodes: a coordinator that died or froze
would leave the rest of the program running for ever, with no budget, no
watch and no ordered stop. Once it is gone, the launcher records the run
as failed and stops every node at once.

Under local_mp, local_mt (and test_mt) the launcher takes the nodes' output
off the terminal, into a log per node under `<workdir>/logs/`
(`launch.console.node_output`), and shows the run's status instead
(`launch.console.terminal`), with the nodes' warnings and errors, and
its own messages, above it.

Under vertex_ai the launcher plans (`--dry_run`) or submits the job, and
returns: the job runs on Google Cloud, where `programs/stop.py` stops it in
order.
"""

import os
import signal
import sys
import threading
from typing import Optional

import launchpad as lp

from launch import use_onednn
from launch.runs import run_manifest
from launch.supervision import heartbeat
from launch.supervision import keeper
from launch.supervision import local
from launch import node_groups
from launch.console import node_output
from launch.console import status as status_lib
from launch.console import terminal as terminal_lib
from launch.options import RunOptions

STOP_COMMAND = 'python programs/stop.py --workdir={workdir}'

# How long the launcher tries to reach the coordinator with a Ctrl-C's stop
# request before it stops every node at once instead: long enough for a
# coordinator on a machine loaded by the run itself to answer (a second
# Ctrl-C stops every node at once without waiting).
REQUEST_SECONDS = 30.0
USER_STOP = 'stopped by the user (Ctrl-C)'
# The launch types whose nodes run on this machine: their output goes to
# the workdir's logs, and the terminal shows the run's status (test_mt:
# local_mt as the tests run it).
WATCHED_LOCALLY = ('local_mp', 'local_mt', 'test_mt')


class _StopOnCtrlC:
  """The launcher's SIGINT handler: the first asks the coordinator to stop
  the program in order, the next stops it at once (Launchpad's handler)."""

  def __init__(self, program: lp.Program, terminal: terminal_lib.Terminal):
    coordinator = program.groups['coordinator'][0]
    self._terminal = terminal
    self._last = ('replay and the counter' if 'replay' in program.groups
                  else 'the counter')
    self._handle = coordinator.create_handle()
    self._launchpad_handler = None
    self.requested = False

  def install(self):
    self._launchpad_handler = signal.signal(signal.SIGINT, self._on_sigint)

  def _on_sigint(self, signum, frame):
    if self.requested:
      self._terminal.say('Stopping every node at once.')
      signal.signal(signal.SIGINT, self._launchpad_handler)
      if callable(self._launchpad_handler):
        self._launchpad_handler(signum, frame)
      return
    self.requested = True
    self._terminal.say('Stopping: the actors and the evaluator, then the '
                       f'learner\'s final checkpoint, then {self._last}. '
                       'Press Ctrl-C again to stop every node at once.')
    threading.Thread(target=self._request, daemon=True).start()

  def _request(self):
    # The client must outlive its call: its end shuts the call's queue.
    coordinator = self._handle.dereference()
    answer = coordinator.futures.request_stop(USER_STOP)
    try:
      answer.result(timeout=REQUEST_SECONDS)
    except Exception:  # pylint: disable=broad-except
      self._terminal.say('The coordinator does not answer; stopping every '
                         'node at once.')
      os.kill(os.getpid(), signal.SIGTERM)  # Launchpad's stop.


class _CoordinatorWatch:
  """The launcher's heartbeats to the coordinator (local_mp): once it is
  gone while the program runs, the stop record says so (as failed) and
  Launchpad's stop ends every node at once. A stop already under way
  (`stopping`, set by Launchpad's stop) is left to finish."""

  def __init__(self, program: lp.Program, workdir: str, timeout: float,
               stopping: threading.Event, terminal: terminal_lib.Terminal):
    self._terminal = terminal
    self._handle = program.groups['coordinator'][0].create_handle()
    self._workdir = workdir
    self._timeout = timeout
    self._stopping = stopping

  def start(self):
    threading.Thread(target=self._run, daemon=True,
                     name='coordinator-heartbeats').start()

  def _run(self):
    watch = heartbeat.HeartbeatWatch(
        {'coordinator': [self._handle.dereference()]}, timeout=self._timeout)
    while not self._stopping.wait(1.0):
      gone = watch.dead()
      if gone is None:
        continue
      if self._stopping.is_set():
        break
      try:
        earlier = run_manifest.read_stop_record(self._workdir)
      except run_manifest.BadRecord as error:  # Kept beside the new one.
        earlier = None
        self._terminal.say('warning: ' + str(run_manifest.set_aside(
            error, 'The launcher\'s stop record replaces it.')))
      reason = gone
      if earlier:
        reason += f', during its stop ({earlier["reason"]})'
      counts = earlier['counts'] if earlier else {}
      run_manifest.write_stop_record(
          self._workdir,
          f'{reason}; the other nodes were stopped at once (their last '
          'periodic checkpoints stand); launch again with the same '
          '--workdir to resume', True, counts)
      self._terminal.say(f'Stopping every node at once: {gone}.')
      # A frozen coordinator would outlive Launchpad's stop, which would
      # then kill the whole program, this launcher too.
      local.end_node(self._workdir, 'coordinator', launcher=os.getpid())
      os.kill(os.getpid(), signal.SIGTERM)  # Launchpad's stop.
      break
    watch.close()


def _on_vertex_ai(program: lp.Program, options: RunOptions, plan):
  """Prints the plan (--dry_run), or submits the program to Vertex AI and
  returns: the job runs there (the launcher has nothing to wait for; the
  job's console page, its logs and `<workdir>/stop.json` say how it goes)."""
  from launch.cloud import dry_run  # pylint: disable=g-import-not-at-top
  from launch.cloud import submission  # pylint: disable=g-import-not-at-top
  # Every replica but the coordinator's runs its node under a keeper.
  keeping = keeper.settings(options.workdir, options.max_node_restarts,
                            options.node_restart_window)
  if plan.options.dry_run:
    try:
      dry_run.dry_run(program, plan.requests, options.workdir, plan.options,
                      plan.replay, plan.parameters, keeping,
                      node_labels(program))
    except ValueError as error:
      sys.stderr.write(f'error: {error}\n')
      sys.exit(2)
    return
  for advice in (plan.replay, plan.parameters):
    if advice:
      print(advice, flush=True)
  try:
    run_manifest.remove_earlier_launch_records(options.workdir)
    submission.submit(program, plan.requests, plan.options, options.workdir,
                      keeping, node_labels(program))
  except ValueError as error:
    sys.stderr.write(f'error: {error}\n')
    sys.exit(1)
  print(f'The job runs on Vertex AI; its files go to {options.workdir}. '
        f'`{STOP_COMMAND.format(workdir=options.workdir)}` stops it in order '
        '(the learner\'s and replay\'s final checkpoints, then the job '
        'ends); Cancel on the job\'s console page, or `gcloud ai '
        'custom-jobs cancel`, ends it at once.')


def node_labels(program: lp.Program):
  """{(group, index): label}: how the workdir names each node of `program`
  (`node_groups.NodeGroup.label`)."""
  return {(group, index): label
          for group, nodes in program.groups.items()
          for index, label in enumerate(
              node_groups.labels(group, len(nodes)))}


def _watch_locally(program: lp.Program, options: RunOptions,
                   members: str):
  """Takes the nodes' output off the terminal (into the workdir's logs);
  (the node output, the terminal, the run's status)."""
  labels = node_labels(program)
  output = node_output.NodeOutput(options.workdir, labels,
                                  threads=options.launch_type != 'local_mp')
  terminal = terminal_lib.Terminal(*output.terminal())
  output.start(terminal.say)
  logs = os.path.join(options.workdir, node_output.LOGS)
  terminal.say(f'Each node logs to {logs}/<node>.log; their warnings and '
               'errors show here.')
  # Handles made before the launch, which binds their addresses.
  replays = {labels[('replay', index)]: node.create_handle()
             for index, node in enumerate(program.groups.get('replay', []))}
  evaluators = len(program.groups.get('evaluator', []))
  status = status_lib.RunStatus(
      options.workdir, node_groups.labels('actor', options.num_actors),
      members, replays, options.evaluation_episodes if evaluators else 0,
      options.max_actor_steps, options.max_seconds)
  return output, terminal, status


def launch(program: lp.Program, options: RunOptions,
           program_name: Optional[str] = None, plan=None,
           members: str = 'actors'):
  """Launches `program` and waits until it stops; exits with status 1 if
  the program's coordinator stopped it as failed. Under vertex_ai, `plan`
  (`cloud.machines.Plan`, from `command_line.build_program`) is planned or
  submitted. `members`: what the nodes that act are called in the status
  (actors, workers)."""
  if options.launch_type == 'vertex_ai':
    _on_vertex_ai(program, options, plan)
    return
  run_manifest.remove_earlier_launch_records(options.workdir)
  output = status = None
  if options.launch_type in WATCHED_LOCALLY:
    output, terminal, status = _watch_locally(program, options, members)
  else:
    terminal = terminal_lib.Terminal(sys.stdout, sys.stderr)
  ctrl_c = _StopOnCtrlC(program, terminal)
  if options.launch_type == 'local_mp':
    use_onednn()  # For the nodes' processes, which inherit it.
    resources = {}
    if options.max_node_restarts > 0:
      resources = local.keeper_resources(
          program, node_labels(program), options.workdir,
          options.max_node_restarts, options.node_restart_window)
    manager = lp.launch(program, launch_type=options.launch_type,
                        terminal='current_terminal',
                        local_resources=resources)
    _CoordinatorWatch(program, options.workdir, options.heartbeat_timeout,
                      manager.stop_event(), terminal).start()
  else:
    manager = lp.launch(program, launch_type=options.launch_type)
  if status is not None:
    status.connect()
    terminal.start(status)
  ctrl_c.install()
  manager.wait()
  if output is not None:
    output.finish()
    terminal.stop()
  _report_stop(options, program_name, terminal)


def _report_stop(options: RunOptions, program_name: Optional[str],
                 terminal: terminal_lib.Terminal):
  """Says why the program stopped and where its checkpoints are; exits 1 if
  it stopped as failed, or if its stop record cannot say."""
  try:
    record, unreadable = run_manifest.read_stop_record(options.workdir), None
  except run_manifest.BadRecord as error:
    record, unreadable = None, error
  if record and record.get('failed'):
    terminal.error(f'error: the program stopped because '
                   f'{record["reason"]}.')
    sys.exit(1)
  if record:
    terminal.say(f'The program stopped: {record["reason"]}.')
  if unreadable:
    # Whether it stopped as failed cannot be told: not a success (exit 1,
    # after saying where its checkpoints are).
    terminal.error('error: the program has ended, but its stop record '
                   f'cannot say why: {unreadable}')
  checkpoints = os.path.join(options.workdir, run_manifest.CHECKPOINTS)
  if os.path.isdir(checkpoints) and os.listdir(checkpoints):
    # The program as it was started (programs/<name>.py, or a program file
    # of the user's own).
    resume = f'python {sys.argv[0]}' if program_name else 'the program'
    terminal.say(f'Checkpoints are in {checkpoints}; {resume} '
                 f'--workdir={options.workdir} resumes the run.')
  if unreadable:
    sys.exit(1)
