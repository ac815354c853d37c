"""Fault tolerance of the Ape-X DQN program (Ape-X App. F), with real faults.

Each program is launched the way users launch it (`python
programs/apex_dqn.py --lp_launch_type=local_mp ...`) in its own session, so
that its whole process group can be signalled, as a terminal does on Ctrl-C,
and is always killed when a test ends. The faults are real: SIGKILL of one
actor process or of the whole program, SIGINT, and environments that raise or
return NaN/inf (tests/faulty_envs.py).
"""

import ast
from concurrent import futures
import dataclasses
import json
import logging
import os
import re
import signal
import time
from typing import Dict, List, Tuple

import numpy as np
import psutil
import pytest
import reverb
import tensorflow as tf
from acme.utils import counting

from launch.supervision import coordinator
from agents.replay import adders
from launch.runs import checkpointing
from launch.supervision import local
from launch import node_groups
from launch import replay_nodes as nodes
from launch.options import RunOptions
from agents.envs import environments
from agents.replay import tables
from launch.runs import run_manifest
from agents.apex_dqn.builder import ApeXDQNBuilder
from agents.apex_dqn.config import ApeXDQNConfig
from agents.apex_dqn.presets import PRESETS
import helpers
from helpers import last as _last
from helpers import rows as _rows
from helpers import rows_from as _rows_from

ENV = 'gym:CartPole-v1'
# The runs of the tests of a program that starts no node again: the
# program's own watch, which stops it as failed past --max_node_restarts
# (tests/test_healing.py has the nodes started again).
NO_RESTARTS = '--max_node_restarts=0'
FAULTY_ENV = 'gym:tests.faulty_envs:FaultyCartPole-v0'
ALWAYS_CRASHING_ENV = 'gym:tests.faulty_envs:AlwaysCrashingCartPole-v0'

# The `cartpole_smoke` preset's runs; its config's values are also those of
# the in-process builders that read the runs' checkpoints.
PRESET = PRESETS['cartpole_smoke']
CONFIG = {field.name: PRESET.values[field.name]
          for field in dataclasses.fields(ApeXDQNConfig)
          if field.name in PRESET.values}
RUN_FLAGS = ['--preset=cartpole_smoke']
NODE_LABELS = ('learner', 'actor', 'actor_1', 'evaluator')
COUNT_KEYS = ('actor_steps', 'actor_episodes', 'learner_steps',
              'evaluator_steps', 'evaluator_episodes')

START_TIMEOUT = helpers.START_TIMEOUT


def _command(workdir, env=ENV, extra=(), config=None):
  return helpers.program_command(
      'apex_dqn', f'--workdir={workdir}', *RUN_FLAGS, f'--env={env}',
      *[f'--{name}={value}' for name, value in (config or {}).items()],
      *extra)


def _launch(launch, name: str, workdir, env=ENV, extra=()) -> helpers.Program:
  """The small run in `workdir`, started by conftest's `launch` fixture
  (killed, whatever is left of it, when the test ends). The faulty
  environments are test code, not part of the installed project: their
  runs have the repository on the path (PYTHONPATH), as a user's own
  environment module would be."""
  environment = ({'PYTHONPATH': helpers.ROOT}
                 if env.startswith('gym:tests.') else None)
  return launch(name, _command(workdir, env, extra), environment)


def _max_logged(workdir) -> Dict[str, int]:
  """The largest count any node has logged, per count."""
  logged = {key: 0 for key in COUNT_KEYS}
  for label in NODE_LABELS:
    for row in _rows(workdir, label):
      for key in COUNT_KEYS:
        if key in row:
          logged[key] = max(logged[key], int(float(row[key])))
  return logged


def _max_count(workdir, key: str) -> int:
  return max((int(float(row[key])) for label in NODE_LABELS
              for row in _rows(workdir, label)), default=0)


def _pid(workdir, label: str):
  path = os.path.join(str(workdir), local.NODES, f'{label}.pid')
  return helpers.read_pid(path)


def _all_nodes_running(workdir) -> bool:
  return (all(_pid(workdir, label) for label in NODE_LABELS) and
          _last(workdir, 'learner', 'learner_steps') > 0)


def _builder(env=ENV) -> ApeXDQNBuilder:
  return ApeXDQNBuilder(ApeXDQNConfig(**CONFIG),
                        environments.resolve_discrete(env))


def _learner_checkpoint_steps(workdir) -> int:
  """The step count in the newest learner checkpoint, read from its files
  (-1 without one)."""
  path = tf.train.latest_checkpoint(
      checkpointing.checkpoint_directory(str(workdir), 'learner'))
  if path is None:
    return -1
  return int(tf.train.load_checkpoint(path).get_tensor(
      'num_steps/.ATTRIBUTES/VARIABLE_VALUE'))


