"""A trained policy read back from a run: from the newest learner checkpoint
of a run's directory, from one learner checkpoint, or from a policy snapshot
(`agents.snapshots`).

Every way gives a `Policy`: its actions for a batch of observations, the
environment it was trained on (resolved as the programs resolve `--env`),
and what is known of where it came from. A policy may carry a state from
step to step (a recurrent one: `agents.snapshots`), begun at each episode's
start: `start(batch_size)` gives the first (None for a policy without one;
`agents.actor_loop.begin_again` begins one row of it again) and
`actions(observations, state)` the actions and the next state, for either
kind.
"""

import dataclasses
import json
import os
from typing import Any, Optional

import numpy as np
import tensorflow as tf

from launch.runs import checkpointing
from agents.envs import environments
from launch.runs import run_manifest
from agents import plugins
from agents import registry
from agents import snapshots


@dataclasses.dataclass
class Policy:
  # observations [B, ...] -> actions [B, ...] (a tf.function); None for a
  # recurrent policy, which has `initial_state` and `step` instead.
  act: Optional[Any]
  environment: environments.EnvironmentSpec
  program: str
  source: str  # The checkpoint or snapshot it was read from.
  learner_steps: int
  q_values: Optional[Any] = None  # Ape-X DQN: observations -> Q-values.
  module: Optional[Any] = None  # What holds the functions' variables.
  initial_state: Optional[Any] = None  # batch size -> a nest of tensors.
  step: Optional[Any] = None  # (observations, state) -> (actions, state).
  # Its actions are the argmax of Q-values (Ape-X DQN, Ape-X C51, R2D2,
  # with a state or without), which epsilon-greedy evaluation can mix with
  # random ones.
  greedy: bool = False

  @property
  def recurrent(self) -> bool:
    return self.step is not None

  def start(self, batch_size: int):
    """The state of `batch_size` episodes at their start (None: the policy
    has no state)."""
    if not self.recurrent:
      return None
    return tf.nest.map_structure(
        np.array, self.initial_state(tf.constant(batch_size, tf.int32)))

  def actions(self, observations, state):
    """(the actions for a batch of observations, the next state)."""
    if not self.recurrent:
      return np.asarray(self.act(observations)), None
    actions, state = self.step(observations, state)
    return np.asarray(actions), tf.nest.map_structure(np.array, state)


def _functions(module) -> dict:
  """The policy's functions of a snapshot module (`agents.snapshots`),
  and whether they are greedy over Q-values: it has `q_values`, or its
  metadata says so (a recurrent policy's Q-values need its state, so it
  has no `q_values`)."""
  recurrent = hasattr(module, 'step')
  q_values = getattr(module, 'q_values', None)
  policy = json.loads(module.metadata.numpy()).get('policy')
  return dict(act=None if recurrent else module.act, q_values=q_values,
              initial_state=getattr(module, 'initial_state', None),
              step=getattr(module, 'step', None), module=module,
              greedy=q_values is not None or policy == 'greedy')


def import_run_plugins(workdir: str, manifest=None):
  """Imports the plug-ins the run in `workdir` launched with (its record's
  --plugins), which may register its environment's suite or its agent."""
  manifest = manifest or run_manifest.read_manifest(workdir)
  plugins.import_plugins(str(manifest.get('flags', {}).get('plugins', '')))


def make_builder(workdir: str):
  """The builder of the run in `workdir`, with its checkpointed config."""
  manifest = run_manifest.read_manifest(workdir)
  import_run_plugins(workdir, manifest)
  try:
    agent = registry.get(manifest['program'])
  except ValueError as error:  # Another program's run.json.
    raise ValueError(f'{os.path.join(workdir, run_manifest.MANIFEST)}: '
                     f'{error}') from None
  fields = {field.name for field in dataclasses.fields(agent.config_class)}
  config = agent.config_class(**{name: value for name, value
                                 in manifest.get('config', {}).items()
                                 if name in fields})
  return agent.make_builder(config,
                            agent.resolve_environment(manifest['env']))


_WHERE_LEARNER_CHECKPOINTS_ARE = (
    'Learner checkpoints are in <workdir>/checkpoints/learner/ (every '
    '--checkpoint_every seconds and when the program stops); a run with '
    '--checkpoint_every=0 has none.')


