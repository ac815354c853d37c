"""R2D2 (Kapturowski et al. 2019, "Recurrent Experience Replay in
Distributed Reinforcement Learning"): Ape-X's distributed prioritised
n-step double Q-learning with a recurrent (LSTM) Q-network, learnt from
stored sequences with their actors' recurrent states (§2.3, "stored
state") and a burn-in (§3), its targets under the invertible value
rescaling h in place of reward clipping, and a sequence's priority a mix
of its TD errors' max and mean.

The package registers the agent (`agents.registry`) with its config and
presets, which import no TensorFlow; its builder, learner and actor are
imported from their modules as the registry names them.
"""

from agents import registry
from agents.r2d2.config import R2D2Config
from agents.r2d2.presets import PRESETS

AGENT = registry.register(registry.Agent(
    name='r2d2', title='R2D2', config_class=R2D2Config,
    builder='agents.r2d2.builder:R2D2Builder',
    presets=PRESETS, actions='discrete', default_env='atari:Pong'))
