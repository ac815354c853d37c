"""What each node group asks of Google Cloud, and who can reach the job.

`CloudOptions` holds the flags of a launch with --lp_launch_type=vertex_ai
(one flag per field, its docstring the help) and refuses values out of
range, naming the flag.

Every replica serves Courier or Reverb on every interface without asking
who calls, and a caller that reaches a Courier port runs code there. So
the job is submitted with interactive shells into its replicas off
(`--enable_web_access` opens them), as the service account given
(`--service_account`; without one, xmanager's own, which xmanager grants
project-wide roles), on the VPC network given (`--network`; without one,
peered with none), and the plan says so (docs/google_cloud_security.md).
"""

import dataclasses
import re
from typing import Any, Dict, Optional, Sequence

from agents.config import check_flag
from launch.machine import private_network

# Accelerators Vertex AI offers that xmanager 0.3.0 can ask for
# (`xm.GpuType`); the A100 picks its own a2 machine.
ACCELERATORS = ('P4', 'T4', 'P100', 'V100', 'A100')

# Who can reach a job (docs/google_cloud_security.md). A service account's
# email: user-managed ones are <name>@<project>.iam.gserviceaccount.com,
# Google's default ones end in gserviceaccount.com too.
SERVICE_ACCOUNT = re.compile(
    r'[a-z0-9][a-z0-9._-]*@[a-z0-9][a-z0-9.-]*\.gserviceaccount\.com')
# A VPC network as Vertex AI's CustomJob takes it: the project's number
# (not its ID), and the network's name (lowercase letters, digits, hyphens).
NETWORK = re.compile(
    r'projects/[0-9]+/global/networks/[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?')
# Without --service_account, xmanager 0.3.0 runs the job as its own account
# (named by its flag --xm_gcp_service_account_name, default xmanager),
# creating it if missing and granting it these roles on the whole project.
XMANAGER_ACCOUNT = '{name}@<project>.iam.gserviceaccount.com'
XMANAGER_ACCOUNT_FLAG = 'xm_gcp_service_account_name'
XMANAGER_ROLES = ('roles/aiplatform.user', 'roles/storage.admin')
SECURITY_DOCS = 'docs/google_cloud_security.md'


