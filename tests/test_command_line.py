"""The programs' command line: presets, `none`, resuming with `--workdir`
alone, and the table of run options in docs/running.md.

Each check runs a program the way users run it; `--print_config` makes it
print the values a launch would use and exit before anything starts.
"""

import dataclasses
import json
import os
import subprocess
import sys

import pytest

import helpers
from agents.apex_c51.config import ApeXC51Config
from agents.apex_c51.presets import PRESETS as C51_PRESETS
from agents.apex_dpg.config import ApeXDPGConfig
from agents.apex_dpg.presets import PRESETS as DPG_PRESETS
from agents.apex_dqn.config import ApeXDQNConfig
from agents.apex_dqn.presets import PRESETS as DQN_PRESETS
from agents.d4pg.config import D4PGConfig
from agents.d4pg.presets import PRESETS as D4PG_PRESETS
from agents.envs import suites
from launch.options import RunOptions

PROGRAMS = {'apex_dqn': (ApeXDQNConfig, DQN_PRESETS, 'atari:Pong'),
            'apex_c51': (ApeXC51Config, C51_PRESETS, 'atari:Pong'),
            'apex_dpg': (ApeXDPGConfig, DPG_PRESETS,
                         'control:manipulator:bring_ball'),
            'd4pg': (D4PGConfig, D4PG_PRESETS,
                     'control:cheetah:run:repeat=4')}


def _program(name, *flags, timeout=120):
  return helpers.run_script(name, *flags, timeout=timeout)


def _config(name, *flags):
  result = _program(name, '--print_config', *flags)
  assert result.returncode == 0, result.stdout[-3000:]
  return json.loads(result.stdout[result.stdout.index('{'):])


def _defaults(name):
  """Every recorded flag's default (not the per-launch ones), from the
  dataclasses and the suites' run options (not from the program)."""
  config_class, _, default_env = PROGRAMS[name]
  values = {field.name: field.default
            for dataclass in (RunOptions, config_class)
            for field in dataclasses.fields(dataclass)
            if field.metadata.get('flag', True)
            and field.name not in RunOptions.PER_LAUNCH}
  values.update((option.name, option.default)
                for option in suites.run_options())
  values['env'] = default_env
  return values


@pytest.mark.parametrize('name', sorted(PROGRAMS))
def test_without_preset_every_value_is_its_default(name):
  assert _config(name) == _defaults(name)


@pytest.mark.parametrize('name', sorted(PROGRAMS))
def test_a_preset_sets_its_values_and_explicit_flags_win(name):
  presets = PROGRAMS[name][1]
  expected = {**_defaults(name), **presets['cartpole'].values}
  assert expected['samples_per_insert'] is not None  # What `none` undoes.
  expected.update(num_actors=3, samples_per_insert=None, seed=11)
  assert _config(name, '--preset=cartpole', '--num_actors=3',
                 '--samples_per_insert=none', '--seed=11') == expected


@pytest.mark.parametrize('name', sorted(PROGRAMS))
def test_list_presets_shows_every_preset_with_its_values(name):
  result = _program(name, '--list_presets')
  assert result.returncode == 0, result.stdout[-3000:]
  for preset_name, preset in PROGRAMS[name][1].items():
    assert f'{preset_name}: {preset.description}' in result.stdout
    for flag in preset.values:
      assert f'--{flag}=' in result.stdout


def test_an_unknown_preset_is_refused_with_the_known_ones(tmp_path):
  workdir = tmp_path / 'run'
  result = _program('apex_dqn', '--preset=cartpol', f'--workdir={workdir}')
  assert result.returncode == 2, result.stdout[-3000:]
  assert ('--preset=cartpol is not a preset of apex_dqn; choose one of '
          'atari_small, cartpole, cartpole_smoke, minatar, '
          'paper') in result.stdout
  assert 'Traceback' not in result.stdout
  assert not workdir.exists()  # Refused before anything was made.


