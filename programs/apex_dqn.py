"""Ape-X DQN as a Launchpad program.

  python programs/apex_dqn.py --lp_launch_type=local_mp
  python programs/apex_dqn.py --lp_launch_type=local_mp --preset=cartpole

Every hyper-parameter of `ApeXDQNConfig` and every run option is a flag of the
same name; `--preset=<name>` selects a named configuration (`--list_presets`).
"""

from agents.distributed import entry


def builder():
  """Ape-X DQN's builder: TensorFlow, loaded once the flags are checked."""
  from agents.apex_dqn.builder import ApeXDQNBuilder  # pylint: disable=g-import-not-at-top
  return ApeXDQNBuilder


def agent() -> entry.Agent:
  """Ape-X DQN, imported once a local launch has its own network (`entry`)."""
  # pylint: disable=g-import-not-at-top
  from agents.apex_dqn.config import ApeXDQNConfig
  from agents.apex_dqn.presets import PRESETS
  from agents.envs import environments
  return entry.Agent(ApeXDQNConfig, builder, environments.resolve_discrete, PRESETS)


ENTRY = entry.ProgramEntry('apex_dqn', 'Ape-X DQN', agent,
                           default_env='atari:Pong')
build = ENTRY.build  # (program, run options, environment, plan)

if __name__ == '__main__':
  ENTRY.main()
