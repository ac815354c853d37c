"""The programs' command line: flags, presets, resuming, and building the
program before anything starts.

Every field of the agent's config dataclass and of `RunOptions` is a flag of
the same name, with the field's docstring as help, and so is every run
option of a registered environment suite's own (`suites.RunOption`), with
its help. A value of a flag comes, from the strongest to the weakest, from:

  1. the flag given on the command line;
  2. the preset named by `--preset` (the agent's `presets.py`);
  3. when `--workdir` holds a run, the values that run last launched with
     (`run.json`), so that a relaunch naming only `--workdir` resumes it;
  4. the field's default.

A run cannot be resumed with other values of the fields its checkpoints
depend on (`CHECKPOINT_FIELDS`): such a launch is refused, naming them.
"""

import ast
import dataclasses
import datetime
import inspect
import json
import os
import sys
import typing
from typing import Any, Callable, Dict, List, Mapping, Optional

from absl import flags

from launch.runs import run_manifest
from launch.runs import storage
from agents import builders
from agents import plugins
from agents.config import Preset
from agents.envs import suites
from launch.cloud import capacity
from launch.cloud import machines
from launch.cloud import packaging
from launch import node_groups
from launch.machine import private_network
from launch.cloud.options import CloudOptions
from launch.options import RunOptions
from launch.options import WORKDIR_UMASKS

FLAGS = flags.FLAGS


def _field_docstrings(dataclass) -> Dict[str, str]:
  """Reads the docstring written under each dataclass field."""
  docs = {}
  for cls in reversed(dataclass.__mro__):
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
  """`Optional[float]` -> (float, True); others -> (annotation, False)."""
  if typing.get_origin(annotation) is typing.Union:
    kind = next(a for a in typing.get_args(annotation) if a is not type(None))
    return kind, True
  return annotation, False


class _OptionalParser(flags.ArgumentParser):
  """A flag's parser that also takes `none` (the field's None: no limit, no
  rate limiter), so that a command line can undo a preset's value."""

  def __init__(self, parser: flags.ArgumentParser):
    super().__init__()
    self._parser = parser

  def parse(self, argument):
    if isinstance(argument, str) and argument.strip().lower() == 'none':
      return None
    return self._parser.parse(argument)

  def flag_type(self):
    return f'{self._parser.flag_type()} or none'


_PARSERS = {int: flags.IntegerParser, float: flags.FloatParser,
            str: flags.ArgumentParser, bool: flags.BooleanParser}


def _flag_fields(dataclass):
  return [field for field in dataclasses.fields(dataclass)
          if field.metadata.get('flag', True)]


def _flag_names(dataclass):
  return [field.name for field in _flag_fields(dataclass)]


def _define_flag(name: str, annotation, default, help_text: str):
  """Defines the flag `--name` of the type `annotation` (int, float, str or
  bool, or `Optional` of one: the flag then takes `none`)."""
  kind, optional = _base_type(annotation)
  if kind is bool and not optional:  # --name and --noname, as absl's.
    flags.DEFINE_bool(name, default, help_text)
    return
  parser = _PARSERS[kind]()
  if optional:
    parser = _OptionalParser(parser)
  serializer = None if kind is bool else flags.ArgumentSerializer()
  flags.DEFINE(parser, name, default, help_text, serializer=serializer)


def env_help(built_in_only: bool = False) -> str:
  """--env's help: `RunOptions.env`'s docstring, then each registered
  suite's forms of name by the actions of its environments (`suites.Suite`),
  made from the suites themselves so that a suite of your own is listed
  as the built-in ones are (with `built_in_only`, those alone)."""
  wanted = suites.built_in_names() if built_in_only else suites.names()
  forms = [f'{form}, for {action} actions' for name in wanted
           for action, form in suites.get(name).forms.items()]
  return ' '.join(_field_docstrings(RunOptions)['env'].split() +
                  ['The suites:'] + ['; '.join(forms) + '.'])


def _define_flags(dataclass, defaults: Mapping[str, Any]):
  docs = _field_docstrings(dataclass)
  if dataclass is RunOptions:
    docs['env'] = env_help()
  hints = typing.get_type_hints(dataclass)
  for field in _flag_fields(dataclass):
    _define_flag(field.name, hints[field.name],
                 defaults.get(field.name, field.default),
                 docs.get(field.name, field.name))


# The suites' own run options this module has made flags, in order.
_SUITE_FLAGS: List[str] = []


