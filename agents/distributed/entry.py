"""What every program of `programs/` is: an agent, named, behind one main.

A program file names its agent (config, builder, presets, which
environments it takes) in a `ProgramEntry`, which defines the flags at
import, and calls its `main` under `__main__`:

  ENTRY = entry.ProgramEntry('apex_dqn', 'Ape-X DQN', ApeXDQNConfig,
                             ApeXDQNBuilder, environments.resolve_discrete,
                             PRESETS, default_env='atari:Pong')
  build = ENTRY.build  # For tests that launch the program themselves.

  if __name__ == '__main__':
    ENTRY.main()

The program file calls `private_network.isolate_launch(sys.argv)` before it
imports this module (which imports TensorFlow): see that module.
"""

import dataclasses
from typing import Any, Callable, Mapping, Type

from absl import app

from agents.config import Preset
from agents.distributed import command_line
from agents.distributed import interfaces
from agents.distributed import launcher


@dataclasses.dataclass(frozen=True)
class ProgramEntry:
  """One program: its name (`programs/<name>.py`, its runs' default
  workdir), its title for the terminal, its agent (its builder a subclass
  of `interfaces.ReplayBuilder` or `interfaces.WorkerBuilder`), and what
  its nodes that act are called (`members`: actors, or workers)."""

  name: str
  title: str
  config_class: type
  builder_class: Type[interfaces.Builder]
  resolve_environment: Callable[[str], Any]
  presets: Mapping[str, Preset]
  default_env: str
  members: str = 'actors'

  def __post_init__(self):
    if not issubclass(self.builder_class, interfaces.Builder):
      raise TypeError(f'{self.builder_class.__name__} is not an '
                      'agents.distributed.interfaces.Builder.')
    command_line.define_flags(self.config_class, self.presets,
                              default_env=self.default_env)

  def build(self):
    """Validates the flags: (program, run options, environment, plan)."""
    return command_line.build_program(self.name, self.config_class,
                                      self.builder_class,
                                      self.resolve_environment, self.presets)

  def _main(self, argv):
    del argv  # Unused: every argument is a flag.
    program, options, environment, plan = self.build()
    print(f'{self.title} on {environment.name} with {options.num_actors} '
          f'{self.members}; logs in {options.workdir}')
    launcher.launch(program, options, self.name, plan)

  def main(self):
    app.run(self._main)
