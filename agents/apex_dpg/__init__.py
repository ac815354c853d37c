"""Ape-X DPG (Horgan et al. 2018, §3.2): distributed prioritised DDPG."""

from agents.apex_dpg.actor import ApeXDPGActor
from agents.apex_dpg.builder import ApeXDPGBuilder
from agents.apex_dpg.config import ApeXDPGConfig
from agents.apex_dpg.learning import ApeXDPGLearner
