"""What a run needs beyond the agent's hyper-parameters.

Each field of `RunOptions` is a command-line flag of the same name, its
docstring the flag's help (`launch.console.command_line`), as the
agents' config fields are: one source for the default, the help and the
check of every run option. An environment suite declares the run options
particular to it (`agents.envs.suites.RunOption`), each a flag too, whose
values `RunOptions.suite_options` holds.
"""

import dataclasses
from typing import Any, Dict, Mapping, Optional

from agents.builders import ProgramShape
from agents.envs import suites
from launch.runs import storage
from agents.config import check_flag


# --workdir_access: the umask of the launcher and of every node it starts.
WORKDIR_UMASKS = {'user': 0o077, 'group': 0o027, 'all': 0o022}


@dataclasses.dataclass(frozen=True)
class RunOptions:
  """How a program runs: where, with how many nodes, for how long."""

  env: str = ''
  """Environment, <suite>:<name>; the default is the program's. A bad name
  is answered with the accepted forms."""
  plugins: str = ''
  """Modules of your own to import before the environment is resolved,
  comma-separated (e.g. my_suites,my_networks): each registers environment
  suites (agents.envs.suites) or agents (agents.registry). Imported from
  the current directory or the Python path; recorded with the run, so a
  resumed run, its nodes and evaluate.py import them too; copied into a
  Vertex AI job's containers (docs/extending.md)."""
  workdir: Optional[str] = None
  """Directory of the run's logs, checkpoints and records; default:
  ~/apex_runs/<program>/<timestamp>. A program launched again with the same
  --workdir resumes the run there. Under vertex_ai: gs://<bucket>/<path>."""
  num_actors: int = 4
  """Actor processes (Ape-X §4.1: 360, one CPU core each)."""
  envs_per_actor: int = 1
  """Environments per actor process, acted in with one batched forward pass;
  each keeps its own exploration (an epsilon of the Ape-X schedule over all
  num_actors x envs_per_actor environments) and its writes to replay."""
  num_evaluators: int = 1
  """Evaluator processes: 1, or 0 for none (benchmarks; training without
  evaluation)."""
  max_actor_steps: Optional[int] = None
  """Stop the whole program (exit 0) once the actors have taken this many
  environment steps; none: run until stopped."""
  max_seconds: Optional[float] = None
  """Stop the whole program (exit 0) this many seconds after the actors'
  first step (a wall-clock budget; start-up, longer with more actors, is not
  counted); none: no budget."""
  seed: int = 0
  """Seed of the networks, environments and exploration. A run does not
  repeat from its seed: its processes (A3C's workers too) interleave as the
  machine schedules them, so the same seed gives another run."""
  log_every: float = 10.0
  """Seconds between two log rows of the learner and of each actor (the
  evaluator logs every episode)."""
  evaluation_period: int = 0
  """Learner steps between two rounds of evaluation; 0: the evaluator never
  pauses. On a small machine a pause leaves the cores to learner and
  actors."""
  evaluation_episodes: int = 10
  """Episodes per round of evaluation, played side by side in as many
  environments with one batched forward pass a step, all with the
  parameters pulled as the round began."""
  checkpoint_every: float = 30.0
  """Seconds between two checkpoints of the learner (each begun after the
  last, written beside its updates: launch/runs/checkpointing.py) and
  between two of the counter's, under <workdir>/checkpoints/; 0: none. A
  fault of either loses at most this and one write of their work."""
  replay_checkpoint_every: float = 3600.0
  """Seconds between two checkpoints of the replay table (Reverb's own);
  0: none."""
  variable_cachers: int = 0
  """Variable cachers, nodes between the learner and the actors: each pulls
  the learner's parameters every 0.5 s (when they have changed) and serves
  the actors i with i mod N its index, so that the learner sends them to N
  cachers instead of to every actor. A cacher adds up to 0.5 s to the age
  of the parameters its actors act with (docs/architecture.md). 0: the
  actors pull from the learner. Under vertex_ai, when not given, the plan
  chooses N so that neither the learner nor a cacher sends more than half
  its machine's network egress cap (docs/google_cloud.md)."""
  actor_max_failures: int = 5
  """Environment failures within a minute after which an actor gives up
  (the others go on)."""
  heartbeat_timeout: float = 30.0
  """Seconds after which the learner, the counter, replay, a variable
  cacher, the evaluator or an actor that has stopped answering the
  coordinator's heartbeats (over the program's own RPC) counts as frozen:
  under local_mp it is ended and started again (--max_node_restarts),
  elsewhere, or past that bound, the program stops as failed. A
  coordinator silent as long to the launcher's heartbeats (local_mp) stops
  the program as failed. Not under local_mt, where nodes are threads."""
  max_node_restarts: int = 5
  """local_mp: how many times a node that dies or freezes (its heartbeats
  silent for --heartbeat_timeout) is started again in place, from its own
  newest checkpoint, within --node_restart_window seconds, while the rest
  of the program goes on (`launch.supervision.keeper`, docs/checkpoints.md). One fault
  more and the program stops as failed, naming the node. 0: no node is
  started again; the program stops at the first such fault. Five, as
  Vertex AI restarts a failing replica five times before it fails the
  job."""
  node_restart_window: float = 3600.0
  """Seconds within which --max_node_restarts counts a node's faults."""
  workdir_access: str = 'user'
  """Who may read the workdir and what the run writes there: user
  (directories 0700, files 0600), group (0750, 0640) or all (0755, 0644).
  Logs, checkpoints and policies are the user's own unless shared on
  purpose."""
  allow_network_exposure: bool = False
  """Under local_mp and local_mt, where this system cannot give the run a
  network namespace of its own (docs/security.md): start anyway, with every
  node listening on every interface, unauthenticated; any host that reaches
  this one can then run code as this user. Given per launch, never resumed
  from run.json."""
  placement: str = 'sized'
  """How the nodes' processes share the cores (launch/machine/placement.py): sized
  (each node's TensorFlow thread pools sized for the cores it should use:
  the learner every core it may run on, every other node one; under
  local_mp the evaluator at nice 10, yielding to the learner and the
  actors) or tf_default (TensorFlow's own pools of every core in every
  process but the actors', which take one: the program before placement, to
  compare against)."""
  pin_learner: str = ''
  """local_mp: CPUs to pin the learner to (e.g. 0-3); its thread pools
  take as many threads. Empty: wherever the system puts it."""
  pin_others: str = ''
  """local_mp: CPUs to pin every other node to (actors, evaluator, replay,
  counter, cachers, coordinator; e.g. 4-15). Empty: wherever the system
  puts them."""
  launch_type: str = dataclasses.field(default='local_mp',
                                       metadata={'flag': False})
  """Launchpad's launch type (--lp_launch_type); under local_mp every node
  is a process of this machine."""
  suite_options: Mapping[str, Any] = dataclasses.field(
      default_factory=dict, metadata={'flag': False})
  """The values of the environment suites' own run options
  (`agents.envs.suites.RunOption`, each a flag), by name; one not given
  has its default."""

  # Options that say how this launch runs, not what the run is: a relaunch
  # of a run may change them freely (see `command_line`).
  PER_LAUNCH = ('workdir', 'launch_type', 'allow_network_exposure',
                'variable_cachers', 'placement', 'pin_learner',
                'pin_others')

  @property
  def program_shape(self) -> ProgramShape:
    """What the agent's builder may know of the program
    (`agents.builders.ProgramShape`)."""
    return ProgramShape(num_actors=self.num_actors,
                        envs_per_actor=self.envs_per_actor,
                        variable_cachers=self.variable_cachers,
                        max_actor_steps=self.max_actor_steps)

  def environment_options(self) -> Dict[str, Any]:
    """Every run option by name but the seed and the environment's name,
    the suites' own among them, for the environment's suite to take those
    its environments take (`agents.envs.suites.Suite.options`)."""
    options = {field.name: getattr(self, field.name)
               for field in dataclasses.fields(self)
               if field.name not in ('seed', 'env', 'suite_options')}
    options.update((option.name, option.default)
                   for option in suites.run_options())
    options.update(self.suite_options)
    return options

  @property
  def node_workdir(self) -> str:
    """The workdir as the nodes read and write it: a gs:// workdir is under
    the Cloud Storage mount of the replica the node runs in."""
    return storage.node_path(self.workdir)

  def validate(self):
    """Raises ValueError naming the first flag whose value is out of range
    (the suites' own run options too: those of the suites registered)."""
    at_least_one = ('num_actors', 'envs_per_actor', 'evaluation_episodes',
                    'actor_max_failures')
    for name in at_least_one:
      check_flag(name, getattr(self, name) >= 1, getattr(self, name), '>= 1')
    check_flag('variable_cachers',
               0 <= self.variable_cachers <= self.num_actors,
               self.variable_cachers,
               f'between 0 and --num_actors={self.num_actors} (each cacher '
               'serves one actor or more)')
    check_flag('heartbeat_timeout', self.heartbeat_timeout > 0,
               self.heartbeat_timeout, '> 0')
    check_flag('max_node_restarts', self.max_node_restarts >= 0,
               self.max_node_restarts, '>= 0')
    check_flag('node_restart_window', self.node_restart_window > 0,
               self.node_restart_window, '> 0')
    for name in ('log_every', 'evaluation_period'):
      check_flag(name, getattr(self, name) >= 0, getattr(self, name), '>= 0')
    for name in ('checkpoint_every', 'replay_checkpoint_every'):
      check_flag(name, getattr(self, name) >= 0, getattr(self, name),
                 '>= 0 (0: none)')
    check_flag('workdir_access', self.workdir_access in WORKDIR_UMASKS,
               self.workdir_access, ' or '.join(WORKDIR_UMASKS))
    check_flag('num_evaluators', self.num_evaluators in (0, 1),
               self.num_evaluators, '0 or 1')
    from launch.machine import placement  # pylint: disable=g-import-not-at-top
    placement.check(self.placement, self.pin_learner, self.pin_others,
                    self.launch_type)
    declared = {option.name: option for option in suites.run_options()}
    for name, value in self.suite_options.items():
      if name not in declared:
        raise ValueError(f'--{name}: no environment suite has such a run '
                         'option (is the suite\'s module in --plugins?).')
      declared[name].validate(value)
    check_flag('max_actor_steps',
               self.max_actor_steps is None or self.max_actor_steps >= 1,
               self.max_actor_steps, '>= 1 (or none to run until stopped)')
    check_flag('max_seconds',
               self.max_seconds is None or self.max_seconds > 0,
               self.max_seconds, '> 0 (or none to run until stopped)')
