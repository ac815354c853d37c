"""Ape-X DPG (Horgan et al. 2018, §3.2): distributed prioritised DDPG.

The package registers the agent (`agents.registry`) with its config and
presets, which import no TensorFlow; its other parts are imported when first
named (`from agents.apex_dpg import ...`), so that a program checks its flags
before the builder, and with it TensorFlow, is loaded.
"""

import agents
from agents import registry
from agents.apex_dpg.config import ApeXDPGConfig
from agents.apex_dpg.presets import PRESETS

# Each name this package gives -> its module.
_EXPORTS = {
    'ApeXDPGActor': 'actor',
    'ApeXDPGBuilder': 'builder',
    'ApeXDPGLearner': 'learning',
}
__all__ = ['AGENT', 'ApeXDPGConfig', *_EXPORTS]

__getattr__ = agents.lazy_exports(__name__, _EXPORTS)

AGENT = registry.register(registry.Agent(
    name='apex_dpg', title='Ape-X DPG', config_class=ApeXDPGConfig,
    builder='agents.apex_dpg.builder:ApeXDPGBuilder',
    presets=PRESETS, actions='continuous', default_env='control:manipulator:bring_ball'))
