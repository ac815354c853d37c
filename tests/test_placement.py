"""Placement of the nodes on the cores (`launch.machine.placement`, --placement,
--pin_learner, --pin_others): a real local_mp program's processes, read
from the kernel (/proc: every thread's allowed CPUs and nice) and from
each node's log of TensorFlow's pool sizes; and a placement that cannot run
here refused before anything starts."""

import os
import sys

import pytest

import helpers
from launch.machine import placement

SMOKE = ['--preset=cartpole_smoke', '--max_actor_steps=100000000']
NUM_ACTORS = 2  # cartpole_smoke's.
NODES = ['coordinator', 'counter', 'replay', 'replay_server', 'learner',
         'actor', 'actor_1', 'evaluator']


def test_cpu_lists_read_and_written_as_the_kernel_does():
  assert placement.parse_cpus('0-3,6') == {0, 1, 2, 3, 6}
  assert placement.parse_cpus(' 2, 0-1 ') == {0, 1, 2}
  assert placement.parse_cpus('') == set()
  assert placement.format_cpus({9, 0, 1, 2, 3, 6, 8}) == '0-3,6,8-9'
  assert placement.format_cpus({5}) == '5'
  for bad in ('a', '3-1', '-1', '0-x'):
    with pytest.raises(ValueError):
      placement.parse_cpus(bad)


def test_the_plan_gives_the_learner_its_cores_and_the_rest_one_thread():
  plan = placement.plan(['learner', 'actor', 'evaluator', 'replay'],
                        pin_learner='0-2', pin_others='3')
  assert plan['learner'] == placement.NodePlacement({0, 1, 2}, None, 0)
  assert plan['learner'].pool_size() == 3
  assert plan['actor'] == placement.NodePlacement({3}, 1, 0)
  assert plan['evaluator'] == placement.NodePlacement(
      {3}, 1, placement.EVALUATOR_NICE)
  assert plan['replay'] == placement.NodePlacement({3}, 1, 0)
  # A replica on a machine of its own: pools only.
  cloud = placement.plan(['learner', 'evaluator'], pin=False)
  assert cloud['evaluator'] == placement.NodePlacement(None, 1, 0)
  before = placement.plan(['learner', 'actor'], placement.TF_DEFAULT)
  assert before['learner'] == before['actor'] == placement.NodePlacement(
      None, 0, 0)


def test_pools_are_sized_as_tensorflow_is_imported_and_not_before():
  # In a fresh interpreter: applying a placement of 1 thread a pool does
  # not import TensorFlow; importing it (here by Reverb, as the replay node
  # does) sizes its pools to 1 where its default is a thread per core.
  script = (
      'import sys\n'
      'from launch.machine import placement\n'
      'placement.apply(placement.NodePlacement(None, 1, 0))\n'
      'print("before", "tensorflow" in sys.modules)\n'
      'import reverb\n'
      'import tensorflow as tf\n'
      'print("pools", tf.config.threading.get_intra_op_parallelism_threads(),'
      ' tf.config.threading.get_inter_op_parallelism_threads())\n'
      'print("sum", int(tf.reduce_sum(tf.range(10))))\n')
  result = helpers.run([sys.executable, '-c', script], 300)
  assert result.returncode == 0, result.stdout[-3000:]
  printed = [line for line in result.stdout.splitlines()
             if line.split(' ')[0] in ('before', 'pools', 'sum')]
  assert printed == ['before False', 'pools 1 1', 'sum 45'], result.stdout


def _kernel_view(pid: int):
  """{thread: (allowed CPUs, nice)} of process `pid`, from /proc."""
  view = {}
  for thread in os.listdir(f'/proc/{pid}/task'):
    try:
      with open(f'/proc/{pid}/task/{thread}/status') as f:
        allowed = next(line.split(':', 1)[1].strip() for line in f
                       if line.startswith('Cpus_allowed_list'))
      with open(f'/proc/{pid}/task/{thread}/stat') as f:
        nice = int(f.read().rsplit(')', 1)[1].split()[16])
    except (FileNotFoundError, ProcessLookupError):
      continue  # The thread has ended since.
    view[int(thread)] = (placement.parse_cpus(allowed), nice)
  return view


def _lines_with(program, marker: str):
  """{node label: its log's line with `marker`}."""
  return {line.split(']')[0].lstrip('['): line
          for line in program.logs().splitlines() if marker in line}


def _run_until_every_node_logged(tmp_path, *flags):
  workdir = tmp_path / 'run'
  program = helpers.Program(
      helpers.program_command('apex_dqn', f'--workdir={workdir}', *SMOKE,
                              *flags), tmp_path / 'output.txt')
  program.wait_until(
      lambda: helpers.every_node_logged(workdir, NUM_ACTORS),
      helpers.START_TIMEOUT, 'a log row of every node')
  program.wait_until(lambda: all(helpers.pid(workdir, label)
                                 for label in NODES),
                     helpers.START_TIMEOUT, 'every node\'s pid file')
  return program, workdir


# A whole local_mp program beyond make test's one smoke run: the second tier
# (pytest.ini).
@pytest.mark.slow
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2,
                    reason='pins the learner to one CPU of two or more')
def test_the_learner_pinned_the_rest_everywhere_the_evaluator_yielding(
    tmp_path):
  # One program for both cases (each launch costs a minute of start-up):
  # the learner pinned to one CPU, every other node left to the system.
  everywhere = set(os.sched_getaffinity(0))
  learner_cpu = max(everywhere)
  program, workdir = _run_until_every_node_logged(
      tmp_path, f'--pin_learner={learner_cpu}')
  try:
    for label in NODES:
      view = _kernel_view(helpers.pid(workdir, label))
      assert view, label
      # The replay server is the replay node's child: it takes the node's.
      expected_cpus = {learner_cpu} if label == 'learner' else everywhere
      expected_nice = (placement.EVALUATOR_NICE if label == 'evaluator'
                       else 0)
      for thread, (cpus, nice) in view.items():
        assert cpus == expected_cpus, (label, thread, cpus)
        assert nice == expected_nice, (label, thread, nice)
    placed = _lines_with(program, 'Placement:')
    assert set(placed) >= set(NODES) - {'replay_server'}, placed
    pools = _lines_with(program, 'TensorFlow pools:')
    # The learner's pools: the one CPU it may use; every other node's: one.
    for label in ('learner', 'actor', 'actor_1', 'evaluator', 'replay',
                  'coordinator'):
      assert 'TensorFlow pools: intra-op 1, inter-op 1' in pools[label], (
          label, pools.get(label))
    # The counter has no use for TensorFlow: sizing its pools, as it is
    # imported, does not import it.
    assert 'counter' not in pools, pools['counter']
    assert not helpers.has_tensorflow(helpers.pid(workdir, 'counter'))
    program.interrupt()
  finally:
    program.close()


@pytest.mark.parametrize('flag, message', [
    ('--pin_learner=0-4095', 'are not among those this launch may use'),
    ('--pin_others=one', "'one' is not a CPU or a range of CPUs"),
    ('--placement=pinned', '--placement=pinned: it is one of sized, '
     'tf_default.'),
])
def test_a_placement_that_cannot_run_is_refused_before_anything_starts(
    tmp_path, flag, message):
  workdir = tmp_path / 'run'
  result = helpers.run(helpers.program_command(
      'apex_dqn', f'--workdir={workdir}', '--preset=cartpole_smoke', flag),
                       300)
  assert result.returncode != 0
  assert message in result.stdout, result.stdout[-3000:]
  assert 'Traceback' not in result.stdout
  assert not workdir.exists()
