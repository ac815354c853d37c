"""The whole Ape-X DPG program, launched the way users launch it.

Each run is a real Launchpad program (replay, counter, learner, 2 actors,
evaluator) on control:cartpole:balance (1,000-step episodes). A run stopped
by --max_actor_steps is checked for what the limit guarantees (the stop, the
counts, the learner's logs); every node's logs are checked in runs stopped
only once every node has logged (the probe under test_mt; Ctrl-C under
local_mp): the evaluator's first 1,000-step episode, for one, may well end
after the actors' step limit.
"""

import os
import re

import pytest

import helpers
from agents.apex_dpg.presets import PRESETS

SMALL_RUN = ['--preset=cartpole_smoke']
NUM_ACTORS = PRESETS['cartpole_smoke'].values['num_actors']
EPISODE_LENGTH = 1000
MAX_ACTOR_STEPS = 4000


def _check_learner_logs(workdir):
  helpers.check_learner_logs(workdir, columns=('policy_loss', 'mean_q'),
                             losses=('loss', 'policy_loss'))


def _check_episode_rows(label, rows):
  for row in rows:
    # Episodes end only by dm_control's time limit; cartpole:balance pays a
    # reward in [0, 1] per step.
    assert int(row['episode_length']) == EPISODE_LENGTH, (label, row)
    assert 0.0 <= float(row['episode_return']) <= EPISODE_LENGTH, (label,
                                                                   row)


def _check_logs(workdir):
  """Every node's logs, of a run stopped once every node had logged."""
  _check_learner_logs(workdir)
  for label in helpers.actor_labels(NUM_ACTORS) + ['evaluator']:
    _check_episode_rows(label, helpers.check_episode_logs(workdir, label))
  # The evaluator reports returns of the parameters the learner updated.
  evaluated = [row for row in helpers.rows(workdir, 'evaluator')
               if int(row['learner_steps']) > 0]
  assert evaluated, helpers.rows(workdir, 'evaluator')


def _check_counts(workdir, all_actors: bool = True) -> int:
  """The counter's final counts hold every step the actors took, also those
  after the stop request and since their last sync; each actor that ran
  (`all_actors`: both) said how many it took in its log. Returns their
  sum."""
  own = helpers.own_actor_steps(workdir)
  assert set(own) <= set(range(NUM_ACTORS)), own
  if all_actors:
    assert len(own) == NUM_ACTORS, helpers.node_logs(workdir)[-5000:]
  else:
    assert own, helpers.node_logs(workdir)[-5000:]
  assert helpers.final_counts(workdir)['actor_steps'] == sum(own.values()), (
      own, helpers.node_logs(workdir)[-3000:])
  return sum(own.values())


def test_program_under_test_mt_learns_and_reprioritises(tmp_path):
  # The probe stops the program once it has looked at the table twice, 30
  # updates apart, and every node has logged (the evaluator an episode of
  # updated parameters).
  result = helpers.run_module('program_probe', '--program=apex_dpg',
                              '--lp_launch_type=test_mt',
                              f'--workdir={tmp_path}', *SMALL_RUN)
  assert result.returncode == 0, result.stdout[-5000:]
  assert 'did not terminate in time' not in result.stdout
  seen = helpers.probe_report(result.stdout, 'PROBE ')
  assert seen['program'] == 'apex_dpg'
  helpers.check_probe_report(seen)
  _check_logs(tmp_path)


# Both in the second tier: the quick tier's step-limit stop is Ape-X DQN's
# under test_mt (test_program.py), by the same coordinator.
@pytest.mark.slow
@pytest.mark.parametrize('launch_type', ['local_mp', 'test_mt'])
def test_program_stops_cleanly_at_max_actor_steps(tmp_path, launch_type):
  # The rate limit makes the learner keep pace with the actors' 4,000 steps:
  # they cannot take them without the learner's updates.
  output = helpers.run_to_step_limit('apex_dpg', tmp_path, SMALL_RUN,
                                     MAX_ACTOR_STEPS, launch_type)
  assert 'Traceback' not in output, output[-5000:]
  # The program was stopped by its step limit, not by a failing node.
  reached = re.findall(
      rf'Stopping: reached (\d+) actor steps \(limit {MAX_ACTOR_STEPS}\)',
      output)
  assert len(reached) == 1, output[-5000:]
  assert int(reached[0]) >= MAX_ACTOR_STEPS
  # The limit does not wait for both actors to have started: the counts
  # are those of the actors that did (both, in the Ctrl-C test below).
  acted = _check_counts(tmp_path, all_actors=False)
  assert acted >= int(reached[0])
  _check_learner_logs(tmp_path)
  for label in helpers.actor_labels(NUM_ACTORS) + ['evaluator']:
    # The rows there are (the limit does not wait for any: see _check_logs).
    _check_episode_rows(label, helpers.rows(tmp_path, label))
  helpers.check_stopped_at_step_limit(tmp_path, MAX_ACTOR_STEPS,
                                      EPISODE_LENGTH, num_actors=NUM_ACTORS)


@pytest.mark.slow
def test_every_node_logs_and_ctrl_c_stops_the_program(tmp_path, launch):
  program = launch('run', helpers.program_command(
      'apex_dpg', f'--workdir={tmp_path}', *SMALL_RUN))
  output = helpers.interrupt_once_every_node_logged(program, tmp_path,
                                                    NUM_ACTORS)
  assert 'Traceback' not in output, output[-5000:]
  _check_counts(tmp_path)
  _check_logs(tmp_path)


@pytest.mark.parametrize('flag, message', [
    ('--env=gym:CartPole-v1', 'continuous'),
    ('--env=control:nope:x', 'Accepted forms'),
    ('--sigma=-1', '--sigma=-1'),
    ('--batch_size=0', '--batch_size=0'),
    ('--replay_remover=lifo', "--replay_remover='lifo'"),
    ('--critic_hidden_sizes=abc', "--critic_hidden_sizes='abc'"),
])
def test_bad_flags_are_refused_before_launch(tmp_path, flag, message):
  result = helpers.run_program('apex_dpg', f'--workdir={tmp_path}',
                               *SMALL_RUN, flag, timeout=120)
  assert result.returncode == 2, result.stdout[-5000:]
  assert message in result.stdout
  assert result.stdout.count('error: ') == 1, result.stdout[-5000:]
  assert 'Traceback' not in result.stdout
  # Nothing was launched: no node wrote logs or checkpoints, and no run
  # manifest binds the workdir to the refused flags.
  for name in ('logs', 'tensorboard', 'checkpoints', 'run.json'):
    assert not os.path.exists(os.path.join(tmp_path, name)), name
