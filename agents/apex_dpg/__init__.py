"""Ape-X DPG (Horgan et al. 2018, §3.2): distributed prioritised DDPG.

The package registers the agent (`agents.registry`) with its config and
presets, which import no TensorFlow; its builder, learner and actor are
imported from their modules (`agents.apex_dpg.builder`, ...), as the registry
names them, so that a program checks its flags before TensorFlow loads.
"""

from agents import registry
from agents.apex_dpg.config import ApeXDPGConfig
from agents.apex_dpg.presets import PRESETS

AGENT = registry.register(registry.Agent(
    name='apex_dpg', title='Ape-X DPG', config_class=ApeXDPGConfig,
    builder='agents.apex_dpg.builder:ApeXDPGBuilder',
    presets=PRESETS, actions='continuous',
    default_env='control:manipulator:bring_ball',
    small_machine_preset='control_small'))
