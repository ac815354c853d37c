"""The plan --dry_run prints: the worker pools, each with its replicas,
machine and nodes, the job's primary replica, the containers, the
machine-hours, each pool's resources and cost and the quotas they need
(`costs`), who can reach the job, where its files go, the replay's load and
the parameters' egress (`capacity`), and the sources of the tables.
"""

from typing import Any, Dict, List

from launch.cloud import costs
from launch.cloud.options import SECURITY_DOCS
from launch.cloud.options import XMANAGER_ROLES
from launch.cloud.options import xmanager_account


def _counted(labels: List[str]) -> str:
  counts: Dict[str, int] = {}
  for label in labels:
    counts[label] = counts.get(label, 0) + 1
  return ', '.join(f'{count} x {label}' if count > 1 else label
                   for label, count in counts.items())


def format_plan(job: Dict[str, Any], workdir: str, directory: str,
                replay: str = '', parameters: str = '') -> str:
  """The plan `--dry_run` prints (`replay`: what it says of the replay's
  load; `parameters`: of the parameters' egress, and the variable cachers),
  its tables' sources last."""
  lines = [f'Vertex AI job "{job["name"]}" (not submitted: --dry_run).', '']
  machine_hours: Dict[str, int] = {}
  for pool in job['pools']:
    lines.append(f'{pool["name"]}: {pool["replicas"]} replica(s), each on '
                 f'its own {pool["machine"]}: {_counted(pool["nodes"])}')
    machine_hours[pool['machine_type']] = machine_hours.get(
        pool['machine_type'], 0) + pool['replicas']
  first = job['pools'][0]
  lines += ['', f'Primary replica (its exit ends the job and gives its '
                f'status): {first["nodes"][0]} ({first["name"]}).', '',
            f'Container of each pool: FROM {first["base_image"]}, then']
  lines += [f'  {step}' for step in first['docker_instructions']]
  lines.append(f'  CMD {first["command"]}')
  lines.append('  requirements.txt: this project\'s pinned set and '
               'requirements-cloud.txt' + ''.join(
                   f'; in {pool["name"]}, TensorFlow 2.8 for GPUs with CUDA '
                   '11 and cuDNN 8 wheels' for pool in job['pools']
                   if pool['gpu_image']))
  lines += ['', 'Machine-hours per hour of running: ' + ', '.join(
      f'{count} x {machine}' for machine, count in sorted(
          machine_hours.items())) + '.', '']
  lines += costs.resource_lines(costs.pools_of(job)) + ['']
  lines += access_lines(job['access'])
  lines += ['', f'Run files (logs, checkpoints, run.json, stop.json): '
                f'{workdir}',
            f'Packaged containers and job.json: {directory}', '']
  for advice in (replay, parameters):
    if advice:
      lines += [advice, '']
  lines += costs.footnote()
  return '\n'.join(lines)


def access_lines(access: Dict[str, Any]) -> List[str]:
  """What the plan says of who can reach the job (`job_settings`)."""
  lines = [f'Who can reach the job ({SECURITY_DOCS}):']
  if access['enable_web_access']:
    lines.append('  Interactive shells (web access): on: whoever may open '
                 'the job\'s web access URIs runs commands in every '
                 'replica, as its service account.')
  else:
    lines.append('  Interactive shells (web access): off '
                 '(--enable_web_access opens them).')
  if access['service_account']:
    lines.append(f'  Runs as: {access["service_account"]} (--service_account:'
                 ' no account is created, no role granted).')
  else:
    lines.append(f'  Runs as: {xmanager_account()}, which the launch creates '
                 f'if missing and grants {" and ".join(XMANAGER_ROLES)} on '
                 'the whole project (--service_account=<email> runs it as '
                 'an account of yours instead).')
  if access['network']:
    lines.append(f'  Network: peered with {access["network"]}: its hosts, '
                 'and networks connected to it, can reach every replica\'s '
                 'ports.')
  else:
    lines.append('  Network: peered with no VPC network (Vertex AI\'s own; '
                 '--network=projects/<project number>/global/networks/'
                 '<name> peers one of yours).')
  return lines
