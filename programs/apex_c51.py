"""The distributional Ape-X DQN (Ape-X C51) as a Launchpad program.

  python programs/apex_c51.py --lp_launch_type=local_mp --preset=atari_small
  python programs/apex_c51.py --lp_launch_type=local_mp --preset=minatar \
      --env=minatar:breakout:full

Every hyper-parameter of `ApeXC51Config` and every run option is a flag of
the same name; `--preset=<name>` selects a named configuration
(`--list_presets`).
"""

from launch import entry

# The agent, as `agents.registry` has it.
ENTRY = entry.ProgramEntry('apex_c51')
build = ENTRY.build  # (program, run options, environment, plan)

if __name__ == '__main__':
  ENTRY.main()
