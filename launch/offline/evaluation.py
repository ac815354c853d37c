"""Evaluating a trained policy (`launch.offline.restore.Policy`): N episodes
played by the one evaluation loop of this project,
`agents.actor_loop.play_episodes`, as the evaluator node plays its rounds,
in rounds of up to `ROUND_ENVIRONMENTS` environments side by side, one
batched forward pass a step; the returns' statistics; a video of the first
episode. `programs/evaluate.py` and the results' pages use it.
"""

import os
from typing import List, Optional

import numpy as np

from agents import actor_loop

# Environments played side by side in one round: one batched forward pass
# steps them all (an actor's 16 environments, docs/performance.md).
ROUND_ENVIRONMENTS = 16
# Each environment's seed is the evaluation's seed times this, plus its
# index: evaluations of different seeds share no environment's stream.
SEED_STRIDE = 1_000

MIN_VIDEO_SIDE = 160  # Small screens (MinAtar: 10x10) are scaled up.


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


class PolicyActor:
  """A restored policy as the evaluation loop's actor: its action for each
  of a batch of observations, or with probability `epsilon` a uniformly
  random one (discrete actions). A policy with a state (a recurrent one)
  carries one per environment, begun again as that environment's episode
  begins. It notes how each episode started (its suite's `episode_start`:
  an Atari game's no-op frames) and the order in which episodes end, and
  gives environment 0's screens to `recorder`, if any, until its first
  episode ends."""

  def __init__(self, policy, environments, epsilon: float,
               rng: np.random.Generator, recorder=None):
    self._policy = policy
    self._state = policy.start(len(environments))
    self._first = policy.start(1)  # An episode's first state.
    self._environments = environments
    self._num_actions = getattr(policy.environment.spec.actions,
                                'num_values', None)
    self._epsilon = epsilon
    self._rng = rng
    self.recorder = recorder
    self.starts: List[Optional[int]] = [None] * len(environments)
    self.ended: List[int] = []  # Environment indices, as episodes ended.

  def select_actions(self, observations: np.ndarray) -> np.ndarray:
    actions, self._state = self._policy.actions(observations, self._state)
    actions = np.array(actions)
    if self._num_actions and self._epsilon:
      for index in range(len(actions)):
        if self._rng.random() < self._epsilon:
          actions[index] = self._rng.integers(self._num_actions)
    return actions

  def _record(self, index: int):
    if self.recorder is not None and index == 0:
      self.recorder.add(self._environments[0].render())

  def observe_first_at(self, index: int, timestep):
    del timestep
    if self._state is not None:
      actor_loop.begin_again(self._state, self._first, index)
    episode_start = self._policy.environment.suite.episode_start
    if episode_start is not None:
      self.starts[index] = episode_start(self._environments[index])
    self._record(index)

  def observe_at(self, index: int, action, timestep):
    del action
    self._record(index)
    if timestep.last():
      self.ended.append(index)
      if index == 0 and self.recorder is not None:
        self.recorder.close()
        self.recorder = None


def evaluate(policy, episodes: int, epsilon: float = 0.0, seed: int = 0,
             video: Optional[str] = None, noops: Optional[int] = None,
             **options):
  """Plays `episodes` evaluation episodes of `policy`, in environments
  made with those of the run options `options` their suite takes (what
  makes its evaluation episodes differ; its defaults where not given);
  with `noops`, each begun by exactly that many NOOP frames
  (results/pong_phase.py). Writes the first one's frames to the mp4 file
  `video` if given; returns (returns, lengths, video info or None, each
  episode's no-op start or None where the game has none), the episodes in
  the order in which they ended (the video's `episode`: its place among
  them)."""
  spec = policy.environment
  count = min(episodes, ROUND_ENVIRONMENTS)
  environments = [
      spec.make_environment(seed=seed * SEED_STRIDE + index, evaluation=True,
                            noops=noops, **options)
      for index in range(count)]
  recorder = (VideoWriter(video, frames_per_second(environments[0], spec))
              if video else None)
  info = None
  rng = np.random.default_rng(seed)
  returns, lengths, starts = [], [], []
  try:
    while len(returns) < episodes:
      playing = environments[:min(count, episodes - len(returns))]
      actor = PolicyActor(policy, playing, epsilon, rng, recorder)
      finished = actor_loop.play_episodes(playing, actor)
      if recorder is not None:
        # The first environment's episode, which need not end first: its
        # place among the returns.
        info = {'path': video, 'frames': recorder.frames,
                'fps': recorder.fps,
                'episode': len(returns) + list(actor.ended).index(0)}
        recorder = None
      for (episode_return, length), index in zip(finished, actor.ended):
        returns.append(episode_return)
        lengths.append(length)
        starts.append(actor.starts[index])
  finally:
    for environment in environments:
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
