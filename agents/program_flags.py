"""Command-line flags for the Ape-X programs.

Every field of an agent's config dataclass becomes a flag of the same name,
with the field's docstring as help, so that each hyper-parameter can be set
from the command line (`--batch_size=64`). The run flags (`--env`,
`--num_actors`, ...) are shared by every program.
"""

import ast
import dataclasses
import datetime
import inspect
import os
import sys
import typing
from typing import Dict, Optional

import launchpad as lp
from absl import flags

from agents import config as config_lib
from agents import distributed
from agents import run_manifest

FLAGS = flags.FLAGS


def _field_docstrings(config_class) -> Dict[str, str]:
  """Reads the docstring written under each dataclass field."""
  docs = {}
  for cls in reversed(config_class.__mro__):
    if not dataclasses.is_dataclass(cls):
      continue
    body = ast.parse(inspect.getsource(cls)).body[0].body
    for field, following in zip(body, body[1:]):
      if (isinstance(field, ast.AnnAssign) and
          isinstance(following, ast.Expr) and
          isinstance(following.value, ast.Constant)):
        docs[field.target.id] = ' '.join(following.value.value.split())
  return docs


def _base_type(annotation):
  """`Optional[float]` -> float; other annotations unchanged."""
  if typing.get_origin(annotation) is typing.Union:
    return next(a for a in typing.get_args(annotation) if a is not type(None))
  return annotation


def define_config_flags(config_class):
  """Defines one flag per field of `config_class`, defaulting to its value."""
  docs = _field_docstrings(config_class)
  hints = typing.get_type_hints(config_class)
  for field in dataclasses.fields(config_class):
    kind = _base_type(hints[field.name])
    define = {int: flags.DEFINE_integer, float: flags.DEFINE_float,
              str: flags.DEFINE_string, bool: flags.DEFINE_bool}[kind]
    define(field.name, field.default, docs.get(field.name, field.name))


def config_from_flags(config_class):
  """The config with every field taken from its flag."""
  return config_class(**{field.name: FLAGS[field.name].value
                         for field in dataclasses.fields(config_class)})


def define_run_flags(program_name: str, default_env: str):
  """Flags shared by every Ape-X program."""
  flags.DEFINE_string('env', default_env, 'Environment, <kind>:<name> '
                      f'(default {default_env}); a bad name is answered with '
                      'the accepted forms.')
  flags.DEFINE_integer('num_actors', 4, 'Number of actor processes.')
  flags.DEFINE_integer('envs_per_actor', 1, 'Environments per actor process, '
                       'acted in with one batched forward pass; each keeps '
                       'its own exploration (an epsilon of the Ape-X '
                       'schedule over all num_actors x envs_per_actor '
                       'environments), n-step window and priorities.')
  flags.DEFINE_integer('num_evaluators', 1, 'Evaluator processes: 1, or 0 '
                       'for none (benchmarks; training without evaluation).')
  flags.DEFINE_integer('max_actor_steps', None, 'Stop the whole program once '
                       'actors have taken this many environment steps.')
  flags.DEFINE_float('max_seconds', None, 'Stop the whole program this many '
                     'seconds after the actors\' first step (a wall-clock '
                     'budget; start-up is not counted).')
  flags.DEFINE_string('workdir', None, 'Directory for logs and TensorBoard; '
                      f'default: ~/apex_runs/{program_name}/<timestamp>.')
  flags.DEFINE_integer('seed', 0, 'Seed of the networks, environments and '
                       'exploration.')
  flags.DEFINE_float('log_every', 10.0, 'Seconds between log rows of the '
                     'learner and actors (the evaluator logs every episode).')
  flags.DEFINE_integer('evaluation_period', 0, 'Learner steps between two '
                       'rounds of evaluation; 0: the evaluator never pauses.')
  flags.DEFINE_integer('evaluation_episodes', 10, 'Episodes per round of '
                       'evaluation (with --evaluation_period > 0).')
  flags.DEFINE_float('checkpoint_every', 600.0, 'Seconds between two '
                     'checkpoints of the learner and the counter, under '
                     '<workdir>/checkpoints/; 0: none. A program launched '
                     'again with the same --workdir resumes from them.')
  flags.DEFINE_float('replay_checkpoint_every', 3600.0, 'Seconds between two '
                     'checkpoints of the replay table (Reverb); 0: none.')
  flags.DEFINE_integer('actor_max_failures', 5, 'Environment failures within '
                       'a minute after which an actor gives up (the others '
                       'go on).')


