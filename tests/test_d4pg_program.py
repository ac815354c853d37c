"""The whole D4PG program, launched the way users launch it, on
control:cartpole:balance with the `cartpole_smoke` preset: it learns and
reprioritises (under test_mt); under local_mp it heals a learner killed by
the chaos tool's real SIGKILL, resumes from its checkpoints, and its final
policy is evaluated by programs/evaluate.py. Its stop at a step budget is
the coordinator's, which knows no agent: test_dpg_program.py checks it for
Ape-X DPG, whose nodes D4PG's are.
"""

import json
import re
import sys

import pytest

import helpers

SMALL_RUN = ['--preset=cartpole_smoke']
EPISODE_LENGTH = 1000


def _check_learner_logs(workdir):
  helpers.check_learner_logs(workdir, columns=('policy_loss', 'mean_q'),
                             losses=('loss', 'policy_loss'))


def test_program_under_test_mt_learns_and_reprioritises(tmp_path):
  # The probe stops the program once it has seen the table's priorities
  # change twice, 30 updates apart, and every node has logged.
  result = helpers.run_module('program_probe', '--program=d4pg',
                              '--lp_launch_type=test_mt',
                              f'--workdir={tmp_path}', *SMALL_RUN)
  assert result.returncode == 0, result.stdout[-5000:]
  seen = helpers.probe_report(result.stdout, 'PROBE ')
  assert seen['program'] == 'd4pg'
  helpers.check_probe_report(seen)
  _check_learner_logs(tmp_path)
  # The critic's loss is a cross-entropy over 51 atoms: at most about
  # log(51) = 3.9 for a near-uniform critic, never below 0.
  losses = [float(row['loss']) for row in helpers.rows(tmp_path, 'learner')]
  assert all(0.0 <= loss < 10.0 for loss in losses), losses


@pytest.mark.slow
def test_a_killed_learner_heals_and_the_run_resumes(tmp_path):
  workdir = tmp_path / 'run'
  output = helpers.run([
      sys.executable, '-m', 'benchmarks.chaos', f'--workdir={workdir}',
      '--fault_every=2', '--after_checkpoints', '--schedule=learner:SIGKILL',
      '--stop_after_faults=1', '--', 'programs/d4pg.py', *SMALL_RUN,
      '--max_actor_steps=100000000', '--checkpoint_every=2',
      '--replay_checkpoint_every=2',
      # No evaluator: programs/evaluate.py plays the policy below.
      '--num_evaluators=0'], timeout=900).stdout
  summary = json.loads((workdir / 'chaos.json').read_text())
  assert summary['ok'], (output[-3000:], summary)
  assert summary['injected'] == summary['recovered'] == 1, summary
  assert summary['stop']['restarts'] == {'learner': 1}, summary['stop']
  assert summary['stop']['failed'] is False, summary['stop']
  # The learner came back from its own checkpoint, not from nothing (a
  # learner says where it starts only when it restores one).
  starts = re.findall(r'Learner starts at step (\d+)',
                      helpers.node_logs(workdir))
  assert starts and all(int(step) > 0 for step in starts), starts
  # Launched again, the run resumes where its checkpoints left it.
  resume = summary['resume']
  assert resume['exit_status'] == 0, resume
  assert resume['learner_starts_at'] > 0, resume
  # Its final policy, restored from the learner's last checkpoint, plays.
  evaluation = tmp_path / 'evaluation.json'
  result = helpers.run_script('evaluate', f'--workdir={workdir}',
                              '--episodes=2', '--seed=3',
                              f'--output={evaluation}', timeout=300)
  assert result.returncode == 0, result.stdout[-3000:]
  record = json.loads(evaluation.read_text())
  assert record['program'] == 'd4pg'
  assert record['env'] == 'control:cartpole:balance'
  assert record['learner_steps'] >= resume['learner_starts_at']
  assert len(record['returns']) == record['episodes'] == 2
  assert all(0.0 <= value <= EPISODE_LENGTH for value in record['returns'])
