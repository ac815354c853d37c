"""Why Pong's final policy loses under no-op starts (a result, not a test):
plays the run's newest policy, greedy, after exactly N NOOP frames for each
N from 0 to 7, on the deterministic emulator (one episode each: every one
is the same) and with sticky actions (`--episodes` each), and writes
results/pong_final_policy/phases.json, beside the final policy's other
evaluations; results/pong.md cites it.

  .venv/bin/python -m results.pong_phase --workdir=<the Pong run> \
      --episodes=5 --seed=0

With an action repeat of 4 the agent sees the screen every 4th frame from
the episode's first, so N no-ops shift what it sees by N mod 4 frames. The
run's training episodes began without no-ops: it trained at one phase.
Sticky actions change which action the emulator plays, not when the agent
looks, so they keep the phase the no-ops set.
"""

import json
import os
from typing import Dict, List

from absl import app
from absl import flags
import numpy as np

from launch.offline import evaluation

flags.DEFINE_string('workdir', None, 'The Pong run: its newest learner '
                    'checkpoint is played.')
flags.DEFINE_integer('episodes', 5, 'Episodes with sticky actions for each '
                     'no-op count.')
flags.DEFINE_integer('seed', 0, 'Seed of the environments.')
FLAGS = flags.FLAGS

RESULTS = os.path.dirname(os.path.abspath(__file__))
COUNTS = range(8)  # Two of each phase.
# The two ways to play: the no-op protocol's emulator and the default one.
PROTOCOLS = {'deterministic': 'noops', 'sticky': 'sticky'}


def play(policy, count: int) -> Dict[str, List[float]]:
  """Each protocol's returns after exactly `count` no-op frames."""
  returns = {}
  for name, protocol in PROTOCOLS.items():
    episodes = 1 if name == 'deterministic' else FLAGS.episodes
    returns[name], _, _, _ = evaluation.evaluate(
        policy, episodes, seed=FLAGS.seed, atari_evaluation=protocol,
        noops=count)
  return returns


def table(rows: List[Dict[str, object]]) -> str:
  """The page's table: one row per no-op count."""
  lines = ['| no-ops | phase (no-ops mod 4) | deterministic emulator, one '
           'episode | sticky actions, mean (sample sd) of '
           f'{len(rows[0]["sticky"])} |', '|---|---|---|---|']
  for row in rows:
    sticky = np.asarray(row['sticky'])
    spread = f' ({sticky.std(ddof=1):.1f})' if len(sticky) > 1 else ''
    lines.append(f'| {row["noops"]} | {row["noops"] % 4} | '
                 f'{row["deterministic"][0]:g} | {sticky.mean():.1f}{spread} |')
  return '\n'.join(lines)


def main(argv):
  del argv
  from launch.offline import restore  # pylint: disable=g-import-not-at-top
  policy = restore.load(FLAGS.workdir)
  rows = []
  for count in COUNTS:
    rows.append({'noops': count, **play(policy, count)})
    print(rows[-1], flush=True)
  data = {'env': policy.environment.name,
          'source': evaluation.recorded_source(policy.source),
          'learner_steps': policy.learner_steps, 'seed': FLAGS.seed,
          'epsilon': 0.0, 'rows': rows}
  with open(os.path.join(RESULTS, 'pong_final_policy', 'phases.json'),
            'w') as f:
    json.dump(data, f, indent=1)
  print(table(rows))


if __name__ == '__main__':
  app.run(main)