def _read_learner_checkpoint(workdir, builder: ApeXDQNBuilder):
  """(steps, parameters checksum) of a learner restored from the newest
  checkpoint, as the program's learner restores it."""
  assert tf.train.latest_checkpoint(checkpointing.checkpoint_directory(
      str(workdir), 'learner')), 'no learner checkpoint'
  server = reverb.Server(builder.make_replay_tables())
  try:
    learner = builder.make_learner(reverb.Client(f'localhost:{server.port}'))
    checkpointing.make_checkpointer(learner.state, str(workdir), 'learner',
                                    1.0)
    return learner.num_steps, checkpointing.parameters_checksum(
        learner.get_variables(learner.variable_names))
  finally:
    server.stop()


def _read_counter_checkpoint(workdir) -> Dict[str, int]:
  state = checkpointing.read_counts_state(str(workdir))
  assert state is not None, 'no counter checkpoint'
  return state['counts']


class _ReplayCheckpoint:
  """The newest replay checkpoint, loaded into an in-process server."""

  def __init__(self, workdir, builder: ApeXDQNBuilder):
    assert helpers.replay_checkpoints(workdir), 'no replay checkpoint'
    self._server = reverb.Server(
        builder.make_replay_tables(),
        checkpointer=reverb.checkpointers.DefaultCheckpointer(
            checkpointing.checkpoint_directory(str(workdir), 'replay')))
    self.client = reverb.Client(f'localhost:{self._server.port}')

  def size(self) -> int:
    return self.client.server_info()[tables.TABLE].current_size

  def read_all_items(self, max_rounds: int = 2000):
    """key -> transition, for every item. Each item read gets priority 0,
    so that the prioritised sampler picks items not read yet while any is
    left (and samples uniformly once all are 0); the table keeps its size,
    so its MinSize rate limiter never blocks."""
    size = self.size()
    items = {}
    for _ in range(max_rounds):
      if len(items) == size:
        break
      new = {}
      for sample in self.client.sample(tables.TABLE, 500,
                                       emit_timesteps=False,
                                       unpack_as_table_signature=True):
        key = int(sample.info.key)
        if key not in items:
          new[key] = {name: np.asarray(value)
                      for name, value in sample.data.items()}
      items.update(new)
      if new:
        self.client.mutate_priorities(tables.TABLE,
                                      updates={key: 0.0 for key in new})
    assert len(items) == size, (len(items), size)
    return items

  def stop(self):
    self._server.stop()


def _parse_dict(pattern: str, output: str):
  matches = re.findall(pattern, output)
  assert len(matches) == 1, (pattern, matches)
  return ast.literal_eval(matches[0])


def _interrupt(program: helpers.Program,
               stop_bound: float = helpers.STOP_BOUND) -> str:
  """Ctrl-C (`helpers.Program.interrupt`): exit 0 within `stop_bound`
  seconds, no process left; returns the output."""
  program.note_processes()
  assert len(program.seen) > len(NODE_LABELS), 'node processes not seen'
  return program.interrupt(stop_bound)


def _kill_node_when_running(program: helpers.Program, workdir, label: str,
                            before=lambda: None):
  """Once every node runs and the learner trains: `before()`, then SIGKILL
  of the node `label` (named by its pid file), waited for; returns what
  `before` returned."""
  program.wait_until(lambda: _all_nodes_running(workdir), START_TIMEOUT,
                     'learner steps and node pid files')
  victim = _pid(workdir, label)
  program.note_processes()
  assert victim in program.seen, f'{label}.pid is not a process of the run'
  seen_before = before()
  os.kill(victim, signal.SIGKILL)
  _, left = psutil.wait_procs([program.seen[victim]], timeout=10)
  assert not left, f'{label} survived SIGKILL'
  return seen_before


@pytest.mark.slow
def test_a_killed_actor_leaves_the_program_training_until_the_last_dies(
    tmp_path, launch):
  # Killing one actor leaves the program training; killing the other too
  # leaves a learner with no new data: the program stops as failed.
  workdir = tmp_path / 'run'
  program = _launch(launch, 'run', workdir, extra=[NO_RESTARTS])
  actor_rows = _kill_node_when_running(program, workdir, 'actor_1',
                                       lambda: len(_rows(workdir, 'actor')))
  killed_rows = len(_rows(workdir, 'actor_1'))
  learner_steps = _last(workdir, 'learner', 'learner_steps')
  actor_steps = _last(workdir, 'actor', 'actor_steps')

  program.wait_until(
      lambda: _last(workdir, 'learner', 'learner_steps') >
      learner_steps + 300, START_TIMEOUT, 'learner progress after the kill')
  # Actor 0 goes on acting and writing: the actors' step count (now its
  # own steps only) grows in its log.
  program.wait_until(
      lambda: (len(_rows(workdir, 'actor')) > actor_rows + 3 and
               _last(workdir, 'actor', 'actor_steps') > actor_steps + 500),
      START_TIMEOUT, 'actor 0 progress after the kill')
  # The pid file named actor 1: its log stopped with it (nothing restarts
  # an actor).
  assert len(_rows(workdir, 'actor_1')) == killed_rows
  assert program.process.poll() is None, program.tail()

  # The last actor killed.
  victim = _pid(workdir, 'actor')
  assert victim in program.seen, 'actor.pid is not a process of the run'
  os.kill(victim, signal.SIGKILL)
  returncode = program.wait_exit(60, 'both actors were killed')
  _check_stopped_as_failed(workdir, returncode, program.output(),
                           'all 2 actor processes have died')


