"""Actor efficiency, vectorised actors and learner utilisation (goals 1, 2,
3 and 6 of docs/performance.md), each measured side by side in one run.

Layout, as in the paper (every actor owns a CPU core; the learner has its
own): the actor process is pinned to CPU 0; learner, replay server, counter
and launcher share CPU 1. The baselines run pinned the same way, and side by
side, so that each sees the other CPU as busy as in the program (the two
CPUs of a small cloud machine share hardware: an actor loop alone runs
faster than next to a training learner):

  actor baseline    `bare_loops.py actor`: the same environments stepped with
                    the same batched forward pass of the same Q-network, and
                    nothing else, on CPU 0.
  learner baseline  `bare_loops.py learner`: the learner's same compiled
                    update on a batch already in memory, on CPU 1.

Then the real program (`programs/apex_dqn.py --lp_launch_type=local_mp`, the
default Ape-X DQN on atari:Pong, one actor, no evaluator) runs with K = 1 and
K = 16 environments per actor. Replay starts learning at
`--min_replay_size` (5,000 here, not the paper's 50,000, so that learning
starts within seconds); once the learner has logged its first steps, the
actor's and the learner's own logged rates (rows every `--log_every`
seconds) are read for `--seconds`.

  actor efficiency    = actor steps/s in the program / bare loop (goal >= 0.9)
  vectorised speed-up = program K=16 frames/s / program K=1 frames/s (>= 1.8)
  learner utilisation = learner updates/s in the program / in memory (>= 0.9)
  frames per actor core / the paper's 139 (50K frames/s from 360 actors)

  .venv/bin/python benchmarks/program_throughput.py
"""

import os
import signal
import subprocess
import time

from absl import app
from absl import flags

from benchmarks import common
from benchmarks import runs

flags.DEFINE_string('env', 'atari:Pong', 'Environment.')
flags.DEFINE_list('envs_per_actor', ['1', '16'], 'Values of K to measure.')
flags.DEFINE_integer('repeats', 4, 'Pairs of windows (program, then bare '
                     'loops) per K; figures are medians over them.')
flags.DEFINE_float('window_seconds', 15.0, 'Seconds of one window.')
flags.DEFINE_float('log_every', 1.0, 'Seconds between the nodes\' log rows.')
flags.DEFINE_integer('min_replay_size', 5000, 'Transitions before learning.')
FLAGS = flags.FLAGS

ACTOR_CPU, LEARNER_CPU = 0, 1
PAPER_FRAMES_PER_ACTOR_CORE = 139.0  # 50K frames/s from 360 actor cores.
FRAMES_PER_STEP = 4  # Atari frame skip.


def _start_bare(kind: str, cpu: int, *flags_) -> subprocess.Popen:
  """A bare loop, started, pinned and paused once it is ready."""
  process = common.start_bare_loop(kind, f'--env={FLAGS.env}',
                                   f'--cpus={cpu}', *flags_)
  process.send_signal(signal.SIGSTOP)
  return process


def _program_rates(rows, windows):
  """A node's logged rates (`steps_per_second`, over the interval since its
  row before) whose interval lies within one of `windows`."""
  return [row['steps_per_second'] for before, row in zip(rows, rows[1:])
          if any(begin <= before['walltime'] and row['walltime'] <= end
                 for begin, end in windows)]


def _measure(envs_per_actor: int):
  """The program (actor on the actor CPU, learner and the rest on the
  learner CPU) and the bare loops (on the same CPUs) in turn: while one pair
  runs, the other is paused (SIGSTOP), so that both see the same machine."""
  # The paper's Ape-X DQN, with what this measurement changes.
  flags_ = ['--preset=paper', f'--env={FLAGS.env}', '--num_actors=1',
            f'--envs_per_actor={envs_per_actor}', '--num_evaluators=0',
            f'--min_replay_size={FLAGS.min_replay_size}',
            f'--log_every={FLAGS.log_every}', '--checkpoint_every=0',
            '--replay_checkpoint_every=0']
  with runs.ProgramRun('apex_dqn', flags_, name=f'k{envs_per_actor}') as run:
    run.wait_for_nodes(['actor', 'learner', 'replay_server'])
    run.pin({'actor': [ACTOR_CPU]}, other_cpus=[LEARNER_CPU])
    bare = [_start_bare('actor', ACTOR_CPU, f'--envs={envs_per_actor}'),
            _start_bare('learner', LEARNER_CPU)]
    try:
      run.wait_for(lambda: len(run.rows('learner')) >= 2, 600,
                   'The learner logged no steps')
      nodes = [run.node_pids()['actor'], run.node_pids()['learner']]
      loops = [process.pid for process in bare]
      program_windows, bare_windows, rss = [], [], []
      for _ in range(FLAGS.repeats):
        for windows, running, paused in [(program_windows, nodes, loops),
                                         (bare_windows, loops, nodes)]:
          for pid in paused:
            os.kill(pid, signal.SIGSTOP)
          for pid in running:
            os.kill(pid, signal.SIGCONT)
          begin = time.time()
          time.sleep(FLAGS.window_seconds)
          windows.append((begin, time.time()))
          if running is nodes:
            rss.append(run.rss_bytes())
      for pid in nodes:
        os.kill(pid, signal.SIGCONT)
      time.sleep(2 * FLAGS.log_every)  # The last rows reach the CSV files.
      run.check_running()
      actor_rows, learner_rows = run.rows('actor'), run.rows('learner')
    finally:
      for process in bare:
        process.kill()
    bare_lines = [process.communicate()[0].splitlines() for process in bare]
  return {
      'actor_bare': common.bare_rates(bare_lines[0], bare_windows),
      'learner_bare': common.bare_rates(bare_lines[1], bare_windows),
      'actor_program': _program_rates(actor_rows, program_windows),
      'learner_program': _program_rates(learner_rows, program_windows),
      'median_rss_bytes': {
          label: common.median(sample[label] for sample in rss
                               if label in sample)
          for label in rss[-1]},
  }


