"""Ape-X DPG (Horgan et al. 2018, §3.2): distributed prioritised DDPG.

Its parts are imported when first named (`from agents.apex_dpg import ...`), so
that importing `agents.apex_dpg.config` (as a program does to check its flags)
does not import TensorFlow with the builder.
"""

import agents

# Each name this package gives -> its module.
_EXPORTS = {
    'ApeXDPGActor': 'actor',
    'ApeXDPGBuilder': 'builder',
    'ApeXDPGConfig': 'config',
    'ApeXDPGLearner': 'learning',
}
__all__ = list(_EXPORTS)

__getattr__ = agents.lazy_exports(__name__, _EXPORTS)
