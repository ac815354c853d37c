"""docs/extending.md, run as a user of it would: a suite and its network, and
an agent, in modules of their own outside this repository's packages.

Each block of code the page shows under `<!-- file: <path> -->` is written
to that path in a directory of the test's own, which is the current
directory of every command (as "with that file in the current directory"
says); the programs are this repository's, named by their path.

* The suite's refusals come before anything starts: a bad name of the
  suite, with every accepted form (the plug-in's among them); an unknown
  plug-in module; the suite's name without the plug-in.
* The suite's run option, `--signal_steps`: a flag of the program that
  imports the suite, its bad value refused before anything starts, its
  value recorded (and read back from the record of a run resumed with
  `--workdir` alone), and passed to the suite's environments, as a node
  that unpickles the spec makes them.
* The suite and its network, under `local_mp`, through
  `programs/apex_dqn.py --plugins=signal_suite`: every node's process
  takes the suite, and the agent learns the task (a mean return of 9 of
  10 over 4 evaluation episodes, where a random policy has 2.5: by the
  binomial of 40 steps with p = 1/4, a random policy reaches 36 right
  with probability below 1e-16). `programs/evaluate.py` evaluates the run,
  taking the suite from the run's record.
* The same suite in a Vertex AI job packaged by `--dry_run`, which the
  emulator runs: each replica runs from its container's code directory
  with no PYTHONPATH, so the suite reaches it only as the package's copy.
* The agent: its program, three lines naming it, runs under `local_mp`,
  and `programs/evaluate.py` restores its learner's checkpoint into its
  plain Q-network (a dueling network's checkpoint would not fit it).
"""

import json
import os
import re
import subprocess
import sys

import pytest

from tests import helpers
from tests.test_cloud import _emulate
from tests.test_cloud import _environment
from tests.test_cloud import _replica_log

PAGE = os.path.join(helpers.ROOT, 'docs', 'extending.md')
BLOCK = re.compile(r'<!-- file: (\S+) -->\n```python\n(.*?)```', re.S)


def write_blocks(directory) -> list:
  """Writes each of the page's files into `directory`; their paths."""
  with open(PAGE) as f:
    blocks = BLOCK.findall(f.read())
  assert blocks, f'no <!-- file: --> blocks in {PAGE}'
  paths = []
  for path, code in blocks:
    target = directory / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(code)
    paths.append(path)
  return paths


@pytest.fixture
def user(tmp_path):
  """A user's directory holding the page's files."""
  directory = tmp_path / 'user'
  directory.mkdir()
  assert write_blocks(directory) == [
      'signal_suite.py', 'plain_dqn/__init__.py', 'plain_dqn/networks.py',
      'plain_dqn_program.py']
  return directory


def _run_in(directory, command, timeout=600):
  return helpers.run(command, timeout, cwd=directory)


@pytest.mark.parametrize('flags, says', [
    (['--plugins=signal_suite', '--env=signal:1'],
     "signal:<n> takes a number of lights, 2 or more, not '1'"),
    (['--plugins=no_such_plugin', '--env=signal:4'],
     "--plugins=no_such_plugin: cannot import 'no_such_plugin'"),
    (['--env=signal:4'], "unknown kind 'signal'"),
])
def test_a_plugged_suites_refusals_come_before_anything_starts(
    user, tmp_path, flags, says):
  workdir = tmp_path / 'run'
  result = _run_in(user, helpers.program_command(
      'apex_dqn', f'--workdir={workdir}', *flags), timeout=120)
  assert result.returncode == 2, result.stdout[-3000:]
  assert says in result.stdout, result.stdout[-3000:]
  assert 'Traceback' not in result.stdout
  assert not workdir.exists()
  if 'signal_suite' in flags[0]:  # Its form beside the built-in ones.
    for form in ('signal:<n> (n lights, 2 or more)', 'atari:<Game>',
                 'minatar:<game>', 'gym:<id>'):
      assert form in result.stdout, form


