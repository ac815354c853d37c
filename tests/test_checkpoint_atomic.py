"""A process killed while it saves leaves the previous checkpoint usable.

tests/checkpoint_writer.py saves checkpoints in a loop through the learner's
checkpointer; it is killed (SIGKILL) at arbitrary moments, most of them in
the middle of a save, and restarted. After every kill the newest checkpoint
must restore, be internally consistent (every weight equals the step count
saved with it) and not be older than the last save the writer reported
complete.
"""

import os
import random
import signal
import subprocess
import sys
import time

import numpy as np
import tensorflow as tf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WRITER = os.path.join(ROOT, 'tests', 'checkpoint_writer.py')
KILLS = 6


def _restore_newest(workdir):
  from agents import checkpointing  # pylint: disable=g-import-not-at-top
  import checkpoint_writer  # pylint: disable=g-import-not-at-top
  state = {
      'weights': tf.Variable(tf.zeros([checkpoint_writer.SIZE])),
      'num_steps': tf.Variable(0, dtype=tf.int64),
  }
  checkpointing.make_checkpointer(state, workdir, 'learner', 1.0)
  return int(state['num_steps'].numpy()), state['weights'].numpy()


def test_kill_during_save_leaves_a_usable_checkpoint(tmp_path):
  sys.path.insert(0, os.path.join(ROOT, 'tests'))
  rng = random.Random(0)
  last_reported = 0
  for kill in range(KILLS):
    log_path = tmp_path / f'writer_{kill}.log'
    with open(log_path, 'w') as log:
      writer = subprocess.Popen([sys.executable, WRITER, str(tmp_path)],
                                stdout=log, stderr=subprocess.STDOUT,
                                cwd=ROOT)
      deadline = time.time() + 120
      # Let it save a few times, then kill it at an arbitrary moment.
      while time.time() < deadline:
        saves = log_path.read_text().count('saved ')
        if saves >= 2 + kill % 3:
          break
        time.sleep(0.05)
      time.sleep(rng.uniform(0.0, 0.3))
      writer.send_signal(signal.SIGKILL)
      writer.wait()
    lines = log_path.read_text().splitlines()
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
