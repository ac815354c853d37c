"""Policy snapshots: the learner's policy as a TensorFlow SavedModel that
loads without this project's code.

  <workdir>/snapshots/policy-<learner steps, 10 digits>/  (the 2 newest kept)

    import json
    import tensorflow as tf
    policy = tf.saved_model.load('<run>/snapshots/policy-0000012345')
    actions = policy.act(observations)  # a batch: [B, *observation shape]
    policy.q_values(observations)       # Ape-X DQN only: [B, num actions]
    json.loads(policy.metadata.numpy()) # program, env, specs, learner steps

A recurrent policy (metadata `recurrent`: true) carries a state from step
to step, begun at each episode's start, instead of `act`:

    state = policy.initial_state(batch_size)           # a nest of tensors
    actions, state = policy.step(observations, state)  # batch in, batch out

`act` is the greedy policy (Ape-X DQN: the argmax of the Q-values), the
noiseless one (Ape-X DPG: pi(s), inside the action bounds) or the policy's
mode (A3C: its most likely action, or its Gaussian's mean inside the bounds). Observations are
what the project's environment gives (`agents.envs.environments`; Atari: the last
4 preprocessed 84x84 frames, uint8, frames on the last axis).

The learner writes a snapshot next to each of its checkpoints. A snapshot
is complete once its `saved_model.pb` exists: TensorFlow writes that file
last, whole (a file renamed into place), after the variables. Only complete
snapshots are listed or loaded, so a reader never takes a half-written one,
and a crash while writing leaves the previous ones as they were. (No
directory is renamed: Cloud Storage FUSE, Vertex AI's mount of a gs://
workdir, cannot rename a directory unless mounted to allow it.)
"""

import json
import os
import re
import shutil
from typing import Any, Dict, List, Optional

import numpy as np
import tensorflow as tf

SNAPSHOTS = 'snapshots'
KEEP = 2
_NAME = re.compile(r'^policy-(\d{10,})$')
_LEFTOVER = re.compile(r'^\.policy-\d+\.tmp$')  # Of the earlier scheme.
_COMPLETE = 'saved_model.pb'


def _complete(path: str) -> bool:
  return os.path.isfile(os.path.join(path, _COMPLETE))


def snapshot_directory(workdir: str) -> str:
  return os.path.join(workdir, SNAPSHOTS)


def _spec_description(spec) -> Dict[str, Any]:
  description = {'shape': [int(size) for size in spec.shape],
                 'dtype': np.dtype(spec.dtype).name}
  if hasattr(spec, 'num_values'):
    description['num_values'] = int(spec.num_values)
  elif hasattr(spec, 'minimum'):
    description['minimum'] = np.broadcast_to(
        spec.minimum, spec.shape).tolist()
    description['maximum'] = np.broadcast_to(
        spec.maximum, spec.shape).tolist()
  return description


