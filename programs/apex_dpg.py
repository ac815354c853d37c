"""Ape-X DPG as a Launchpad program.

  python programs/apex_dpg.py --lp_launch_type=local_mp
  python programs/apex_dpg.py --env=control:cartpole:balance --num_actors=2 ...

Every hyper-parameter of `ApeXDPGConfig` is a flag of the same name.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app  # pylint: disable=g-import-not-at-top,wrong-import-position

from agents import environments  # pylint: disable=wrong-import-position
from agents import program_flags  # pylint: disable=wrong-import-position
from agents.apex_dpg import ApeXDPGBuilder  # pylint: disable=wrong-import-position
from agents.apex_dpg import ApeXDPGConfig  # pylint: disable=wrong-import-position

PROGRAM = 'apex_dpg'
program_flags.define_run_flags(PROGRAM,
                               default_env='control:manipulator:bring_ball')
program_flags.define_config_flags(ApeXDPGConfig)


def build():
  """Validates the flags and returns (program, run options, environment)."""
  return program_flags.build_program(PROGRAM, ApeXDPGConfig, ApeXDPGBuilder,
                                     environments.resolve_continuous)


def main(_):
  program, options, environment = build()
  print(f'Ape-X DPG on {environment.name} with {options.num_actors} actors; '
        f'logs in {options.workdir}')
  program_flags.launch(program, workdir=options.workdir)


if __name__ == '__main__':
  app.run(main)
