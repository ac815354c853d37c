"""The whole A3C program (programs/a3c.py), launched the way users launch it:
a parameter server in the learner's place, workers in the actors', the
evaluator, counter and coordinator, on gym:CartPole-v1.

What a run's files say is checked against what A3C must have done: every
update comes from one worker's rollout of 1 to t_max steps, so the updates
U and the environment steps T they came from (both in the parameter
server's checkpoint) satisfy T / t_max <= U <= T; the counter's learner
steps are the server's updates; a relaunch resumes the parameters, the
T (so the learning rate goes on annealing from where it was).
"""

import os
import re

import numpy as np
import pytest
import tensorflow as tf

import helpers
from launch.runs import checkpointing
from agents.envs import environments
from agents.a3c.builder import A3CBuilder
from agents.a3c.config import A3CConfig
from agents.a3c.presets import PRESETS

SMALL_RUN = ['--preset=cartpole_smoke']
NUM_WORKERS = PRESETS['cartpole_smoke'].values['num_actors']
SMALL_SIZES = PRESETS['cartpole_smoke'].values['mlp_hidden_sizes']
T_MAX = A3CConfig().t_max  # The smoke preset keeps the default.


def _server_checkpoint(workdir):
  """(updates, T, {variable name: value}) of the newest checkpoint of the
  parameter server, read from its files."""
  path = tf.train.latest_checkpoint(
      checkpointing.checkpoint_directory(str(workdir), 'learner'))
  assert path, 'no checkpoint of the parameter server'
  reader = tf.train.load_checkpoint(path)
  values = {name: reader.get_tensor(name)
            for name, _ in tf.train.list_variables(path)}
  updates = int(values['num_steps/.ATTRIBUTES/VARIABLE_VALUE'])
  steps = int(values['environment_steps/.ATTRIBUTES/VARIABLE_VALUE'])
  return updates, steps, values


# Both whole programs are the second tier's: the quick tier's one local_mp
# run is Ape-X DQN's (test_program.py). The processes' run has Pop-Art (the
# default: its returns travel with each worker's call, its statistics come
# back with the parameters and are checkpointed); the threads' run the
# paper's value (--nopopart).
@pytest.mark.slow
@pytest.mark.parametrize('launch_type, popart', [('local_mp', True),
                                                 ('local_mt', False)])
def test_a3c_runs_to_its_step_limit_and_checkpoints_what_it_did(
    tmp_path, launch_type, popart):
  limit = 3000
  result = helpers.run_program('a3c', f'--workdir={tmp_path}', *SMALL_RUN,
                               f'--max_actor_steps={limit}',
                               '--popart' if popart else '--nopopart',
                               launch_type=launch_type)
  assert result.returncode == 0, result.stdout[-5000:]
  helpers.check_stopped_in_order(result.stdout, tmp_path)
  assert 'The program stopped: reached' in result.stdout
  updates, steps, values = _server_checkpoint(tmp_path)
  # Every update is one worker's rollout of 1 to t_max steps.
  assert 0 < updates <= steps <= T_MAX * updates, (updates, steps)
  # The workers took at least the limit's steps (counted at their episodes'
  # ends), and every one of them went into an update, but the last
  # unfinished rollout of each worker.
  counts = helpers.final_counts(tmp_path)
  assert counts['actor_steps'] >= limit
  assert counts['learner_steps'] == updates, (counts, updates)
  own = sum(helpers.own_actor_steps(tmp_path).values())
  assert own <= steps + NUM_WORKERS * (T_MAX - 1), (own, steps)
  # Shared RMSProp's statistics were updated: g > 0 for every parameter.
  statistics = [value for name, value in values.items()
                if name.startswith('optimizer/mean_squares/')]
  assert statistics and all(np.all(g > 0) for g in statistics)
  # The learner's log: the annealed learning rate falls with T.
  rows = helpers.rows(tmp_path, 'learner')
  rates = [float(row['learning_rate']) for row in rows]
  assert rates and all(a >= b for a, b in zip(rates, rates[1:])), rates
  means = [name for name in values if name.endswith('mean/.ATTRIBUTES/'
                                                    'VARIABLE_VALUE')]
  if popart:
    # CartPole's returns are positive: mu moved up from 0 with the workers'
    # returns, and the log has sigma.
    assert len(means) == 1 and values[means[0]] > 0.01, means
    assert all(float(row['popart_scale']) > 0 for row in rows)
  else:
    assert not means, means
  helpers.check_episode_logs(tmp_path, 'actor')
  # evaluate.py reads the run back: the policy's mode, from its checkpoint.
  evaluation = helpers.run_script('evaluate', f'--workdir={tmp_path}',
                                  '--episodes=2', timeout=300)
  assert evaluation.returncode == 0, evaluation.stdout[-3000:]
  assert f'a3c on gym:CartPole-v1, learner step {updates:,}' in (
      evaluation.stdout)


