"""What every program of `programs/` is: an agent, named, behind one main.

A program file names its agent (config, builder, presets, which
environments it takes) in a function that imports it, and hands that to a
`ProgramEntry`, which calls its `main` under `__main__`:

  def agent() -> entry.Agent:
    from agents.apex_dqn import ApeXDQNBuilder, ApeXDQNConfig, PRESETS
    from agents.envs import environments
    return entry.Agent(ApeXDQNConfig, ApeXDQNBuilder,
                       environments.resolve_discrete, PRESETS)

  ENTRY = entry.ProgramEntry('apex_dqn', 'Ape-X DQN', agent,
                             default_env='atari:Pong')
  build = ENTRY.build  # For tests that launch the program themselves.

  if __name__ == '__main__':
    ENTRY.main()

Making the entry (as the program file is imported) first moves a launch on
this machine into a network of its own (`private_network.isolate_launch`),
while the process still has one thread; only then does it call `agent`,
which imports TensorFlow and NumPy, and define the flags. This module
imports neither at its top.
"""

import dataclasses
import sys
from typing import Any, Callable, Mapping, Type

from agents.config import Preset
from agents.distributed import interfaces
from agents.distributed import private_network


@dataclasses.dataclass(frozen=True)
class Agent:
  """What a program runs: its config and builder (a subclass of
  `interfaces.ReplayBuilder` or `interfaces.WorkerBuilder`), the environments it takes
  (`resolve_environment`: a name -> the environment's spec) and its
  named configurations."""

  config_class: type
  builder_class: Type[interfaces.Builder]
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
    from agents.distributed import command_line  # pylint: disable=g-import-not-at-top
    self.name = name
    self.title = title
    self.agent = agent()
    if not issubclass(self.agent.builder_class, interfaces.Builder):
      raise TypeError(f'{self.agent.builder_class.__name__} is not an '
                      'agents.distributed.interfaces.Builder.')
    self.default_env = default_env
    self.members = members
    command_line.define_flags(self.agent.config_class, self.agent.presets,
                              default_env=default_env)

  def build(self):
    """Validates the flags: (program, run options, environment, plan)."""
    from agents.distributed import command_line  # pylint: disable=g-import-not-at-top
    return command_line.build_program(
        self.name, self.agent.config_class, self.agent.builder_class,
        self.agent.resolve_environment, self.agent.presets)

  def _main(self, argv):
    from agents.distributed import launcher  # pylint: disable=g-import-not-at-top
    del argv  # Unused: every argument is a flag.
    program, options, environment, plan = self.build()
    print(f'{self.title} on {environment.name} with {options.num_actors} '
          f'{self.members}; logs in {options.workdir}')
    launcher.launch(program, options, self.name, plan)

  def main(self):
    from absl import app  # pylint: disable=g-import-not-at-top
    app.run(self._main)
