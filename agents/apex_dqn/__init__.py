"""Ape-X DQN (Horgan et al. 2018, §3.1): distributed prioritised double DQN."""

from agents.apex_dqn.actor import ApeXDQNActor
from agents.apex_dqn.builder import ApeXDQNBuilder
from agents.apex_dqn.config import ApeXDQNConfig
from agents.apex_dqn.learning import ApeXDQNLearner
