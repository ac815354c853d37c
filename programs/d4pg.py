"""D4PG as a Launchpad program.

  python programs/d4pg.py --lp_launch_type=local_mp
  python programs/d4pg.py --lp_launch_type=local_mp --preset=dmc500k \
      --env=control:cheetah:run:repeat=4

Every hyper-parameter of `D4PGConfig` and every run option is a flag of the
same name; `--preset=<name>` selects a named configuration (`--list_presets`).
"""

from launch import entry

ENTRY = entry.ProgramEntry('d4pg')  # The agent, as `agents.registry` has it.
build = ENTRY.build  # (program, run options, environment, plan)

if __name__ == '__main__':
  ENTRY.main()
