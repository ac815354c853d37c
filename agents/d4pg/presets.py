"""Named configurations of D4PG (`--preset=<name>`).

Each names the flags it sets; every other flag keeps its default (D4PG's
where its paper gives one, else Ape-X DPG's, App. D), and a flag given
explicitly wins over the preset's value.
"""

from agents.apex_dpg import presets as dpg_presets
from agents.config import Preset

# The state-based DeepMind Control table at 500K simulator steps (CURL,
# Laskin et al. 2020, Table 1), as Ape-X DPG's `dmc500k` runs it
# (results/dpg_dmc500k.md), set before any D4PG run of the table's six
# tasks and not changed after them (results/d4pg_dmc500k.md). Every value
# is Ape-X DPG's `dmc500k` (its file gives each reason: App. D's networks,
# Adam rates, batch of 256, target copies, noise of 0.3 and replay; 2
# actors; CURL's action repeat in the task's name) but these, and why:
# - samples_per_insert 256: one update of 256 per agent step, at a repeat
#   of 4 one per 4 simulator steps (Ape-X DPG's table: per 8); the table's
#   runs give every task that ratio (64 x the repeat), about 125,000
#   updates in 500K simulator steps. D4PG's learner made 89 to 106 updates
#   a second in memory on this machine when this was set (Ape-X DPG's 121
#   to 137 the same minutes), so a run should take 30 to 45 minutes of 2
#   cores, inside the hour a run may take; one update per 2 simulator
#   steps would not be, on a slow day;
# - n_step 3 (D4PG's default: 5, §5): Ape-X DPG's, so that the critic's
#   head and the replay ratio are the differences measured against its
#   table; at CURL's repeat of 4 a 3-step return already spans 12
#   simulator steps, more than D4PG's 5 at a repeat of 1;
# - the support: 51 atoms on [0, 100 k] for a repeat of k (the suite's
#   rewards are in [0, 1] a simulator step, the discount 0.99), from the
#   environment by default (`config.value_bounds`);
# - 5 evaluation episodes every 10,000 updates: 12 rounds a run.
DMC500K = dict(dpg_presets.DMC500K, samples_per_insert=256.0, n_step=3,
               evaluation_period=10_000)

PRESETS = {
    'paper': Preset(
        'D4PG as its paper gives it (N = 5, 51 atoms, Ape-X DPG\'s networks, '
        'Adam 1e-4, batch 256) on control:cheetah:run: every default.',
        {'env': 'control:cheetah:run'}),
    'dmc500k': Preset(
        'The state-based DeepMind Control table at 500K simulator steps on '
        'a few CPU cores (default control:cheetah:run:repeat=4; give each '
        'task CURL\'s action repeat and --samples_per_insert=64 x it, '
        '--max_actor_steps=500000 / it) (results/d4pg_dmc500k.md).',
        DMC500K),
    'cartpole': Preset(
        'Ape-X DPG\'s cartpole preset (control:cartpole:balance, 2 actors, '
        'one update of 64 per 4 actor steps) with the categorical critic.',
        dpg_presets.CARTPOLE),
    'cartpole_smoke': Preset(
        'A whole program on control:cartpole:balance with tiny networks and '
        'replay, logging every second: the plumbing in seconds, not '
        'learning.', dpg_presets.CARTPOLE_SMOKE),
}
