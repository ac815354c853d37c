"""Ape-X DQN (Horgan et al. 2018, §3.1): distributed prioritised double DQN.

The package registers the agent (`agents.registry`) with its config and
presets, which import no TensorFlow; its other parts are imported when first
named (`from agents.apex_dqn import ...`), so that a program checks its flags
before the builder, and with it TensorFlow, is loaded.
"""

import agents
from agents import registry
from agents.apex_dqn.config import ApeXDQNConfig
from agents.apex_dqn.presets import PRESETS

# Each name this package gives -> its module.
_EXPORTS = {
    'ApeXDQNActor': 'actor',
    'ApeXDQNBuilder': 'builder',
    'ApeXDQNLearner': 'learning',
}
__all__ = ['AGENT', 'ApeXDQNConfig', *_EXPORTS]

__getattr__ = agents.lazy_exports(__name__, _EXPORTS)

AGENT = registry.register(registry.Agent(
    name='apex_dqn', title='Ape-X DQN', config_class=ApeXDQNConfig,
    builder='agents.apex_dqn.builder:ApeXDQNBuilder',
    presets=PRESETS, actions='discrete', default_env='atari:Pong'))