@dataclasses.dataclass(frozen=True)
class CloudOptions:
  """What each node group asks of Google Cloud (--lp_launch_type=vertex_ai).

  Vertex AI gives every replica a machine of its own: the N1 machine with
  the fewest CPUs, then the least memory, that has what a group asks for.
  """

  dry_run: bool = False
  """With --lp_launch_type=vertex_ai: package the containers, print the plan
  (worker pools, their nodes and replicas, machines, accelerators, memory,
  image and install steps, where the run's files go) and exit without
  submitting anything; needs no credentials."""
  package_dir: Optional[str] = None
  """With --dry_run: where the packaged containers and job.json are kept
  (the Vertex AI emulator in tests/ runs them on this machine);
  default: a new temporary directory."""
  learner_machine: str = 'n1-standard-8'
  """The learner's Vertex AI machine type (N1; an A100 brings its own a2
  machine)."""
  learner_accelerator: str = 'none'
  """The learner's accelerator: none, P4, T4, P100, V100 or A100 (its image
  then holds TensorFlow 2.8 built for GPUs, with CUDA 11 and cuDNN 8)."""
  learner_accelerator_count: int = 1
  """How many of --learner_accelerator: 1, 2 or 4 of a P4, T4 or P100, 1,
  2, 4 or 8 of a V100, 1, 2, 4, 8 or 16 of an A100; Vertex AI allows each
  count on certain machines only, and a plan it would refuse is refused
  naming them (launch/cloud/compatibility.py)."""
  actor_cpus: int = 2
  """CPUs of each actor's machine (an actor acts with one core; give it
  more with --envs_per_actor)."""
  actor_memory_gb: float = 4.0
  """Memory of each actor's machine, GB."""
  replay_cpus: int = 4
  """CPUs of the replay's machine (one Reverb server takes ~13,900
  inserts/s on about one core: docs/performance.md)."""
  replay_memory_gb: Optional[float] = None
  """Memory of the replay's machine, GB; none: --replay_capacity times the
  measured bytes per transition of the environment's kind, x1.5, + 2 GB."""
  small_node_cpus: int = 2
  """CPUs of the counter's and the evaluator's machines (the actors' puts
  them in the actors' worker pool)."""
  small_node_memory_gb: float = 4.0
  """Memory of the counter's and the evaluator's machines, GB."""
  enable_web_access: bool = False
  """Let Vertex AI open an interactive shell into each replica (the job's
  web access URIs): whoever may open them runs commands in every replica,
  as the job's service account. Off by default: no shells."""
  service_account: Optional[str] = None
  """The service account the job runs as (its email,
  <name>@<project>.iam.gserviceaccount.com); the launch then creates no
  account and grants no role. none (default): xmanager's own,
  xmanager@<project>.iam.gserviceaccount.com, which the launch creates if
  missing and grants roles/aiplatform.user and roles/storage.admin on the
  whole project (docs/google_cloud_security.md: the least a job needs)."""
  network: Optional[str] = None
  """The VPC network of yours the job is peered with,
  projects/<project number>/global/networks/<name> (VPC Network Peering
  with Vertex AI set up on it first): its hosts can then reach the
  replicas. none (default): the job is peered with no network."""

  job_timeout_hours: float = 168.0
  """The job's time limit, hours (Vertex AI's scheduling.timeout; its
  default, 7 days): reached, the job ends as failed, and
  `programs/watch.py` submits the run again, which resumes it."""

  def validate(self):
    """Raises ValueError naming the first flag whose value is out of range."""
    self._validate_access()
    check_flag('job_timeout_hours', self.job_timeout_hours > 0,
               self.job_timeout_hours, '> 0')
    for name in ('actor_cpus', 'replay_cpus', 'small_node_cpus'):
      check_flag(name, getattr(self, name) >= 1, getattr(self, name), '>= 1')
    for name in ('actor_memory_gb', 'small_node_memory_gb'):
      check_flag(name, getattr(self, name) > 0, getattr(self, name), '> 0')
    check_flag('replay_memory_gb',
               self.replay_memory_gb is None or self.replay_memory_gb > 0,
               self.replay_memory_gb, '> 0 (or none to compute it)')
    accelerator = self.learner_accelerator
    check_flag('learner_accelerator',
               accelerator == 'none' or accelerator.upper() in ACCELERATORS,
               accelerator, f'none or one of {", ".join(ACCELERATORS)}')
    counts = (1, 2, 4, 8, 16) if self.accelerator == 'A100' else (1, 2, 4, 8)
    check_flag('learner_accelerator_count',
               self.learner_accelerator_count in counts,
               self.learner_accelerator_count,
               ', '.join(str(count) for count in counts))

  def _validate_access(self):
    if self.service_account is not None and not SERVICE_ACCOUNT.fullmatch(
        self.service_account):
      raise ValueError(
          f'--service_account={self.service_account} is not a service '
          'account\'s email: give <name>@<project>.iam.gserviceaccount.com '
          '(`gcloud iam service-accounts list` shows them; '
          f'{SECURITY_DOCS} says how to make one).')
    if self.network is not None and not NETWORK.fullmatch(self.network):
      raise ValueError(
          f'--network={self.network} is not a VPC network\'s full name: give '
          'projects/<project number>/global/networks/<name>, with the '
          'project\'s number, not its ID (`gcloud projects describe '
          '<project> --format="value(projectNumber)"`).')

  def job_settings(self) -> Dict[str, Any]:
    """Who can reach the job, as `aiplatform.CustomJob.run` takes it: its
    web access, the account it runs as (None: xmanager's), its network
    (None: peered with none)."""
    return {'enable_web_access': self.enable_web_access,
            'service_account': self.service_account,
            'network': self.network}

  def scheduling(self) -> Dict[str, Any]:
    """The job's scheduling: its time limit, seconds."""
    return {'timeout_seconds': round(self.job_timeout_hours * 3600)}

  @property
  def accelerator(self) -> Optional[str]:
    if self.learner_accelerator == 'none':
      return None
    return self.learner_accelerator.upper()


def define_xmanager_flags(argv: Sequence[str]):
  """For a launch with --lp_launch_type=vertex_ai, defines xmanager's own
  flags (`--xm_*`, e.g. --xm_gcp_service_account_name,
  --xm_build_image_locally) before absl parses the command line. xmanager
  defines them as its modules are imported, which Launchpad's launcher
  does only after the parse, so absl would refuse them as unknown. Other
  launches do not import xmanager: it takes seconds. Without xmanager
  installed nothing is defined, and the launch's check says how to install
  it (`packaging.check_cloud_dependencies`)."""
  if private_network.launch_type(argv) != 'vertex_ai':
    return
  try:
    from xmanager import xm_local  # pylint: disable=g-import-not-at-top,unused-import
  except Exception:  # pylint: disable=broad-except
    return


def xmanager_account() -> str:
  """The account a job runs as without --service_account: xmanager's own,
  named by --xm_gcp_service_account_name where xmanager's flags are
  defined and parsed (`define_xmanager_flags`), else its default name."""
  from absl import flags  # pylint: disable=g-import-not-at-top
  name = 'xmanager'
  if XMANAGER_ACCOUNT_FLAG in flags.FLAGS and flags.FLAGS.is_parsed():
    name = flags.FLAGS[XMANAGER_ACCOUNT_FLAG].value
  return XMANAGER_ACCOUNT.format(name=name)
