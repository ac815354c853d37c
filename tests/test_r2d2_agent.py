"""R2D2's parts together in one process, with a real Reverb server: its
flags refused with their fixes, and the sequences its actors write (with
their stored states and initial priorities) read back by its learner,
whose first update, with the actors' own parameters, finds the actors'
priorities again."""

import dataclasses
import time

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


def _priorities(client) -> dict:
  """{key: priority} of the items of a replay server (sampled many times
  over: the items are few)."""
  return {int(sample.info.key): float(sample.info.priority)
          for sample in client.sample(tables.TABLE, num_samples=3000,
                                      emit_timesteps=False)}


@pytest.mark.parametrize('shards', [1, 2])
def test_the_learner_finds_the_actors_priorities_from_the_stored_states(
    shards):
  # With 2 shards, each actor writes to a shard of its own (as each actor
  # node does) and the learner draws its batches from both as from one
  # table (`agents.replay.shards`), writing each priority back to the
  # shard its sequence came from.
  agent = registry.get('r2d2')
  config = _config(replay_shards=shards)
  builder = agent.make_builder(config, agent.resolve_environment(ENV))
  servers = [reverb.Server(builder.make_replay_tables())
             for _ in range(shards)]
  try:
    clients = [reverb.Client(f'localhost:{server.port}')
               for server in servers]
    learner = builder.make_learner(clients if shards > 1 else clients[0])
    # Greedy and exploring environments, with the learner's parameters.
    for shard, client in enumerate(clients):
      actor = builder.make_actor(learner, [0.5, 0.0], replay_client=client,
                                 seed=1 + shard)
      environments = [builder.environment.make_environment(seed=seed)
                      for seed in (1 + 2 * shard, 2 + 2 * shard)]
      steps = iter(range(400))
      actor_loop.VectorEnvironmentLoop(environments, actor).run(
          lambda: next(steps, None) is None)  # pylint: disable=cell-var-from-loop
      actor.close()
    # Every item's initial priority, as the actor wrote it, by shard.
    written = [_priorities(client) for client in clients]
    for own in written:
      assert len(own) > 20, own
      assert len(set(own.values())) > len(own) // 2  # Their own.

    learner.step()  # Its TD errors are computed before its Adam step.
    update = learner.last_update
    keys = [int(key) for key in update['keys'].astype(np.uint64)]
    learnt = update['priorities']
    # The learner unrolled each sequence from its stored state (through a
    # burn-in, unless it began an episode) with the target network equal
    # to the online one: the actor's values, so the actor's priorities.
    served_by = [next(shard for shard, own in enumerate(written)
                      if key in own) for key in keys]
    actor_side = np.array([written[shard][key]
                           for shard, key in zip(served_by, keys)])
    np.testing.assert_allclose(learnt, actor_side, rtol=2e-3, atol=2e-4)
    assert float(update['learnt_steps']) > 0
    # The actor's state where the burn-in ends, stored with the sequence,
    # is the one the burn-in recomputes from the start state with the same
    # parameters: no discrepancy (checked again below once the parameters
    # are no longer the actor's).
    assert config.burn_in_length > 0
    assert float(update['q_discrepancy']) < 1e-4, update['q_discrepancy']
    if shards > 1:
      # Drawn from both; the new priorities reach the shard of each key
      # (written by the learner's writer threads: waited for).
      assert set(served_by) == {0, 1}, served_by
      assert [int(update[f'shard_{shard}_samples'])
              for shard in range(shards)] == [
                  served_by.count(shard) for shard in range(shards)]
      expected = {key: float(priority)
                  for key, priority in zip(keys, learnt)}
      deadline = time.monotonic() + 60
      while True:
        now = [_priorities(client) for client in clients]
        mismatched = [
            key for shard, key in zip(served_by, keys)
            if not np.isclose(now[shard][key], expected[key], rtol=1e-5)]
        if not mismatched or time.monotonic() > deadline:
          break
        time.sleep(0.2)
      assert not mismatched, mismatched
    # After the learner's Adam step its parameters are no longer the
    # actor's, and the stored and recomputed states part.
    learner.step()
    assert float(learner.last_update['q_discrepancy']) > 1e-3
  finally:
    for server in servers:
      server.stop()


def test_atari_sequences_keep_whole_frame_stacks_in_shards_too():
  # The n-step writer stores each frame of a stack once and its batches put
  # them back; R2D2's rows hold whole stacks, so neither its adder nor its
  # batches, from one server or from shards, take frames apart.
  for name, stored in (('r2d2', 0), ('apex_dqn', 4)):
    agent = registry.get(name)
    builder = agent.make_builder(agent.config_class(replay_shards=2),
                                 agent.resolve_environment('atari:Pong'))
    assert builder.environment.stacked_frames == 4
    assert builder.stored_frames == stored, name
