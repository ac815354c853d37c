"""What the learner's checkpoints cost it: its updates a second with none,
with checkpoints written beside its updates (`launch.runs.checkpointing.
LearnerCheckpoints`, the program's way: a copy of the state in the
learner's thread, the write and the policy snapshot's export in a thread
of their own) and with checkpoints written between its updates (Acme's
`Checkpointer` and the snapshot's export in the learner's thread, the
program's way before), all three timed in turn within every repeat
(windows of `--seconds`), so that the machine's drift hits them alike.

Ape-X DQN's learner on a batch in memory (`benchmarks/in_memory.py`), for
MinAtar's network (`minatar`) and Atari's (`atari_small`). Checkpoints come
every `--period` seconds here (shorter than the program's default, so that
each window holds several); each save's own figures (the learner's pause,
the writer's seconds) give what the default period costs. Prints a table;
writes benchmarks/results/checkpoint_cost.json.

  .venv/bin/python benchmarks/checkpoint_cost.py   # about 8 minutes
"""

import tempfile
import time

from absl import app
from absl import flags

import launch
from benchmarks import common

flags.DEFINE_integer('repeats', 3, 'Timed windows of each way of saving.')
flags.DEFINE_float('seconds', 30.0, 'Seconds a window lasts.')
flags.DEFINE_float('period', 5.0, 'Seconds between two checkpoints.')
FLAGS = flags.FLAGS

CASES = {'minatar': 'minatar:breakout', 'atari_small': 'atari:Pong'}
MODES = ('none', 'beside updates', 'between updates')


def _savers(builder, learner, workdir: str):
  """{mode: a function called after each update, returning the seconds it
  held the learner if it saved} and the background checkpoints."""
  from launch.runs import checkpointing  # pylint: disable=g-import-not-at-top
  beside = checkpointing.LearnerCheckpoints(
      learner.state, lambda: learner.num_steps, f'{workdir}/beside',
      'learner', FLAGS.period,
      after_write=lambda steps: beside_snapshot.export(
          f'{workdir}/beside', steps))
  beside_snapshot = builder.policy_snapshot(beside.shadow)
  between = checkpointing.make_checkpointer(
      learner.state, f'{workdir}/between', 'learner', FLAGS.period)
  between_snapshot = builder.policy_snapshot(learner.state)

  def save_beside():
    began = time.perf_counter()
    return time.perf_counter() - began if beside.save() else None

  def save_between():
    began = time.perf_counter()
    if not between.save():
      return None
    between_snapshot.export(f'{workdir}/between', learner.num_steps)
    return time.perf_counter() - began

  return {'none': lambda: None, 'beside updates': save_beside,
          'between updates': save_between}, beside


def _window(learner, save, seconds: float):
  """Updates a second over `seconds`, saving as `save` does, and the
  learner's pauses for its saves."""
  steps, pauses, begin = 0, [], time.perf_counter()
  while time.perf_counter() - begin < seconds:
    learner.step()
    steps += 1
    pause = save()
    if pause is not None:
      pauses.append(pause)
  return steps / (time.perf_counter() - begin), pauses


def measure(preset: str, env: str, workdir: str):
  # pylint: disable=g-import-not-at-top
  from agents import registry
  from agents.envs import environments
  from benchmarks import in_memory
  # pylint: enable=g-import-not-at-top
  agent = registry.get('apex_dqn')
  environment = environments.resolve_discrete(env)
  config = in_memory.config_of(agent, preset)
  learner = in_memory.learner(agent, config, environment,
                              in_memory.batch(environment, config.batch_size))
  learner.step()  # Traces the update; the optimiser's state exists.
  builder = agent.make_builder(config, environment)
  savers, beside = _savers(builder, learner, workdir)
  for save in savers.values():  # Warm-up: each way's first save traces.
    _window(learner, save, 2.0)
  rates = {mode: [] for mode in MODES}
  pauses = {mode: [] for mode in MODES}
  for repeat in range(FLAGS.repeats):
    for mode in MODES:
      rate, held = _window(learner, savers[mode], FLAGS.seconds)
      rates[mode].append(rate)
      pauses[mode].extend(held)
    print(f'{preset} repeat {repeat}: ' + ', '.join(
        f'{mode} {values[-1]:.2f}' for mode, values in rates.items()) +
          ' updates/s', flush=True)
  beside.wait()
  none = common.median(rates['none'])
  result = {'env': env, 'batch': config.batch_size, 'modes': {}}
  for mode in MODES:
    median = common.median(rates[mode])
    pause = common.median(pauses[mode]) if pauses[mode] else 0.0
    result['modes'][mode] = dict(
        updates_per_second=rates[mode], median_updates_per_second=median,
        ratio_to_none=median / none, saves=len(pauses[mode]),
        median_pause_seconds=pause)
  result['beside_write_seconds'] = common.median(beside.write_seconds)
  result['beside_copy_seconds'] = common.median(beside.copy_seconds)
  return result


def main(argv):
  del argv
  results, rows = {}, []
  for preset, env in CASES.items():
    with tempfile.TemporaryDirectory() as workdir:
      results[preset] = result = measure(preset, env, workdir)
    for mode, figures in result['modes'].items():
      pause = figures['median_pause_seconds']
      rows.append([preset, mode, f'{figures["median_updates_per_second"]:.2f}',
                   f'{figures["ratio_to_none"]:.3f}', figures['saves'],
                   f'{pause * 1000:.0f}', f'{pause / 30.0 * 100:.2f}%'])
    print(f'{preset}: a write and snapshot beside the updates took '
          f'{result["beside_write_seconds"]:.2f} s of its own thread '
          f'(median).')
  common.print_table(
      f'The learner\'s updates a second, checkpoints every {FLAGS.period:g} s '
      f'(medians of {FLAGS.repeats} windows of {FLAGS.seconds:g} s)',
      ['preset', 'checkpoints', 'updates/s', 'of none', 'saves',
       'pause (ms)', 'pause per 30 s'], rows)
  path = common.write_result('checkpoint_cost', dict(
      repeats=FLAGS.repeats, seconds=FLAGS.seconds, period=FLAGS.period,
      presets=results))
  print(f'wrote {path}')


if __name__ == '__main__':
  launch.use_onednn()  # Before TensorFlow starts: the nodes' setting.
  app.run(main)