def test_a_plugged_suites_run_option_is_a_flag_checked_and_passed_on(
    user, tmp_path):
  workdir = tmp_path / 'run'
  flags = ['--plugins=signal_suite', '--env=signal:4']
  refused = _run_in(user, helpers.program_command(
      'apex_dqn', f'--workdir={workdir}', *flags, '--signal_steps=0'),
                    timeout=120)
  assert refused.returncode == 2, refused.stdout[-3000:]
  assert ('error: --signal_steps=0 is out of range: it must be >= 1.'
          in refused.stdout), refused.stdout[-3000:]
  assert 'Traceback' not in refused.stdout
  assert not workdir.exists()

  def config(*given):
    result = _run_in(user, helpers.program_command(
        'apex_dqn', '--print_config', *given), timeout=120)
    assert result.returncode == 0, result.stdout[-3000:]
    return json.loads(result.stdout[result.stdout.index('{'):])

  assert config(*flags)['signal_steps'] == 10
  assert config(*flags, '--signal_steps=5')['signal_steps'] == 5
  # A run's record naming the plug-in and the option's value: a relaunch
  # naming only its workdir takes both.
  workdir.mkdir()
  (workdir / 'run.json').write_text(json.dumps({
      'program': 'apex_dqn', 'env': 'signal:4', 'config': {},
      'flags': {'plugins': 'signal_suite', 'env': 'signal:4',
                'signal_steps': 7}}))
  resumed = config(f'--workdir={workdir}')
  assert (resumed['plugins'], resumed['signal_steps']) == ('signal_suite', 7)

  # The environments a node makes from the unpickled spec, given the run
  # options: 5 steps an episode.
  code = (
      'import cloudpickle\n'
      'from agents import plugins\n'
      'from agents.envs import suites\n'
      'from launch.options import RunOptions\n'
      "plugins.import_plugins('signal_suite')\n"
      "options = RunOptions(env='signal:4', plugins='signal_suite',\n"
      "                     suite_options={'signal_steps': 5})\n"
      'options.validate()\n'
      "spec = cloudpickle.loads(cloudpickle.dumps(suites.resolve(\n"
      "    options.env, 'discrete')))\n"
      'environment = spec.make_environment(\n'
      '    seed=0, **options.environment_options())\n'
      'timestep, steps = environment.reset(), 0\n'
      'while not timestep.last():\n'
      '  timestep, steps = environment.step(0), steps + 1\n'
      'print(spec.suite.take_options(options.environment_options()), steps)\n')
  result = _run_in(user, [sys.executable, '-c', code], timeout=120)
  assert result.returncode == 0, result.stdout[-3000:]
  assert result.stdout.strip().splitlines()[-1] == "{'signal_steps': 5} 5"


@pytest.mark.slow  # A program under local_mp, learning.
def test_a_suite_of_your_own_learns_under_local_mp_and_evaluates(
    user, tmp_path):
  workdir = tmp_path / 'run'
  result = _run_in(user, helpers.program_command(
      'apex_dqn', f'--workdir={workdir}', '--plugins=signal_suite',
      '--env=signal:4', '--preset=cartpole_smoke', '--learning_rate=0.001',
      '--samples_per_insert=8', '--max_actor_steps=5000',
      '--evaluation_period=100'))
  assert result.returncode == 0, result.stdout[-5000:]
  record = json.loads((workdir / 'run.json').read_text())
  assert record['env'] == 'signal:4'
  assert record['flags']['plugins'] == 'signal_suite'
  counts = json.loads((workdir / 'stop.json').read_text())['counts']
  assert counts['actor_steps'] >= 5000 and counts['learner_steps'] > 0
  # The actors and the evaluator played the suite's episodes: 10 steps.
  for label, logged in [*helpers.actors_rows(workdir, 2).items(),
                        ('evaluator', helpers.rows(workdir, 'evaluator'))]:
    lengths = {int(row['episode_length']) for row in logged}
    assert lengths == {10}, (label, lengths)
  # What it learned, read from its final policy (the learner's steps are
  # tied to the actors' by --samples_per_insert, so the policy is the same
  # however fast each node ran; the evaluator's rounds are not: how many it
  # plays before the step limit depends on its pace). A step whose action
  # names the lit light earns 1: 10 at most in an episode.
  evaluation = _run_in(user, helpers.script_command(
      'evaluate', f'--workdir={workdir}', '--episodes=10',
      f'--output={tmp_path / "evaluation.json"}'))
  assert evaluation.returncode == 0, evaluation.stdout[-3000:]
  assert 'apex_dqn on signal:4' in evaluation.stdout
  evaluated = json.loads((tmp_path / 'evaluation.json').read_text())
  assert evaluated['lengths'] == [10] * 10
  assert evaluated['mean'] >= 9.0, evaluated['returns']


