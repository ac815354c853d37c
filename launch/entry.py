"""What every program of `programs/` is: a registered agent (`agents.registry`)
behind one main. A program file names its agent:

  ENTRY = entry.ProgramEntry('apex_dqn')
  build = ENTRY.build  # For tests that launch the program themselves.

  if __name__ == '__main__':
    ENTRY.main()

Making the entry (as the program file is imported) first moves a launch on
this machine into a network of its own (`private_network.isolate_launch`),
while the process still has one thread; only then does it import the
plug-ins (`--plugins`, read ahead of absl's parse), read the agent from the
registry, which imports its config and presets (NumPy, not TensorFlow),
and define the flags, the registered suites' own run options among them.
The builder, and with it TensorFlow, is loaded once every flag is checked
(`command_line.build_program`): a bad flag is answered in a second. This
module imports neither at its top.
"""

import sys

from launch.machine import private_network


def _plugins_given(argv) -> str:
  """--plugins as the program will read it from `argv` (--flagfile too);
  '' where it gives none or cannot be read (the program's parse says
  why)."""
  from absl import flags  # pylint: disable=g-import-not-at-top
  values = flags.FlagValues()
  flags.DEFINE_string('plugins', '', '', flag_values=values)
  try:
    values(list(argv), known_only=True)
  except flags.Error:
    return ''
  return values.plugins


class ProgramEntry:
  """One program: the registered agent `name` (`agents.registry`), whose
  name is the program's (`programs/<name>.py`, its runs' default workdir).
  `plugins`: the modules (comma-separated) that register it, when it is an
  agent of your own code (docs/extending.md): imported first, and the
  default of `--plugins`, so that the run's record names them."""

  def __init__(self, name: str, plugins: str = ''):
    # First of all, while this process has one thread: a launch on this
    # machine moves into a network of its own (or refuses to start exposed).
    private_network.isolate_launch(sys.argv)
    # pylint: disable=g-import-not-at-top
    import launchpad  # pylint: disable=unused-import  # Its --lp_* flags.
    from agents import plugins as plugins_lib
    from agents import registry
    from launch.console import command_line
    from launch.cloud import options as cloud_options
    # pylint: enable=g-import-not-at-top
    cloud_options.define_xmanager_flags(sys.argv)
    plugins_lib.import_plugins(plugins)
    # The command line's --plugins too, so that the run options of their
    # suites are flags when absl parses it; a module that cannot be
    # imported is refused with the other bad flags (`build`).
    try:
      plugins_lib.import_plugins(_plugins_given(sys.argv))
    except ValueError:
      pass
    self.agent = registry.get(name)
    self.name = self.agent.name
    command_line.define_flags(self.agent.config_class, self.agent.presets,
                              default_env=self.agent.default_env,
                              default_plugins=plugins)

  def build(self):
    """Validates the flags: (program, run options, environment, plan)."""
    from launch.console import command_line  # pylint: disable=g-import-not-at-top
    return command_line.build_program(
        self.name, self.agent.config_class, self.agent.make_builder,
        self.agent.resolve_environment, self.agent.presets,
        self.agent.title, self.agent.small_machine_preset)

  def _main(self, argv):
    del argv  # Unused: every argument is a flag.
    program, options, environment, plan = self.build()
    from launch.supervision import launcher  # pylint: disable=g-import-not-at-top
    print(f'{self.agent.title} on {environment.name} with '
          f'{options.num_actors} {self.agent.members}; logs in '
          f'{options.workdir}')
    launcher.launch(program, options, self.name, plan, self.agent.members)

  def main(self):
    from absl import app  # pylint: disable=g-import-not-at-top
    app.run(self._main)
