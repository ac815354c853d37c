"""The learner against the machine's arithmetic limit, in FLOPs.

For each network the presets use (Ape-X DQN's on Pong and on MinAtar, Ape-X
DPG's and D4PG's MLPs on cheetah_run):

  * FLOPs per sample of the learner's update, by hand from the networks'
    layers (2 x kernel x channels in x channels out x output pixels for a
    convolution, 2 x inputs x outputs for a dense layer; bias adds,
    activations and the optimiser's element-wise work left out) and the
    update's passes: for Ape-X DQN 3 forward passes (online on s, online
    and target on s') and the backward pass on s (weight gradients as much
    as a forward pass, input gradients as much less the first layer's):
    5F - F_first. For Ape-X DPG and D4PG, policy p and critic c: the
    critic's loss takes p and c on s' (targets) and c on s, and c's
    backward pass; the policy's takes p and c on s, c's input gradients
    (all layers: dq/da) and p's backward pass: 4Fp + 6Fc - Fp_first -
    Fc_first. Checked: one forward pass counted by hand against
    TensorFlow's profiler on its traced graph; the profiler's count of the
    whole update is given beside (it also counts gradients the runtime
    prunes, such as the first convolution's input gradient, and costs a
    convolution's input gradient by its input's size);
  * the update's rate on a batch in memory (the agent's own learner,
    `benchmarks/in_memory.py`), so GFLOP/s achieved;
  * the cores' peak in float32 and, where the CPU has bfloat16 arithmetic,
    in bfloat16: the best of a large square matrix product and the update's
    own largest dense product and first convolution, each a `tf.function`
    timed over repeats;
  * the learner's fraction of each peak; where the CPU has bfloat16
    arithmetic, the same update computing in bfloat16 (`--learner_precision`)
    too, its rate against the bfloat16 peak and its speed-up over float32.

Every case runs in this one process, the cases and the peak kernels
alternating within each repeat, so that the machine's drift hits all of
them alike. Prints a table; writes benchmarks/results/learner_flops.json.

  .venv/bin/python benchmarks/learner_flops.py            # about 4 minutes
  .venv/bin/python benchmarks/learner_flops.py --repeats=5 --seconds=10
"""

import json
import os
import subprocess
import sys
from typing import Dict, List

from absl import app
from absl import flags
import numpy as np

import launch
from benchmarks import common
from benchmarks import flops

flags.DEFINE_integer('repeats', 3, 'Timed windows of each case and kernel.')
flags.DEFINE_float('seconds', 6.0, 'Seconds a window of updates lasts.')
flags.DEFINE_string('peaks_of', None, 'Internal: time the peak kernels of '
                    'these cases (JSON) in this process alone, print their '
                    'GFLOP/s as JSON and exit.')
flags.DEFINE_list('cases', None, 'The agents whose cases run (apex_dqn, '
                  'apex_dpg, d4pg); default: all.')
flags.DEFINE_list('dtypes', ['float32'], 'Internal: with --peaks_of.')
FLAGS = flags.FLAGS

# (label, agent, preset, environment)
CASES = (
    ('Ape-X DQN, Pong (atari_small)', 'apex_dqn', 'atari_small',
     'atari:Pong'),
    ('Ape-X DQN, MinAtar (minatar)', 'apex_dqn', 'minatar',
     'minatar:breakout'),
    ('Ape-X DPG, cheetah_run (dmc500k)', 'apex_dpg', 'dmc500k',
     'control:cheetah:run'),
    ('D4PG, cheetah_run (dmc500k)', 'd4pg', 'dmc500k', 'control:cheetah:run'),
)
def peak_rates(shapes: str, dtypes: List[str]) -> Dict[str, Dict[str, float]]:
  """{dtype: {kernel: GFLOP/s}}, timed by this script in a new process
  (`--peaks_of`)."""
  output = subprocess.run(
      [sys.executable, os.path.abspath(__file__), f'--peaks_of={shapes}',
       f'--seconds={FLAGS.seconds}', f'--dtypes={",".join(dtypes)}'],
      check=True, stdout=subprocess.PIPE, text=True).stdout
  return json.loads(output.strip().splitlines()[-1])


