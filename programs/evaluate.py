"""Evaluates a trained policy: N episodes, the returns' statistics, and
optionally a video of the first episode.

  python programs/evaluate.py --workdir=<run>        # its newest checkpoint
  python programs/evaluate.py --checkpoint=<run>/snapshots/policy-0000012345
  python programs/evaluate.py --workdir=<run> --episodes=30 --video=run.mp4

The policy is greedy (Ape-X DQN; `--epsilon` adds random actions) or
noiseless (Ape-X DPG). Atari episodes are made to differ from one another
(a greedy policy on the deterministic emulator replays one episode) by
sticky actions (the default, Machado et al. 2018) or, with
`--atari_evaluation=noops`, by up to 30 random no-op starts, the paper's
protocol; the output says which, and `--output`'s JSON lists each
episode's number of no-ops (`noops`). Videos: the ALE's screen for Atari,
MuJoCo rendered off-screen for control:*, MinAtar's own rendering; one
video frame per agent step, plus the first observation.
"""

import json
import os
import sys
from typing import Optional

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
flags.DEFINE_float('epsilon', 0.0, 'Ape-X DQN: probability of a random '
                   'action (0: greedy).')
flags.DEFINE_integer('seed', 0, 'Seed of the environment and of epsilon.')
flags.DEFINE_enum('atari_evaluation', 'sticky', ['sticky', 'noops'],
                  'Atari only: what makes the episodes differ: sticky '
                  '(sticky actions, p = 0.25, Machado et al. 2018) or noops '
                  '(up to 30 random no-op starts on the deterministic '
                  'emulator, the Ape-X paper\'s protocol).')
flags.DEFINE_string('output', None, 'Also writes the results to this JSON '
                    'file.')
FLAGS = flags.FLAGS

MIN_VIDEO_SIDE = 160  # Small screens (MinAtar: 10x10) are scaled up.


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


