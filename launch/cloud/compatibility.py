"""Which machine takes how many of which GPU on Vertex AI, as Google
publishes it, and the check a plan passes before anything is packaged.

Only what xmanager 0.3.0 can ask for matters here: its 17 N1 machines
(`machines.machine_types()`) with P4, T4, P100 or V100, and the A100, which
brings an A2 machine of its own count.

Sources (each as stored in the project's reference library; the date is
the day this module was written from them, 2026-11-27):

* `N1_GPU_COUNTS`: Vertex AI's compatibility table, "Valid numbers of GPUs
  for each machine type" in "Configure compute resources for custom
  training" (`COMPATIBILITY_SOURCE`). The library's copy of that page
  ends before the table, so the rows here are those of Google's AI Platform
  Training table (`AI_PLATFORM_SOURCE`, "Compute Engine machine types with
  GPU attachments"), which Vertex AI's repeats for these machines, as
  transcribed by Google's tensorflow/cloud
  (src/python/tensorflow_cloud/core/gcp.py, `_get_valid_machine_configurations`).
* `A2_MACHINES`: Compute Engine's A2 machine types (`A2_SOURCE`): each
  a2-highgpu-Ng has N A100 40GB GPUs; the a2-megagpu-16g has 16.
"""

from typing import Dict, List, Optional, Tuple

COMPATIBILITY_SOURCE = ('https://cloud.google.com/vertex-ai/docs/training/'
                        'configure-compute#gpu-compatibility-table')
AI_PLATFORM_SOURCE = ('https://cloud.google.com/ml-engine/docs/using-gpus'
                      '#compute-engine-machine-types-with-gpu')
A2_SOURCE = ('https://cloud.google.com/compute/docs/'
             'accelerator-optimized-machines#a2_vms')
TABLE_DATE = '2026-11-27, as stored in the project\'s reference library'

# Machine -> accelerator -> the GPU counts Vertex AI allows on it. A machine
# absent from an accelerator's row takes none of it.
_SMALL = {'P4': (1, 2, 4), 'P100': (1, 2, 4), 'T4': (1, 2, 4),
          'V100': (1, 2, 4, 8)}
_SIXTEEN = {'P4': (1, 2, 4), 'P100': (1, 2, 4), 'T4': (1, 2, 4),
            'V100': (2, 4, 8)}
_THIRTY_TWO = {'P4': (2, 4), 'P100': (2, 4), 'T4': (2, 4), 'V100': (4, 8)}
_LARGE = {'P4': (4,), 'T4': (4,), 'V100': (8,)}
N1_GPU_COUNTS: Dict[str, Dict[str, Tuple[int, ...]]] = {
    'n1-standard-4': _SMALL,
    'n1-standard-8': _SMALL,
    'n1-standard-16': _SIXTEEN,
    'n1-standard-32': _THIRTY_TWO,
    'n1-standard-64': _LARGE,
    'n1-standard-96': _LARGE,
    'n1-highmem-2': _SMALL,
    'n1-highmem-4': _SMALL,
    'n1-highmem-8': _SMALL,
    'n1-highmem-16': _SIXTEEN,
    'n1-highmem-32': _THIRTY_TWO,
    'n1-highmem-64': _LARGE,
    'n1-highmem-96': _LARGE,
    'n1-highcpu-16': _SIXTEEN,
    'n1-highcpu-32': _THIRTY_TWO,
    'n1-highcpu-64': {'P4': (4,), 'P100': (4,), 'T4': (4,), 'V100': (8,)},
    'n1-highcpu-96': _LARGE,
}

# Google's N1 machines as its tables give them: vCPUs, memory in GB (the
# figure Google prices by; xmanager's own table rounds n1-highcpu's down).
N1_MACHINES: Dict[str, Tuple[int, float]] = {
    'n1-standard-4': (4, 15), 'n1-standard-8': (8, 30),
    'n1-standard-16': (16, 60), 'n1-standard-32': (32, 120),
    'n1-standard-64': (64, 240), 'n1-standard-96': (96, 360),
    'n1-highmem-2': (2, 13), 'n1-highmem-4': (4, 26),
    'n1-highmem-8': (8, 52), 'n1-highmem-16': (16, 104),
    'n1-highmem-32': (32, 208), 'n1-highmem-64': (64, 416),
    'n1-highmem-96': (96, 624), 'n1-highcpu-16': (16, 14.4),
    'n1-highcpu-32': (32, 28.8), 'n1-highcpu-64': (64, 57.6),
    'n1-highcpu-96': (96, 86.4),
}