def define_suite_flags() -> List[str]:
  """Makes a flag of each run option of the registered suites' own
  (`suites.RunOption`) that is none yet; returns their names. A suite a
  program's `--plugins` registers gets its flags before the command line
  is parsed (`launch.entry`); one a resumed run's record names, as its
  plug-in is imported (`build_program`), with the record's values.

  Raises:
    ValueError: a suite's run option has the name of another flag.
  """
  defined = []
  for option in suites.run_options():
    if option.name in _SUITE_FLAGS:
      continue
    if option.name in FLAGS:
      raise ValueError(f'The run option {option.name!r} of a suite has the '
                       'name of another flag; give it another name.')
    _define_flag(option.name, option.kind, option.default,
                 ' '.join(option.help.split()))
    _SUITE_FLAGS.append(option.name)
    defined.append(option.name)
  return defined


def _run_flag_names() -> List[str]:
  """The flags of the run options: `RunOptions`' and the suites' own."""
  return _flag_names(RunOptions) + _SUITE_FLAGS


def _run_options(values: Mapping[str, Any], **given) -> RunOptions:
  """The `RunOptions` of the flags' `values` (by name), with `given`."""
  return RunOptions(**{
      **{name: values[name] for name in _flag_names(RunOptions)},
      'suite_options': {name: values[name] for name in _SUITE_FLAGS},
      **given})


def define_flags(config_class, presets: Mapping[str, Preset],
                 default_env: str, default_plugins: str = ''):
  """Defines the program's flags: `--preset`, `--list_presets`, the run
  options (with the program's default `--env` and `--plugins`) and the
  fields of `config_class`."""
  flags.DEFINE_string(
      'preset', None, 'A named configuration; flags given explicitly win '
      'over its values (--list_presets shows them). ' + ' '.join(
          f'"{name}": {preset.description}'
          for name, preset in presets.items()))
  flags.DEFINE_bool('list_presets', False,
                    'Print every preset with its values, and exit.')
  flags.DEFINE_bool('print_config', False,
                    'Print the value of every flag this launch would run '
                    'with (after --preset and a resumed run\'s record), as '
                    'JSON, and exit without creating anything.')
  _define_flags(RunOptions, {'env': default_env, 'plugins': default_plugins})
  define_suite_flags()
  _define_flags(config_class, {})
  _define_flags(CloudOptions, {})


def cloud_options() -> CloudOptions:
  """The launch's `CloudOptions`, from their flags (per launch: a run's
  record does not keep them)."""
  return CloudOptions(**{name: FLAGS[name].value
                         for name in _flag_names(CloudOptions)})


def _check_cloud_plan(options: RunOptions, config) -> Optional[machines.Plan]:
  """Under vertex_ai: the launch's plan, every node group's request checked
  (see `launch.cloud.machines`); None for other launch types,
  which refuse --dry_run. Raises ValueError naming the flag and the fix."""
  cloud_flags = cloud_options()
  if options.launch_type != 'vertex_ai':
    if cloud_flags.dry_run:
      raise ValueError('--dry_run plans a launch on Google Cloud: give it '
                       'with --lp_launch_type=vertex_ai.')
    return None
  cloud_flags.validate()
  packaging.check_cloud_dependencies()
  # Each replay replica holds one shard; None: a program without replay.
  replay_capacity = config.replay_shard_capacity()
  env_kind = options.env.split(':')[0]  # Its suite's name.
  item_bytes = None
  if replay_capacity is not None:
    item_bytes = config.replay_item_bytes(suites.get(env_kind))
  requests = machines.requests(cloud_flags, env_kind, replay_capacity,
                               item_bytes)
  shards = 0 if replay_capacity is None else config.replay_shards
  machines.check_plan(requests, list(node_groups.counts(options, shards)))
  advice = ''
  if replay_capacity is not None:
    advice = capacity.replay_advice(env_kind, options.num_actors,
                                    options.envs_per_actor,
                                    config.replay_shards)
  return machines.Plan(requests, cloud_flags, advice)


def _check_field_names(config_class, presets: Mapping[str, Preset]):
  """A preset naming no flag is a mistake in its module: said at once."""
  known = set(_run_flag_names() + _flag_names(config_class))
  for name, preset in presets.items():
    unknown = sorted(set(preset.values) - known)
    if unknown:
      raise ValueError(f'Preset {name!r} sets unknown flags {unknown}.')


def format_presets(presets: Mapping[str, Preset]) -> str:
  """Every preset, its description and values, as `--list_presets` prints
  them."""
  lines = []
  for name, preset in presets.items():
    lines.append(f'{name}: {preset.description}')
    lines.append('  ' + ' '.join(f'--{flag}={_flag_text(value)}'
                                 for flag, value in preset.values.items()))
  return '\n'.join(lines)


