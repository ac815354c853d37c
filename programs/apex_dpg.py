"""Ape-X DPG as a Launchpad program.

  python programs/apex_dpg.py --lp_launch_type=local_mp
  python programs/apex_dpg.py --lp_launch_type=local_mp --preset=cartpole

Every hyper-parameter of `ApeXDPGConfig` and every run option is a flag of the
same name; `--preset=<name>` selects a named configuration (`--list_presets`).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app  # pylint: disable=g-import-not-at-top,wrong-import-position

from agents import environments  # pylint: disable=wrong-import-position
from agents.distributed import command_line  # pylint: disable=wrong-import-position
from agents.distributed import launcher  # pylint: disable=wrong-import-position
from agents.apex_dpg import ApeXDPGBuilder  # pylint: disable=wrong-import-position
from agents.apex_dpg import ApeXDPGConfig  # pylint: disable=wrong-import-position
from agents.apex_dpg.presets import PRESETS  # pylint: disable=wrong-import-position

PROGRAM = 'apex_dpg'
command_line.define_flags(ApeXDPGConfig, PRESETS,
                          default_env='control:manipulator:bring_ball')


def build():
  """Validates the flags: (program, run options, environment, plan)."""
  return command_line.build_program(PROGRAM, ApeXDPGConfig, ApeXDPGBuilder,
                                     environments.resolve_continuous,
                                     PRESETS)


def main(_):
  program, options, environment, plan = build()
  print(f'Ape-X DPG on {environment.name} with {options.num_actors} actors; '
        f'logs in {options.workdir}')
  launcher.launch(program, options, PROGRAM, plan)


if __name__ == '__main__':
  app.run(main)