def _exit_after_kill(program: helpers.Program, workdir,
                     label: str) -> Tuple[int, str]:
  """SIGKILLs the node `label` once all run; the program's exit status and
  output once it has stopped itself."""
  _kill_node_when_running(program, workdir, label)
  returncode = program.wait_exit(60, f'{label} was killed')
  return returncode, program.output()


def _check_stopped_as_failed(workdir, returncode: int, output: str,
                             because: str, final_counts: bool = True):
  """The coordinator stopped the program as failed: exit 1 with an error
  naming the cause, a clean stop of the other nodes (with the counter's
  final counts, unless the counter is what died), and the stop record.
  Returns the record."""
  assert returncode == 1, (returncode, output[-4000:])
  assert f'error: the program stopped because {because}' in output, (
      output[-4000:])
  logs = helpers.node_logs(workdir)
  assert 'did not terminate in time' not in output, output[-4000:]
  assert 'did not terminate in time' not in logs, logs[-4000:]
  with open(workdir / run_manifest.STOP_RECORD) as f:
    record = json.load(f)
  assert record['failed'] is True, record
  if final_counts:
    assert 'Final counts' in logs, logs[-4000:]
  return record


@pytest.mark.slow
def test_a_dead_learner_stops_the_program_with_an_error(tmp_path, launch):
  # Launchpad would leave the actors acting for nobody: the coordinator,
  # watching the learner's process, stops the program, which exits 1 saying
  # so, with the counter's final checkpoint.
  workdir = tmp_path / 'run'
  program = _launch(launch, 'run', workdir, extra=[NO_RESTARTS])
  returncode, output = _exit_after_kill(program, workdir, 'learner')
  victim = _pid(workdir, 'learner')
  _check_stopped_as_failed(
      workdir, returncode, output,
      f"the learner's process (pid {victim}) has died")


@pytest.mark.slow
def test_a_dead_counter_stops_the_program_with_an_error(tmp_path, launch):
  # Every node's calls to a dead counter would wait for it forever.
  workdir = tmp_path / 'run'
  program = _launch(launch, 'run', workdir, extra=[NO_RESTARTS])
  program.wait_until(lambda: _pid(workdir, 'counter'), START_TIMEOUT,
                     'the counter\'s pid file')
  victim = _pid(workdir, 'counter')
  # The coordinator logs this line once it has seen the actors' count grow:
  # from then on, the counts it last saw (and records at the stop) hold
  # actor steps. The learner's first log row does not tell.
  program.wait_until(lambda: 'The actors have started' in program.output(),
                     START_TIMEOUT, 'actor steps seen by the coordinator')
  returncode, output = _exit_after_kill(program, workdir, 'counter')
  record = _check_stopped_as_failed(
      workdir, returncode, output,
      f"the counter's process (pid {victim}) has died", final_counts=False)
  # The counts the coordinator saw last, before the counter died.
  assert record['counts']['actor_steps'] > 0, record


def _versions(workdir, label: str) -> List[int]:
  """The versions (learner steps) of the parameters node `label` logged
  acting with, or holding (a cacher), row by row."""
  return [int(float(row['parameters_version']))
          for row in _rows(workdir, label)]


def _actors_learn_through_the_cacher(workdir) -> bool:
  """Whether each actor has acted with parameters of two of the learner's
  updates (the learner's step, carried with them as their version), and
  the cacher has copied them from the learner and served them."""
  cacher = _rows(workdir, 'cacher')
  return (all(len({version for version in _versions(workdir, label)
                   if version > 0}) >= 2 for label in ('actor', 'actor_1'))
          and bool(cacher) and int(cacher[-1]['parameter_copies']) > 0)


