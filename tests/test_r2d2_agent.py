"""R2D2's parts together in one process, with a real Reverb server: its
flags refused with their fixes, and the sequences its actors write (with
their stored states and initial priorities) read back by its learner,
whose first update, with the actors' own parameters, finds the actors'
priorities again."""

import dataclasses

import numpy as np
import pytest
import reverb

from agents import actor_loop
from agents import registry
from agents.replay import tables

ENV = 'gym:CartPole-v1:hide_velocity'


def _config(**values):
  agent = registry.get('r2d2')
  fields = {field.name for field in dataclasses.fields(agent.config_class)}
  preset = {name: value for name, value in
            agent.presets['cartpole_smoke'].values.items() if name in fields}
  return agent.config_class(**{**preset, **values})


@pytest.mark.parametrize('values, message', [
    ({'sequence_period': 9}, '--sequence_period=9 is out of range: it must '
     'be in [1, --trace_length=8]'),
    ({'burn_in_length': -1}, '--burn_in_length=-1 is out of range'),
    ({'priority_eta': 1.5}, '--priority_eta=1.5 is out of range: it must be '
     'in [0, 1]'),
    ({'value_rescaling_epsilon': 0.0}, '--value_rescaling_epsilon=0.0 is out '
     'of range: it must be > 0'),
    ({'initial_priority': 'max'}, "--initial_priority='max' is out of range: "
     "it must be 'actor'"),
    ({'replay_shards': 2}, '--replay_shards=2 is out of range: it must be 1'),
])
def test_bad_flags_are_refused_naming_the_flag_and_the_fix(values, message):
  with pytest.raises(ValueError) as error:
    _config(**values).validate()
  assert message in str(error.value)


def test_the_paper_defaults():
  config = registry.get('r2d2').config_class()
  config.validate()
  assert (config.n_step, config.discount, config.priority_exponent,
          config.importance_sampling_exponent, config.priority_eta,
          config.batch_size, config.target_update_period) == (
              5, 0.997, 0.9, 0.6, 0.9, 64, 2500)
  assert (config.trace_length, config.burn_in_length,
          config.sequence_period, config.sequence_length) == (80, 40, 40, 121)
  assert (config.learning_rate, config.adam_epsilon, config.lstm_size,
          config.value_rescaling_epsilon) == (1e-4, 1e-3, 512, 1e-3)
  for preset in registry.get('r2d2').presets.values():
    dataclasses.replace(config, **{
        name: value for name, value in preset.values.items()
        if hasattr(config, name)}).validate()


def test_the_learner_finds_the_actors_priorities_from_the_stored_states():
  agent = registry.get('r2d2')
  config = _config()
  builder = agent.make_builder(config, agent.resolve_environment(ENV))
  server = reverb.Server(builder.make_replay_tables())
  try:
    client = reverb.Client(f'localhost:{server.port}')
    learner = builder.make_learner(client)
    # Greedy and exploring environments, with the learner's parameters.
    actor = builder.make_actor(learner, [0.5, 0.0], replay_client=client,
                               seed=1)
    environments = [builder.environment.make_environment(seed=seed)
                    for seed in (1, 2)]
    steps = iter(range(400))
    actor_loop.VectorEnvironmentLoop(environments, actor).run(
        lambda: next(steps, None) is None)
    actor.close()
    # Every item's initial priority, as the actor wrote it.
    written = {}
    for sample in client.sample(tables.TABLE, num_samples=3000,
                                emit_timesteps=False):
      written[int(sample.info.key)] = float(sample.info.priority)
    assert len(written) > 20, written
    assert len(set(written.values())) > len(written) // 2  # Their own.

    learner.step()  # Its TD errors are computed before its Adam step.
    update = learner.last_update
    keys = update['keys'].astype(np.uint64)
    learnt = update['priorities']
    # The learner unrolled each sequence from its stored state (through a
    # burn-in, unless it began an episode) with the target network equal
    # to the online one: the actor's values, so the actor's priorities.
    actor_side = np.array([written[int(key)] for key in keys])
    np.testing.assert_allclose(learnt, actor_side, rtol=2e-3, atol=2e-4)
    assert float(update['learnt_steps']) > 0
  finally:
    server.stop()
