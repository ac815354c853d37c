"""Ape-X in one process: acme.EnvironmentLoop, a real Reverb server, no Launchpad.

  python examples/single_process.py --num_steps=3000
  python examples/single_process.py --agent=apex_dpg --num_steps=5000

`--agent`: any registered agent with replay (`agents.registry`): apex_dqn
(default, on gym:CartPole-v1) or apex_dpg (default control:cartpole:balance).
One actor and the learner share this process through
`acme.agents.agent.Agent`, which steps the learner once every
`observations_per_step` observations after `min_observations`. The actor writes
prioritised n-step transitions to an in-process `reverb.Server`, from which the
learner samples.
"""

import dataclasses
from typing import Any, Dict

import acme
import reverb
import tensorflow as tf
from absl import app
from absl import flags
from acme.agents import agent as agent_lib
from acme.utils import loggers

from agents import builders
from agents import registry
from agents.replay import adders
from agents.replay import tables


@dataclasses.dataclass(frozen=True)
class ShortRun:
  """What this example sets for a short run of one agent: its config's
  values (the rest are the agent's defaults), the single actor's
  exploration and the environment without `--env`."""
  config: Dict[str, Any]
  exploration: float
  """The single actor's exploration: epsilon (DQN) or noise sigma (DPG)."""
  default_env: str


# The agents' short runs, by their names in `agents.registry`; another
# registered agent with replay runs with its defaults.
SHORT_RUNS = {
    'apex_dqn': ShortRun(
        config=dict(batch_size=32, min_replay_size=200,
                    replay_capacity=10_000, mlp_hidden_sizes='64',
                    dueling_hidden_size=64, target_update_period=100,
                    learning_rate=1e-3, variable_update_period=100),
        exploration=0.1,
        default_env='gym:CartPole-v1'),
    'apex_dpg': ShortRun(
        config=dict(batch_size=64, min_replay_size=500,
                    replay_capacity=20_000, critic_hidden_sizes='64,64',
                    policy_hidden_sizes='64,64', critic_learning_rate=1e-3,
                    policy_learning_rate=1e-3, target_update_period=100,
                    variable_update_period=100),
        exploration=0.3,
        default_env='control:cartpole:balance'),
}


def short_run(agent: registry.Agent) -> ShortRun:
  """This example's short run of `agent`."""
  return SHORT_RUNS.get(agent.name, ShortRun({}, 0.1, agent.default_env))


def replay_agents() -> list:
  """The registered agents with replay (the others have no single-process
  form here)."""
  return [name for name in registry.names()
          if registry.get(name).members == 'actors']


flags.DEFINE_enum('agent', 'apex_dqn', replay_agents(),
                  'Which agent (agents.registry).')
flags.DEFINE_string('env', None, 'Environment, <kind>:<name>; default: '
                    + ', '.join(f'{run.default_env} for {name}'
                                for name, run in SHORT_RUNS.items()) + '.')
flags.DEFINE_integer('num_steps', 3000, 'Environment steps to run.')
flags.DEFINE_integer('seed', 0, 'Seed of the environment, network and actor.')

EPSILON = SHORT_RUNS['apex_dqn'].exploration  # The DQN actor's epsilon.
SIGMA = SHORT_RUNS['apex_dpg'].exploration  # The DPG actor's noise std.
OBSERVATIONS_PER_STEP = 4  # Environment steps per learner step.


def run(env_name: str, num_steps: int, seed: int = 0,
        agent: str = 'apex_dqn') -> dict:
  """Trains `agent` for at least `num_steps` steps; returns the parts and
  counts.

  The caller owns the returned Reverb `server` and should `stop()` it.
  """
  if agent not in replay_agents():
    raise ValueError(f'agent={agent!r}: choose one of {replay_agents()}.')
  definition = registry.get(agent)
  setup = short_run(definition)
  tf.random.set_seed(seed)
  environment = definition.resolve_environment(env_name)
  config = definition.config_class(**setup.config)
  config.validate()
  builder = definition.make_builder(config, environment)
  if not isinstance(builder, builders.ReplayBuilder):
    raise ValueError(f'agent={agent!r} learns without replay; this example '
                     'runs an agent with replay.')

  server = reverb.Server(builder.make_replay_tables())
  client = reverb.Client(f'localhost:{server.port}')
  learner = builder.make_learner(client)
  actor = builder.make_actor(learner, exploration=setup.exploration,
                             replay_client=client, seed=seed)
  # The adder writes to Reverb in batches of `actor_flush_size` completed
  # transitions, each n steps behind its observation, and an item reaches
  # replay once the chunk of its rows is full (`adders.CHUNK_LENGTH` rows):
  # wait for all three, so that the table holds `min_replay_size` items when
  # the learner first samples.
  min_observations = (config.min_replay_size + config.actor_flush_size +
                      config.n_step + adders.CHUNK_LENGTH)
  acme_agent = agent_lib.Agent(actor, learner,
                               min_observations=min_observations,
                               observations_per_step=OBSERVATIONS_PER_STEP)

  episodes = loggers.InMemoryLogger()
  terminal = loggers.TimeFilter(loggers.TerminalLogger('environment_loop'), 5.0)
  loop = acme.EnvironmentLoop(
      environment.make_environment(seed=seed), acme_agent,
      logger=loggers.Dispatcher([episodes, terminal]))
  loop.run(num_steps=num_steps)
  actor.wait_until_written()  # Transitions reach replay in the background.

  return {
      'agent': agent, 'config': config, 'environment': environment,
      'exploration': setup.exploration,
      'server': server, 'client': client,
      'actor': actor, 'learner': learner, 'loop': loop,
      'min_observations': min_observations,
      'observations_per_step': OBSERVATIONS_PER_STEP,
      'learner_steps': learner.num_steps,
      'table_size': client.server_info()[tables.TABLE].current_size,
      'episode_lengths': [int(row['episode_length']) for row in episodes.data],
      'episode_returns': [float(row['episode_return']) for row in episodes.data],
  }


def main(argv):
  del argv
  agent = flags.FLAGS.agent
  env_name = flags.FLAGS.env or short_run(registry.get(agent)).default_env
  result = run(env_name, flags.FLAGS.num_steps, flags.FLAGS.seed, agent=agent)
  returns = result['episode_returns']
  print(f'{agent} on {env_name}: {len(returns)} episodes, '
        f'{sum(result["episode_lengths"])} steps, '
        f'{result["learner_steps"]} learner steps, '
        f'{result["table_size"]} items in replay; mean return of the last 10 '
        f'episodes: {sum(returns[-10:]) / len(returns[-10:]):.1f}')
  result['server'].stop()


if __name__ == '__main__':
  app.run(main)
