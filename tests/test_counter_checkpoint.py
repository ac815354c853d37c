"""The counter's checkpoint: its counts survive a relaunch, a save cut short
leaves the last whole one, and a run whose counter saved TensorFlow
checkpoints resumes from its newest."""

import json
import os

import numpy as np
from acme.utils import counting

from launch.runs import checkpointing


def _counter_file(workdir) -> str:
  return os.path.join(checkpointing.checkpoint_directory(str(workdir),
                                                         'counter'),
                      checkpointing.COUNTS_FILE)


def test_counts_saved_are_the_counts_of_the_next_launch(tmp_path):
  counter = checkpointing.CheckpointedCounter(str(tmp_path), 600.0)
  assert counter.get_counts() == {}
  counter.increment(actor_steps=np.int64(1_000), learner_steps=7)
  counter.increment(actor_steps=np.int64(24))
  assert counter.save_checkpoint()
  with open(_counter_file(tmp_path)) as f:
    assert json.load(f)['counts'] == {'actor_steps': 1_024, 'learner_steps': 7}
  counter.increment(learner_steps=1)  # After the save: not in it.

  relaunched = checkpointing.CheckpointedCounter(str(tmp_path), 600.0)
  assert relaunched.get_counts() == {'actor_steps': 1_024, 'learner_steps': 7}


def test_a_save_cut_short_leaves_the_last_whole_one(tmp_path):
  counter = checkpointing.CheckpointedCounter(str(tmp_path), 600.0)
  counter.increment(actor_steps=5)
  counter.save_checkpoint()
  # What a process killed while writing its next save leaves behind.
  with open(_counter_file(tmp_path) + '.partial', 'w') as f:
    f.write('{"counts": {"actor_st')
  relaunched = checkpointing.CheckpointedCounter(str(tmp_path), 600.0)
  assert relaunched.get_counts() == {'actor_steps': 5}
  relaunched.increment(actor_steps=1)
  assert relaunched.save_checkpoint()
  assert checkpointing.CheckpointedCounter(
      str(tmp_path), 600.0).get_counts() == {'actor_steps': 6}


def test_a_run_with_tensorflow_counter_checkpoints_resumes_their_counts(
    tmp_path):
  # The counter of a run saved before the counts were JSON.
  old = counting.Counter()
  old.increment(actor_steps=300, learner_steps=40)
  checkpointer = checkpointing.make_checkpointer(
      {'counter': old}, str(tmp_path), 'counter', 1.0)
  checkpointer.save(force=True)
  old.increment(actor_steps=1)  # After the newest save: not in it.

  counter = checkpointing.CheckpointedCounter(str(tmp_path), 600.0)
  assert counter.get_counts() == {'actor_steps': 300, 'learner_steps': 40}
  counter.increment(learner_steps=2)
  counter.save_checkpoint()
  # From then on the JSON counts are the ones read.
  assert checkpointing.CheckpointedCounter(
      str(tmp_path), 600.0).get_counts() == {'actor_steps': 300,
                                            'learner_steps': 42}


def test_checkpoints_off_saves_nothing(tmp_path):
  counter = checkpointing.CheckpointedCounter(str(tmp_path), 0.0)
  counter.increment(actor_steps=3)
  assert not counter.save_checkpoint()
  assert not os.path.exists(checkpointing.checkpoint_directory(
      str(tmp_path), 'counter'))
