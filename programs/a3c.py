"""A3C (Mnih et al. 2016) as a Launchpad program: a parameter server and
--num_actors workers (the paper's actor-learners), with the evaluator,
counter and coordinator of the Ape-X programs.

  python programs/a3c.py --lp_launch_type=local_mp --preset=cartpole
  python programs/a3c.py --lp_launch_type=local_mt --preset=cartpole

Every hyper-parameter of `A3CConfig` and every run option is a flag of the
same name; `--preset=<name>` selects a named configuration (`--list_presets`).
"""

from agents.distributed import entry


def builder():
  """A3C's builder: TensorFlow, loaded once the flags are checked."""
  from agents.a3c.builder import A3CBuilder  # pylint: disable=g-import-not-at-top
  return A3CBuilder


def agent() -> entry.Agent:
  """A3C, imported once a local launch has its own network (`entry`)."""
  # pylint: disable=g-import-not-at-top
  from agents.a3c.config import A3CConfig
  from agents.a3c.presets import PRESETS
  from agents.envs import environments
  return entry.Agent(A3CConfig, builder, environments.resolve_any, PRESETS)


ENTRY = entry.ProgramEntry('a3c', 'A3C', agent, default_env='atari:Pong',
                           members='workers')
build = ENTRY.build  # (program, run options, environment, plan)

if __name__ == '__main__':
  ENTRY.main()