def presets_table() -> str:
  """docs/running.md's table of every registered agent's presets, made
  from the registry (`agents.registry`): their names and descriptions."""
  from agents import registry  # pylint: disable=g-import-not-at-top
  rows = ['| program | preset | what it is |', '|---|---|---|']
  for name in registry.names():
    for preset, value in registry.get(name).presets.items():
      rows.append(f'| `{name}` | `{preset}` | '
                  f'{value.description.replace("|", "&#124;")} |')
  return '\n'.join(rows)


def run_options_table() -> str:
  """docs/running.md's table of the run options, made from `RunOptions` (its
  fields' defaults and docstrings) and then from the built-in suites' own
  (`suites.RunOption`), so that the page cannot drift from the flags."""
  docs = dict(_field_docstrings(RunOptions), env=env_help(built_in_only=True))
  options = [(field.name, field.default, docs[field.name])
             for field in _flag_fields(RunOptions)]
  options += [(option.name, option.default, ' '.join(option.help.split()))
              for option in suites.run_options(built_in_only=True)]
  rows = ['| flag | default | meaning |', '|---|---|---|']
  for name, default, meaning in options:
    default = '(the program\'s)' if name == 'env' else _flag_text(default)
    meaning = meaning.replace('<', '&lt;').replace('>', '&gt;')
    rows.append(f'| `--{name}` | {default} | {meaning} |')
  return '\n'.join(rows)


def _flag_text(value) -> str:
  return 'none' if value is None else f'{value:g}' if isinstance(
      value, float) else str(value)


def _workdir_path(program_name: str, workdir: Optional[str]) -> str:
  """The run's directory: --workdir, or a new one under ~/apex_runs."""
  workdir = workdir or os.path.join(
      '~', 'apex_runs', program_name,
      datetime.datetime.now().strftime('%Y%m%d-%H%M%S'))
  return os.path.abspath(os.path.expanduser(workdir))


def _workdir(program_name: str, workdir: Optional[str],
             access: str = 'user') -> str:
  """The run's directory, created, and readable as `access` allows
  (`--workdir_access`; an existing directory too: its files are the run's);
  raises ValueError if it cannot be."""
  workdir = _workdir_path(program_name, workdir)
  try:
    os.makedirs(workdir, exist_ok=True)
  except OSError as error:
    raise ValueError(f'--workdir={workdir} cannot be created ({error}); '
                     'choose a directory you can write to.') from error
  if not os.access(workdir, os.W_OK | os.X_OK):
    raise ValueError(f'--workdir={workdir} is not writable; choose a '
                     'directory you can write to.')
  mode = 0o777 & ~WORKDIR_UMASKS[access]
  if os.stat(workdir).st_mode & 0o777 != mode:
    try:
      os.chmod(workdir, mode)
    except OSError as error:
      raise ValueError(f'--workdir={workdir} cannot be made mode '
                       f'{mode:o} (--workdir_access={access}): {error}; '
                       'choose a directory of your own.') from error
  return workdir


def _recorded_values(workdir: Optional[str], program_name: str,
                     names) -> Dict[str, Any]:
  """The flag values the run in `workdir` last launched with (run.json);
  empty if there is none, or if it is another program's run (which the
  manifest's check then refuses). Raises BadRecord for a run.json that is
  not a run record."""
  if not workdir:
    return {}
  if not storage.is_cloud(workdir):
    workdir = os.path.abspath(os.path.expanduser(workdir))
  try:
    manifest = run_manifest.read_manifest(workdir)
  except storage.Unreachable:
    if not FLAGS.dry_run:
      raise
    return {}  # A plan goes on; `_check_record` says why.
  except run_manifest.BadRecord:
    raise  # Not a new run: refused, never written over.
  except ValueError:  # No run.json: a new run.
    return {}
  if manifest.get('program') != program_name:
    return {}
  # Runs recorded before run.json held every flag: their checkpointed
  # fields; the environment only if its recorded name is a flag's value.
  recorded = dict(manifest.get('config', {}))
  if 'flags' in manifest:
    recorded.update(manifest['flags'])
  elif 'env' in manifest:
    recorded['env'] = manifest['env']
  return {name: value for name, value in recorded.items() if name in names}


