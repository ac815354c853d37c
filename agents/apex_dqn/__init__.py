"""Ape-X DQN (Horgan et al. 2018, §3.1): distributed prioritised double DQN.

The package registers the agent (`agents.registry`) with its config and
presets, which import no TensorFlow; its builder, learner and actor are
imported from their modules (`agents.apex_dqn.builder`, ...), as the registry
names them, so that a program checks its flags before TensorFlow loads.
"""

from agents import registry
from agents.apex_dqn.config import ApeXDQNConfig
from agents.apex_dqn.presets import PRESETS

AGENT = registry.register(registry.Agent(
    name='apex_dqn', title='Ape-X DQN', config_class=ApeXDQNConfig,
    builder='agents.apex_dqn.builder:ApeXDQNBuilder',
    presets=PRESETS, actions='discrete', default_env='atari:Pong',
    small_machine_preset='atari_small'))
