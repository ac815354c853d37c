"""Ape-X DQN as a Launchpad program.

  python programs/apex_dqn.py --lp_launch_type=local_mp
  python programs/apex_dqn.py --env=gym:CartPole-v1 --num_actors=2 ...

Every hyper-parameter of `ApeXDQNConfig` is a flag of the same name.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app  # pylint: disable=g-import-not-at-top,wrong-import-position

from agents import environments  # pylint: disable=wrong-import-position
from agents import program_flags  # pylint: disable=wrong-import-position
from agents.apex_dqn import ApeXDQNBuilder  # pylint: disable=wrong-import-position
from agents.apex_dqn import ApeXDQNConfig  # pylint: disable=wrong-import-position

PROGRAM = 'apex_dqn'
program_flags.define_run_flags(PROGRAM, default_env='atari:Pong')
program_flags.define_config_flags(ApeXDQNConfig)


def build():
  """Validates the flags and returns (program, run options, environment)."""
  return program_flags.build_program(PROGRAM, ApeXDQNConfig, ApeXDQNBuilder,
                                     environments.resolve_discrete)


def main(_):
  program, options, environment = build()
  print(f'Ape-X DQN on {environment.name} with {options.num_actors} actors; '
        f'logs in {options.workdir}')
  program_flags.launch(program, workdir=options.workdir)


if __name__ == '__main__':
  app.run(main)