@pytest.mark.slow  # Packages a Vertex AI job and runs it in the emulator.
def test_a_suite_of_your_own_goes_into_a_vertex_ai_job(user, tmp_path):
  (tmp_path / 'home').mkdir()
  job, workdir = tmp_path / 'job', tmp_path / 'run'
  plan = subprocess.run(
      helpers.program_command(
          'apex_dqn', '--dry_run', f'--package_dir={job}',
          f'--workdir={workdir}', '--plugins=signal_suite', '--env=signal:4',
          '--preset=cartpole_smoke', '--samples_per_insert=4',
          '--max_actor_steps=2000', launch_type='vertex_ai'),
      cwd=user, capture_output=True, text=True, timeout=600,
      env=_environment(tmp_path / 'home'))
  assert plan.returncode == 0, plan.stderr[-3000:]
  copies = sorted(job.glob('**/signal_suite.py'))
  assert copies and all(copy.read_text() == (user / 'signal_suite.py')
                        .read_text() for copy in copies), copies
  result = _emulate(job)
  assert result.returncode == 0, result.stdout[-5000:]
  record = json.loads((workdir / 'stop.json').read_text())
  assert not record['failed'] and record['counts']['actor_steps'] >= 2000
  assert record['counts']['learner_steps'] > 0
  lengths = {int(row['episode_length'])
             for row in helpers.rows(workdir, 'actor')}
  assert lengths == {10}, lengths
  assert 'Ending the job (succeeded).' in _replica_log(job, 'coordinator')


@pytest.mark.slow  # A program under local_mp.
def test_an_agent_of_your_own_runs_and_its_checkpoint_evaluates(
    user, tmp_path):
  workdir = tmp_path / 'run'
  result = _run_in(user, [
      sys.executable, str(user / 'plain_dqn_program.py'),
      '--lp_launch_type=local_mp', f'--workdir={workdir}',
      '--preset=cartpole_smoke', '--samples_per_insert=4',
      '--max_actor_steps=1500'])
  assert result.returncode == 0, result.stdout[-5000:]
  assert ('Ape-X DQN (plain Q-network) on gym:CartPole-v1 with 2 actors'
          in result.stdout), result.stdout[:1000]
  assert f'python {user / "plain_dqn_program.py"} --workdir={workdir} ' \
      'resumes the run' in result.stdout, result.stdout[-1000:]
  record = json.loads((workdir / 'run.json').read_text())
  assert record['program'] == 'plain_dqn'
  assert record['flags']['plugins'] == 'plain_dqn'
  assert json.loads((workdir / 'stop.json').read_text())['counts'][
      'learner_steps'] > 0

  evaluation = _run_in(user, helpers.script_command(
      'evaluate', f'--workdir={workdir}', '--episodes=2'))
  assert evaluation.returncode == 0, evaluation.stdout[-3000:]
  assert 'plain_dqn on gym:CartPole-v1' in evaluation.stdout
  # The checkpoint holds the plain network: no dueling head.
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  names = [name for name, _ in tf.train.list_variables(
      tf.train.latest_checkpoint(str(workdir / 'checkpoints' / 'learner')))]
  assert any('network' in name for name in names), names
  assert not any('advantage' in name for name in names), names


def test_the_registries_and_the_page_plug_ins_import_no_tensorflow(user):
  # What a program reads before it checks its flags: every agent and suite
  # registered, the page's plug-ins among them; TensorFlow comes only with
  # a builder or a torso.
  code = (
      'import sys\n'
      'from agents import plugins, registry\n'
      'from agents.envs import suites\n'
      "plugins.import_plugins('signal_suite,plain_dqn')\n"
      'agents = [registry.get(name) for name in registry.names()]\n'
      'found = [suites.get(name) for name in suites.names()]\n'
      "print(sorted(a.name for a in agents), sorted(s.name for s in found))\n"
      "print('tensorflow' in sys.modules, 'sonnet' in sys.modules)\n")
  result = _run_in(user, [sys.executable, '-c', code], timeout=120)
  assert result.returncode == 0, result.stdout[-3000:]
  names, loaded = result.stdout.strip().splitlines()[-2:]
  assert names == ("['a3c', 'apex_c51', 'apex_dpg', 'apex_dqn', 'd4pg', "
                   "'plain_dqn', 'r2d2'] "
                   "['atari', 'control', 'gym', 'minatar', 'signal']")
  assert loaded == 'False False'
