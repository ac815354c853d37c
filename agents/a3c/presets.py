"""Named configurations of A3C (`--preset=<name>`).

Each names the flags it sets; every other flag keeps its default (the A3C
paper's, `agents/a3c/config.py`), and a flag given explicitly wins over the
preset.
"""

from agents.config import Preset

# A3C on gym:CartPole-v1 (tests/test_a3c_program.py's learning check). What
# differs from the paper's Atari defaults, and why: a discount of 0.95. On
# CartPole every step pays +1, so with gamma 0.99 values approach 100, two
# orders of magnitude above Atari's clipped, sparse rewards, for which the
# paper's entropy weight and learning rates were chosen; advantages that
# large and long positive while V catches up drive every worker's policy
# onto one action early in training (docs/a3c.md gives the runs of the
# discounts and learning rates tried). With gamma 0.95 values stay below 20
# and the same learning rate learns. The learning rate anneals over the 200K
# steps.
CARTPOLE = {
    'env': 'gym:CartPole-v1', 'num_actors': 4, 'max_actor_steps': 200_000,
    'discount': 0.95, 'evaluation_period': 2_000, 'evaluation_episodes': 10,
}

PRESETS = {
    'cartpole': Preset(
        'Learns gym:CartPole-v1 with 4 workers, discount 0.95; the learning '
        'rate anneals to 0 over 200K actor steps.', CARTPOLE),
    'cartpole_smoke': Preset(
        'A whole program on gym:CartPole-v1 with a tiny network, logging '
        'every second: the plumbing in seconds, not learning.',
        {'env': 'gym:CartPole-v1', 'num_actors': 2, 'mlp_hidden_sizes': '16',
         'log_every': 1.0, 'evaluation_period': 200,
         'evaluation_episodes': 2}),
}
