"""What an actor plays (`ActingNode`): every environment it builds, the
first ones and one rebuilt after a failure, is made as the run's options
say: sticky actions or not (`--atari_training`) and random no-op starts
(`--atari_noop_starts`). Read back from the real ALE each environment
holds, and from the no-op start each episode began with."""

import pytest
from acme.utils import counting

from agents.apex_dqn.builder import ApeXDQNBuilder
from agents.apex_dqn.config import ApeXDQNConfig
from launch import nodes
from launch.options import RunOptions
from agents.envs import atari
from agents.envs import environments
from tests.test_vector_actors import FixedVariableSource


@pytest.mark.parametrize('training, noop_starts', [
    ('deterministic', 0), ('sticky', 0), ('deterministic', 30),
    ('sticky', 12)])
def test_every_environment_an_actor_builds_is_as_the_options_say(
    tmp_path, training, noop_starts):
  spec = environments.resolve_discrete('atari:Pong')
  builder = ApeXDQNBuilder(ApeXDQNConfig(), spec)
  options = RunOptions(workdir=str(tmp_path), envs_per_actor=2,
                       suite_options={'atari_training': training,
                                      'atari_noop_starts': noop_starts})
  options.validate()
  actor = builder.make_actor(FixedVariableSource(builder.make_network()),
                             exploration=[0.4, 0.1], seed=0)
  node = nodes.ActingNode(builder, actor, counting.Counter(), 0, options)
  built = list(node._loop.environments)  # pylint: disable=protected-access
  built.append(node._make_environment())  # As after a failure.  # pylint: disable=protected-access
  sticky = atari.ATARI_TRAININGS[training]
  starts = []
  for environment in built:
    # The actor's guard around the dm_env adapter around gymnasium's ALE.
    ale = environment._environment._environment.unwrapped.ale  # pylint: disable=protected-access
    assert ale.getFloat('repeat_action_probability') == pytest.approx(sticky)
    for _ in range(4):
      environment.reset()
      starts.append(atari.noops_played(environment))
    environment.close()
  if noop_starts:
    assert all(1 <= count <= noop_starts for count in starts), starts
    assert len(set(starts)) > 1, starts  # Drawn afresh each episode.
  else:
    assert starts == [None] * len(starts)
