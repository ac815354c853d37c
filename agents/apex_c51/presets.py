"""Named configurations of the distributional Ape-X DQN (`--preset=<name>`).

Each is Ape-X DQN's preset of the same name (agents/apex_dqn/presets.py
gives each value's reason), with the support of the return distributions
where C51's [-10, 10] does not fit; a flag given explicitly wins.
"""

from agents.apex_dqn import presets as dqn_presets
from agents.config import Preset

# MinAtar: every reward of its five games is 0 or more (+1 an event; a
# Seaquest surfacing pays one a cell of oxygen), so no return is negative;
# Ape-X DQN's final policies (results/minatar.md) earn at most 0.094 a step
# (Space Invaders), a discounted return near 9 at a discount of 0.99. The
# support [0, 25] holds a policy well over twice as good, 0.5 between
# atoms; C51's [-10, 10] would spend half its atoms on returns that cannot
# occur and clip a better policy's.
MINATAR = dict(dqn_presets.MINATAR, v_min=0.0, v_max=25.0)

# CartPole pays 1 a step until it falls or reaches 500: discounted returns
# of 0 to 99.3 at 0.99.
CARTPOLE = dict(dqn_presets.CARTPOLE, v_min=0.0, v_max=100.0)
CARTPOLE_SMOKE = dict(dqn_presets.CARTPOLE_SMOKE, v_min=0.0, v_max=100.0)

PRESETS = {
    'paper': Preset(
        'Ape-X DQN\'s defaults (App. C) with 51 atoms on [-10, 10] (C51, '
        'Rainbow) on Atari Pong.', {'env': 'atari:Pong'}),
    'atari_small': Preset(
        'Ape-X DQN\'s atari_small (a few CPU cores: batch 64, 8 samples per '
        'insert, 200K replay, 2 actors x 8 environments) with 51 atoms on '
        '[-10, 10] (C51, Rainbow; Atari\'s rewards are clipped to [-1, 1]).',
        dqn_presets.ATARI_SMALL),
    'minatar': Preset(
        'Ape-X DQN\'s minatar preset (default breakout; --env=minatar:<game> '
        'for another) with 51 atoms on [0, 25].', MINATAR),
    'cartpole': Preset(
        'Ape-X DQN\'s cartpole preset (gym:CartPole-v1, 2 actors, one update '
        'of 64 per 4 actor steps) with 51 atoms on [0, 100].', CARTPOLE),
    'cartpole_smoke': Preset(
        'A whole program on gym:CartPole-v1 with tiny networks and replay, '
        'logging every second: the plumbing in seconds, not learning.',
        CARTPOLE_SMOKE),
}