class PolicySnapshot(tf.Module):
  """The policy of a learner's network, as a module to save.

  `network` maps a batch of observations to Q-values (`q_network=True`: the
  policy is their argmax) or to actions (the policy itself). With
  `recurrent`, it is a recurrent core (`snt.RNNCore`): `network(observations,
  state)` gives (Q-values or actions, the next state), and
  `network.initial_state(batch_size)` an episode's first state. The module
  shares the network's variables: saving it saves their current values.
  """

  def __init__(self, network: tf.Module, environment, program: str,
               q_network: bool, learner_steps: int = 0,
               policy: Optional[str] = None, recurrent: bool = False):
    super().__init__(name='policy_snapshot')
    self._network = network
    observation_spec = environment.spec.observations
    signature = [tf.TensorSpec((None, *observation_spec.shape),
                               tf.as_dtype(observation_spec.dtype),
                               name='observations')]
    description = {
        'program': program,
        'env': environment.name,
        'policy': policy or ('greedy' if q_network else 'noiseless'),
        'observation': _spec_description(observation_spec),
        'action': _spec_description(environment.spec.actions),
        'frames_per_step': int(environment.frames_per_step),
        'learner_steps': int(learner_steps),
        'recurrent': bool(recurrent),
    }
    # Kept as a string: a dict attribute of a tf.Module would be tracked.
    self._description = json.dumps(description)
    self.metadata = tf.Variable(self._description,
                                trainable=False, name='metadata')
    if recurrent:
      self._export_recurrent(network, signature[0], q_network)
    elif q_network:
      self.q_values = tf.function(network, input_signature=signature)
      self.act = tf.function(
          lambda observations: tf.argmax(
              network(observations), axis=-1, output_type=tf.int32),
          input_signature=signature)
    else:
      self.act = tf.function(network, input_signature=signature)

  def _export_recurrent(self, core, observations: tf.TensorSpec,
                        q_network: bool):
    """`initial_state(batch_size)` and `step(observations, state)`."""
    self.initial_state = tf.function(
        core.initial_state,
        input_signature=[tf.TensorSpec((), tf.int32, name='batch_size')])
    state = tf.nest.map_structure(
        lambda x: tf.TensorSpec((None, *x.shape[1:]), x.dtype),
        core.initial_state(1))

    def step(observations, state):
      outputs, next_state = core(observations, state)
      if q_network:
        outputs = tf.argmax(outputs, axis=-1, output_type=tf.int32)
      return outputs, next_state

    self.step = tf.function(step, input_signature=[observations, state])

  @property
  def recurrent(self) -> bool:
    return json.loads(self._description)['recurrent']

  def export(self, workdir: str, learner_steps: int) -> str:
    """Writes the snapshot of the network's current values as
    `<workdir>/snapshots/policy-<learner_steps>`; keeps the `KEEP` newest.
    Returns its path."""
    directory = snapshot_directory(workdir)
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f'policy-{int(learner_steps):010d}')
    if _complete(path):  # The same parameters were exported already.
      return path
    description = json.loads(self._description)
    description['learner_steps'] = int(learner_steps)
    self.metadata.assign(json.dumps(description))
    shutil.rmtree(path, ignore_errors=True)  # What a crash left of it.
    # A recurrent policy's state is a nest, which a serving signature's flat
    # inputs cannot name: it has none.
    signatures = None if self.recurrent else {'serving_default': self.act}
    tf.saved_model.save(self, path, signatures=signatures)
    # The new one stays even if an older run's snapshots have higher steps
    # (a run restarted from scratch in the same workdir).
    others = [other for other in list_snapshots(workdir) if other != path]
    for old in others[:max(len(others) - (KEEP - 1), 0)]:
      shutil.rmtree(old, ignore_errors=True)
    for name in os.listdir(directory):  # What crashes left of others.
      other = os.path.join(directory, name)
      if _LEFTOVER.match(name) or (
          _NAME.match(name) and other != path and not _complete(other)):
        shutil.rmtree(other, ignore_errors=True)
    return path


def list_snapshots(workdir: str) -> List[str]:
  """The complete snapshots of a run, oldest first: in the order they were
  written (a run restarted from scratch in the same workdir writes lower
  steps after higher ones), then by learner step."""
  directory = snapshot_directory(workdir)
  if not os.path.isdir(directory):
    return []
  found = []
  for name in os.listdir(directory):
    match = _NAME.match(name)
    path = os.path.join(directory, name)
    if match and _complete(path):
      found.append((os.path.getmtime(os.path.join(path, _COMPLETE)),
                    int(match.group(1)), path))
  return [path for _, _, path in sorted(found)]


def latest_snapshot(workdir: str) -> Optional[str]:
  found = list_snapshots(workdir)
  return found[-1] if found else None


def load(path: str):
  """Loads a snapshot; returns (module, metadata dict).

  Raises:
    ValueError: `path` is not a snapshot written by `PolicySnapshot.export`.
  """
  if not os.path.isfile(os.path.join(path, 'saved_model.pb')):
    raise ValueError(
        f'{path} is not a policy snapshot (no saved_model.pb in it). '
        'Snapshots are the directories <workdir>/snapshots/policy-<step>, '
        'written by the learner next to its checkpoints.')
  module = tf.saved_model.load(path)
  if not hasattr(module, 'metadata') or not (
      hasattr(module, 'act') or hasattr(module, 'step')):
    raise ValueError(
        f'{path} is a SavedModel but not a policy snapshot of this project '
        '(it has no act or step function and metadata).')
  return module, json.loads(module.metadata.numpy())