def time_peaks():
  """`--peaks_of`: prints {dtype: {kernel: GFLOP/s}} as one JSON line."""
  cases = json.loads(FLAGS.peaks_of)
  measured = {}
  for dtype in FLAGS.dtypes:
    measured[dtype] = {
        name: flops.time_kernel(function, FLAGS.seconds / 2) * count / 1e9
        for name, (function, count) in flops.kernels(dtype, cases).items()}
  print(json.dumps(measured))


def main(argv):
  del argv
  if FLAGS.peaks_of:
    time_peaks()
    return
  from agents.networks import precision  # pylint: disable=g-import-not-at-top
  from agents import registry  # pylint: disable=g-import-not-at-top
  from agents.envs import environments  # pylint: disable=g-import-not-at-top
  from benchmarks import in_memory  # pylint: disable=g-import-not-at-top
  native = precision.bfloat16_flags()
  dtypes = ['float32'] + (['bfloat16'] if native else [])
  cases, learners = {}, {}
  for label, name, preset, env in CASES:
    if FLAGS.cases and name not in FLAGS.cases:
      continue
    agent = registry.get(name)
    config = in_memory.config_of(agent, preset)
    continuous = name in ('apex_dpg', 'd4pg')
    environment = (environments.resolve_continuous(env) if continuous
                   else environments.resolve_discrete(env))
    sample = in_memory.batch(environment, config.batch_size)
    learner = in_memory.learner(agent, config, environment, sample)
    learner.step()  # Traces the update.
    _, network, _ = flops.forward_inputs(name, learner, sample.data)[-1]
    first = [module for module in network.submodules
             if type(module).__name__ == 'Conv2D']
    cases[label] = dict(
        agent=name, preset=preset, env=env, batch=config.batch_size,
        first_stride=(int(np.ravel(first[0].stride)[0]) if first else None),
        **flops.count(name, learner, sample, config.batch_size))
    learners[label] = {'float32': learner}
    if native:  # The same update computing in bfloat16, from the same start.
      learners[label]['bfloat16'] = in_memory.learner(
          agent, config, environment, sample, precision='bfloat16')
      learners[label]['bfloat16'].step()
    print(f'{label}: {cases[label]["update_flops_per_sample"] / 1e6:.1f} '
          'MFLOP a sample\'s update by hand ('
          f'{cases[label]["update_flops_per_sample_profiled"] / 1e6:.1f} '
          'by the profiler); one forward pass '
          f'{cases[label]["forward_flops_per_sample_by_hand"] / 1e6:.2f} '
          'MFLOP by hand, '
          f'{cases[label]["forward_flops_per_sample_profiled"] / 1e6:.2f} '
          'by the profiler', flush=True)
  rates = {label: {dtype: [] for dtype in by_dtype}
           for label, by_dtype in learners.items()}
  kernel_rates = {dtype: {} for dtype in dtypes}
  for by_dtype in learners.values():
    for learner in by_dtype.values():
      in_memory.time_updates(learner, 2.0)  # Warm-up.
  shapes = json.dumps({label: dict(batch=case['batch'], layers=case['layers'],
                                   first_stride=case['first_stride'])
                       for label, case in cases.items()})
  for repeat in range(FLAGS.repeats):
    for label, by_dtype in learners.items():
      for dtype, learner in by_dtype.items():
        rates[label][dtype].append(
            in_memory.time_updates(learner, FLAGS.seconds))
    # The kernels in a process of their own, from the cases' shapes.
    for dtype, measured in peak_rates(shapes, dtypes).items():
      for name, gflops in measured.items():
        kernel_rates[dtype].setdefault(name, []).append(gflops)
    print(f'repeat {repeat}: ' + ', '.join(
        f'{label.split(" (")[0]} ' + ' / '.join(
            f'{values[-1]:.1f}' for values in rates[label].values()) +
        ' updates/s' for label in cases) + f' ({" / ".join(dtypes)})',
          flush=True)
  peaks = {}
  for dtype, measured in kernel_rates.items():
    medians = {name: common.median(values)
               for name, values in measured.items()}
    best = max(medians, key=medians.get)
    peaks[dtype] = dict(gflops=medians[best], kernel=best,
                        kernels={name: dict(median_gflops=medians[name],
                                            gflops=measured[name])
                                 for name in measured})
  rows = []
  for label, case in cases.items():
    flop = case['batch'] * case['update_flops_per_sample'] / 1e9
    updates = common.median(rates[label]['float32'])
    achieved = updates * flop
    case.update(updates_per_second=rates[label]['float32'],
                median_updates_per_second=updates,
                samples_per_second=updates * case['batch'],
                achieved_gflops=achieved,
                fraction_of_peak={dtype: achieved / peak['gflops']
                                  for dtype, peak in peaks.items()})
    if 'bfloat16' in rates[label]:
      # The learner computing in bfloat16 against the bfloat16 peak; its
      # speed-up is the ratio of the two learners' medians.
      in_bf16 = common.median(rates[label]['bfloat16'])
      case['bfloat16_learner'] = dict(
          updates_per_second=rates[label]['bfloat16'],
          median_updates_per_second=in_bf16,
          samples_per_second=in_bf16 * case['batch'],
          achieved_gflops=in_bf16 * flop,
          fraction_of_bfloat16_peak=in_bf16 * flop / peaks['bfloat16'][
              'gflops'],
          speedup_over_float32=in_bf16 / updates)
    del case['layers']
    bf16 = case.get('bfloat16_learner')
    rows.append([label, f'{case["update_flops_per_sample"] / 1e6:.1f}',
                 f'{case["forward_profiled_over_hand"]:.3f}',
                 f'{updates:.1f}', f'{achieved:.1f}',
                 f'{case["fraction_of_peak"]["float32"]:.2f}'] +
                ([f'{bf16["median_updates_per_second"]:.1f}',
                  f'{bf16["achieved_gflops"]:.1f}',
                  f'{bf16["fraction_of_bfloat16_peak"]:.2f}',
                  f'{bf16["speedup_over_float32"]:.2f}x'] if bf16 else
                 ['no bf16'] * 4))
  common.print_table(
      'The learner against the cores\' peak (medians of '
      f'{FLAGS.repeats} windows; float32, then the learner in bfloat16)',
      ['case', 'MFLOP/sample', 'forward: profiler/hand', 'updates/s',
       'GFLOP/s', 'of f32 peak', 'bf16 updates/s', 'bf16 GFLOP/s',
       'of bf16 peak', 'bf16 speed-up'], rows)
  for dtype, peak in peaks.items():
    print(f'{dtype} peak: {peak["gflops"]:.1f} GFLOP/s ({peak["kernel"]})')
  if not native:
    print('bfloat16 peak: not measured, this CPU has no bfloat16 arithmetic '
          f'(no {" or ".join(precision.BFLOAT16_FLAGS)} flag).')
  path = common.write_result('learner_flops', dict(
      machine=common.machine(), cpu_bfloat16_flags=native,
      repeats=FLAGS.repeats, seconds=FLAGS.seconds, cases=cases,
      peaks=peaks, bfloat16_peak_measured=bool(native),
      onednn=os.environ.get(launch.ONEDNN)))
  print(f'wrote {path}')


if __name__ == '__main__':
  launch.use_onednn()  # Before TensorFlow starts: the nodes' setting.
  import tensorflow  # pylint: disable=g-import-not-at-top,unused-import
  app.run(main)