@pytest.mark.slow
def test_actors_learn_through_a_variable_cacher_whose_death_stops_the_run(
    tmp_path, launch):
  # With --variable_cachers=1 the actors get the learner's parameters
  # through the cacher, newer ones as the learner learns. Without it they
  # would act on ever older parameters: like the learner, a dead cacher
  # stops the program, which exits 1 saying so.
  workdir = tmp_path / 'run'
  program = _launch(launch, 'run', workdir,
                    extra=['--variable_cachers=1', NO_RESTARTS])
  program.wait_until(lambda: _actors_learn_through_the_cacher(workdir),
                     START_TIMEOUT, 'actors acting with two versions of the '
                     'parameters, through the cacher')
  # Each node's parameters only get newer.
  for label in ('actor', 'actor_1', 'cacher'):
    versions = _versions(workdir, label)
    assert versions == sorted(versions), (label, versions)
  returncode, output = _exit_after_kill(program, workdir, 'cacher')
  victim = _pid(workdir, 'cacher')
  _check_stopped_as_failed(
      workdir, returncode, output,
      f"the cacher's process (pid {victim}) has died")


def _kill_right_after_a_log_row(program: helpers.Program, workdir,
                                attempts: int = 60):
  """SIGKILLs the program's group at a moment when the learner has logged a
  step newer than its newest checkpoint, so that the logs hold counts at
  least as new as every checkpoint. The group is frozen (SIGSTOP) while this
  is checked, and killed frozen."""
  for attempt in range(attempts):
    program.note_processes()
    program.signal_group(signal.SIGSTOP)
    saved = _learner_checkpoint_steps(workdir)
    if 0 < saved < _last(workdir, 'learner', 'learner_steps'):
      program.signal_group(signal.SIGKILL)
      return
    program.signal_group(signal.SIGCONT)
    time.sleep(0.3 + 0.05 * attempt)
  pytest.fail('The learner never logged a step after its newest checkpoint')


@pytest.mark.slow
def test_kill_9_then_relaunch_resumes_then_ctrl_c_saves_the_last_steps(
    tmp_path, launch):
  workdir = tmp_path / 'run'
  periods = ['--checkpoint_every=2', '--replay_checkpoint_every=2']
  program = _launch(launch, 'first', workdir, extra=periods)
  program.wait_until(
      lambda: (_all_nodes_running(workdir) and
               _learner_checkpoint_steps(workdir) > 200),
      START_TIMEOUT, 'a learner checkpoint')
  # The learner has sampled items: a replay checkpoint begun now holds them.
  helpers.wait_for_a_new_replay_checkpoint(program, workdir)
  _kill_right_after_a_log_row(program, workdir)
  program.wait_exit(30, 'SIGKILL')
  _, left = psutil.wait_procs(list(program.seen.values()), timeout=10)
  assert not left, [p.pid for p in left]
  program.close()

  # What the checkpoints hold, read independently of the program.
  logged = _max_logged(workdir)
  builder = _builder()
  steps, checksum = _read_learner_checkpoint(workdir, builder)
  counts = _read_counter_checkpoint(workdir)
  stored = _ReplayCheckpoint(workdir, builder)
  replay_size = stored.size()
  stored.stop()
  assert steps > 0 and replay_size > 0, (steps, replay_size)

  logs_before = {}
  for label in ('learner', 'actor'):
    with open(os.path.join(workdir, 'logs', label, 'logs.csv')) as f:
      logs_before[label] = f.read()
  with open(os.path.join(workdir, run_manifest.MANIFEST)) as f:
    manifest = f.read()

  # A relaunch that differs in what the checkpoints depend on is refused
  # before anything starts.
  refusals = [
      (_command(workdir, config={'mlp_hidden_sizes': '64'}),
       ["--mlp_hidden_sizes='32'", "'64'"]),
      (_command(workdir, env='gym:Acrobot-v1'),
       ["'gym:CartPole-v1'", "'gym:Acrobot-v1'"]),
      (helpers.program_command('apex_dpg', f'--workdir={workdir}',
                               '--env=gym:Pendulum-v1', '--num_actors=2'),
       ["'apex_dqn'", "'apex_dpg'"]),
  ]
  refused = [launch(f'refused{index}', command)
             for index, (command, _) in enumerate(refusals)]
  for process, (command, expected) in zip(refused, refusals):
    returncode = process.wait_exit(120)
    output = process.output()
    assert returncode == 2, (command, output[-3000:])
    assert 'Traceback' not in output, output[-3000:]
    assert all(text in output for text in expected), (expected, output)
  with open(os.path.join(workdir, run_manifest.MANIFEST)) as f:
    assert f.read() == manifest
  with open(os.path.join(workdir, 'logs', 'learner', 'logs.csv')) as f:
    assert f.read() == logs_before['learner']

  # The relaunch runs until its learner has taken 100 steps and its first
  # actor has logged, then is stopped as a user stops it (Ctrl-C). Its
  # periodic checkpoints are far apart: the learner saves at its first step,
  # then only at the stop, which must save what it had done by then.
  learner_rows = len(_rows_from(logs_before['learner']))
  actor_rows = len(_rows_from(logs_before['actor']))
  relaunched = _launch(launch, 'relaunch', workdir,
                       extra=['--checkpoint_every=600',
                              '--replay_checkpoint_every=600'])
  relaunched.wait_until(
      lambda: (len(_rows(workdir, 'learner')) > learner_rows + 1 and
               _last(workdir, 'learner', 'learner_steps') > steps + 100 and
               len(_rows(workdir, 'actor')) > actor_rows),
      START_TIMEOUT, 'log rows of the relaunched learner and actor')
  logged_at_stop = _last(workdir, 'learner', 'learner_steps')
  output = _interrupt(relaunched)
  assert 'Resuming the run in' in output
  logs = relaunched.logs()
  assert 'Final replay checkpoint' in logs
  final_steps, _ = _read_learner_checkpoint(workdir, builder)
  assert final_steps >= logged_at_stop, (final_steps, logged_at_stop)

  starts = re.findall(
      r'Learner starts at step (\d+) \(parameters checksum (\w+)\)', logs)
  assert starts == [(str(steps), checksum)], (starts, steps, checksum)
  sizes = _parse_dict(r'Replay starts with (\{[^}]*\}) items', logs)
  assert sizes == {tables.TABLE: replay_size}, (sizes, replay_size)
  # The counts start from the counter's checkpoint: nothing newer than the
  # checkpoints, nothing newer than what the killed run had logged.
  started = _parse_dict(r'Counter starts from (\{[^}]*\})', logs)
  assert started == counts, (started, counts)
  for key, value in started.items():
    if key in logged:
      assert value <= logged[key], (key, value, logged)

  # The logs go on in the same files.
  for label, before in logs_before.items():
    with open(os.path.join(workdir, 'logs', label, 'logs.csv')) as f:
      after = f.read()
    assert after.startswith(before), label
    header = before.splitlines()[0]
    assert after.splitlines().count(header) == 1, label
    assert len(after) > len(before), label
  new_rows = _rows(workdir, 'learner')[learner_rows:]
  assert new_rows
  assert int(new_rows[0]['learner_steps']) > steps, (new_rows[0], steps)
  # The counter saves on its own, so the killed run's counts may claim more
  # or fewer learner steps than its learner's checkpoint: the relaunched
  # learner made them its own, and the final counts say its final step.
  final_counts = _read_counter_checkpoint(workdir)
  assert final_counts['learner_steps'] == final_steps, (
      final_counts, final_steps, counts, steps)