def resolve_flags(program_name: str, config_class,
                  presets: Mapping[str, Preset]) -> Dict[str, Any]:
  """Every flag's value after presets and the workdir's record (see the
  module docstring). Raises ValueError for an unknown preset."""
  names = _run_flag_names() + _flag_names(config_class)
  values = {name: FLAGS[name].value for name in names}
  layers = [_recorded_values(FLAGS.workdir, program_name, names)]
  if FLAGS.preset is not None:
    if FLAGS.preset not in presets:
      raise ValueError(f'--preset={FLAGS.preset} is not a preset of '
                       f'{program_name}; choose one of '
                       f'{", ".join(sorted(presets))} (--list_presets shows '
                       'their values).')
    layers.append(presets[FLAGS.preset].values)
  for layer in layers:
    for name, value in layer.items():
      if not FLAGS[name].present and name not in RunOptions.PER_LAUNCH:
        values[name] = value
  return values


# A machine with fewer cores runs a program's defaults (the paper's
# configuration: Ape-X's 360 actors on a core each, A3C's 16 threads)
# too slowly to be of use.
PAPER_CORES = 16


def small_machine_notice(title: str, presets: Mapping[str, Preset],
                         small_preset: Optional[str], cores: int,
                         launch_type: str) -> Optional[str]:
  """What a launch without `--preset` on this machine says first: that it
  runs the program's defaults, made for far more cores than `cores`, and
  the preset that fits (`small_preset`, with its description); None where
  nothing needs saying (a cloud job, a machine of `PAPER_CORES` or more,
  an agent without a small preset)."""
  if (small_preset is None or cores >= PAPER_CORES or
      launch_type not in private_network.LAUNCH_TYPES):
    return None
  return (f'Note: without --preset this runs {title}\'s defaults, the '
          f'paper\'s configuration, made for a machine of many more cores '
          f'than this one\'s {cores}: expect it to learn slowly here. The '
          f'preset that fits a few cores is --preset={small_preset}: '
          f'{presets[small_preset].description}')


def build_program(program_name: str, config_class,
                  make_builder: Callable[..., builders.Builder],
                  resolve_environment, presets: Mapping[str, Preset],
                  title: str = '', small_preset: Optional[str] = None):
  """Validates the flags and returns (program, run options, environment,
  the Vertex AI plan or None), for `launcher.launch`.

  Every bad flag or environment is reported here, before any process starts
  (exit status 2, no traceback), and before the agent's builder, and with it
  TensorFlow, is loaded (`make_builder(config, environment)`): the checks use the config class
  (`agents.config.AgentConfig`), the run options and the environment's spec.
  """
  if FLAGS.list_presets:
    print(format_presets(presets))
    sys.exit(0)
  try:
    _check_field_names(config_class, presets)
    if (storage.is_cloud(FLAGS.workdir) and FLAGS.lp_launch_type != 'vertex_ai'
        and not FLAGS.print_config):
      # Said before its record is read: a launch on this machine is in a
      # network of its own (`private_network`), which reaches no bucket.
      raise ValueError(
          f'--workdir={FLAGS.workdir} is on Cloud Storage, which only the '
          'nodes of a Vertex AI job reach as files: give a local directory, '
          'or --lp_launch_type=vertex_ai.')
    values = resolve_flags(program_name, config_class, presets)
    # Suites and agents of the user's own code, registered before anything
    # asks for them. A suite named only by a resumed run's record gets its
    # run options' flags now, and their values from the record.
    plugins.import_plugins(values['plugins'])
    if define_suite_flags():
      values = resolve_flags(program_name, config_class, presets)
    config = config_class(**{name: values[name]
                             for name in _flag_names(config_class)})
    config.validate()
    options = _run_options(values, workdir=None,
                           launch_type=FLAGS.lp_launch_type)
    options.validate()
    # What an agent cannot run with (for one, a replay shard that no
    # environment writes to).
    config.check_program(options.program_shape)
    plan = _check_cloud_plan(options, config)
    environment = resolve_environment(options.env)
    config.check_environment(environment)
    recorded = {name: value for name, value in values.items()
                if name not in RunOptions.PER_LAUNCH}
    if FLAGS.print_config:
      print(json.dumps(recorded, indent=2, sort_keys=True))
      sys.exit(0)
    network = private_network.check_launch(options.launch_type,
                                           options.allow_network_exposure)
    if options.launch_type in private_network.LAUNCH_TYPES:
      # Every file and directory the launcher and its nodes create from now.
      os.umask(WORKDIR_UMASKS[options.workdir_access])
    if storage.is_cloud(FLAGS.workdir):
      # On Cloud Storage: its records are read (and, unless this is a plan,
      # written) here through the Cloud Storage API; the nodes reach the
      # rest through their replica's mount (`storage.node_path`).
      options = dataclasses.replace(options,
                                    workdir=FLAGS.workdir.rstrip('/'))
      resuming = _check_record(options.workdir, program_name, environment,
                               config, recorded)
    elif plan is not None and FLAGS.dry_run:
      # A plan for a local directory (the Vertex AI emulator's runs):
      # nothing is created here.
      options = dataclasses.replace(
          options, workdir=_workdir_path(program_name, FLAGS.workdir))
      resuming = False
    elif plan is not None:
      raise ValueError(
          f'--workdir={FLAGS.workdir} is not on Cloud Storage: the nodes of a '
          'Vertex AI job run on machines of their own, and their files must '
          'go where all of them (and you) can reach them. Give '
          '--workdir=gs://<bucket>/<path> (or --dry_run to plan).')
    else:
      options = dataclasses.replace(
          options, workdir=_workdir(program_name, FLAGS.workdir,
                                    options.workdir_access))
      resuming = _check_record(options.workdir, program_name, environment,
                               config, recorded)
  except ValueError as error:
    fail(str(error))
  if network:
    print(network, file=sys.stderr if network.startswith('warning') else
          sys.stdout, flush=True)
  notice = None if resuming or FLAGS.preset is not None else (
      small_machine_notice(title or program_name, presets, small_preset,
                           len(os.sched_getaffinity(0)), options.launch_type))
  if notice:
    print(notice, flush=True)
  for note in config.start_notes(options.launch_type):
    print(note, file=sys.stderr if note.startswith('warning') else sys.stdout,
          flush=True)
  if resuming:
    given = sorted(name for name in recorded if FLAGS[name].present)
    print(('This plan resumes' if FLAGS.dry_run else 'Resuming') +
          f' the run in {options.workdir} from its checkpoints, with '
          'the values it last ran with (run.json)' +
          (f' but {", ".join(f"--{name}" for name in given)} as given now'
           if given else '') + '.')
  from launch import program as program_lib  # pylint: disable=g-import-not-at-top
  builder = make_builder(config, environment).for_program(
      options.program_shape)
  if plan is not None and isinstance(builder, builders.ReplayBuilder):
    plan, options = _plan_parameters(plan, options, builder)
  program = program_lib.make_program(builder, options)
  return program, options, environment, plan