# A100 count -> the A2 machine that has them (as xmanager 0.3.0 picks it),
# with its vCPUs and memory in GB.
A2_MACHINES: Dict[int, Tuple[str, int, float]] = {
    1: ('a2-highgpu-1g', 12, 85),
    2: ('a2-highgpu-2g', 24, 170),
    4: ('a2-highgpu-4g', 48, 340),
    8: ('a2-highgpu-8g', 96, 680),
    16: ('a2-megagpu-16g', 96, 1360),
}


def machine_shape(machine: str) -> Optional[Tuple[int, float]]:
  """(vCPUs, memory in GB) of an N1 or A2 machine as Google lists it."""
  if machine in N1_MACHINES:
    return N1_MACHINES[machine]
  for name, cpus, memory in A2_MACHINES.values():
    if name == machine:
      return cpus, memory
  return None


def allowed_counts(machine: str, accelerator: str) -> Tuple[int, ...]:
  """The counts of `accelerator` Vertex AI allows on `machine`."""
  if accelerator == 'A100':
    return tuple(count for count, (name, _, _) in A2_MACHINES.items()
                 if name == machine)
  return N1_GPU_COUNTS.get(machine, {}).get(accelerator, ())


def counts(accelerator: str) -> Tuple[int, ...]:
  """Every count of `accelerator` some machine takes."""
  if accelerator == 'A100':
    return tuple(sorted(A2_MACHINES))
  return tuple(sorted({count for row in N1_GPU_COUNTS.values()
                       for count in row.get(accelerator, ())}))


def _size(machine: str):
  cpus, memory = N1_MACHINES[machine]
  return cpus, memory, machine


def machines_for(accelerator: str, count: int) -> List[str]:
  """The machines that take `count` x `accelerator`, smallest first (fewest
  vCPUs, then least memory)."""
  if accelerator == 'A100':
    return [A2_MACHINES[count][0]] if count in A2_MACHINES else []
  return [machine for _, _, machine in sorted(
      _size(machine) for machine in N1_GPU_COUNTS
      if count in allowed_counts(machine, accelerator))]


def _family(machine: str) -> str:
  return machine.rsplit('-', 1)[0]


def _ranges(machines: List[str]) -> str:
  """`machines` by family, each run of consecutive sizes as a range:
  'n1-standard-4 to n1-standard-16, n1-highcpu-16'."""
  parts = []
  for family in dict.fromkeys(_family(machine) for machine in N1_MACHINES):
    sizes = sorted((machine for machine in N1_MACHINES
                    if _family(machine) == family), key=_size)
    run: List[str] = []
    for machine in sizes + ['']:
      if machine in machines:
        run.append(machine)
        continue
      if run:
        parts.append(run[0] if len(run) == 1 else f'{run[0]} to {run[-1]}')
      run = []
  return ', '.join(parts)


def _or(values) -> str:
  values = [str(value) for value in values]
  return values[0] if len(values) == 1 else (
      f'{", ".join(values[:-1])} or {values[-1]}')


def allowed_text(accelerator: str) -> str:
  """What Vertex AI allows of `accelerator`: its counts per machine, and
  the machines that take each."""
  if accelerator == 'A100':
    per_count = '; '.join(f'{count}: {name}' for count, (name, _, _) in
                          sorted(A2_MACHINES.items()))
  else:
    per_count = '; '.join(
        f'with {count}: {_ranges(machines_for(accelerator, count))}'
        for count in counts(accelerator))
  return (f'{accelerator} allows {_or(counts(accelerator))} per machine '
          f'({per_count})')


def check(machine: str, accelerator: str, count: int,
          flags: Tuple[str, ...] = ('learner_machine', 'learner_accelerator',
                                    'learner_accelerator_count')):
  """Raises ValueError, naming the flags and what is allowed, unless Vertex
  AI's table lets `machine` take `count` x `accelerator`."""
  if count in allowed_counts(machine, accelerator):
    return
  on_machine = allowed_counts(machine, accelerator)
  machine_text = (f'{machine} takes {_or(on_machine)} of them' if on_machine
                  else f'{machine} takes none')
  raise ValueError(
      f'--{flags[0]}={machine} --{flags[1]}={accelerator} '
      f'--{flags[2]}={count}: Vertex AI does not run {count} x '
      f'{accelerator} on {machine}. {allowed_text(accelerator)}; '
      f'{machine_text} (Vertex AI\'s GPU compatibility table, '
      f'{COMPATIBILITY_SOURCE}, read {TABLE_DATE}).')