def test_the_run_options_table_is_made_from_the_dataclass():
  from scripts import update_flags_table  # pylint: disable=g-import-not-at-top
  with open(update_flags_table.PAGE) as f:
    text = f.read()
  assert update_flags_table.with_current_table(text) == text, (
      'The run options in docs/running.md are out of date: run '
      '.venv/bin/python scripts/update_flags_table.py')
  for field in dataclasses.fields(RunOptions):
    if field.metadata.get('flag', True):
      assert f'| `--{field.name}` |' in text


def _counts(workdir):
  with open(os.path.join(workdir, 'stop.json')) as f:
    return json.load(f)['counts']


@pytest.mark.slow
def test_a_relaunch_naming_only_the_workdir_resumes_with_its_values(tmp_path):
  workdir = tmp_path / 'run'
  first = ['--preset=cartpole_smoke', '--num_actors=1', '--seed=7',
           '--batch_size=16', '--max_actor_steps=600',
           '--checkpoint_every=1', '--replay_checkpoint_every=0']
  result = _program('apex_dqn', '--lp_launch_type=local_mt',
                    f'--workdir={workdir}', *first, timeout=600)
  assert result.returncode == 0, result.stdout[-3000:]
  launched = _config('apex_dqn', '--preset=cartpole_smoke', '--num_actors=1',
                     '--seed=7', '--batch_size=16', '--max_actor_steps=600',
                     '--checkpoint_every=1', '--replay_checkpoint_every=0')
  # The workdir alone: every value as the first launch had it.
  assert _config('apex_dqn', f'--workdir={workdir}') == launched
  # A flag the checkpoints depend on, given with another value: refused.
  refused = _program('apex_dqn', f'--workdir={workdir}',
                     '--mlp_hidden_sizes=64')
  assert refused.returncode == 2, refused.stdout[-3000:]
  assert "--mlp_hidden_sizes='32' (now '64')" in refused.stdout
  # Other flags given explicitly win, and the relaunch resumes: the counts
  # go on from the first launch's to the new limit.
  stopped_at = _counts(workdir)['actor_steps']
  limit = stopped_at + 600
  with open(workdir / 'checkpoints' / 'counter' / 'counts.json') as f:
    saved = {name: int(value) for name, value in json.load(f)['counts'].items()}
  result = _program('apex_dqn', '--lp_launch_type=local_mt',
                    f'--workdir={workdir}', f'--max_actor_steps={limit}',
                    timeout=600)
  assert result.returncode == 0, result.stdout[-3000:]
  assert 'Resuming the run in' in result.stdout
  assert 'but --max_actor_steps as given now' in result.stdout
  assert _counts(workdir)['actor_steps'] >= limit
  with open(workdir / 'run.json') as f:
    recorded = json.load(f)
  assert recorded['flags'] == {**launched, 'max_actor_steps': limit}
  assert recorded['preset'] is None  # This launch named none.
  # The relaunch changed one flag: run.json says which, and the counts the
  # first launch's counter saved last, which the relaunch resumed from.
  change, = recorded['flag_changes']
  assert change['changed'] == {'max_actor_steps': [600, limit]}
  assert change['counts'] == saved


def _imports(*command):
  """Runs `python -X importtime <command>`: (the process, the names of the
  modules it imported, from the interpreter's own import log)."""
  result = subprocess.run([sys.executable, '-X', 'importtime', *command],
                          cwd=helpers.ROOT, capture_output=True, text=True,
                          timeout=120)
  imported = {line.split('|')[-1].strip()
              for line in result.stderr.splitlines()
              if line.startswith('import time:')}
  return result, imported


def test_the_import_log_sees_tensorflow_where_it_is_imported():
  # What the next test's check rests on.
  result, imported = _imports('-c', 'from agents.replay import tables')
  assert result.returncode == 0, result.stderr[-3000:]
  assert 'tensorflow' in imported and 'reverb' in imported


