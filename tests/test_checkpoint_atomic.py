"""A process killed while it saves leaves the previous checkpoint usable.

tests/checkpoint_writer.py saves checkpoints in a loop through the learner's
checkpointer; it is killed (SIGKILL) at arbitrary moments, most of them in
the middle of a save, and restarted. After every kill the newest checkpoint
must restore, be internally consistent (every weight equals the step count
saved with it) and not be older than the last save the writer reported
complete.
"""

import random
import signal
import time

import numpy as np
import pytest
import tensorflow as tf

from launch.runs import checkpointing
import checkpoint_writer
import helpers

pytestmark = pytest.mark.slow

KILLS = 6


def _restore_newest(workdir):
  state = {
      'weights': tf.Variable(tf.zeros([checkpoint_writer.SIZE])),
      'num_steps': tf.Variable(0, dtype=tf.int64),
  }
  checkpointing.make_checkpointer(state, workdir, 'learner', 1.0)
  return int(state['num_steps'].numpy()), state['weights'].numpy()


def test_kill_during_save_leaves_a_usable_checkpoint(tmp_path, launch):
  rng = random.Random(0)
  last_reported = 0
  for kill in range(KILLS):
    writer = launch(f'writer_{kill}', helpers.module_command(
        'checkpoint_writer', str(tmp_path)))
    # Let it save a few times, then kill it at an arbitrary moment.
    writer.wait_until(
        lambda: writer.output().count('saved ') >= 2 + kill % 3,  # pylint: disable=cell-var-from-loop
        helpers.START_TIMEOUT, 'saves', poll_seconds=0.05)
    time.sleep(rng.uniform(0.0, 0.3))
    writer.signal_group(signal.SIGKILL)
    writer.wait_exit(30, 'SIGKILL')
    lines = writer.output().splitlines()
    restored = [int(line.split()[1]) for line in lines
                if line.startswith('restored')]
    saved = [int(line.split()[1]) for line in lines
             if line.startswith('saved')]
    assert restored and saved, lines[-20:]
    # The writer started from the checkpoint the previous round left.
    assert restored[0] >= last_reported
    last_reported = saved[-1]

    step, weights = _restore_newest(tmp_path)
    assert step >= last_reported, (step, last_reported)
    assert step <= last_reported + 1  # At most the save in flight finished.
    np.testing.assert_array_equal(weights, np.full_like(weights, step))
