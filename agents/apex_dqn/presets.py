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

# Ape-X DQN on Atari sized for a few CPU cores (results/pong_45min.md,
# results/pong.md). The paper's batch of 512 and learning start of 50K are
# made for 360 actors and a GPU (§4.1): on one CPU core the learner makes
# about one update of 512 a second (0.84-0.93 in
# benchmarks/results/program_throughput.json), and on 2 cores 13-19 of 64
# (benchmarks/results/onednn.json, oneDNN off and on). What differs from
# the paper's defaults (App. C, §4.1), and why:
# - batch 64 (the paper: 512; App. E tried 32-1024): eight times more
#   updates per second for the same samples, which a CPU learner needs;
# - samples_per_insert 8 (the paper: unlimited): DQN's replay ratio (a batch
#   of 32 every 4 agent steps), and learning measured in steps, not in the
#   speed of the machine;
# - learning starts at 10K and replay holds 200K transitions (the paper: 50K
#   and 2M): the paper's 2M transitions are its last ~160 s of play (about
#   12,500 inserts/s, §4.1), some 3,000 of its updates; 200K here are the
#   last ~25,000 updates of this preset (one update of 64 per 8 inserts):
#   a bigger replay would hold data of ever older policies (and 200K take
#   ~0.5 GB at 2,390 bytes each, benchmarks/results/replay_memory.json);
# - learning rate 1e-4 (the paper: 0.00025/4) and a target copy every 1,000
#   updates (the paper: 2,500) for updates of a smaller batch;
# - 2 actors of 8 environments each (the paper: 360 of one): one batched
#   forward pass steps several emulators (16 give 3.3x the frames per core
#   of one, benchmarks/results/program_throughput.json), which leaves the
#   cores to the learner; the 16 environments still get the paper's 16
#   epsilons of 0.4^(1 + 7 i / 15);
# - parameters pulled every 400 frames as in the paper, evaluation of 10
#   episodes every 4,000 updates (the evaluator waits in between).
ATARI_SMALL = {
    'env': 'atari:Pong', 'num_actors': 2, 'envs_per_actor': 8,
    'batch_size': 64, 'samples_per_insert': 8.0, 'min_replay_size': 10_000,
    'replay_capacity': 200_000, 'learning_rate': 0.0001,
    'target_update_period': 1000, 'evaluation_period': 4000,
    'evaluation_episodes': 10,
}

# Ape-X DQN on MinAtar (Young & Tian 2019; results/minatar.md), one preset
# for all five games. Their DQN (their §4): batch 32, one update per frame,
# replay of 100K, learning from 5,000 frames, RMSProp at 0.00025, a target
# copy every 1,000 updates, one 3x3 convolution of 16 channels and 128
# hidden units. What differs, and why:
# - batch 64 and 8 samples per insert (theirs: 32 per frame): a replay
#   ratio a CPU learner keeps up with: 108 to 115 updates of 64 per second
#   on 2 cores beside 2 actors, i.e. 868 to 918 frames/s, 1M frames in 19.5
#   to 20.2 minutes (each game's mean of 3 seeds, results/minatar.md;
#   theirs would need 1M updates);
# - Ape-X's fixed per-environment epsilons 0.4^(1 + 7 i / 15) over 2 actors
#   x 8 environments, not their epsilon annealed from 1 to 0.1, and Ape-X's
#   3-step double-Q dueling loss (128 units per stream, as their one hidden
#   layer);
# - replay of 100K, learning from 5,000, learning rate 0.00025 and a target
#   copy every 1,000 updates: theirs;
# - 10 evaluation episodes every 10,000 updates (about 80K frames).
MINATAR = {
    'env': 'minatar:breakout', 'num_actors': 2, 'envs_per_actor': 8,
    'batch_size': 64, 'samples_per_insert': 8.0, 'min_replay_size': 5_000,
    'replay_capacity': 100_000, 'learning_rate': 0.00025,
    'target_update_period': 1000, 'dueling_hidden_size': 128,
    'evaluation_period': 10_000, 'evaluation_episodes': 10,
}

# The plumbing of a whole program in seconds: tiny networks and replay.
CARTPOLE_SMOKE = {
    'env': 'gym:CartPole-v1', 'num_actors': 2, 'batch_size': 32,
    'min_replay_size': 300, 'replay_capacity': 20_000,
    'mlp_hidden_sizes': '32', 'dueling_hidden_size': 32,
    'target_update_period': 50, 'log_every': 1.0,
    'evaluation_period': 50, 'evaluation_episodes': 2,
}

PRESETS = {
    'paper': Preset(
        'The paper\'s Ape-X DQN (App. C) on Atari Pong: every default.',
        {'env': 'atari:Pong'}),
    'atari_small': Preset(
        'Ape-X DQN on Atari (default Pong; --env=atari:<Game> for another) '
        'sized for a few CPU cores: batch 64, 8 samples per insert, 200K '
        'replay, 2 actors x 8 environments (what 45 minutes on 2 cores give '
        'on Pong: results/pong_45min.md).',
        ATARI_SMALL),
    'minatar': Preset(
        'Ape-X DQN on MinAtar (default breakout; --env=minatar:<game> for '
        'another) on a few CPU cores: batch 64, 8 samples per insert, 100K '
        'replay, 2 actors x 8 environments (results/minatar.md).', MINATAR),
    'cartpole': Preset(
        'Learns gym:CartPole-v1 (mean return 475) within 100K actor steps '
        '(its times on 2 cores: results/replay.md).', CARTPOLE),
    'cartpole_smoke': Preset(
        'A whole program on gym:CartPole-v1 with tiny networks and replay, '
        'logging every second: the plumbing in seconds, not learning.',
        CARTPOLE_SMOKE),
}
