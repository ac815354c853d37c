"""What a plan's worker pools hold and cost an hour on Vertex AI, and the
regional quotas the job needs.

The job runs in us-central1 (xmanager 0.3.0's region). Prices are Vertex
AI's for custom training there, on demand (no Spot VMs, no reservations,
no savings plans), in US dollars, from `PRICE_SOURCE`, each figure as
stored in the project's reference library (read 2026-11-27):

* N1 machines: Vertex AI prices an N1 machine by its vCPUs and its memory.
  `N1_VCPU_HOUR` is the "N1 Predefined Instance Core" price in the
  Americas, Cloud Billing SKU 2A57-4214-1832 of Vertex AI's service
  C7E2-9256-1C43, $0.03635265/h (as a stored transcription of the billing
  catalog gives it). The n1-standard-4 (4 vCPUs, 15 GB) is $0.21849885/h in
  us-central1, as three stored transcriptions of the pricing page give it
  (each dated by its author: 2026-09-06, 2026-09-08, 2026-10-07);
  `N1_GB_HOUR` is what that leaves per GB:
  (0.21849885 - 4 x 0.03635265) / 15 = 0.00487255.
* GPUs: `GPU_HOUR`, empty. No stored copy gives Vertex AI's training
  price of a GPU in us-central1 (one job script quotes the page's T4
  figure for europe-west4, another region's): the plan names the GPUs it
  leaves unpriced instead of guessing.

Quotas, as Google names them (`QUOTA_SOURCE`: "Custom model training CPUs
for N1/E2 machine types per region", "Custom model training Nvidia V100
GPUs per region"; the other GPUs' follow the same pattern, and their
metrics `aiplatform.googleapis.com/custom_model_training_nvidia_<gpu>_gpus`).
"""

import dataclasses
from typing import Any, Dict, List, Optional, Tuple

from launch.cloud import compatibility

REGION = 'us-central1'
PRICE_SOURCE = 'https://cloud.google.com/vertex-ai/pricing'
PRICE_DATE = ('2026-11-27, as stored in the project\'s reference library '
              '(each figure\'s copy: launch/cloud/costs.py)')
N1_VCPU_HOUR = 0.03635265
N1_GB_HOUR = 0.00487255
GPU_HOUR: Dict[str, float] = {}

QUOTA_SOURCE = ('https://docs.cloud.google.com/gemini-enterprise-agent-'
                'platform/machine-learning/training/neural-architecture-'
                'search/environment-setup')
N1_CPU_QUOTA = ('Custom model training CPUs for N1/E2 machine types per '
                'region (aiplatform.googleapis.com/custom_model_training_cpus)')
A2_CPU_QUOTA = ('vCPUs of A2 machines (Vertex AI counts them apart from '
                'N1\'s; their quota\'s name is not in the pages read here)')


def gpu_quota(accelerator: str) -> str:
  """The regional quota of `accelerator` GPUs for custom training."""
  return (f'Custom model training Nvidia {accelerator} GPUs per region '
          f'(aiplatform.googleapis.com/custom_model_training_nvidia_'
          f'{accelerator.lower()}_gpus)')


def machine_price(machine: str) -> Optional[float]:
  """An hour of `machine` for custom training (None: not in the table)."""
  if machine not in compatibility.N1_MACHINES:
    return None
  cpus, memory = compatibility.N1_MACHINES[machine]
  return cpus * N1_VCPU_HOUR + memory * N1_GB_HOUR


@dataclasses.dataclass(frozen=True)
class Pool:
  """One worker pool: `replicas` machines, each `machine` with
  `accelerator_count` x `accelerator`."""
  name: str
  replicas: int
  machine: str
  accelerator: Optional[str] = None
  accelerator_count: int = 0

  @property
  def cpus(self) -> int:
    return self.replicas * compatibility.machine_shape(self.machine)[0]

  @property
  def memory_gb(self) -> float:
    return self.replicas * compatibility.machine_shape(self.machine)[1]

  @property
  def gpus(self) -> int:
    return self.replicas * self.accelerator_count

  def unpriced(self) -> List[str]:
    """What of the pool the price table has no price for."""
    missing = []
    if machine_price(self.machine) is None:
      missing.append(f'{self.replicas} x {self.machine}')
    if self.accelerator and self.accelerator not in GPU_HOUR:
      missing.append(f'{self.gpus} x {self.accelerator}')
    return missing

  def hourly(self) -> float:
    """An hour of the pool, of what the price table prices."""
    cost = self.replicas * (machine_price(self.machine) or 0.0)
    if self.accelerator:
      cost += self.gpus * GPU_HOUR.get(self.accelerator, 0.0)
    return cost


