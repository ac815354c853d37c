"""The whole Ape-X DQN program, launched the way users launch it.

Each run is a real Launchpad program (replay, counter, learner, 2 actors,
evaluator) on gym:CartPole-v1. A run stopped by --max_actor_steps is checked
for what the limit guarantees (the stop, its counts, the learner's logs);
every node's logs are checked in runs that are stopped only once every node
has logged (the probe under test_mt; Ctrl-C under local_mp and local_mt),
since no node of the program waits for another. The local_mt run stopped
by Ctrl-C, and a local_mp run stopped by a request (programs/stop.py), are
test_private_network's: a second host attacks them first.
"""

import os

import pytest

import helpers
from agents.apex_dqn.presets import PRESETS

SMALL_RUN = ['--preset=cartpole_smoke']
NUM_ACTORS = PRESETS['cartpole_smoke'].values['num_actors']
MAX_ACTOR_STEPS = 4000


def test_program_under_test_mt_learns_and_reprioritises(tmp_path):
  # The probe stops the program once it has looked at the table twice, 30
  # updates apart, and every node has logged.
  result = helpers.run_module('program_probe', '--lp_launch_type=test_mt',
                              f'--workdir={tmp_path}', *SMALL_RUN)
  assert result.returncode == 0, result.stdout[-5000:]
  assert 'did not terminate in time' not in result.stdout
  helpers.check_probe_report(helpers.probe_report(result.stdout, 'PROBE '))
  helpers.check_every_node_logs(tmp_path, NUM_ACTORS)


@pytest.mark.parametrize('launch_type, extra', [
    # With a variable cacher between the learner and the actors, which the
    # ordered stop stops after the actors and before the learner.
    pytest.param('local_mp', ['--variable_cachers=1'], marks=pytest.mark.slow,
                 id='local_mp'),
    pytest.param('local_mt', [], marks=pytest.mark.slow, id='local_mt'),
    pytest.param('test_mt', [], id='test_mt'),
])
def test_program_stops_cleanly_at_max_actor_steps(tmp_path, launch_type,
                                                  extra):
  # The rate limit makes the learner keep pace with the actors' 4,000 steps:
  # they cannot take them without the learner's updates.
  helpers.run_to_step_limit('apex_dqn', tmp_path, SMALL_RUN + extra,
                            MAX_ACTOR_STEPS, launch_type)
  helpers.check_learner_logs(tmp_path)
  if extra:
    # The cacher served the actors (their first pulls, at least), and
    # logged its last row as it stopped.
    cacher = helpers.rows(tmp_path, 'cacher')
    assert cacher and int(cacher[-1]['parameter_answers']) >= NUM_ACTORS, (
        cacher)
  # The coordinator's record of why it stopped the program, with the counts
  # then (at least the limit, and not much more).
  helpers.check_stopped_at_step_limit(tmp_path, MAX_ACTOR_STEPS,
                                      episode_length=500,  # CartPole's longest.
                                      num_actors=NUM_ACTORS)


def test_every_node_logs_and_ctrl_c_stops_the_program(tmp_path, launch):
  # The one local_mp run of `make test`. (Under local_mt, and by a stop
  # request under local_mp: test_private_network's runs, which a second
  # host attacks first.)
  workdir = tmp_path / 'run'
  program = launch('run', helpers.program_command(
      'apex_dqn', f'--workdir={workdir}', *SMALL_RUN,
      '--learner_precision=bfloat16'))
  program.wait_until(lambda: helpers.every_node_logged(workdir, NUM_ACTORS),
                     helpers.START_TIMEOUT, 'a log row of every node')
  # The learner computes in bfloat16 only where this CPU multiplies it, as
  # /proc/cpuinfo says; elsewhere it runs in float32, and the program says
  # so before it starts.
  computes_in = ('bfloat16' if helpers.cpu_has_bfloat16() else 'float32')
  said = f'learner computes in {computes_in}'
  assert said in program.output().split('Each node logs to')[0]
  assert ('warning: --learner_precision=bfloat16' in program.output()) == (
      computes_in == 'float32')
  assert said in helpers.node_logs(workdir)
  # The counter starts without TensorFlow; the learner has it. (The
  # coordinator has it too: it reaches the replay through Reverb's client.)
  loaded = {label: helpers.has_tensorflow(helpers.pid(workdir, label))
            for label in ('counter', 'learner')}
  assert loaded == {'counter': False, 'learner': True}
  program.interrupt()
  helpers.check_every_node_logs(workdir, NUM_ACTORS)
  # Everything the run wrote is the user's alone (--workdir_access=user).
  helpers.check_private_files(workdir)


@pytest.mark.parametrize('flag, message', [
    ('--num_actors=0', '--num_actors=0'),
    ('--env=atari:NoSuchGame', 'Accepted forms'),
    ('--env=gym:Pendulum-v1', 'discrete'),
    ('--batch_size=0', '--batch_size=0'),
    ('--discount=1.5', '--discount=1.5'),
    ('--min_replay_size=50000', '--min_replay_size=50000'),
    ('--n_step=0', '--n_step=0'),
    ('--importance_sampling_exponent=1.5', '--importance_sampling_exponent'),
    ('--priority_exponent=-1', '--priority_exponent=-1'),
    ('--batch_size=30000', '--batch_size=30000'),
    ('--checkpoint_every=-1', '--checkpoint_every=-1'),
    ('--actor_max_failures=0', '--actor_max_failures=0'),
    ('--replay_remover=lifo', '--replay_remover'),
    ('--replay_shards=0', '--replay_shards=0'),
    # 2 actors cannot feed 3 shards (each writes to one).
    ('--replay_shards=3', 'Give at most as many shards as actors'),
    ('--workdir=/proc/apex_run', '--workdir=/proc/apex_run'),
])
def test_bad_flags_are_refused_before_launch(tmp_path, flag, message):
  result = helpers.run_program('apex_dqn', f'--workdir={tmp_path}',
                               *SMALL_RUN, flag, timeout=120)
  assert result.returncode != 0
  assert message in result.stdout
  assert 'Traceback' not in result.stdout
  assert not os.path.exists(os.path.join(tmp_path, 'logs'))
