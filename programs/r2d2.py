"""R2D2 (Kapturowski et al. 2019) as a Launchpad program.

  python programs/r2d2.py --lp_launch_type=local_mp --preset=cartpole_hidden
  python programs/r2d2.py --lp_launch_type=local_mp --preset=minatar \
      --env=minatar:breakout:full

Every hyper-parameter of `R2D2Config` and every run option is a flag of
the same name; `--preset=<name>` selects a named configuration
(`--list_presets`).
"""

from launch import entry

# The agent, as `agents.registry` has it.
ENTRY = entry.ProgramEntry('r2d2')
build = ENTRY.build  # (program, run options, environment, plan)

if __name__ == '__main__':
  ENTRY.main()
