"""Ape-X DQN (Horgan et al. 2018, §3.1): distributed prioritised double DQN.

Its parts are imported when first named (`from agents.apex_dqn import ...`), so
that importing `agents.apex_dqn.config` (as a program does to check its flags)
does not import TensorFlow with the builder.
"""

import agents

# Each name this package gives -> its module.
_EXPORTS = {
    'ApeXDQNActor': 'actor',
    'ApeXDQNBuilder': 'builder',
    'ApeXDQNConfig': 'config',
    'ApeXDQNLearner': 'learning',
}
__all__ = list(_EXPORTS)

__getattr__ = agents.lazy_exports(__name__, _EXPORTS)
