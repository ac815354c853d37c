"""Measures what variable cachers do to the learner's egress and to the age
of the actors' parameters.

The question (docs/architecture.md, "Variable cachers"): with
`--variable_cachers=N`, how many bytes of parameters does the learner send
per second, and how old are the parameters the actors act with? The
program (Ape-X DQN on gym:CartPole-v1, the `cartpole_smoke` preset with
`--actors` actors, a pull every `--variable_update_period` steps and
networks of `--mlp_hidden_sizes`) runs under local_mp once per cacher count
of `--cachers` (e.g. 0 and 2), `--repeats` times each, in turn.

In each run, once every actor has acted with parameters of a learner
update, a window of `--seconds`:

* the learner's bytes sent per second: the growth of the
  `parameter_bytes_sent` column of its log (every answer's parameters,
  `agents.variables.ServedBytes`: the payload, less the RPC's framing) over
  the window, and each cacher's likewise;
* the actors' parameter age: at each actor log row of the window, the
  learner's step then (interpolated between its log rows, one a second)
  less the version the actor acts with (the learner's step that made its
  parameters: `parameters_version`), in learner steps, and the seconds
  since the learner reached that step.

Each figure is the median over the window's rows (age) and over the
repeats. The age follows the actors' speed (an actor pulls every
`--variable_update_period` of its steps) and the learner's: both rates, of
all actors together and of the learner, are printed beside them.

  .venv/bin/python benchmarks/variable_cachers.py
  .venv/bin/python benchmarks/variable_cachers.py --repeats=1 --seconds=20

Prints a table and writes `benchmarks/results/variable_cachers.json`.
"""

import bisect
import time
from typing import Dict, List, Sequence, Tuple

from absl import app
from absl import flags

from benchmarks import common
from benchmarks import runs

flags.DEFINE_list('cachers', ['0', '2'], 'Variable cacher counts to measure.')
flags.DEFINE_integer('actors', 8, 'Actor processes.')
flags.DEFINE_integer('variable_update_period', 100,
                     'Steps between two pulls of an actor (CartPole: one '
                     'frame a step).')
flags.DEFINE_string('mlp_hidden_sizes', '256,256',
                    'The Q-network\'s layers: its parameters are what is '
                    'sent.')
flags.DEFINE_float('seconds', 30.0, 'Length of a run\'s measured window.')
flags.DEFINE_integer('repeats', 3, 'Runs per cacher count (median).')
flags.DEFINE_float('start_timeout', 600.0,
                   'Seconds a run may take to have every actor act with '
                   'parameters of a learner update.')
FLAGS = flags.FLAGS


def _series(rows: Sequence[Dict[str, float]], column: str
            ) -> List[Tuple[float, float]]:
  return [(row['walltime'], row[column]) for row in rows
          if column in row and 'walltime' in row]


def _at(points: List[Tuple[float, float]], when: float) -> float:
  """The value of a growing series at `when`, linear between its points."""
  times = [t for t, _ in points]
  index = bisect.bisect_left(times, when)
  if index <= 0:
    return points[0][1]
  if index >= len(points):
    return points[-1][1]
  (t0, v0), (t1, v1) = points[index - 1], points[index]
  return v0 + (v1 - v0) * (when - t0) / (t1 - t0) if t1 > t0 else v1


def _when(points: List[Tuple[float, float]], value: float) -> float:
  """When a growing series first reached `value`, linear between points."""
  for (t0, v0), (t1, v1) in zip(points, points[1:]):
    if v1 >= value:
      return t0 + (t1 - t0) * (value - v0) / (v1 - v0) if v1 > v0 else t1
  return points[-1][0]


def _rate(points: List[Tuple[float, float]], begin: float,
          end: float) -> float:
  return (_at(points, end) - _at(points, begin)) / (end - begin)


def _actor_labels(actors: int) -> List[str]:
  return ['actor'] + [f'actor_{index}' for index in range(1, actors)]


def _cacher_labels(cachers: int) -> List[str]:
  return (['cacher'] if cachers == 1 else
          [f'cacher_{index}' for index in range(cachers)])


