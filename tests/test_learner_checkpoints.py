"""The learner's checkpoints, written beside its updates
(`checkpointing.LearnerCheckpoints`): what a checkpoint holds is the
learner's state at the moment its save began, every variable of it
(networks, target networks, optimiser moments, step count), even while the
learner goes on updating as it is written; a relaunch restores exactly
that; a forced save waits for its write; and a write that fails says so and
leaves the newest earlier checkpoint in place."""

import os

import numpy as np
import pytest
import sonnet as snt
import tensorflow as tf

from launch.runs import checkpointing
from tests import test_dpg_learner
from tests import test_learner


def _dqn(seed: int):
  samples = [test_learner.make_sample(seed=seed + i) for i in range(4)] * 8
  learner, _, _ = test_learner.make_learner(
      samples, optimizer=snt.optimizers.Adam(0.01), target_update_period=3,
      online_seed=seed, target_seed=seed + 1)
  return learner


def _dpg(seed: int):
  samples = [test_dpg_learner.make_sample(seed=seed + i)
             for i in range(4)] * 8
  learner, _ = test_dpg_learner.make_learner(
      samples, nets=test_dpg_learner.Nets(seed), target_update_period=3)
  return learner


def _values(state):
  """Every variable of a learner's state, by its path in the state."""
  holder = tf.Module()
  holder.state = dict(state)
  return {variable.name + str(index): variable.numpy()
          for index, variable in enumerate(holder.variables)}


def _assert_same(actual, expected):
  assert actual.keys() == expected.keys()
  for key in expected:
    np.testing.assert_array_equal(actual[key], expected[key], err_msg=key)


def _differs(actual, expected) -> bool:
  return any(not np.array_equal(actual[key], expected[key])
             for key in expected)


@pytest.mark.parametrize('make', [_dqn, _dpg], ids=['dqn_adam', 'dpg'])
def test_a_checkpoint_holds_the_state_its_save_began_with(tmp_path, make):
  workdir = str(tmp_path)
  learner = make(seed=3)
  for _ in range(2):  # The optimiser's moments exist and are not zero.
    learner.step()
  written = []
  checkpoints = checkpointing.LearnerCheckpoints(
      learner.state, lambda: learner.num_steps, workdir, 'learner',
      period_seconds=1e-4,
      after_write=lambda steps: written.append(
          (steps, _values(checkpoints.shadow))))
  assert checkpoints.save() and checkpoints.wait()
  assert checkpoints.saved_steps == 2

  # A save begun, then more updates while it may still be being written.
  learner.step()
  assert checkpoints.save()
  began_with = _values(learner.state)
  for _ in range(5):
    learner.step()
  assert _differs(_values(learner.state), began_with)
  assert checkpoints.wait()
  assert checkpoints.saved_steps == 3 and learner.num_steps == 8
  # The shadow the policy snapshot is made from held the same values.
  assert [steps for steps, _ in written] == [2, 3]
  _assert_same(written[-1][1], began_with)

  # A relaunch (a new learner of other initial values) restores them all.
  relaunched = make(seed=11)
  relaunched.step()  # Its optimiser's state exists, as a learner's does.
  assert _differs(_values(relaunched.state), began_with)
  restored = checkpointing.LearnerCheckpoints(
      relaunched.state, lambda: relaunched.num_steps, workdir, 'learner',
      period_seconds=3600.0)
  _assert_same(_values(relaunched.state), began_with)
  assert relaunched.num_steps == restored.saved_steps == 3
  assert tf.train.latest_checkpoint(checkpointing.checkpoint_directory(
      workdir, 'learner')).endswith('ckpt-3')  # Named by its steps.


def test_checkpoints_follow_the_learner_and_keep_the_newest_two(tmp_path):
  workdir = str(tmp_path)
  learner = _dqn(seed=5)
  checkpoints = checkpointing.LearnerCheckpoints(
      learner.state, lambda: learner.num_steps, workdir, 'learner',
      period_seconds=0.0001)
  steps_saved = []
  for _ in range(6):
    learner.step()
    if checkpoints.save():
      steps_saved.append(learner.num_steps)
    checkpoints.wait()  # Each save due: the one before it is written.
  assert steps_saved == [1, 2, 3, 4, 5, 6]
  learner.step()
  checkpoints.save(force=True)
  directory = checkpointing.checkpoint_directory(workdir, 'learner')
  assert tf.train.latest_checkpoint(directory).endswith('ckpt-7')
  indexes = sorted(name for name in os.listdir(directory)
                   if name.endswith('.index'))
  assert indexes == ['ckpt-6.index', 'ckpt-7.index']
  reader = tf.train.load_checkpoint(os.path.join(directory, 'ckpt-7'))
  assert reader.get_tensor('num_steps/.ATTRIBUTES/VARIABLE_VALUE') == 7


def test_a_save_is_due_at_the_first_update_then_a_period_after_the_last(
    tmp_path):
  learner = _dqn(seed=9)
  learner.step()
  checkpoints = checkpointing.LearnerCheckpoints(
      learner.state, lambda: learner.num_steps, str(tmp_path), 'learner',
      period_seconds=3600.0)
  assert checkpoints.save()
  assert checkpoints.wait() and checkpoints.saved_steps == 1
  learner.step()
  assert not checkpoints.save()  # An hour later.
  assert checkpoints.saved_steps == 1
  assert checkpoints.save(force=True) and checkpoints.saved_steps == 2


def test_a_failed_write_is_said_and_leaves_the_newest_earlier_one(tmp_path):
  workdir = str(tmp_path)
  learner = _dqn(seed=7)
  learner.step()
  checkpoints = checkpointing.LearnerCheckpoints(
      learner.state, lambda: learner.num_steps, workdir, 'learner',
      period_seconds=3600.0)
  checkpoints.save(force=True)
  saved = _values(learner.state)
  directory = checkpointing.checkpoint_directory(workdir, 'learner')
  # The disk refuses: a file where the checkpoint's data would go.
  learner.step()
  blocker = os.path.join(directory, 'ckpt-2_temp')
  with open(blocker, 'w') as f:
    f.write('not a directory')
  with pytest.raises(RuntimeError, match='step 2 could not be written'):
    checkpoints.save(force=True)
  assert checkpoints.saved_steps == 1
  os.remove(blocker)

  relaunched = _dqn(seed=8)
  relaunched.step()
  checkpointing.LearnerCheckpoints(
      relaunched.state, lambda: relaunched.num_steps, workdir, 'learner',
      period_seconds=3600.0)
  _assert_same(_values(relaunched.state), saved)