def run_options_from_flags(program_name: str) -> distributed.RunOptions:
  """The run flags, validated; creates the workdir.

  Raises:
    ValueError: naming the flag that is out of range, or an unwritable workdir.
  """
  checks = [
      ('num_actors', FLAGS.num_actors >= 1, '>= 1'),
      ('envs_per_actor', FLAGS.envs_per_actor >= 1, '>= 1'),
      ('num_evaluators', FLAGS.num_evaluators in (0, 1), '0 or 1'),
      ('max_actor_steps',
       FLAGS.max_actor_steps is None or FLAGS.max_actor_steps >= 1,
       '>= 1 (or unset to run until stopped)'),
      ('max_seconds', FLAGS.max_seconds is None or FLAGS.max_seconds > 0,
       '> 0 (or unset to run until stopped)'),
      ('log_every', FLAGS.log_every >= 0, '>= 0'),
      ('evaluation_period', FLAGS.evaluation_period >= 0, '>= 0'),
      ('evaluation_episodes', FLAGS.evaluation_episodes >= 1, '>= 1'),
      ('checkpoint_every', FLAGS.checkpoint_every >= 0, '>= 0 (0: none)'),
      ('replay_checkpoint_every', FLAGS.replay_checkpoint_every >= 0,
       '>= 0 (0: none)'),
      ('actor_max_failures', FLAGS.actor_max_failures >= 1, '>= 1'),
  ]
  for name, ok, allowed in checks:
    config_lib.check_flag(name, ok, FLAGS[name].value, allowed)
  workdir = FLAGS.workdir or os.path.join(
      '~', 'apex_runs', program_name,
      datetime.datetime.now().strftime('%Y%m%d-%H%M%S'))
  workdir = os.path.abspath(os.path.expanduser(workdir))
  try:
    os.makedirs(workdir, exist_ok=True)
  except OSError as error:
    raise ValueError(f'--workdir={workdir} cannot be created ({error}); '
                     'choose a directory you can write to.') from error
  if not os.access(workdir, os.W_OK | os.X_OK):
    raise ValueError(f'--workdir={workdir} is not writable; choose a '
                     'directory you can write to.')
  return distributed.RunOptions(
      workdir=workdir,
      num_actors=FLAGS.num_actors,
      max_actor_steps=FLAGS.max_actor_steps,
      seed=FLAGS.seed,
      log_every=FLAGS.log_every,
      evaluation_period=FLAGS.evaluation_period,
      evaluation_episodes=FLAGS.evaluation_episodes,
      launch_type=FLAGS.lp_launch_type,
      checkpoint_every=FLAGS.checkpoint_every,
      replay_checkpoint_every=FLAGS.replay_checkpoint_every,
      actor_max_failures=FLAGS.actor_max_failures,
      envs_per_actor=FLAGS.envs_per_actor,
      num_evaluators=FLAGS.num_evaluators,
      max_seconds=FLAGS.max_seconds)


def build_program(program_name: str, config_class, builder_class,
                  resolve_environment):
  """Validates the flags and returns (program, run options, environment).

  Every bad flag or environment is reported here, before any process starts
  (exit status 2, no traceback).
  """
  config = config_from_flags(config_class)
  try:
    config.validate()
    environment = resolve_environment(FLAGS.env)
    options = run_options_from_flags(program_name)  # Creates the workdir.
    resuming = run_manifest.check_or_write_manifest(
        options.workdir, program_name, environment.name,
        environment.frames_per_step, config, config.CHECKPOINT_FIELDS)
  except ValueError as error:
    fail(str(error))
  if resuming:
    print(f'Resuming the run in {options.workdir} from its checkpoints.')
  builder = builder_class(config, environment)
  return distributed.make_program(builder, options), options, environment


def fail(message: str):
  """Reports a usage error without a traceback and exits with status 2."""
  sys.stderr.write(f'error: {message}\n')
  sys.exit(2)


def launch(program: lp.Program, launch_type: Optional[str] = None,
           workdir: Optional[str] = None):
  """Launches `program` and waits until it stops; exits with status 1 if the
  program's coordinator stopped it as failed (see `<workdir>/stop.json`)."""
  launch_type = launch_type or FLAGS.lp_launch_type
  if workdir:
    run_manifest.remove_stop_record(workdir)
  if launch_type == 'local_mp':
    manager = lp.launch(program, launch_type=launch_type,
                        terminal='current_terminal')
  else:
    manager = lp.launch(program, launch_type=launch_type)
  manager.wait()
  record = run_manifest.read_stop_record(workdir) if workdir else None
  if record and record.get('failed'):
    sys.stderr.write(f'error: the program stopped because '
                     f'{record["reason"]}.\n')
    sys.exit(1)
