"""Named configurations of R2D2 (`--preset=<name>`).

Each names the flags it sets; every other flag keeps its default (the
paper's: agents/r2d2/config.py), and a flag given explicitly wins.
Replay's sizes and the batch count sequences.
"""

from agents.config import Preset

# The paper's R2D2 on Atari (Table 2): every default, with its 256 actors.
PAPER = {'env': 'atari:Pong', 'num_actors': 256}

# R2D2 on MinAtar (Young & Tian 2019), one preset for the five games, on a
# few CPU cores. What differs from the paper's Atari values, and why:
# - an LSTM of 128 units and dueling streams of 128: Young & Tian's one
#   hidden layer of 128 for these 10x10 images (Ape-X DQN's minatar preset);
# - sequences of 40 learnt steps after a burn-in of 20, a new one every 20
#   (the paper: 80, 40, 40): half the paper's, so that an update of 32
#   sequences unrolls 61 rows each, which a CPU learner keeps up with;
# - batch 32 sequences (1,280 learnt steps), 4 samples per insert: each
#   sequence brings 20 new steps and each step is learnt from in two
#   sequences, so each step is replayed about 4 x 40 / 20 = 8 times, as
#   Ape-X DQN's minatar preset replays each transition;
# - replay of 5,000 sequences (100K new steps, Young & Tian's replay),
#   learning from 250 (their 5,000 steps), a target copy every 1,000
#   updates (theirs); 2 actors x 8 environments with the paper's 16
#   epsilons;
# - 10 evaluation episodes every 500 updates: an update learns from 1,280
#   steps and brings about 80 to 160 new frames, so a 1M-frame run makes
#   6K to 12K updates, and a round comes about every 80K frames, as
#   Ape-X DQN's minatar preset plays them.
MINATAR = {
    'env': 'minatar:breakout', 'num_actors': 2, 'envs_per_actor': 8,
    'lstm_size': 128, 'dueling_hidden_size': 128,
    'trace_length': 40, 'burn_in_length': 20, 'sequence_period': 20,
    'batch_size': 32, 'samples_per_insert': 4.0, 'replay_capacity': 5_000,
    'min_replay_size': 250, 'target_update_period': 1000,
    'evaluation_period': 500, 'evaluation_episodes': 10,
}

# CartPole without its velocities (gym:CartPole-v1:hide_velocity): only the
# cart's position and the pole's angle are seen, so the policy must infer
# their velocities from consecutive steps. What differs, and why:
# - an MLP of 64 and an LSTM of 64, dueling streams of 64: a 2-number
#   observation needs no more;
# - 16 learnt steps after a burn-in of 8, a new sequence every 8: a
#   velocity is a difference of two steps, and a random policy's episodes
#   last ~20 steps (each still gives a sequence begun at its start, all of
#   whose steps are learnt);
# - discount 0.99 (Ape-X DQN's cartpole): a horizon of ~100 steps;
# - batch 32 sequences (512 learnt steps), 8 samples per insert: each
#   sequence brings 8 new steps, each learnt from in two, so each step is
#   replayed about 8 x 16 / 8 = 16 times, as Ape-X DQN's cartpole preset;
# - Adam at 1e-3 and a target copy every 100 updates (Ape-X DQN's cartpole
#   preset: a short horizon); replay of 12,500 sequences (its 100K steps),
#   learning from 125 (its 1,000 steps);
# - 2 actors, parameters every 100 steps, 10 evaluation episodes every
#   500 updates.
CARTPOLE_HIDDEN = {
    'env': 'gym:CartPole-v1:hide_velocity', 'num_actors': 2,
    'mlp_hidden_sizes': '64', 'lstm_size': 64, 'dueling_hidden_size': 64,
    'trace_length': 16, 'burn_in_length': 8, 'sequence_period': 8,
    'discount': 0.99, 'batch_size': 32, 'samples_per_insert': 8.0,
    'learning_rate': 0.001, 'target_update_period': 100,
    'replay_capacity': 12_500, 'min_replay_size': 125,
    'variable_update_period': 100, 'evaluation_period': 500,
    'evaluation_episodes': 10,
}

# The plumbing of a whole program in seconds: tiny networks, sequences and
# replay on the velocity-hidden CartPole, logging every second.
CARTPOLE_SMOKE = {
    'env': 'gym:CartPole-v1:hide_velocity', 'num_actors': 2,
    'mlp_hidden_sizes': '16', 'lstm_size': 16, 'dueling_hidden_size': 16,
    'trace_length': 8, 'burn_in_length': 4, 'sequence_period': 4,
    'batch_size': 16, 'min_replay_size': 32, 'replay_capacity': 2_000,
    'target_update_period': 50, 'variable_update_period': 20,
    'log_every': 1.0, 'evaluation_period': 50, 'evaluation_episodes': 2,
}

PRESETS = {
    'paper': Preset(
        'The paper\'s R2D2 (Table 2) on Atari Pong: every default, 256 '
        'actors.', PAPER),
    'minatar': Preset(
        'R2D2 on MinAtar (default breakout; --env=minatar:<game> for '
        'another) on a few CPU cores: LSTM of 128, sequences of 20 + 40, '
        'batch 32, 2 actors x 8 environments. Not yet measured.', MINATAR),
    'cartpole_hidden': Preset(
        'gym:CartPole-v1:hide_velocity (position and angle only), which '
        'needs memory: LSTM of 64, sequences of 8 + 16, 2 actors '
        '(results/r2d2_hidden_cartpole.md).', CARTPOLE_HIDDEN),
    'cartpole_smoke': Preset(
        'A whole program on gym:CartPole-v1:hide_velocity with tiny '
        'networks, sequences and replay, logging every second: the '
        'plumbing in seconds, not learning.', CARTPOLE_SMOKE),
}
