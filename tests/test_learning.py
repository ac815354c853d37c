"""Learning check, counted in steps: Ape-X DQN solves CartPole.

The README's small config (2 actors, a samples-per-insert rate limit so that
progress depends on steps, not on this machine's speed) must bring the
evaluator's mean return over its last 10 episodes to at least 475 within
100,000 actor steps.
"""

import csv
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_ACTOR_STEPS = 100_000
TARGET_RETURN = 475.0
WINDOW = 10

# Keep in step with the README's "CartPole in minutes".
CARTPOLE_FLAGS = [
    '--env=gym:CartPole-v1', '--num_actors=2',
    '--batch_size=64', '--samples_per_insert=16',
    '--min_replay_size=1000', '--replay_capacity=100000',
    '--learning_rate=0.001', '--target_update_period=100',
    '--mlp_hidden_sizes=256,256', '--dueling_hidden_size=256',
    '--variable_update_period=100',
    '--evaluation_period=500', '--evaluation_episodes=10',
]


def test_cartpole_reaches_475_within_100k_actor_steps(tmp_path):
  result = subprocess.run(
      [sys.executable, os.path.join(ROOT, 'programs', 'apex_dqn.py'),
       '--lp_launch_type=local_mp', f'--workdir={tmp_path}',
       f'--max_actor_steps={MAX_ACTOR_STEPS}', '--log_every=30',
       *CARTPOLE_FLAGS],
      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
      timeout=1800, cwd=ROOT, check=False)
  assert result.returncode == 0, result.stdout[-5000:]
  with open(os.path.join(tmp_path, 'logs', 'evaluator', 'logs.csv')) as f:
    rows = list(csv.DictReader(f))
  returns = np.array([float(row['episode_return']) for row in rows])
  actor_steps = np.array([int(row['actor_steps']) for row in rows])
  means = [returns[i - WINDOW:i].mean() for i in range(WINDOW, len(rows) + 1)]
  reached = [actor_steps[i - 1] for i, mean in zip(range(WINDOW, len(rows) + 1),
                                                   means)
             if mean >= TARGET_RETURN and actor_steps[i - 1] <= MAX_ACTOR_STEPS]
  assert reached, (
      f'best mean return over {WINDOW} evaluation episodes: {max(means):.1f} '
      f'(of {len(rows)} episodes up to {actor_steps[-1]} actor steps)')
