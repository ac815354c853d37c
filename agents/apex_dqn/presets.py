"""Named configurations of Ape-X DQN (`--preset=<name>`).

Each names the flags it sets; every other flag keeps its default (the
paper's, App. C), and a flag given explicitly wins over the preset.
"""

from agents.config import Preset

# A small config that learns gym:CartPole-v1: its evaluator's mean return
# over 10 episodes passes 475 within 100,000 actor steps (tests/test_learning,
# results/). What differs from the paper's Atari defaults, and why: a batch
# of 64 and a replay of 100K suit a 4-dimensional task; samples_per_insert 16
# (one update per 4 actor steps) makes the result a function of steps, not
# of the machine's speed; a faster learning rate and target copy fit the
# short horizon; evaluating 10 episodes every 500 updates leaves the cores
# to the learner in between.
CARTPOLE = {
    'env': 'gym:CartPole-v1', 'num_actors': 2, 'samples_per_insert': 16.0,
    'batch_size': 64, 'min_replay_size': 1000, 'replay_capacity': 100_000,
    'learning_rate': 0.001, 'target_update_period': 100,
    'mlp_hidden_sizes': '256,256', 'dueling_hidden_size': 256,
    'variable_update_period': 100, 'evaluation_period': 500,
    'evaluation_episodes': 10,
}

PRESETS = {
    'paper': Preset(
        'The paper\'s Ape-X DQN (App. C) on Atari Pong: every default.',
        {'env': 'atari:Pong'}),
    'cartpole': Preset(
        'Learns gym:CartPole-v1 (mean return 475) within 100K actor steps, '
        'about 8 minutes on 2 cores.', CARTPOLE),
    'cartpole_smoke': Preset(
        'A whole program on gym:CartPole-v1 with tiny networks and replay, '
        'logging every second: the plumbing in seconds, not learning.',
        {'env': 'gym:CartPole-v1', 'num_actors': 2, 'batch_size': 32,
         'min_replay_size': 300, 'replay_capacity': 20_000,
         'mlp_hidden_sizes': '32', 'dueling_hidden_size': 32,
         'target_update_period': 50, 'log_every': 1.0,
         'evaluation_period': 50, 'evaluation_episodes': 2}),
}
