"""D4PG (Barth-Maron et al. 2018): Ape-X DPG with a distributional critic.

The package registers the agent (`agents.registry`) with its config and
presets, which import no TensorFlow; its builder, learner and networks are
imported from their modules (`agents.d4pg.builder`, ...), as the registry
names them, so that a program checks its flags before TensorFlow loads.
"""

from agents import registry
from agents.d4pg.config import D4PGConfig
from agents.d4pg.presets import PRESETS

AGENT = registry.register(registry.Agent(
    name='d4pg', title='D4PG', config_class=D4PGConfig,
    builder='agents.d4pg.builder:D4PGBuilder',
    presets=PRESETS, actions='continuous',
    default_env='control:cheetah:run:repeat=4',
    small_machine_preset='dmc500k'))
