"""A distributional Ape-X DQN: Ape-X DQN (Horgan et al. 2018, §3.1) whose
network gives each action a categorical return distribution (C51,
Bellemare et al. 2017), learnt by the categorical double-Q loss and
prioritised by its KL divergence, as Rainbow (Hessel et al. 2018) combines
them; everything else (actors, epsilons, replay, n-step targets, dueling
torso, RMSProp, presets) is Ape-X DQN's.

An agent folder of its own rather than a flag of Ape-X DQN (Acme makes it
a choice of its DQN's loss): its checkpoints, network and results are not
Ape-X DQN's, so a run of one can never resume as the other, and Ape-X
DQN's code keeps no branch on its loss. The package registers the agent
(`agents.registry`) with its config and presets, which import no
TensorFlow.
"""

from agents import registry
from agents.apex_c51.config import ApeXC51Config
from agents.apex_c51.presets import PRESETS

AGENT = registry.register(registry.Agent(
    name='apex_c51', title='Ape-X C51', config_class=ApeXC51Config,
    builder='agents.apex_c51.builder:ApeXC51Builder',
    presets=PRESETS, actions='discrete', default_env='atari:Pong',
    small_machine_preset='atari_small'))
