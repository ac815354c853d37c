"""The whole program with its learner in float32 and in bfloat16, back to
back: what `--learner_precision=bfloat16` gives a user.

`make train`'s kind of launch (`programs/apex_dqn.py --lp_launch_type=
local_mp --preset=<preset>`, the default placement, nothing pinned), once
for each precision in each of `--rounds` rounds, the order reversed in
every other round (float32, bfloat16, bfloat16, float32, ...) so that a
drift of the machine's speed over the run falls on both alike. Each
program's rates are measured as `program_limit.py` measures them: from
`--settle` seconds after its learner's first update, `--windows` windows
of `--window_seconds`, its actors' agent steps/s and its learner's samples
learned/s (updates x batch).

Beside them, alone on the machine and alternating in the same way, the
learner's compiled update on a batch in memory (`bare_loops.py learner
--learner_precision=...`) and the actor's bare loop once, so that each
precision's program is set against its own limit at the preset's replay
ratio (`program_limit.limit`).

The figure the goal takes (docs/performance.md, issue: the learner at the
machine's arithmetic limit) is the ratio of the two programs' samples
learned a second, medians over all their windows: bfloat16 / float32 >=
1.4 on Pong, `atari_small`. On a CPU with no bfloat16 arithmetic the
program computes in float32 whatever it is asked (it says so), and this
benchmark says so and stops.

  .venv/bin/python benchmarks/program_precision.py                 # Pong
  .venv/bin/python benchmarks/program_precision.py --rounds=2
  .venv/bin/python benchmarks/program_precision.py --preset=minatar
"""

import os
from typing import Dict, List

from absl import app
from absl import flags

from benchmarks import common
from benchmarks import program_limit

FLAGS = flags.FLAGS
PRECISIONS = ('float32', 'bfloat16')


def define_flags():
  program_limit.define_flags()
  flags.DEFINE_integer('rounds', 1, 'Rounds of one program of each '
                       'precision (the order reversed every other round).')
  FLAGS.set_default('windows', 3)
  FLAGS.set_default('placements', ['sized'])


def order(rounds: int) -> List[str]:
  """The precisions' programs in the order they run: each round both,
  every other round reversed (ABBA...)."""
  runs = []
  for index in range(rounds):
    runs.extend(PRECISIONS if index % 2 == 0 else PRECISIONS[::-1])
  return runs


def main(argv):
  del argv
  from agents.networks import precision  # pylint: disable=g-import-not-at-top
  native = precision.bfloat16_flags()
  if not native:
    print('This CPU has no bfloat16 arithmetic (no '
          f'{" or ".join(precision.BFLOAT16_FLAGS)} flag): the learner '
          'computes in float32 whatever --learner_precision asks, so there '
          'is nothing to compare. No result written.')
    return
  values = program_limit._preset()  # pylint: disable=protected-access
  cores = len(os.sched_getaffinity(0))
  batch = int(values['batch_size'])
  ratio = float(values['samples_per_insert'])
  shared = [f'--env={values["env"]}', f'--preset={FLAGS.preset}']
  actor = [common.bare_loop_rate(
      'actor', *shared, f'--envs={values.get("envs_per_actor", 1)}',
      warmup=FLAGS.warmup, seconds=FLAGS.bare_seconds)
           for _ in range(FLAGS.repeats)]
  in_memory: Dict[str, List[float]] = {name: [] for name in PRECISIONS}
  for index in range(FLAGS.repeats):
    for name in order(index + 1)[-2:]:
      in_memory[name].append(common.bare_loop_rate(
          'learner', *shared, f'--learner_precision={name}',
          warmup=FLAGS.warmup, seconds=FLAGS.bare_seconds))
  programs: Dict[str, List[Dict[str, object]]] = {
      name: [] for name in PRECISIONS}
  for name in order(FLAGS.rounds):
    print(f'program, --learner_precision={name} ...', flush=True)
    programs[name].append(program_limit.program_rates(
        values, FLAGS.placements[0], [f'--learner_precision={name}']))
  a = common.median(actor)
  summary = {}
  for name in PRECISIONS:
    steps = [rate for run in programs[name]
             for rate in run['agent_steps_per_second']]
    updates = [rate for run in programs[name]
               for rate in run['updates_per_second']]
    u = common.median(in_memory[name])
    machine_limit = program_limit.limit(a, u, ratio, batch, cores)
    summary[name] = dict(
        median_agent_steps_per_second=common.median(steps),
        median_samples_per_second=common.median(updates) * batch,
        in_memory_updates_per_second=in_memory[name],
        median_in_memory_updates_per_second=u,
        limit_agent_steps_per_second=machine_limit,
        ratio_to_limit=common.median(steps) / machine_limit)
  speedup = (summary['bfloat16']['median_samples_per_second'] /
             summary['float32']['median_samples_per_second'])
  in_memory_speedup = (
      summary['bfloat16']['median_in_memory_updates_per_second'] /
      summary['float32']['median_in_memory_updates_per_second'])
  result = {
      'preset': FLAGS.preset, 'env': values['env'], 'cores': cores,
      'cpu_bfloat16_flags': native, 'samples_per_insert': ratio,
      'batch_size': batch, 'rounds': FLAGS.rounds, 'order': order(
          FLAGS.rounds), 'windows': FLAGS.windows,
      'window_seconds': FLAGS.window_seconds, 'settle': FLAGS.settle,
      'bare_actor_steps_per_second': actor, 'programs': programs,
      'summary': summary, 'program_speedup': speedup,
      'in_memory_speedup': in_memory_speedup,
      'goal_program_speedup_at_least_1.4': speedup >= 1.4,
  }
  path = common.write_result(f'program_precision_{FLAGS.preset}', result)
  rows = []
  for name in PRECISIONS:
    figures = summary[name]
    rows += [[f'{name}: in-memory updates/s',
              figures['median_in_memory_updates_per_second']],
             [f'{name}: program agent steps/s',
              figures['median_agent_steps_per_second']],
             [f'{name}: program samples learned/s',
              figures['median_samples_per_second']],
             [f'{name}: program / its limit', figures['ratio_to_limit']]]
  rows += [['bfloat16 / float32, in-memory updates', in_memory_speedup],
           ['bfloat16 / float32, program samples learned', speedup]]
  common.print_table(
      f'The program in float32 and bfloat16 ({FLAGS.preset}, '
      f'{values["env"]}, {cores} cores, {FLAGS.rounds} round(s)), medians',
      ['figure', 'value'], rows)
  print(f'\n{path}')


if __name__ == '__main__':
  define_flags()
  app.run(main)
