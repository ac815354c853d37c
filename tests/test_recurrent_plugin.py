"""An agent from outside the project's packages whose experience is
sequences, with a policy that carries a state (`tests/plugins/recall_plugin`:
a recurrent DQN on a task that needs memory), run as a user runs a plug-in
agent: its three-line program under `local_mp`, `programs/evaluate.py` on
its learner checkpoint and on its policy snapshot, and the run resumed from
its checkpoints. Nothing under `launch/` names it or knows its items.

The task (`recall:4`): a cue of 4 at an episode's first step, two blank
steps, then a question; naming the cue earns 1. A policy without memory
sees the same question whatever the cue, and earns 1/4 an episode at best:
over 40 episodes, 36 or more right has probability below 1e-17 for it
(binomial, p = 1/4). So a high mean shows that the state was carried
through the actors, the learner's stored states, the evaluator, the
snapshot and the restored policy.
"""

import json
import os
import shutil
import sys

import pytest

from agents import snapshots
from tests import helpers

PLUGIN = os.path.join(helpers.ROOT, 'tests', 'plugins')
STEPS = 10_000
EPISODES = 40


@pytest.fixture
def user(tmp_path):
  """A user's directory holding the plug-in and its program."""
  directory = tmp_path / 'user'
  shutil.copytree(os.path.join(PLUGIN, 'recall_plugin'),
                  directory / 'recall_plugin',
                  ignore=shutil.ignore_patterns('__pycache__'))
  shutil.copy(os.path.join(PLUGIN, 'recall_program.py'), directory)
  return directory


def _launch(user, workdir, steps: int):
  result = helpers.run(
      [sys.executable, 'recall_program.py', '--lp_launch_type=local_mp',
       f'--workdir={workdir}', '--preset=recall', '--env=recall:4',
       f'--max_actor_steps={steps}'], 900, cwd=user)
  assert result.returncode == 0, result.stdout[-5000:]
  return json.loads((workdir / 'stop.json').read_text())['counts']


def _evaluate(user, tmp_path, name: str, *source: str):
  output = tmp_path / f'{name}.json'
  result = helpers.run(helpers.script_command(
      'evaluate', *source, f'--episodes={EPISODES}', f'--output={output}'),
      600, cwd=user)
  assert result.returncode == 0, result.stdout[-3000:]
  assert 'recall_dqn on recall:4' in result.stdout
  return json.loads(output.read_text())


@pytest.mark.slow  # A program under local_mp, learning, then resumed.
def test_a_recurrent_agent_of_sequences_runs_evaluates_and_resumes(
    user, tmp_path):
  workdir = tmp_path / 'run'
  counts = _launch(user, workdir, STEPS)
  assert counts['actor_steps'] >= STEPS and counts['learner_steps'] > 0
  # Every episode the actors and the evaluator logged lasted the task's 4.
  for label, logged in [*helpers.actors_rows(workdir, 2).items(),
                        ('evaluator', helpers.rows(workdir, 'evaluator'))]:
    lengths = {int(row['episode_length']) for row in logged}
    assert lengths == {4}, (label, lengths)

  # Its learner checkpoint, restored into its recurrent network.
  restored = _evaluate(user, tmp_path, 'checkpoint', f'--workdir={workdir}')
  assert restored['lengths'] == [4] * EPISODES
  assert sum(restored['returns']) >= 36, restored['returns']
  # Its policy snapshot, which carries the state without the plug-in's code.
  snapshot = snapshots.latest_snapshot(str(workdir))
  played = _evaluate(user, tmp_path, 'snapshot', f'--checkpoint={snapshot}')
  assert played['returns'] == restored['returns']

  # Resumed: the learner goes on from its checkpoint, and the first whole
  # round the evaluator plays after the resume already recalls the cues
  # (a network begun anew earns 1/4 an episode).
  learned = counts['learner_steps']
  resumed = _launch(user, workdir, STEPS + 4_000)
  assert resumed['learner_steps'] > learned
  rounds = {}
  for row in helpers.rows(workdir, 'evaluator'):
    if int(float(row['round_learner_steps'])) >= learned:
      rounds.setdefault(row['round_started'], []).append(
          float(row['episode_return']))
  first_round = next(returns for returns in rounds.values()
                     if len(returns) == 8)
  assert sum(first_round) >= 7, rounds


def test_no_module_of_the_launch_package_knows_the_agent_or_its_items():
  names = ('recall', 'sequences', 'SequenceAdder', 'start_state')
  for folder, _, files in os.walk(os.path.join(helpers.ROOT, 'launch')):
    for name in files:
      if name.endswith('.py'):
        with open(os.path.join(folder, name)) as f:
          text = f.read()
        for word in names:
          assert word not in text, (os.path.join(folder, name), word)
