"""A3C (Mnih et al. 2016) as a Launchpad program: a parameter server and
--num_actors workers (the paper's actor-learners), with the evaluator,
counter and coordinator of the Ape-X programs.

  python programs/a3c.py --lp_launch_type=local_mp --preset=cartpole
  python programs/a3c.py --lp_launch_type=local_mt --preset=cartpole

Every hyper-parameter of `A3CConfig` and every run option is a flag of the
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
from agents.a3c.builder import A3CBuilder
from agents.a3c.config import A3CConfig
from agents.a3c.presets import PRESETS
from agents.distributed import entry

ENTRY = entry.ProgramEntry('a3c', 'A3C', A3CConfig, A3CBuilder,
                           environments.resolve_any, PRESETS,
                           default_env='atari:Pong', members='workers')
build = ENTRY.build  # (program, run options, environment, plan)

if __name__ == '__main__':
  ENTRY.main()
