"""The agents: each agent folder declares once what it is, here.

An agent is an `Agent`: its name (its program's, and what a run's record
names), its config class, its builder (named as `module:Class`, imported
only when asked for: it imports TensorFlow), its network factory (the
builder's own by default), its named configurations, the actions it takes
(and so the environments it resolves), its default environment, and what
its acting nodes are called. Its folder's
`__init__.py` registers it:

  registry.register(registry.Agent(
      name='apex_dqn', title='Ape-X DQN', config_class=ApeXDQNConfig,
      builder='agents.apex_dqn.builder:ApeXDQNBuilder', presets=PRESETS,
      actions='discrete', default_env='atari:Pong'))

The programs (`programs/<name>.py`), restoring a policy (`launch.offline.restore`),
`programs/evaluate.py` and `examples/single_process.py` all read this
registry, and nothing else lists the agents. An agent of your own code is
registered the same way, from a module imported before a program reads its
flags.

Nothing here imports TensorFlow: a program checks its flags with the
agent's config and presets before it loads the builder.
"""

import dataclasses
import importlib
from typing import Dict, List, Mapping, Optional, Type

from agents import builders
from agents import plugins
from agents.config import AgentConfig
from agents.config import Preset

# The agent folders of this package; each registers itself when imported,
# as its `AGENT`.
_BUILT_IN = ('agents.apex_dqn', 'agents.apex_c51', 'agents.apex_dpg',
             'agents.d4pg', 'agents.a3c', 'agents.r2d2')

# Which environments an agent takes, by its actions.
ACTIONS = ('discrete', 'continuous', 'any')


@dataclasses.dataclass(frozen=True)
class Agent:
  """What an agent is, declared once by its folder (module docstring)."""

  name: str
  """Its program's name (`programs/<name>.py`, the runs' default workdir
  `~/apex_runs/<name>/`) and what a run's record (`run.json`) names."""
  title: str
  """How the terminal names it, e.g. 'Ape-X DQN'."""
  config_class: Type[AgentConfig]
  """Its hyper-parameters: a dataclass whose fields are the program's
  flags."""
  builder: str
  """Its builder class, as `module:Class` (an `agents.builders.Builder`),
  imported by `load_builder`."""
  presets: Mapping[str, Preset]
  """Its named configurations (`--preset=<name>`)."""
  actions: str
  """The actions it takes: 'discrete', 'continuous' or 'any'."""
  default_env: str
  """The environment a program runs without `--env`."""
  members: str = 'actors'
  """What its acting nodes are called: 'actors' or 'workers'."""
  networks: Optional[str] = None
  """Its network factory, as `module:function`, `(environment, config) ->
  networks`; None: its builder's own."""
  small_machine_preset: Optional[str] = None
  """The preset sized for a machine of a few cores, which a launch without
  `--preset` there names (`launch.console.command_line.small_machine_notice`)."""

  def __post_init__(self):
    if self.actions not in ACTIONS:
      raise ValueError(f'Agent {self.name!r}: actions={self.actions!r} must '
                       f'be one of {", ".join(ACTIONS)}.')
    for field in ('builder', 'networks'):
      value = getattr(self, field)
      if value is not None and ':' not in value:
        raise ValueError(f'Agent {self.name!r}: {field}={value!r} must be '
                         '<module>:<name>.')

  def load_builder(self):
    """The builder class (this imports TensorFlow)."""
    return plugins.load(self.builder)

  def make_builder(self, config, environment):
    """Its builder for `config` and the environment's spec, with its
    network factory and its name (this imports TensorFlow).

    Raises:
      TypeError: the builder named is not an `agents.builders.Builder`.
    """
    builder_class = self.load_builder()
    if not (isinstance(builder_class, type) and
            issubclass(builder_class, builders.Builder)):
      raise TypeError(f'Agent {self.name!r}: {self.builder} is not an '
                      'agents.builders.Builder.')
    networks = plugins.load(self.networks) if self.networks else None
    return builder_class(config, environment, networks=networks,
                         name=self.name)

  def resolve_environment(self, env_name: str):
    """The spec of environment `env_name` (`agents.envs.suites`), or an
    `UnknownEnvironmentError` that lists the forms this agent takes."""
    from agents.envs import suites  # pylint: disable=g-import-not-at-top
    return suites.resolve(env_name, self.actions, agents_for)


_AGENTS: Dict[str, Agent] = {}


def register(agent: Agent) -> Agent:
  """Adds `agent` to the registry and returns it. Registering a name again
  with the same definition is harmless (a module imported twice); with
  another one it is an error."""
  known = _AGENTS.get(agent.name)
  if known is not None and known != agent:
    raise ValueError(f'An agent named {agent.name!r} is registered already '
                     f'(builder {known.builder}); choose another name.')
  _AGENTS[agent.name] = agent
  return agent


def _load_built_in() -> List[str]:
  """Imports the built-in agent folders; returns their agents' names."""
  return [importlib.import_module(module).AGENT.name for module in _BUILT_IN]


def names() -> List[str]:
  """Every registered agent's name, the built-in ones first, in
  `_BUILT_IN`'s order."""
  built_in = _load_built_in()
  return built_in + [name for name in _AGENTS if name not in built_in]


def agents_for(actions) -> str:
  """The registered agents that take environments of any of `actions`
  ('discrete', 'continuous'), as advice: 'apex_dqn or a3c'."""
  fitting = [name for name in names()
             if _AGENTS[name].actions in (*actions, 'any')]
  return ' or '.join(fitting) or 'an agent of those actions'


def get(name: str) -> Agent:
  """The agent named `name`; a ValueError naming the known ones if there is
  none."""
  _load_built_in()
  if name not in _AGENTS:
    raise ValueError(f'Unknown program {name!r}: no agent of that name is '
                     f'registered (known: {", ".join(_AGENTS)}).')
  return _AGENTS[name]