def main(_):
  began = time.time()
  ks = [int(k) for k in FLAGS.envs_per_actor]
  measured = {k: _measure(k) for k in ks}

  actors, learners = [], []
  for k in ks:
    actor_bare = measured[k]['actor_bare']
    learner_bare = measured[k]['learner_bare']
    bare = common.median(actor_bare)
    inside = common.median(measured[k]['actor_program'])
    actors.append({
        'envs_per_actor': k,
        'bare_steps_per_second': actor_bare,
        'program_steps_per_second': measured[k]['actor_program'],
        'median_bare_steps_per_second': bare,
        'median_program_steps_per_second': inside,
        'efficiency': inside / bare,
        'frames_per_second_per_actor_core': inside * FRAMES_PER_STEP,
        'ratio_to_paper_139': inside * FRAMES_PER_STEP /
                              PAPER_FRAMES_PER_ACTOR_CORE,
        'median_actor_rss_bytes': measured[k]['median_rss_bytes'].get('actor'),
    })
    in_memory = common.median(learner_bare)
    in_program = common.median(measured[k]['learner_program'])
    learners.append({
        'envs_per_actor': k,
        'in_memory_updates_per_second': learner_bare,
        'program_updates_per_second': measured[k]['learner_program'],
        'median_in_memory_updates_per_second': in_memory,
        'median_program_updates_per_second': in_program,
        'utilisation': in_program / in_memory,
        'median_learner_rss_bytes':
            measured[k]['median_rss_bytes'].get('learner'),
    })
  speedup = None
  if 1 in ks and len(ks) > 1:
    speedup = (actors[-1]['median_program_steps_per_second'] /
               actors[0]['median_program_steps_per_second'])

  common.print_table(
      f'Actor on one core ({FLAGS.env}; medians; goal: efficiency >= 0.90)',
      ['K', 'bare steps/s', 'program steps/s', 'efficiency', 'frames/s/core',
       'x paper 139'],
      [[a['envs_per_actor'], a['median_bare_steps_per_second'],
        a['median_program_steps_per_second'], a['efficiency'],
        a['frames_per_second_per_actor_core'], a['ratio_to_paper_139']]
       for a in actors])
  if speedup is not None:
    print(f'\nVectorised actor: K={ks[-1]} gives {speedup:.2f}x the frames/s '
          f'of K=1 in the program (goal >= 1.8).')
  common.print_table(
      'Learner on one core (batch 512; medians; goal: utilisation >= 0.90)',
      ['K', 'in-memory updates/s', 'program updates/s', 'utilisation'],
      [[l['envs_per_actor'], l['median_in_memory_updates_per_second'],
        l['median_program_updates_per_second'], l['utilisation']]
       for l in learners])
  path = common.write_result('program_throughput', {
      'settings': {
          'env': FLAGS.env, 'actor_cpu': ACTOR_CPU,
          'learner_cpu': LEARNER_CPU, 'min_replay_size': FLAGS.min_replay_size,
          'window_seconds': FLAGS.window_seconds,
          'log_every': FLAGS.log_every,
          'repeats': FLAGS.repeats,
      },
      'actors': actors,
      'vectorised_speedup': speedup,
      'learners': learners,
      # What the default program's learner uses of replay (for
      # replay_headroom.py): its updates/s with one K=1 actor.
      'learner': {'in_program_updates_per_second':
                      learners[0]['median_program_updates_per_second']},
      'goals': {
          'actor_efficiency_at_least_0.9': all(
              a['efficiency'] >= 0.9 for a in actors),
          'vectorised_speedup_at_least_1.8': (
              None if speedup is None else speedup >= 1.8),
          'learner_utilisation_at_least_0.9': all(
              l['utilisation'] >= 0.9 for l in learners),
      },
      'seconds_taken': time.time() - began,
  })
  print(f'\nWritten {os.path.relpath(path, common.ROOT)} in '
        f'{time.time() - began:.0f} s.')


if __name__ == '__main__':
  app.run(main)
