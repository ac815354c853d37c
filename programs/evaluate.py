"""Evaluates a trained policy: N episodes, the returns' statistics, and
optionally a video of one episode (the first environment's; the JSON
says which episode it is).

  python programs/evaluate.py --workdir=<run>        # its newest checkpoint
  python programs/evaluate.py --checkpoint=<run>/snapshots/policy-0000012345
  python programs/evaluate.py --workdir=<run> --episodes=30 --video=run.mp4

The policy is greedy (Ape-X DQN, Ape-X C51, R2D2; `--epsilon` adds random
actions) or noiseless (Ape-X DPG). Atari episodes are made to differ from
one another (a greedy policy on the deterministic emulator replays one
episode) by sticky actions (the default, Machado et al. 2018) or, with
`--atari_evaluation=noops`, by up to 30 random no-op starts, the paper's
protocol; the output says which, and `--output`'s JSON lists each
episode's number of no-ops (`noops`). Videos: the ALE's screen for Atari,
MuJoCo rendered off-screen for control:*, MinAtar's own rendering; one
video frame per agent step, plus the first observation.
"""

import json
import os
import sys

from absl import app
from absl import flags
import numpy as np

flags.DEFINE_string('workdir', None, 'A run directory: its newest learner '
                    'checkpoint is evaluated.')
flags.DEFINE_string('checkpoint', None, 'A policy snapshot directory '
                    '(<run>/snapshots/policy-<step>) or a learner checkpoint '
                    '(<run>/checkpoints/learner/ckpt-<n>).')
flags.DEFINE_integer('episodes', 10, 'Evaluation episodes.')
flags.DEFINE_string('video', None, 'Writes a video of the first episode to '
                    'this .mp4 file.')
flags.DEFINE_float('epsilon', 0.0, 'Policies greedy over Q-values (Ape-X '
                   'DQN, Ape-X C51, R2D2): probability of a random action '
                   '(0: greedy).')
flags.DEFINE_integer('seed', 0, 'Seed of the environment and of epsilon.')
flags.DEFINE_enum('atari_evaluation', 'sticky', ['sticky', 'noops'],
                  'Atari only: what makes the episodes differ: sticky '
                  '(sticky actions, p = 0.25, Machado et al. 2018) or noops '
                  '(up to 30 random no-op starts on the deterministic '
                  'emulator, the Ape-X paper\'s protocol).')
flags.DEFINE_string('output', None, 'Also writes the results to this JSON '
                    'file.')
FLAGS = flags.FLAGS

def _check_flags():
  """Bad flags, reported before anything is loaded."""
  problems = []
  if not FLAGS.workdir and not FLAGS.checkpoint:
    problems.append('pass --workdir=<a run directory> or '
                    '--checkpoint=<a snapshot or learner checkpoint>')
  if FLAGS.workdir and not os.path.isdir(FLAGS.workdir):
    problems.append(f'--workdir={FLAGS.workdir} does not exist')
  if FLAGS.episodes < 1:
    problems.append(f'--episodes must be >= 1, got {FLAGS.episodes}')
  if not 0.0 <= FLAGS.epsilon <= 1.0:
    problems.append(f'--epsilon must be in [0, 1], got {FLAGS.epsilon}')
  if FLAGS.video is not None:
    if not FLAGS.video.endswith('.mp4'):
      problems.append(f'--video must name an .mp4 file, got {FLAGS.video}')
    elif not os.path.isdir(os.path.dirname(os.path.abspath(FLAGS.video))):
      problems.append(f'the directory of --video={FLAGS.video} does not '
                      'exist')
  if problems:
    sys.stderr.write(f'error: {"; ".join(problems)}.\n')
    sys.exit(2)


def main(_):
  _check_flags()
  # pylint: disable=g-import-not-at-top
  from launch.offline import evaluation
  from launch.offline import restore
  # pylint: enable=g-import-not-at-top
  try:
    policy = restore.load(FLAGS.workdir, FLAGS.checkpoint)
    if FLAGS.epsilon and not policy.greedy:
      raise ValueError('--epsilon is for Ape-X DQN policies and the others '
                       'greedy over Q-values (Ape-X C51, R2D2); this one is '
                       f'{policy.program}.')
    returns, lengths, video, noops = evaluation.evaluate(
        policy, FLAGS.episodes, FLAGS.epsilon, FLAGS.seed, video=FLAGS.video,
        atari_evaluation=FLAGS.atari_evaluation)
  except ValueError as error:
    sys.stderr.write(f'error: {error}\n')
    sys.exit(2)
  print(f'{policy.program} on {policy.environment.name}, learner step '
        f'{policy.learner_steps:,}, from {policy.source}')
  suite = policy.environment.suite
  # The evaluation options its suite takes (an Atari game's protocol).
  options = suite.take_options({'atari_evaluation': FLAGS.atari_evaluation})
  if suite.evaluation_note:
    print(f'Episodes made independent by {suite.evaluation_note(options)}.')
  stats = evaluation.summary(returns)
  print(f'{stats["episodes"]} episodes: return mean {stats["mean"]:.2f}, '
        f'median {stats["median"]:.2f}, std {stats["std"]:.2f}, '
        f'min {stats["min"]:.2f}, max {stats["max"]:.2f}; '
        f'mean length {np.mean(lengths):.1f} steps')
  result = {'program': policy.program, 'env': policy.environment.name,
            'source': evaluation.recorded_source(policy.source),
            'learner_steps': policy.learner_steps,
            'epsilon': FLAGS.epsilon, 'seed': FLAGS.seed,
            'returns': returns, 'lengths': lengths, **stats}
  result.update(options)
  if any(count is not None for count in noops):
    result['noops'] = noops  # Each episode's no-op start, in order.
  if video is not None:
    result['video'] = video
    print(f'Video of episode {video["episode"] + 1} ({video["frames"]} '
          f'frames at '
          f'{video["fps"]:g} frames/s): {FLAGS.video}')
  if FLAGS.output:
    with open(FLAGS.output, 'w') as f:
      json.dump(result, f, indent=2)
      f.write('\n')


if __name__ == '__main__':
  app.run(main)
