"""Data generation against the number of actor processes (goal 5 of
docs/performance.md; the paper's Figure 13 at the scale of one machine),
with each actor's memory.

Runs the real program (`programs/apex_dqn.py --lp_launch_type=local_mp`,
Ape-X DQN on atari:Pong, K = 1 environment per actor) with 1, 2, 4 and 8
actors and no evaluator. The learner is left idle (`--min_replay_size` equal
to the replay capacity) so that the actors have the cores to themselves:
this measures how data generation scales, not how actors and learner share
two cores (`program_throughput.py` measures that). Once every actor has
logged, each actor's own logged rate is read for `--seconds`; the total is
the sum of the actors' medians. Resident memory (RSS) of every node is
sampled during the window.

Expectation on a 2-core machine: growth up to 2 actors, then flat (no
collapse) as more processes share the cores.

  .venv/bin/python benchmarks/scaling.py
"""

import os
import time

from absl import app
from absl import flags

from benchmarks import common
from benchmarks import runs

flags.DEFINE_string('env', 'atari:Pong', 'Environment.')
flags.DEFINE_list('num_actors', ['1', '2', '4', '8'], 'Actor counts.')
flags.DEFINE_float('seconds', 25.0, 'Seconds of measurement per count.')
flags.DEFINE_float('log_every', 4.0, 'Seconds between the actors\' log rows.')
flags.DEFINE_integer('replay_capacity', 1_000_000, 'Replay capacity (also '
                     'the minimum size, so that the learner never starts).')
FLAGS = flags.FLAGS

FRAMES_PER_STEP = 4
MIB = 2**20


def _labels(num_actors: int):
  return ['actor'] + [f'actor_{i}' for i in range(1, num_actors)]


def _measure(num_actors: int):
  # The paper's Ape-X DQN, with what this measurement changes.
  flags_ = ['--preset=paper', f'--env={FLAGS.env}',
            f'--num_actors={num_actors}',
            '--num_evaluators=0', f'--replay_capacity={FLAGS.replay_capacity}',
            f'--min_replay_size={FLAGS.replay_capacity}',
            f'--log_every={FLAGS.log_every}', '--checkpoint_every=0',
            '--replay_checkpoint_every=0']
  labels = _labels(num_actors)
  with runs.ProgramRun('apex_dqn', flags_, name=f'n{num_actors}') as run:
    run.wait_for_nodes(labels + ['learner', 'replay_server'], timeout=300)
    run.wait_for(lambda: all(run.rows(label) for label in labels), 300,
                 'Some actor logged no row')
    skip = {label: len(run.rows(label)) for label in labels}
    start, rss = time.time(), []
    while time.time() - start < FLAGS.seconds:
      run.check_running()
      rss.append(run.rss_bytes())
      time.sleep(2.0)
    rates = {label: [row['steps_per_second']
                     for row in run.rows(label)[skip[label]:]]
             for label in labels}
  per_actor = [common.median(rates[label]) for label in labels]
  rss_by_label = {label: common.median(s[label] for s in rss if label in s)
                  for label in rss[-1]}
  actor_rss = [rss_by_label[label] for label in labels if label in rss_by_label]
  return {
      'num_actors': num_actors,
      'actor_steps_per_second': sum(per_actor),
      'frames_per_second': sum(per_actor) * FRAMES_PER_STEP,
      'per_actor_steps_per_second': per_actor,
      'logged_rates': rates,
      'median_actor_rss_mib': common.median(actor_rss) / MIB,
      'total_actor_rss_mib': sum(actor_rss) / MIB,
      'rss_mib_by_node': {label: value / MIB
                          for label, value in rss_by_label.items()},
  }


def _plot(results, path):
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  counts = [r['num_actors'] for r in results]
  figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
  left.plot(counts, [r['frames_per_second'] for r in results], 'o-',
            label='measured')
  single = results[0]['frames_per_second'] / results[0]['num_actors']
  cores = os.cpu_count()
  left.plot(counts, [single * min(n, cores) for n in counts], '--',
            color='grey', label=f'linear up to {cores} cores')
  left.set_xscale('log', base=2)
  left.set_xticks(counts, [str(n) for n in counts])
  left.set_xlabel('actor processes')
  left.set_ylabel('environment frames / s (all actors)')
  left.set_title(f'Data generation, {FLAGS.env}')
  left.legend()
  right.bar([str(n) for n in counts],
            [r['median_actor_rss_mib'] for r in results])
  right.set_xlabel('actor processes')
  right.set_ylabel('RSS per actor process (MiB)')
  right.set_title('Memory per actor')
  figure.tight_layout()
  figure.savefig(path, dpi=100)


def main(_):
  began = time.time()
  results = [_measure(int(n)) for n in FLAGS.num_actors]
  common.print_table(
      f'Scaling of data generation ({FLAGS.env}, learner idle, '
      f'{os.cpu_count()} cores)',
      ['actors', 'steps/s', 'frames/s', 'steps/s per actor',
       'RSS per actor (MiB)', 'RSS all actors (MiB)'],
      [[r['num_actors'], r['actor_steps_per_second'], r['frames_per_second'],
        r['actor_steps_per_second'] / r['num_actors'],
        r['median_actor_rss_mib'], r['total_actor_rss_mib']]
       for r in results])
  plot_path = os.path.join(common.RESULTS, 'scaling.png')
  os.makedirs(common.RESULTS, exist_ok=True)
  _plot(results, plot_path)
  best = max(r['actor_steps_per_second'] for r in results)
  path = common.write_result('scaling', {
      'settings': {'env': FLAGS.env, 'seconds': FLAGS.seconds,
                   'log_every': FLAGS.log_every, 'envs_per_actor': 1,
                   'learner': 'idle', 'evaluator': 'none'},
      'runs': results,
      'no_collapse': results[-1]['actor_steps_per_second'] >= 0.8 * best,
      'plot': os.path.relpath(plot_path, common.ROOT),
      'seconds_taken': time.time() - began,
  })
  print(f'\nWritten {os.path.relpath(path, common.ROOT)} and '
        f'{os.path.relpath(plot_path, common.ROOT)} in '
        f'{time.time() - began:.0f} s.')


if __name__ == '__main__':
  app.run(main)