def _first_error_row(learner_rows):
  """The index of the learner's first row that counts an environment
  error, None before one."""
  return next((index for index, row in enumerate(learner_rows)
               if int(row['actor_environment_errors']) > 0), None)


def _trained_on_after_the_first_error(workdir) -> bool:
  """Whether both actors have logged an error count (the program's), and
  the learner a row counting one and, later, 100 more learner steps."""
  if not all(_last(workdir, label, 'actor_environment_errors') > 0
             for label in ('actor', 'actor_1')):
    return False
  learner = _rows(workdir, 'learner')
  first_error = _first_error_row(learner)
  return first_error is not None and (
      int(learner[-1]['learner_steps']) >
      int(learner[first_error]['learner_steps']) + 100)


@pytest.mark.slow
def test_crashes_and_non_finite_steps_cost_episodes_not_the_run(tmp_path,
                                                               launch):
  # An environment that crashes every 1,000 steps of its life and returns
  # NaN observations and infinite rewards every 97 and 131 steps: crashes
  # cost episodes, not the run, and no non-finite step reaches the replay.
  workdir = tmp_path / 'run'
  # The replay's only checkpoint is the final one, taken at the stop (read
  # back below: without a samples-per-insert rate limiter, whose restored
  # state would hold the reads back). The run is stopped (Ctrl-C) once the
  # logs show training after the crashes, a non-finite step (every node logs
  # the program's counts; the actors their own at once) and 4,000 actor
  # steps: how many actor steps that takes depends on when each node logs.
  program = _launch(launch, 'run', workdir, FAULTY_ENV,
                    ['--replay_checkpoint_every=600'])
  program.wait_until(
      lambda: (_trained_on_after_the_first_error(workdir) and
               _max_count(workdir, 'actor_nonfinite_steps') > 0 and
               _max_count(workdir, 'actor_steps') >= 4000),
      START_TIMEOUT, 'learner steps after the first crash, a logged '
      'non-finite step and 4,000 actor steps')
  _interrupt(program)

  # Crashes: counted by both actors, and the learner trained on after them.
  assert 'simulated simulator crash' in program.logs()
  for label in ('actor', 'actor_1'):
    assert int(_rows(workdir, label)[-1]['actor_environment_errors']) > 0, (
        label)
  learner = _rows(workdir, 'learner')
  first_error = _first_error_row(learner)
  assert (int(learner[-1]['learner_steps']) >
          int(learner[first_error]['learner_steps']) + 100), (
              learner[first_error], learner[-1])

  # Non-finite steps: counted, and none in the replay's final checkpoint.
  assert _max_count(workdir, 'actor_nonfinite_steps') > 0
  checkpoints = helpers.replay_checkpoints(workdir)
  assert len(checkpoints) == 1, checkpoints
  stored = _ReplayCheckpoint(workdir, _builder(FAULTY_ENV))
  try:
    items = stored.read_all_items()
  finally:
    stored.stop()
  assert len(items) > 1000, len(items)
  for key, item in items.items():
    for name in (adders.OBSERVATION, adders.NEXT_OBSERVATION,
                 adders.N_STEP_RETURN, adders.DISCOUNT):
      assert np.all(np.isfinite(item[name])), (key, name, item)


