"""Ape-X DPG as a Launchpad program.

  python programs/apex_dpg.py --lp_launch_type=local_mp
  python programs/apex_dpg.py --lp_launch_type=local_mp --preset=cartpole

Every hyper-parameter of `ApeXDPGConfig` and every run option is a flag of the
same name; `--preset=<name>` selects a named configuration (`--list_presets`).
"""

from agents.distributed import entry


def builder():
  """Ape-X DPG's builder: TensorFlow, loaded once the flags are checked."""
  from agents.apex_dpg.builder import ApeXDPGBuilder  # pylint: disable=g-import-not-at-top
  return ApeXDPGBuilder


def agent() -> entry.Agent:
  """Ape-X DPG, imported once a local launch has its own network (`entry`)."""
  # pylint: disable=g-import-not-at-top
  from agents.apex_dpg.config import ApeXDPGConfig
  from agents.apex_dpg.presets import PRESETS
  from agents.envs import environments
  return entry.Agent(ApeXDPGConfig, builder, environments.resolve_continuous, PRESETS)


ENTRY = entry.ProgramEntry('apex_dpg', 'Ape-X DPG', agent,
                           default_env='control:manipulator:bring_ball')
build = ENTRY.build  # (program, run options, environment, plan)

if __name__ == '__main__':
  ENTRY.main()