def video_frame(frame: np.ndarray) -> np.ndarray:
  """RGB uint8, scaled up by an integer factor to at least MIN_VIDEO_SIDE
  pixels, with even sides (as mp4 encoders need)."""
  frame = np.asarray(frame, np.uint8)
  factor = max(1, -(-MIN_VIDEO_SIDE // min(frame.shape[:2])))
  if factor > 1:
    frame = frame.repeat(factor, axis=0).repeat(factor, axis=1)
  height, width = frame.shape[0] // 2 * 2, frame.shape[1] // 2 * 2
  return frame[:height, :width]


class VideoWriter:
  """Writes RGB frames to an mp4 (MPEG-4 part 2) file as they come; the file
  appears at `path` only once complete (`close`)."""

  def __init__(self, path: str, fps: float):
    self._path = path
    self._temporary = f'{path}.tmp.mp4'
    self.fps = fps
    self._writer = None
    self.frames = 0

  def add(self, frame: np.ndarray):
    import cv2  # pylint: disable=g-import-not-at-top
    frame = video_frame(frame)
    if self._writer is None:
      height, width = frame.shape[:2]
      self._writer = cv2.VideoWriter(
          self._temporary, cv2.VideoWriter_fourcc(*'mp4v'), float(self.fps),
          (width, height))
      if not self._writer.isOpened():
        raise RuntimeError(
            f'OpenCV cannot write an mp4 file at {self._temporary}.')
    self._writer.write(np.ascontiguousarray(frame[..., ::-1]))  # RGB -> BGR.
    self.frames += 1

  def close(self):
    self._writer.release()
    os.replace(self._temporary, self._path)


def frames_per_second(environment, spec) -> float:
  """Video speed: real time for the emulator and the simulator."""
  if spec.suite.frames_per_second:  # The ALE's 60 frames/s.
    return spec.suite.frames_per_second / spec.frames_per_step
  if hasattr(environment, 'control_timestep'):
    return 1.0 / environment.control_timestep
  return 10.0


def evaluate(policy, episodes: int, epsilon: float = 0.0, seed: int = 0,
             video: Optional[str] = None, atari_evaluation: str = 'sticky',
             noops: Optional[int] = None):
  """Runs `episodes` evaluation episodes (an Atari game's made independent
  as `atari_evaluation` names; with `noops`, each begun by exactly that
  many NOOP frames, results/pong_phase.py), writing the first one's frames
  to the mp4 file `video` if given; returns (returns, lengths, video info
  or None, each episode's no-op start or None where the game has none)."""
  from agents.envs import atari  # pylint: disable=g-import-not-at-top
  spec = policy.environment
  environment = spec.make_environment(seed=seed, evaluation=True,
                                      atari_evaluation=atari_evaluation,
                                      noops=noops)
  rng = np.random.default_rng(seed)
  num_actions = getattr(spec.spec.actions, 'num_values', None)
  recorder, info = None, None
  if video:
    recorder = VideoWriter(video, frames_per_second(environment, spec))
  returns, lengths, starts = [], [], []
  for episode in range(episodes):
    timestep = environment.reset()
    starts.append(atari.noops_played(environment))
    recording = recorder is not None and episode == 0
    if recording:
      recorder.add(environment.render())
    episode_return, length = 0.0, 0
    while not timestep.last():
      action = policy.act(timestep.observation[None]).numpy()[0]
      if num_actions and epsilon and rng.random() < epsilon:
        action = np.int32(rng.integers(num_actions))
      timestep = environment.step(action)
      episode_return += float(timestep.reward)
      length += 1
      if recording:
        recorder.add(environment.render())
    if recording:
      recorder.close()
      info = {'path': video, 'frames': recorder.frames, 'fps': recorder.fps}
    returns.append(episode_return)
    lengths.append(length)
  environment.close()
  return returns, lengths, info, starts


def summary(returns) -> dict:
  """Mean, median, standard deviation (the sample's, n - 1; 0 for one
  episode), minimum and maximum of the returns."""
  returns = np.asarray(returns, np.float64)
  return {'episodes': len(returns), 'mean': float(returns.mean()),
          'median': float(np.median(returns)),
          'std': float(returns.std(ddof=1)) if len(returns) > 1 else 0.0,
          'min': float(returns.min()), 'max': float(returns.max())}


def recorded_source(path: str) -> str:
  """The policy's source as the JSON records it: from the run's
  `checkpoints` or `snapshots` directory on (`checkpoints/learner/ckpt-40`),
  so that a results file names no machine's paths; other paths as given."""
  parts = os.path.normpath(path).split(os.sep)
  for index in range(len(parts) - 1, -1, -1):
    if parts[index] in ('checkpoints', 'snapshots'):
      return '/'.join(parts[index:])
  return path


def main(_):
  _check_flags()
  from launch import restore  # pylint: disable=g-import-not-at-top
  try:
    policy = restore.load(FLAGS.workdir, FLAGS.checkpoint)
    if FLAGS.epsilon and policy.q_values is None:
      raise ValueError('--epsilon is for Ape-X DQN policies; this one is '
                       f'{policy.program}.')
    returns, lengths, video, noops = evaluate(
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
  stats = summary(returns)
  print(f'{stats["episodes"]} episodes: return mean {stats["mean"]:.2f}, '
        f'median {stats["median"]:.2f}, std {stats["std"]:.2f}, '
        f'min {stats["min"]:.2f}, max {stats["max"]:.2f}; '
        f'mean length {np.mean(lengths):.1f} steps')
  result = {'program': policy.program, 'env': policy.environment.name,
            'source': recorded_source(policy.source),
            'learner_steps': policy.learner_steps,
            'epsilon': FLAGS.epsilon, 'seed': FLAGS.seed,
            'returns': returns, 'lengths': lengths, **stats}
  result.update(options)
  if any(count is not None for count in noops):
    result['noops'] = noops  # Each episode's no-op start, in order.
  if video is not None:
    result['video'] = video
    print(f'Video of episode 1 ({video["frames"]} frames at '
          f'{video["fps"]:g} frames/s): {FLAGS.video}')
  if FLAGS.output:
    with open(FLAGS.output, 'w') as f:
      json.dump(result, f, indent=2)
      f.write('\n')


if __name__ == '__main__':
  app.run(main)
