"""What every program of `programs/` is: an agent, named, behind one main.

A program file names its agent (config, presets, which environments it
takes, how to load its builder) in a function that imports it, and hands
that to a `ProgramEntry`, which calls its `main` under `__main__`:

  def builder():
    from agents.apex_dqn.builder import ApeXDQNBuilder
    return ApeXDQNBuilder

  def agent() -> entry.Agent:
    from agents.apex_dqn.config import ApeXDQNConfig
    from agents.apex_dqn.presets import PRESETS
    from agents.envs import environments
    return entry.Agent(ApeXDQNConfig, builder, environments.resolve_discrete,
                       PRESETS)

  ENTRY = entry.ProgramEntry('apex_dqn', 'Ape-X DQN', agent,
                             default_env='atari:Pong')
  build = ENTRY.build  # For tests that launch the program themselves.

  if __name__ == '__main__':
    ENTRY.main()

Making the entry (as the program file is imported) first moves a launch on
this machine into a network of its own (`private_network.isolate_launch`),
while the process still has one thread; only then does it call `agent`,
which imports NumPy (not TensorFlow), and define the flags. The builder,
and with it TensorFlow, is loaded once every flag is checked
(`command_line.build_program`): a bad flag is answered in a second. This
module imports neither at its top.
"""

import dataclasses
import sys
from typing import Any, Callable, Mapping, Type

from agents.config import AgentConfig
from agents.config import Preset
from agents.distributed import interfaces
from agents.distributed import private_network


@dataclasses.dataclass(frozen=True)
class Agent:
  """What a program runs: its config (an `agents.config.AgentConfig`), a
  function that loads its builder (a subclass of `interfaces.ReplayBuilder`
  or `interfaces.WorkerBuilder`), the environments it takes
  (`resolve_environment`: a name -> the environment's spec) and its named
  configurations."""

  config_class: Type[AgentConfig]
  load_builder: Callable[[], Type[interfaces.Builder]]
  resolve_environment: Callable[[str], Any]
  presets: Mapping[str, Preset]


class ProgramEntry:
  """One program: its name (`programs/<name>.py`, its runs' default
  workdir), its title for the terminal, its agent (a function that imports
  and returns it), its default environment, and what its nodes that act are
  called (`members`: actors, or workers)."""

  def __init__(self, name: str, title: str, agent: Callable[[], Agent],
               default_env: str, members: str = 'actors'):
    # First of all, while this process has one thread: a launch on this
    # machine moves into a network of its own (or refuses to start exposed).
    private_network.isolate_launch(sys.argv)
    # pylint: disable=g-import-not-at-top
    from agents.distributed import command_line
    from agents.distributed.cloud import options as cloud_options
    # pylint: enable=g-import-not-at-top
    cloud_options.define_xmanager_flags(sys.argv)
    self.name = name
    self.title = title
    self.agent = agent()
    self.default_env = default_env
    self.members = members
    command_line.define_flags(self.agent.config_class, self.agent.presets,
                              default_env=default_env)

  def build(self):
    """Validates the flags: (program, run options, environment, plan)."""
    from agents.distributed import command_line  # pylint: disable=g-import-not-at-top
    return command_line.build_program(
        self.name, self.agent.config_class, self.agent.load_builder,
        self.agent.resolve_environment, self.agent.presets)

  def _main(self, argv):
    del argv  # Unused: every argument is a flag.
    program, options, environment, plan = self.build()
    from agents.distributed import launcher  # pylint: disable=g-import-not-at-top
    print(f'{self.title} on {environment.name} with {options.num_actors} '
          f'{self.members}; logs in {options.workdir}')
    launcher.launch(program, options, self.name, plan, self.members)

  def main(self):
    from absl import app  # pylint: disable=g-import-not-at-top
    app.run(self._main)
