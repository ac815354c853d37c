"""A plug-in from outside the project's packages: a task that needs memory
and a recurrent agent whose experience is sequences.

The suite `recall:<n>`: an episode shows one of `n` cues at its first step,
then `DELAY` blank steps, then asks; the action naming the cue earns 1 and
ends the episode (every other action earns 0). A policy without memory sees
the same question whatever the cue: it earns 1/n an episode at best. One
that remembers earns 1.

The agent `recall_dqn`: an LSTM Q-network trained on stored sequences with
their actors' recurrent states (R2D2 in miniature: `recall_plugin.agent`).
Nothing under the project's `launch/` names it or knows its experience's
shape; this module imports no TensorFlow.
"""

import dataclasses
import functools

import dm_env
import numpy as np
from dm_env import specs

from agents import registry
from agents.apex.config import ApeXConfig
from agents.config import Preset
from agents.config import check_flag
from agents.envs import environments
from agents.envs import suites

DELAY = 2


class Recall(dm_env.Environment):
  """Cue, `DELAY` blank steps, question; see the module docstring. The
  observation is the cue's one-hot (zeros after the first step) and a last
  element that is 1 only at the question."""

  def __init__(self, n: int, seed=None):
    self._n = n
    self._rng = np.random.default_rng(seed)
    self._cue = 0
    self._steps = 0

  def _observation(self, cue=False, question=False):
    observation = np.zeros(self._n + 1, np.float32)
    if cue:
      observation[self._cue] = 1.0
    observation[-1] = float(question)
    return observation

  def reset(self):
    self._cue = int(self._rng.integers(self._n))
    self._steps = 0
    return dm_env.restart(self._observation(cue=True))

  def step(self, action):
    self._steps += 1
    if self._steps == DELAY + 2:  # The action at the question.
      return dm_env.termination(np.float32(int(action) == self._cue),
                                self._observation())
    return dm_env.transition(
        np.float32(0.0), self._observation(question=self._steps == DELAY + 1),
        np.float32(1.0))

  def observation_spec(self):
    return specs.Array((self._n + 1,), np.float32, name='observation')

  def action_spec(self):
    return specs.DiscreteArray(self._n, dtype=np.int32, name='action')

  def reward_spec(self):
    return specs.Array((), np.float32, name='reward')

  def discount_spec(self):
    return specs.BoundedArray((), np.float32, 0.0, 1.0, name='discount')


def make(n: int, seed=None, evaluation: bool = False) -> Recall:
  del evaluation
  return Recall(n, seed)


def resolve(env_name: str, actions: str) -> environments.EnvironmentSpec:
  del actions
  cues = env_name.partition(':')[2]
  if not cues.isdigit() or int(cues) < 2:
    raise environments.UnknownEnvironmentError(
        f'recall:<n> takes a number of cues, 2 or more, not {cues!r}')
  return environments.describe(env_name, functools.partial(make, int(cues)))


SUITE = suites.register(suites.Suite(
    name='recall', resolve=resolve,
    forms={'discrete': 'recall:<n> (n cues, 2 or more)'}))


@dataclasses.dataclass
class RecallConfig(ApeXConfig):
  """The Ape-X machinery's fields (replay, actors, learner), where an item
  is a sequence, and the recurrent agent's own."""

  sequence_length: int = 8
  """Steps per stored sequence (R2D2: 80)."""
  sequence_period: int = 4
  """Steps between the starts of consecutive sequences (R2D2: 40)."""
  lstm_size: int = 32
  learning_rate: float = 1e-3
  target_update_period: int = 50
  priority_eta: float = 0.9
  """R2D2 §2.3: priority eta max|delta| + (1 - eta) mean|delta|."""
  epsilon_base: float = 0.4
  epsilon_alpha: float = 7.0
  evaluation_epsilon: float = 0.0

  CHECKPOINT_FIELDS = ApeXConfig.CHECKPOINT_FIELDS + (
      'sequence_length', 'sequence_period', 'lstm_size')

  def validate(self):
    super().validate()
    check_flag('sequence_length', self.sequence_length >= 2,
               self.sequence_length, '>= 2')
    check_flag('sequence_period',
               1 <= self.sequence_period <= self.sequence_length,
               self.sequence_period, 'in [1, --sequence_length]')

  def replay_item_bytes(self, suite) -> int:
    """A sequence: its steps, each about a transition's bytes."""
    return self.sequence_length * super().replay_item_bytes(suite)


# Items are sequences: sizes in sequences, one update of 32 sequences per
# 8 inserted (each about `sequence_period` new steps).
PRESETS = {
    'recall': Preset('recall:2, 2 actors, sequences of 8', {
        'env': 'recall:2', 'num_actors': 2, 'batch_size': 32,
        'min_replay_size': 64, 'replay_capacity': 5_000,
        'samples_per_insert': 8.0, 'actor_flush_size': 4,
        'variable_update_period': 20, 'evaluation_period': 100,
        'evaluation_episodes': 8}),
}

AGENT = registry.register(registry.Agent(
    name='recall_dqn', title='Recurrent DQN (a plug-in)',
    config_class=RecallConfig,
    builder='recall_plugin.agent:RecallBuilder',
    presets=PRESETS, actions='discrete', default_env='recall:2'))
