"""Named configurations of A3C (`--preset=<name>`).

Each names the flags it sets; every other flag keeps its default (the A3C
paper's, `agents/a3c/config.py`), and a flag given explicitly wins over the
preset.
"""

from agents.config import Preset

# A3C on gym:CartPole-v1 (tests/test_a3c_program.py's learning check).
CARTPOLE = {
    'env': 'gym:CartPole-v1', 'num_actors': 4, 'max_actor_steps': 300_000,
    'evaluation_period': 2_000, 'evaluation_episodes': 10,
}

PRESETS = {
    'cartpole': Preset(
        'Learns gym:CartPole-v1 with 4 workers; the learning rate anneals '
        'to 0 over 300K actor steps.', CARTPOLE),
    'cartpole_smoke': Preset(
        'A whole program on gym:CartPole-v1 with a tiny network, logging '
        'every second: the plumbing in seconds, not learning.',
        {'env': 'gym:CartPole-v1', 'num_actors': 2, 'mlp_hidden_sizes': '16',
         'log_every': 1.0, 'evaluation_period': 200,
         'evaluation_episodes': 2}),
}