def _plan_parameters(plan: machines.Plan, options: RunOptions, builder):
  """The plan with what sending the parameters costs the learner and the
  variable cachers, and the options with the cachers it runs with: those
  given (--variable_cachers), or the fewest that keep every sender within
  half its network egress cap (`capacity.parameter_advice`)."""
  from launch import variable_cache  # pylint: disable=g-import-not-at-top
  from launch.cloud import compatibility  # pylint: disable=g-import-not-at-top

  def machine(group):
    name = plan.requests[group].machine
    return name, compatibility.machine_shape(name)[0]

  given = (options.variable_cachers if FLAGS['variable_cachers'].present
           else None)
  cachers, text = capacity.parameter_advice(
      builder.actor_parameter_bytes(), options.num_actors,
      options.envs_per_actor, builder.variable_update_period,
      machine('learner'), machine('cacher'), given,
      variable_cache.CACHER_PERIOD_SECONDS)
  return (dataclasses.replace(plan, parameters=text),
          dataclasses.replace(options, variable_cachers=cachers))


def _warn_unread_record(workdir: str, error: Exception):
  sys.stderr.write(f'warning: the record of {workdir} could not be read '
                   f'({error}); this plan uses the flags as given, not the '
                   'values the run there last launched with.\n')


def _check_record(workdir: str, program_name: str, environment, config,
                  recorded: Dict[str, Any]) -> bool:
  """Refuses a workdir holding a run this launch cannot resume, and (unless
  planning) records this launch in its `run.json`; True when it resumes
  one. A plan that cannot reach Cloud Storage says so and goes on (a plan
  needs no credentials)."""
  try:
    return run_manifest.check_or_write_manifest(
        workdir, program_name, environment.name,
        environment.frames_per_step, config, config.CHECKPOINT_FIELDS,
        flags=recorded, preset=FLAGS.preset, write=not FLAGS.dry_run,
        # A run recorded before a flag existed ran as its default does.
        defaults={name: FLAGS[name].default for name in recorded
                  if name in FLAGS})
  except storage.Unreachable as error:
    if not FLAGS.dry_run:
      raise
    _warn_unread_record(workdir, error)
    return False


def fail(message: str):
  """Reports a usage error without a traceback and exits with status 2."""
  sys.stderr.write(f'error: {message}\n')
  sys.exit(2)