class _Timeout(Exception):
  pass


def test_actor_with_an_always_failing_environment_gives_up(tmp_path, caplog):
  caplog.set_level(logging.INFO)
  builder = _builder(ALWAYS_CRASHING_ENV)
  server = reverb.Server(builder.make_replay_tables())
  client = reverb.Client(f'localhost:{server.port}')
  counter = counting.Counter()
  options = RunOptions(workdir=str(tmp_path), num_actors=1,
                       launch_type='local_mt', actor_max_failures=3,
                       log_every=0.0)
  learner = builder.make_learner(client)
  actor = nodes.ActorNode(builder, client, learner, counter, 0, options)

  def on_alarm(signum, frame):
    del signum, frame
    raise _Timeout()

  previous = signal.signal(signal.SIGALRM, on_alarm)
  signal.alarm(60)
  try:
    actor.run()
  except _Timeout:
    pytest.fail('The actor still runs 60 s after its environment first '
                'failed')
  finally:
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)
    server.stop()
  assert counter.get_counts().get('actor_environment_errors') == 3, (
      counter.get_counts())
  assert counter.get_counts().get('actor_stopped_on_failures') == 1, (
      counter.get_counts())
  # The give-up message (not the 'stops after K environment steps' line
  # every actor logs when it ends).
  stops = [record.getMessage() for record in caplog.records
           if 'stops:' in record.getMessage()]
  assert len(stops) == 1, [r.getMessage() for r in caplog.records]
  assert '3 environment failures' in stops[0], stops
  assert 'simulated simulator crash' in stops[0], stops


@pytest.mark.slow
def test_program_stops_as_failed_once_every_actor_has_given_up(tmp_path,
                                                                launch):
  # The rate limit would hold the learner waiting for new data forever once
  # no actor is left: the coordinator stops the program instead, and the
  # launcher exits with an error naming the cause and the fix.
  workdir = tmp_path / 'run'
  extra = ['--num_evaluators=0', '--actor_max_failures=2',
           '--samples_per_insert=1']
  ends = []
  for number in range(2):
    program = _launch(launch, f'launch{number}', workdir,
                      ALWAYS_CRASHING_ENV, extra)
    returncode = program.wait_exit(240)
    output = program.output()
    program.close()  # Nothing of it left when the next launch starts.
    ends.append(_check_stopped_as_failed(
        workdir, returncode, output,
        'all 2 actors stopped after repeated environment failures'))
    assert '--actor_max_failures' in output.splitlines()[-1]
    # The learner never trained: no learner checkpoint, whose optimiser state
    # (made by the first update) the relaunch could not have restored. The
    # counter's final checkpoint holds the counts.
    assert _learner_checkpoint_steps(workdir) == -1
    saved = _read_counter_checkpoint(workdir)
    for key in ('actor_stopped_on_failures', 'actor_environment_errors'):
      assert saved[key] == ends[-1]['counts'][key], (saved, ends[-1])
  # Each launch: both actors gave up after 2 failures each. The relaunch
  # (the counts resumed) waited for its own actors to give up.
  first, second = (end['counts'] for end in ends)
  assert first['actor_stopped_on_failures'] == 2, first
  assert first['actor_environment_errors'] == 4, first
  assert second['actor_stopped_on_failures'] == 4, second
  assert second['actor_environment_errors'] == 8, second