@pytest.mark.parametrize('name, flags, said', [
    ('apex_dqn', ['--num_actors=0'],
     '--num_actors=0 is out of range: it must be >= 1.'),
    ('apex_dqn', ['--replay_shards=3', '--num_actors=2'],
     '--replay_shards=3 with --num_actors=2: each actor writes'),
    ('apex_dpg', ['--batch_size=0'], '--batch_size=0 is out of range'),
    ('apex_dqn', ['--atari_evaluation=greedy'],
     '--atari_evaluation=greedy is out of range: it must be sticky or noops.'),
    ('apex_dqn', ['--atari_training=random'],
     '--atari_training=random is out of range: it must be deterministic or '
     'sticky.'),
    ('apex_dqn', ['--atari_noop_starts=-1'],
     '--atari_noop_starts=-1 is out of range: it must be >= 0 (0: none).'),
    ('d4pg', ['--num_atoms=1'], '--num_atoms=1 is out of range'),
    ('apex_c51', ['--v_min=10', '--v_max=-10'],
     '--v_max=-10.0 is out of range: it must be above --v_min (10.0).'),
    ('d4pg', ['--v_min=5', '--v_max=-5'], '--v_max=-5.0 is out of range'),
    ('d4pg', ['--env=gym:Pendulum-v1'],
     '--v_min and --v_max: gym:Pendulum-v1 has no known reward range'),
    ('a3c', ['--envs_per_actor=2'], '--envs_per_actor=2: an A3C worker'),
    ('a3c', ['--t_max=0'], '--t_max=0 is out of range'),
])
def test_a_refused_launch_answers_before_tensorflow_loads(tmp_path, name,
                                                          flags, said):
  program = helpers.program_path(name)
  workdir = tmp_path / 'run'
  result, imported = _imports(program, *flags, f'--workdir={workdir}')
  assert result.returncode == 2, result.stderr[-3000:]
  errors = [line for line in result.stderr.splitlines()
            if not line.startswith('import time:')]
  assert errors[0].startswith('error: '), errors
  assert said in errors[0]
  assert 'tensorflow' not in imported and 'reverb' not in imported
  assert not workdir.exists()
  # The presets and a launch's values are printed without it too.
  for flag in ('--list_presets', '--print_config'):
    result, imported = _imports(program, flag)
    assert result.returncode == 0, result.stderr[-3000:]
    assert 'tensorflow' not in imported


def test_a_launch_without_a_preset_on_a_small_machine_names_the_one_that_fits():
  # Each program's defaults are the paper's configuration; on a machine of
  # a few cores a launch without --preset says so first, and names the
  # preset sized for it (each agent's registry entry), with its
  # description; on a machine of the paper's size, or for a cloud job,
  # nothing.
  from agents import registry
  from launch.console import command_line
  for name, preset in (('apex_dqn', 'atari_small'),
                       ('apex_c51', 'atari_small'),
                       ('apex_dpg', 'control_small'), ('d4pg', 'dmc500k'),
                       ('a3c', 'cartpole')):
    agent = registry.get(name)
    assert agent.small_machine_preset == preset
    notice = command_line.small_machine_notice(
        agent.title, agent.presets, agent.small_machine_preset, 2,
        'local_mp')
    assert notice.startswith(f'Note: without --preset this runs '
                             f'{agent.title}\'s defaults, the paper\'s '
                             'configuration'), notice
    assert 'than this one\'s 2:' in notice
    assert notice.endswith(f'--preset={preset}: '
                           f'{agent.presets[preset].description}')
    assert command_line.small_machine_notice(
        agent.title, agent.presets, preset, command_line.PAPER_CORES,
        'local_mp') is None
    assert command_line.small_machine_notice(
        agent.title, agent.presets, preset, 2, 'vertex_ai') is None


def test_the_env_help_lists_every_registered_suites_forms(monkeypatch):
  # Made from the suites, not written by hand: a suite of your own is
  # listed once registered; docs/running.md's table lists the built-in ones.
  from launch.console import command_line  # pylint: disable=g-import-not-at-top
  toy = suites.Suite(name='toyhelp', resolve=lambda name, action: None,
                     forms={'continuous': 'toyhelp:<n> (n lights)'})
  monkeypatch.setitem(suites._SUITES, 'toyhelp', toy)  # pylint: disable=protected-access
  listed = command_line.env_help()
  for name in suites.built_in_names():
    for action, form in suites.get(name).forms.items():
      assert f'{" ".join(form.split())}, for {action} actions' in listed
  assert 'toyhelp:<n> (n lights), for continuous actions.' in listed
  assert 'toyhelp' not in command_line.env_help(built_in_only=True)
