"""Ape-X DQN as a Launchpad program.

  python programs/apex_dqn.py --lp_launch_type=local_mp
  python programs/apex_dqn.py --lp_launch_type=local_mp --preset=cartpole

Every hyper-parameter of `ApeXDQNConfig` and every run option is a flag of the
same name; `--preset=<name>` selects a named configuration (`--list_presets`).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# pylint: disable=g-import-not-at-top,wrong-import-position
# First of all, while this process has one thread: a launch on this machine
# moves into a network of its own (or refuses to start exposed).
from agents.distributed import private_network
private_network.isolate_launch(sys.argv)

from agents.envs import environments
from agents.apex_dqn import ApeXDQNBuilder
from agents.apex_dqn import ApeXDQNConfig
from agents.apex_dqn.presets import PRESETS
from agents.distributed import entry

ENTRY = entry.ProgramEntry('apex_dqn', 'Ape-X DQN', ApeXDQNConfig,
                           ApeXDQNBuilder, environments.resolve_discrete,
                           PRESETS, default_env='atari:Pong')
build = ENTRY.build  # (program, run options, environment, plan)

if __name__ == '__main__':
  ENTRY.main()
