"""A test_mt program of three nodes whose loops run in
`program_stop.interrupt_if_stuck`, stopped with Launchpad's own stopper once
every loop runs. Used by test_program_stop.py:

  python -m tests.program_stop_probe

(from the repository root). Each node prints what happened to it:

  ends     logs in a tight loop (as the nodes log their rows) until its stop
           event, then does last work for longer than the grace: it must
           never be interrupted, and its last log line must be written.
  stuck    ignores the stop in a Python wait: interrupted by SystemExit,
           not before the grace has passed.
  failing  waits for the stop, then raises as a call to a node that has gone
           does: ended by SystemExit, whose cause is that error.
"""

import sys
import threading
import time

import launchpad as lp
from absl import app
from absl import logging

from launch.supervision import program_stop

running = {name: threading.Event() for name in ('ends', 'stuck', 'failing')}
stopped_at = []  # When the stopper stopped the program.


def report(name: str, what: str):
  since = time.monotonic() - stopped_at[0] if stopped_at else float('nan')
  # One write, newline included: print's two (the text, then the newline)
  # let another thread's text (Launchpad's stop countdown) in between.
  sys.stdout.write(f'PROGRAM_STOP_PROBE {name} {what} {since:.3f}\n')
  sys.stdout.flush()


def ends():
  with program_stop.interrupt_if_stuck('ends') as stopping:
    running['ends'].set()
    rows = 0
    while not stopping.is_set():
      logging.info('ends: row %d', rows)
      rows += 1
  # Longer than the grace, in Python: an interrupt left pending would
  # raise here.
  deadline = time.monotonic() + 2 * program_stop.GRACE_SECONDS
  while time.monotonic() < deadline:
    logging.info('ends: last work')
    time.sleep(0.05)
  logging.info('ends: done')
  report('ends', 'finished')


def stuck():
  try:
    with program_stop.interrupt_if_stuck('stuck'):
      running['stuck'].set()
      while True:
        time.sleep(0.01)
  except SystemExit:
    report('stuck', 'interrupted')
    raise


def failing():
  try:
    with program_stop.interrupt_if_stuck('failing') as stopping:
      running['failing'].set()
      stopping.wait()
      raise ConnectionError('the replay server has gone')
  except SystemExit as error:
    report('failing', f'ended_by_{type(error.__cause__).__name__}')
    raise


def stopper():
  for event in running.values():
    event.wait()
  stopped_at.append(time.monotonic())
  print('PROGRAM_STOP_PROBE every loop runs; stopping the program',
        flush=True)
  lp.make_program_stopper('test_mt')()


def main(_):
  program = lp.Program('program_stop_probe')
  for node in (ends, stuck, failing):
    program.add_node(lp.PyNode(node), label=node.__name__)
  manager = lp.launch(program, launch_type='test_mt',
                      serialize_py_nodes=False)  # Shares the events.
  threading.Thread(target=stopper, daemon=True).start()
  manager.wait()
  print('PROGRAM_STOP_PROBE the program has ended', flush=True)


if __name__ == '__main__':
  app.run(main)