def _exit_after_freeze(program: helpers.Program, workdir,
                       label: str) -> Tuple[int, str]:
  """SIGSTOPs the node `label` once every node runs; the program's exit
  status and output once it has stopped itself."""
  program.wait_until(lambda: _all_nodes_running(workdir), START_TIMEOUT,
                     'learner steps and node pid files')
  # A node that has never answered counts as starting (for minutes): the
  # freeze must come after the coordinator's first answer from each node,
  # which a client's connection back-off can delay past the first updates.
  program.wait_until(
      lambda: f'{helpers.HEARD_FROM_ALL} (learner' in program.logs(),
      START_TIMEOUT, 'the coordinator\'s first answer from every node')
  victim = _pid(workdir, label)
  program.note_processes()
  assert victim in program.seen, f'{label}.pid is not a process of the run'
  os.kill(victim, signal.SIGSTOP)
  # Its process is still there: only heartbeats can tell.
  program.wait_until(
      lambda: psutil.Process(victim).status() == psutil.STATUS_STOPPED, 30,
      f'{label} to be stopped')
  returncode = program.wait_exit(120, f'{label} was frozen')
  return returncode, program.output()


@pytest.mark.slow
@pytest.mark.parametrize('label', ['learner', 'counter'])
def test_a_frozen_node_stops_the_program_with_an_error(tmp_path, launch,
                                                       label):
  # SIGSTOP leaves the process in place, where pid files see a live node:
  # the coordinator's heartbeats over Courier see that it no longer
  # answers, and the program stops as failed, naming it, with no node left.
  workdir = tmp_path / 'run'
  program = _launch(launch, 'run', workdir,
                    extra=['--heartbeat_timeout=8', NO_RESTARTS])
  returncode, output = _exit_after_freeze(program, workdir, label)
  record = _check_stopped_as_failed(
      workdir, returncode, output,
      f'the {label} has not answered its heartbeats for',
      final_counts=label != 'counter')
  silent = float(re.search(r'answered its heartbeats for (\d+) s',
                           record['reason']).group(1))
  assert silent >= 8, record
  _, left = psutil.wait_procs(program.alive(), timeout=30)
  assert not left, f'{left} outlived the program'


@pytest.mark.slow
@pytest.mark.parametrize('fault', ['SIGKILL', 'SIGSTOP'])
def test_a_dead_or_frozen_coordinator_stops_the_program_with_an_error(
    tmp_path, launch, fault):
  # Nothing else watches the coordinator: without the launcher's heartbeats
  # to it, the other nodes would run for ever (no budget, no watch, no
  # ordered stop; Launchpad sees its decorated process end with status 0).
  workdir = tmp_path / 'run'
  program = _launch(launch, 'run', workdir,
                    extra=['--heartbeat_timeout=8', '--checkpoint_every=2'])
  program.wait_until(lambda: _all_nodes_running(workdir), START_TIMEOUT,
                     'learner steps and node pid files')
  program.wait_until(lambda: _learner_checkpoint_steps(workdir) > 0,
                     START_TIMEOUT, 'a learner checkpoint')
  # The launcher's own watch, over the coordinator alone.
  program.wait_until(
      lambda: (f'{helpers.HEARD_FROM_ALL} (coordinator)' in
               program.output()), START_TIMEOUT,
      'the launcher\'s first answer from the coordinator')
  victim = _pid(workdir, 'coordinator')
  program.note_processes()
  assert victim in program.seen, 'coordinator.pid is not a process of the run'
  os.kill(victim, getattr(signal, fault))
  returncode = program.wait_exit(120, f'the coordinator got {fault}')
  output = program.output()
  assert returncode == 1, (returncode, output[-4000:])
  assert ('error: the program stopped because the coordinator has not '
          'answered its heartbeats for') in output, output[-4000:]
  with open(workdir / run_manifest.STOP_RECORD) as f:
    record = json.load(f)
  assert record['failed'] is True, record
  silent = float(re.search(r'answered its heartbeats for (\d+) s',
                           record['reason']).group(1))
  assert silent >= 8, record
  _, left = psutil.wait_procs(program.alive(), timeout=30)
  assert not left, f'{left} outlived the program'
  # The learner's last periodic checkpoint is whole.
  assert _learner_checkpoint_steps(workdir) > 0


@pytest.mark.slow
def test_ctrl_c_just_after_an_actor_died_does_not_wait_for_it(tmp_path,
                                                              launch):
  # The watch confirms a death 3 s after it: a Ctrl-C within them asks the
  # dead actor to stop too, and the ordered stop must drop it once the
  # watch sees it dead, not wait its 30 s for an answer that never comes.
  workdir = tmp_path / 'run'
  program = _launch(launch, 'run', workdir, extra=[NO_RESTARTS])
  _kill_node_when_running(program, workdir, 'actor_1')
  # Whether the stop waited for the dead actor is told by which way it
  # went, as the coordinator says, not by how long it took (a loaded
  # machine's stop can take as long as the wait for a dead actor): the
  # bound is for a stop that hangs.
  output = _interrupt(program, stop_bound=helpers.START_TIMEOUT)
  assert 'stopped by the user (Ctrl-C)' in output
  # Asked to stop before the watch had confirmed its death, then dropped
  # once it had (a stop that waited for its answer until its own timeout
  # says neither); or, if the Ctrl-C came after the watch had confirmed
  # it, never asked (test_the_ordered_stop_drops_an_actor_seen_dead_meanwhile
  # takes both ways every time).
  dropped = ('Actor 1 has died since it was asked to stop; its answer is '
             'not waited for.') in output
  not_asked = 'Actors [1] have died: they are not asked to stop.' in output
  assert dropped != not_asked, output[-5000:]
  print('the dead actor was', 'dropped' if dropped else 'not asked')