def pools_of(job: Dict[str, Any]) -> List[Pool]:
  """The pools of a packaged job's description (`dry_run.package`)."""
  return [Pool(pool['name'], pool['replicas'], pool['machine_type'],
               pool.get('accelerator'), pool.get('accelerator_count', 0))
          for pool in job['pools']]


def quotas(pools: List[Pool]) -> Dict[str, int]:
  """Each regional quota the pools draw on -> how much of it they need."""
  needs: Dict[str, int] = {}
  for pool in pools:
    quota = (N1_CPU_QUOTA if pool.machine in compatibility.N1_MACHINES else
             A2_CPU_QUOTA)
    needs[quota] = needs.get(quota, 0) + pool.cpus
    if pool.accelerator:
      gpu = gpu_quota(pool.accelerator)
      needs[gpu] = needs.get(gpu, 0) + pool.gpus
  return needs


def totals(pools: List[Pool]) -> Tuple[int, int, float, int, float]:
  """(replicas, vCPUs, memory in GB, GPUs, dollars an hour of what is
  priced)."""
  return (sum(pool.replicas for pool in pools),
          sum(pool.cpus for pool in pools),
          sum(pool.memory_gb for pool in pools),
          sum(pool.gpus for pool in pools),
          sum(pool.hourly() for pool in pools))


def _gb(value: float) -> str:
  value = round(value, 1)
  return f'{value:,.0f}' if value == int(value) else f'{value:,.1f}'


def _dollars(value: float) -> str:
  return f'${value:,.4f}' if value < 1 else f'${value:,.2f}'


def _gpus(count: int, accelerators: List[str]) -> str:
  if not count:
    return 'no GPU'
  return f'{count} GPU{"s" if count > 1 else ""} ({", ".join(accelerators)})'


def resource_lines(pools: List[Pool]) -> List[str]:
  """What the plan says of the pools' resources, cost and quotas."""
  lines = [f'Resources and cost per hour (Vertex AI custom training in '
           f'{REGION}, on demand; memory in GB as Google lists it):']
  for pool in pools:
    machine = pool.machine + (f' + {pool.accelerator_count} x '
                              f'{pool.accelerator}' if pool.accelerator
                              else '')
    unpriced = pool.unpriced()
    cost = (f'{_dollars(pool.hourly())}/h' if not unpriced else
            f'{_dollars(pool.hourly())}/h without {" and ".join(unpriced)} '
            '(not in the price table)')
    lines.append(
        f'  {pool.name}: {pool.replicas} x {machine}: {pool.cpus:,} vCPUs, '
        f'{_gb(pool.memory_gb)} GB, '
        f'{_gpus(pool.gpus, [pool.accelerator] if pool.gpus else [])}: {cost}')
  replicas, cpus, memory, gpus, hourly = totals(pools)
  unpriced = [item for pool in pools for item in pool.unpriced()]
  accelerators = sorted({pool.accelerator for pool in pools if pool.gpus})
  lines.append(
      f'  Total: {replicas:,} replicas, {cpus:,} vCPUs, {_gb(memory)} GB, '
      f'{_gpus(gpus, accelerators)}: {_dollars(hourly)}/h' + (
          f', plus {" and ".join(unpriced)} (not in the price table)'
          if unpriced else '') + '.')
  lines += ['', f'Regional quotas the job needs in {REGION} (a job that '
                'needs more than its project\'s quota waits or is refused):']
  lines += [f'  {quota}: {amount:,}' for quota, amount in
            quotas(pools).items()]
  return lines


def footnote() -> List[str]:
  """The sources and dates of the plan's tables."""
  gpus = (', '.join(f'{name} ${price}' for name, price in
                    sorted(GPU_HOUR.items())) if GPU_HOUR else
          f'none in the table for {REGION}')
  return [
      f'Prices: ${N1_VCPU_HOUR} per N1 vCPU hour and ${N1_GB_HOUR} per '
      f'GB hour; per GPU hour: {gpus}; from {PRICE_SOURCE}, read '
      f'{PRICE_DATE}.',
      f'GPUs per machine: Vertex AI\'s compatibility table, '
      f'{compatibility.COMPATIBILITY_SOURCE}, read '
      f'{compatibility.TABLE_DATE}. Quota names: {QUOTA_SOURCE}.']