def _restored_checksum(workdir) -> str:
  """The parameters checksum of a parameter server built anew and restored
  from the run's newest checkpoint, as the program's is."""
  builder = A3CBuilder(A3CConfig(mlp_hidden_sizes=SMALL_SIZES),
                       environments.resolve_any('gym:CartPole-v1'))
  server = builder.make_learner()
  checkpointing.make_checkpointer(server.state, str(workdir), 'learner', 1.0)
  return checkpointing.parameters_checksum(
      server.get_variables(server.variable_names))


@pytest.mark.slow
def test_ctrl_c_then_relaunch_resumes_parameters_and_T(tmp_path, launch):
  workdir = tmp_path / 'run'
  budget = 50_000
  first = launch('first', helpers.program_command(
      'a3c', f'--workdir={workdir}', *SMALL_RUN,
      f'--max_actor_steps={budget}'))
  first.wait_until(lambda: (helpers.every_node_logged(workdir, NUM_WORKERS)
                            and helpers.last(workdir, 'learner',
                                             'learner_steps') > 300),
                   helpers.START_TIMEOUT, 'every node logged, 300 updates')
  first.interrupt()
  updates, steps, _ = _server_checkpoint(workdir)
  assert updates > 300 and steps < budget
  checksum = _restored_checksum(workdir)
  rows_before = len(helpers.rows(workdir, 'learner'))

  relaunched = launch('relaunch', helpers.program_command(
      'a3c', f'--workdir={workdir}'))
  relaunched.wait_until(
      lambda: len(helpers.rows(workdir, 'learner')) > rows_before + 1,
      helpers.START_TIMEOUT, 'log rows of the relaunched parameter server')
  output = relaunched.interrupt()
  assert 'Resuming the run in' in output
  starts = re.findall(
      r'Learner starts at step (\d+) \(parameters checksum (\w+)\)',
      relaunched.logs())
  assert starts == [(str(updates), checksum)], (starts, updates, checksum)
  new_rows = helpers.rows(workdir, 'learner')[rows_before:]
  assert int(new_rows[0]['learner_steps']) > updates
  # T was restored: the rate anneals on from lr0 (1 - T / budget), below
  # what any row of a fresh start with fewer than T steps would show.
  rate = float(new_rows[0]['learning_rate'])
  assert rate <= 7e-4 * (1 - steps / budget) + 1e-12, (rate, steps)
  later_updates, later_steps, _ = _server_checkpoint(workdir)
  assert later_updates > updates and later_steps > steps


@pytest.mark.parametrize('flag, message', [
    ('--envs_per_actor=2', 'one environment'),
    ('--t_max=0', '--t_max=0'),
    ('--rmsprop_decay=1.5', '--rmsprop_decay=1.5'),
    ('--learning_rate=0', '--learning_rate=0'),
    ('--entropy_cost=-1', '--entropy_cost=-1'),
    ('--mlp_hidden_sizes=a', '--mlp_hidden_sizes'),
    ('--mlp_activation=elu', '--mlp_activation=elu'),
    ('--policy_init_scale=0', '--policy_init_scale=0'),
    ('--initial_stddev_scale=-1', '--initial_stddev_scale=-1'),
    ('--env=nowhere:Pong', 'control:<domain>:<task>'),
])
def test_bad_flags_are_refused_before_launch(tmp_path, flag, message):
  result = helpers.run_program('a3c', f'--workdir={tmp_path}', *SMALL_RUN,
                               flag, timeout=120)
  assert result.returncode == 2, result.stdout[-3000:]
  assert message in result.stdout, result.stdout[-3000:]
  assert 'Traceback' not in result.stdout
  assert not os.path.exists(os.path.join(tmp_path, 'logs'))