def _acting_with_updates(run: runs.ProgramRun, actors: int) -> bool:
  return all(any(row.get('parameters_version', -1) > 0
                 for row in run.rows(label))
             for label in _actor_labels(actors))


def measure(cachers: int) -> Dict[str, float]:
  """One run with `cachers` cachers: its window's figures."""
  flags_ = ['--preset=cartpole_smoke', f'--num_actors={FLAGS.actors}',
            '--num_evaluators=0', '--log_every=1',
            f'--variable_update_period={FLAGS.variable_update_period}',
            f'--mlp_hidden_sizes={FLAGS.mlp_hidden_sizes}',
            f'--dueling_hidden_size={FLAGS.mlp_hidden_sizes.split(",")[-1]}',
            f'--variable_cachers={cachers}', '--checkpoint_every=0',
            '--replay_checkpoint_every=0']
  with runs.ProgramRun('apex_dqn', flags_, name=f'cachers{cachers}') as run:
    run.wait_for(lambda: _acting_with_updates(run, FLAGS.actors),
                 FLAGS.start_timeout,
                 'Every actor acting with parameters of a learner update')
    begin = time.time()
    time.sleep(FLAGS.seconds)
    end = time.time()
    time.sleep(2.0)  # The rows of the window's last second.
    learner = run.rows('learner')
    steps = _series(learner, 'learner_steps')
    sent = _series(learner, 'parameter_bytes_sent')
    ages_steps, ages_seconds = [], []
    for label in _actor_labels(FLAGS.actors):
      for row in run.rows(label):
        version = row.get('parameters_version', -1)
        if not begin <= row['walltime'] <= end or version <= 0:
          continue
        ages_steps.append(_at(steps, row['walltime']) - version)
        ages_seconds.append(row['walltime'] - _when(steps, version))
    cacher_rates = [
        _rate(_series(run.rows(label), 'parameter_bytes_sent'), begin, end)
        for label in _cacher_labels(cachers)] if cachers else []
  return {
      'learner_bytes_per_second': _rate(sent, begin, end),
      'learner_steps_per_second': _rate(steps, begin, end),
      'actor_steps_per_second': _rate(_series(learner, 'actor_steps'), begin,
                                      end),
      'cacher_bytes_per_second': (common.median(cacher_rates)
                                  if cacher_rates else 0.0),
      'age_learner_steps': common.median(ages_steps),
      'age_seconds': common.median(ages_seconds),
      'actor_rows': len(ages_steps),
  }


def main(argv):
  del argv
  counts = [int(count) for count in FLAGS.cachers]
  measured = {count: [] for count in counts}
  for repeat in range(FLAGS.repeats):
    for count in counts:  # In turn: the machine's load drifts.
      figures = measure(count)
      measured[count].append(figures)
      print(f'repeat {repeat + 1}, {count} cachers: {figures}', flush=True)
  results = []
  for count in counts:
    median = {key: common.median(run[key] for run in measured[count])
              for key in measured[count][0]}
    results.append({'cachers': count, **median, 'runs': measured[count]})
  common.print_table(
      f'{FLAGS.actors} actors, a pull every {FLAGS.variable_update_period} '
      f'steps; medians of {FLAGS.repeats} runs of {FLAGS.seconds:g} s',
      ['cachers', 'learner MB/s', 'each cacher MB/s', 'age (updates)',
       'age (s)', 'learner updates/s', 'actor steps/s'],
      [[row['cachers'], row['learner_bytes_per_second'] / 1e6,
        row['cacher_bytes_per_second'] / 1e6, row['age_learner_steps'],
        row['age_seconds'], row['learner_steps_per_second'],
        row['actor_steps_per_second']]
       for row in results])
  path = common.write_result('variable_cachers', {
      'settings': {'actors': FLAGS.actors, 'cachers': counts,
                   'variable_update_period': FLAGS.variable_update_period,
                   'mlp_hidden_sizes': FLAGS.mlp_hidden_sizes,
                   'seconds': FLAGS.seconds, 'repeats': FLAGS.repeats,
                   'program': 'apex_dqn --preset=cartpole_smoke, local_mp, '
                              'no evaluator'},
      'results': results,
  })
  print(f'\nWrote {path}')


if __name__ == '__main__':
  app.run(main)
