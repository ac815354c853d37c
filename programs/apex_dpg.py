"""Ape-X DPG as a Launchpad program.

  python programs/apex_dpg.py --lp_launch_type=local_mp
  python programs/apex_dpg.py --lp_launch_type=local_mp --preset=cartpole

Every hyper-parameter of `ApeXDPGConfig` and every run option is a flag of the
same name; `--preset=<name>` selects a named configuration (`--list_presets`).
"""

from launch import entry

ENTRY = entry.ProgramEntry('apex_dpg')  # The agent, as `agents.registry` has it.
build = ENTRY.build  # (program, run options, environment, plan)

if __name__ == '__main__':
  ENTRY.main()