class _StopClock:
  """The coordinator's clock and waits (`coordinator.time`,
  `coordinator.futures`) in the test below: a wait for calls that have not
  all ended takes its whole timeout (one poll: a second), one for calls that
  have, none; whatever the machine, and at once."""

  TimeoutError = futures.TimeoutError  # pylint: disable=invalid-name

  def __init__(self):
    self.now = 0.0

  def time(self) -> float:
    return self.now

  def wait(self, calls, timeout=None):
    done, not_done = futures.wait(calls, timeout=0)
    if not_done:
      self.now += timeout
    return done, not_done


class _Watch:
  """The coordinator's watch over the actors: actor 1 is seen dead from its
  `confirmed_at`-th look on (the 0th is the ordered stop's own, before it
  asks the actors; then one a poll)."""

  def __init__(self, confirmed_at: int):
    self._confirmed_at = confirmed_at
    self.looks = 0

  def dead(self):
    return None

  def dead_actors(self) -> List[int]:
    self.looks += 1
    return [1] if self.looks > self._confirmed_at else []


class _Node:
  """A node's stop as the coordinator calls it: answered at once, or (a
  dead actor) never; a call in flight is ended as Courier ends one
  (`heartbeat.end_call` tells its done-callback that it was cancelled), and
  when that happened is noted."""

  def __init__(self, clock: _StopClock, answers: bool):
    self.futures = self
    self._clock = clock
    self._answers = answers
    self.asked_at = self.ended_at = None
    self.call = None

  def stop(self, timeout):
    del timeout
    self.asked_at = self._clock.now
    self.call = futures.Future()
    if self._answers:
      self.call.set_result(True)
      return self.call

    def on_done(future):
      if future.cancelled() and not self.call.done():
        self.ended_at = self._clock.now
        self.call.set_exception(RuntimeError('CANCELLED'))
    self.call.add_done_callback(on_done)
    return self.call


class _Counter:

  def get_counts(self):
    return {'actor_steps': 100}


@pytest.mark.parametrize('confirmed_at', [3, 0])
def test_the_ordered_stop_drops_an_actor_seen_dead_meanwhile(
    monkeypatch, caplog, confirmed_at):
  # Actor 1 has died: its stop call would wait for its 30 s timeout. With
  # the watch confirming the death 3 polls (3 s) into the ordered stop, the
  # stop must end that call then, and go on to the learner; confirmed
  # before it (look 0), the actor is not asked at all.
  caplog.set_level(logging.INFO)
  clock = _StopClock()
  monkeypatch.setattr(coordinator, 'time', clock)
  monkeypatch.setattr(coordinator, 'futures', clock)
  watch = _Watch(confirmed_at)
  actors = [_Node(clock, answers=True), _Node(clock, answers=False)]
  learner = _Node(clock, answers=True)
  ended = []
  stopper = coordinator.Coordinator(
      {'counter': [_Counter()], 'learner': [learner], 'actor': actors},
      node_watch=lambda: watch,
      end_program=lambda failed, replays, counter: ended.append(failed))
  stopper.request_stop('stopped by the user (Ctrl-C)')
  stopper.run()
  messages = [record.getMessage() for record in caplog.records]
  assert ended == [False]
  assert actors[0].asked_at == 0.0
  if confirmed_at:
    assert actors[1].asked_at == 0.0
    # Ended at the poll whose look saw it dead, long before the call's own
    # timeout (ACTING_STOP_SECONDS, and 5 s more, after which a stop that
    # did not look would end it); through Courier, not by cancelling its
    # future.
    assert actors[1].ended_at == confirmed_at
    assert actors[1].ended_at < node_groups.ACTING_STOP_SECONDS
    assert not actors[1].call.cancelled()
    assert ('Actor 1 has died since it was asked to stop; its answer is not '
            'waited for.') in messages, messages
  else:
    assert actors[1].asked_at is None
    assert 'Actors [1] have died: they are not asked to stop.' in messages
  # Then at once the learner; and nobody is said to have let its stop time
  # run out.
  assert learner.asked_at == confirmed_at
  assert not [m for m in messages if 'did not confirm their stop' in m], (
      messages)
