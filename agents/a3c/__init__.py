"""A3C (Mnih et al. 2016, "Asynchronous Methods for Deep Reinforcement
Learning"): asynchronous advantage actor-critic, on the same machinery as the
Ape-X agents."""

from agents import registry
from agents.a3c.config import A3CConfig
from agents.a3c.presets import PRESETS

AGENT = registry.register(registry.Agent(
    name='a3c', title='A3C', config_class=A3CConfig,
    builder='agents.a3c.builder:A3CBuilder', presets=PRESETS, actions='any',
    default_env='atari:Pong', members='workers',
    small_machine_preset='cartpole'))
