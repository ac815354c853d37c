"""A3C (Mnih et al. 2016) as a Launchpad program: a parameter server and
--num_actors workers (the paper's actor-learners), with the evaluator,
counter and coordinator of the Ape-X programs.

  python programs/a3c.py --lp_launch_type=local_mp --preset=cartpole
  python programs/a3c.py --lp_launch_type=local_mt --preset=cartpole

Every hyper-parameter of `A3CConfig` and every run option is a flag of the
same name; `--preset=<name>` selects a named configuration (`--list_presets`).
"""

from launch import entry

ENTRY = entry.ProgramEntry('a3c')  # The agent, as `agents.registry` has it.
build = ENTRY.build  # (program, run options, environment, plan)

if __name__ == '__main__':
  ENTRY.main()
