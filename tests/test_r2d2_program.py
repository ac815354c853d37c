"""The whole R2D2 program, launched as users launch it: under local_mp with
the `cartpole_smoke` preset on gym:CartPole-v1:hide_velocity, it runs to
`--max_actor_steps` and stops in order; then programs/evaluate.py plays
its learner checkpoint and its policy snapshot, both carrying the LSTM's
state from step to step (the snapshot has `initial_state` and `step`, no
`act`), and the two play alike. Launched again on its workdir, it resumes:
its learner from its final checkpoint's step, its replay from its own
checkpoint's sequences, its counts from where they were, and goes on to the
new step limit."""

import json
import re

import pytest

import helpers
from agents import snapshots

STEPS = 2_000
EPISODES = 3


def _evaluate(tmp_path, name: str, *source: str):
  output = tmp_path / f'{name}.json'
  result = helpers.run_script('evaluate', *source, f'--episodes={EPISODES}',
                              '--seed=4', f'--output={output}', timeout=300)
  assert result.returncode == 0, result.stdout[-3000:]
  assert 'r2d2 on gym:CartPole-v1:hide_velocity' in result.stdout
  return json.loads(output.read_text())


@pytest.mark.slow  # A program under local_mp, two evaluations, a resume.
def test_r2d2_runs_to_its_step_limit_and_its_policy_plays_with_its_state(
    tmp_path):
  workdir = tmp_path / 'run'
  helpers.run_to_step_limit('r2d2', workdir, ['--preset=cartpole_smoke'],
                            STEPS)
  counts = json.loads((workdir / 'stop.json').read_text())['counts']
  assert counts['actor_steps'] >= STEPS and counts['learner_steps'] > 0
  helpers.check_learner_logs(workdir, columns=('mean_q', 'learnt_steps',
                                               'q_discrepancy'))
  for label in helpers.actors_rows(workdir, 2):
    helpers.check_episode_logs(workdir, label)

  snapshot = snapshots.latest_snapshot(str(workdir))
  assert snapshot is not None
  policy, metadata = snapshots.load(snapshot)
  assert metadata['recurrent'] and metadata['program'] == 'r2d2'
  assert hasattr(policy, 'step') and not hasattr(policy, 'act')

  restored = _evaluate(tmp_path, 'checkpoint', f'--workdir={workdir}')
  assert restored['program'] == 'r2d2'
  assert len(restored['returns']) == EPISODES
  # CartPole pays 1 a step: an episode's return is its length.
  assert restored['returns'] == restored['lengths']
  assert all(1 <= length <= 500 for length in restored['lengths'])
  # The snapshot written with the last checkpoint: the same policy, the
  # same greedy episodes.
  played = _evaluate(tmp_path, 'snapshot', f'--checkpoint={snapshot}')
  assert played['learner_steps'] == restored['learner_steps']
  assert played['returns'] == restored['returns']

  # Resumed: the learner starts where the first launch's final checkpoint
  # left it, replay with the sequences it had, and the run goes on.
  learned = int(restored['learner_steps'])  # Its final checkpoint's.
  assert learned > 0, restored
  helpers.run_to_step_limit('r2d2', workdir, ['--preset=cartpole_smoke'],
                            STEPS + 1_000)
  logs = helpers.node_logs(workdir)  # Of the newest launch.
  assert re.search(rf'Learner starts at step {learned}\b', logs), (
      learned, logs[-3000:])
  size = re.search(r"Replay starts with \{'priority_table': (\d+)\}", logs)
  assert size and int(size.group(1)) > 0, logs[-3000:]
  resumed = json.loads((workdir / 'stop.json').read_text())['counts']
  assert resumed['actor_steps'] >= STEPS + 1_000, resumed
  # The count goes on from the checkpoint's (not from 0). Whether the
  # learner adds updates before the actors' 1,000 steps are taken is a race
  # on a busy machine (the rate limiter's buffer holds them), so not asked.
  assert resumed['learner_steps'] >= learned, resumed
