"""An agent's own learner on one batch held in memory, for measuring its
update alone (benchmarks/learner_flops.py) and comparing two of them on the
same batch (tests/test_precision.py).

The batch is made of real observations (consecutive ones of the
environment under random actions), random actions and returns, and
importance-sampling information as Reverb gives it; the learner is the
agent's builder's, with the batch repeated in place of replay and no
replay client (no priority writes).
"""

import dataclasses
import time

import numpy as np
import reverb
import tensorflow as tf

from agents.replay import adders


def config_of(agent, preset: str, **overrides):
  """`agent`'s config (an `agents.registry` entry's) with the values of its
  preset `preset` that are config fields, and `overrides`."""
  fields = {field.name for field in dataclasses.fields(agent.config_class)}
  values = {key: value for key, value in agent.presets[preset].values.items()
            if key in fields}
  return dataclasses.replace(agent.config_class(), **{**values, **overrides})


def observations(environment, count: int, rng: np.random.Generator):
  """`count` + 1 consecutive real observations of `environment` (an
  `EnvironmentSpec`) under random actions, through episode ends."""
  env = environment.make_environment(seed=0)
  actions = environment.spec.actions
  continuous = not hasattr(actions, 'num_values')
  seen = [env.reset().observation]
  while len(seen) <= count:
    if continuous:
      action = rng.uniform(actions.minimum, actions.maximum).astype(
          actions.dtype)
    else:
      action = np.int32(rng.integers(actions.num_values))
    timestep = env.step(action)
    seen.append(env.reset().observation if timestep.last()
                else timestep.observation)
  return np.stack(seen)


def batch(environment, size: int, seed: int = 0) -> reverb.ReplaySample:
  """One batch of `size` transitions as the learner's dataset gives it."""
  rng = np.random.default_rng(seed)
  frames = observations(environment, size, rng)
  actions = environment.spec.actions
  if hasattr(actions, 'num_values'):
    action = rng.integers(actions.num_values, size=size).astype(np.int32)
  else:
    action = rng.uniform(actions.minimum, actions.maximum,
                         (size, *actions.shape)).astype(np.float32)
  priorities = rng.uniform(0.1, 2.0, size)
  return reverb.ReplaySample(
      info=reverb.SampleInfo(
          key=tf.constant(np.arange(size), tf.uint64),
          probability=tf.constant(priorities / priorities.sum(), tf.float64),
          table_size=tf.fill([size], tf.constant(size, tf.int64)),
          priority=tf.constant(priorities, tf.float64)),
      data={adders.OBSERVATION: frames[:-1],
            adders.ACTION: action,
            adders.N_STEP_RETURN: rng.normal(size=size).astype(np.float32),
            adders.DISCOUNT: np.full(size, 0.97, np.float32),
            adders.NEXT_OBSERVATION: frames[1:]})


def learner(agent, config, environment, sample: reverb.ReplaySample,
            precision: str = 'float32', learner_class=None):
  """`agent`'s learner for `config` and `environment`, learning from
  `sample` again and again, computing in `precision` ('float32' or
  'bfloat16', as decided: no CPU check here); of `learner_class` in place
  of its builder's, if given."""
  builder = agent.make_builder(config, environment)
  if learner_class is not None:
    builder.learner_class = learner_class
  dataset = tf.data.Dataset.from_tensors(sample).repeat()
  builder.replay_learner_arguments = lambda *unused, **unused_kw: dict(
      iterator=iter(dataset), replay_client=None,
      importance_sampling_exponent=config.importance_sampling_exponent,
      jit_compile=config.jit_compile, precision=precision)
  return builder.make_learner(None)


def time_updates(learner_, seconds: float) -> float:
  """The learner's updates a second over about `seconds`."""
  steps, begin = 0, time.perf_counter()
  while time.perf_counter() - begin < seconds:
    learner_.step()
    steps += 1
  return steps / (time.perf_counter() - begin)
