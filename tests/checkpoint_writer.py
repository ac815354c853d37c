"""Saves learner-style checkpoints in a loop until killed (for
test_checkpoint_atomic.py):

  python -m tests.checkpoint_writer <workdir>

(from the repository root). Each save holds a large variable filled with the
save's number and a step count equal to it, through the same checkpointer the
learner uses. On start it restores the newest checkpoint and prints the step
it found.
"""

import sys

import tensorflow as tf

from launch.runs import checkpointing

SIZE = 8_000_000  # 32 MB of float32: a save takes a while.


def main(workdir: str):
  state = {
      'weights': tf.Variable(tf.zeros([SIZE])),
      'num_steps': tf.Variable(0, dtype=tf.int64),
  }
  checkpointer = checkpointing.make_checkpointer(state, workdir, 'learner',
                                                 period_seconds=1.0)
  step = int(state['num_steps'].numpy())
  print(f'restored {step}', flush=True)
  while True:
    step += 1
    state['weights'].assign(tf.fill([SIZE], float(step)))
    state['num_steps'].assign(step)
    checkpointer.save(force=True)
    print(f'saved {step}', flush=True)


if __name__ == '__main__':
  main(sys.argv[1])