def _learner_checkpoint(path: str) -> str:
  """The checkpoint prefix named by `path`: a prefix itself (`.../ckpt-N`)
  or a directory of learner checkpoints (its newest)."""
  prefix = None
  if os.path.isfile(f'{path}.index'):
    prefix = path
  elif os.path.isdir(path):
    prefix = tf.train.latest_checkpoint(path)
  if not prefix:
    raise ValueError(f'No learner checkpoint at {path}. '
                     f'{_WHERE_LEARNER_CHECKPOINTS_ARE}')
  # A learner's state has its step count beside the networks (the counter's
  # and other checkpoints do not).
  held = sorted({name.split('/')[0] for name, _ in
                 tf.train.list_variables(prefix)} -
                {'_CHECKPOINTABLE_OBJECT_GRAPH', 'save_counter'})
  if 'num_steps' not in held:
    raise ValueError(f'{prefix} is not a learner checkpoint (it holds '
                     f'{", ".join(held)}). {_WHERE_LEARNER_CHECKPOINTS_ARE}')
  return prefix


def from_checkpoint(workdir: str, checkpoint: Optional[str] = None) -> Policy:
  """The policy of a learner checkpoint of the run in `workdir` (default:
  its newest)."""
  builder = make_builder(workdir)
  prefix = _learner_checkpoint(
      checkpoint or checkpointing.checkpoint_directory(workdir, 'learner'))
  state = builder.policy_state()
  num_steps = tf.Variable(0, dtype=tf.int64, trainable=False)
  try:
    status = tf.train.Checkpoint(num_steps=num_steps, **state).restore(prefix)
    status.expect_partial().assert_existing_objects_matched()
  except (AssertionError, ValueError, tf.errors.OpError) as error:
    raise ValueError(
        f'The checkpoint {prefix} does not fit {builder.name} on '
        f'{builder.environment.name} as recorded in {workdir}/run.json '
        f'({str(error).splitlines()[0]}).') from error
  snapshot = builder.policy_snapshot(state)
  return Policy(environment=builder.environment, program=builder.name,
                source=prefix, learner_steps=int(num_steps.numpy()),
                **_functions(snapshot))


def from_snapshot(path: str) -> Policy:
  """The policy of a snapshot directory (`<workdir>/snapshots/policy-N`)."""
  module, metadata = snapshots.load(path)
  # A snapshot of a run (<workdir>/snapshots/policy-N): its plug-ins.
  run = os.path.dirname(os.path.dirname(os.path.abspath(path)))
  if os.path.isfile(os.path.join(run, run_manifest.MANIFEST)):
    import_run_plugins(run)
  agent = registry.get(metadata['program'])
  return Policy(environment=agent.resolve_environment(metadata['env']),
                program=metadata['program'], source=path,
                learner_steps=int(metadata['learner_steps']),
                **_functions(module))


def load(workdir: Optional[str] = None,
         checkpoint: Optional[str] = None) -> Policy:
  """`checkpoint`: a snapshot directory, a learner checkpoint (prefix or
  directory) inside a run directory; else the newest learner checkpoint of
  `workdir`."""
  if checkpoint:
    if not os.path.exists(checkpoint) and not os.path.isfile(
        f'{checkpoint}.index'):
      raise ValueError(f'--checkpoint={checkpoint} does not exist.')
    if os.path.isfile(os.path.join(checkpoint, 'saved_model.pb')):
      return from_snapshot(checkpoint)
    # A learner checkpoint: its run is <workdir>/checkpoints/learner/...
    _learner_checkpoint(checkpoint)  # Not one: say so before the run.
    directory = checkpoint if os.path.isdir(checkpoint) else os.path.dirname(
        checkpoint)
    run = workdir or os.path.dirname(os.path.dirname(
        os.path.abspath(directory)))
    return from_checkpoint(run, checkpoint)
  if not workdir:
    raise ValueError('Pass --workdir=<a run directory> or '
                     '--checkpoint=<a snapshot or learner checkpoint>.')
  if not os.path.isdir(workdir):
    raise ValueError(f'--workdir={workdir} does not exist.')
  return from_checkpoint(workdir)
