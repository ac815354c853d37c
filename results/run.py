"""The paper's analyses at a scale that learns on 2 CPU cores: runs every
setting and seed of one analysis, then writes its plot, data and page.

  .venv/bin/python -m results.run replay            # all seeds, then the page
  .venv/bin/python -m results.run actors --seeds=0,1,2
  .venv/bin/python -m results.run replay --report_only   # from the runs made
  .venv/bin/python -m results.run replay --dry_run  # what it would run
  .venv/bin/python -m results.run --list
  .venv/bin/python -m results.pages replay          # the page, from its JSON

Runs go to `results/runs/<analysis>/<setting>/seed<k>/` (not in git), or
under `--runs`; a run already finished there is not run again. The page
reports every seed with a finished run, banked or there, not only
`--seeds`: `--seeds=3` adds seed 3 to a page of seeds 0-2.

Each finished run is banked: its small files (records, CSV logs,
evaluations; not its checkpoints) are copied to
`results/banked/<analysis>/<setting>/seed<k>/`, to be committed to git
(`results/bank.py`; not with `--nobank`): the runs directory is lost when
the machine is, and an analysis takes more than one working session. A
banked run is not run again (`--dry_run` says "banked"), and collecting
reads it as a finished one: the runs directory's copy where it is identical
in those files, else the banked copy, with a warning.

Collecting (`collect`) reads the finished runs and writes
`results/<analysis>.png` (plot: mean over seeds and min-max band) and
`results/<analysis>.json` (every seed's figures, and what the page says of
how they were made); rendering (`render`) makes `results/<analysis>.md`
from that JSON alone, so a page can be made again after its runs are gone
(`results/pages.py`).

Why these tasks: gym:CartPole-v1 (Ape-X DQN) and control:cartpole:balance
(Ape-X DPG) learn within minutes on 2 CPU cores with the programs'
`cartpole` presets, so each setting can have several seeds; Atari at the
paper's scale needs days of many cores.
"""

import json
import os
import re
import subprocess
import sys
import time
from typing import Dict, List, Optional, Tuple

from absl import app
from absl import flags
import numpy as np

from launch.runs import run_manifest
from launch.runs import storage

from launch.runs import curves as curves_lib
from results import bank
from results import spread

# --runs, --bank_dir and --bank: results/bank.py's flags.
flags.DEFINE_list('seeds', ['0', '1', '2'], 'Seeds per setting.')
flags.DEFINE_bool('report_only', False, 'Only write the report from the runs '
                  'already made.')
flags.DEFINE_bool('dry_run', False, 'Only list what would run for each '
                  'setting and seed, and which runs are banked.')
flags.DEFINE_bool('list', False, 'List the analyses and their commands.')
flags.DEFINE_float('scale', 1.0, 'Multiplies every budget (steps, seconds): '
                   '< 1 for a quick look, not for the published results.')
FLAGS = flags.FLAGS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, 'results')
FINAL_EPISODES = 10  # "Final return": the mean of a run's last episodes.


def program_environment() -> Dict[str, str]:
  """The environment of a program this runs (a run, an evaluation): this
  checkout's packages first, so that a clone sharing another checkout's
  virtual environment (whose editable install names that checkout) runs
  its own code."""
  paths = [ROOT] + [path for path in os.environ.get(
      'PYTHONPATH', '').split(os.pathsep) if path]
  return {**os.environ, 'PYTHONPATH': os.pathsep.join(paths)}

# The programs' `cartpole` presets (agents/apex_*/presets.py) learn within
# minutes on 2 cores. They tie learner updates to actor steps
# (--samples_per_insert=16); the wall-clock analyses let the actors run free
# instead, as the paper's do.
CARTPOLE = ['--preset=cartpole']
FREE_RUNNING = ['--samples_per_insert=none']
STEP_BUDGET = 100_000  # Actor steps of a step-budgeted run.
# Wall-clock of a time-budgeted run, from the actors' first step.
SECONDS_BUDGET = 300.0

# Every analysis: what it shows, its program and flags, and its settings
# (label -> extra flags). A budget is ('steps', n) or ('seconds', s).
ANALYSES = {
    'actors': dict(
        title='Number of actors (paper Fig. 4): Ape-X DQN on CartPole, '
              'the same wall-clock budget',
        program='apex_dqn', flags=CARTPOLE + FREE_RUNNING,
        budget=('seconds', SECONDS_BUDGET), threshold=475,
        settings={f'{n} actor{"s" if n > 1 else ""}': [f'--num_actors={n}']
                  for n in (1, 2, 4, 8)}),
    'replay': dict(
        title='Prioritised vs uniform replay (paper Fig. 14): Ape-X DQN on '
              'CartPole, the same number of actor steps and updates',
        program='apex_dqn',
        flags=CARTPOLE,
        budget=('steps', STEP_BUDGET), threshold=475,
        settings={'prioritised (alpha 0.6)': ['--priority_exponent=0.6'],
                  'uniform (alpha 0)': ['--priority_exponent=0']}),
    'priorities': dict(
        title='Initial priorities (paper §3): computed by the actors vs the '
              'maximum so far; Ape-X DQN on CartPole, 4 actors',
        program='apex_dqn',
        flags=CARTPOLE + ['--num_actors=4'],
        budget=('steps', STEP_BUDGET), threshold=475,
        settings={'actor-computed TD error': ['--initial_priority=actor'],
                  'max priority so far': ['--initial_priority=max']}),
    'dpg': dict(
        title='Ape-X DPG on control:cartpole:balance vs a DDPG-style single '
              'actor with uniform replay, the same wall-clock budget',
        program='apex_dpg', flags=CARTPOLE + FREE_RUNNING,
        budget=('seconds', SECONDS_BUDGET), threshold=800,
        settings={'Ape-X DPG (4 actors, prioritised)': ['--num_actors=4'],
                  'DDPG-style (1 actor, uniform)': [
                      '--num_actors=1', '--priority_exponent=0']}),
}

# Replay removal (App. D: "it remains to be seen which is superior"): a replay
# of 10,000 transitions, so that from the 10,000th actor step on every
# insert has a victim.
REMOVERS = {
    'FIFO (oldest first; Ape-X DQN)': ['--replay_remover=fifo'],
    'inverse priority (App. D)': ['--replay_remover=inverse_priority'],
    'lowest priority first (MinHeap)': ['--replay_remover=min_heap'],
}
SMALL_REPLAY = ['--replay_capacity=10000']
ANALYSES.update({
    'removers': dict(
        title='Replay removal: FIFO vs the paper\'s eviction by inverse '
              'priority vs lowest priority first; Ape-X DPG on '
              'control:cartpole:balance, replay of 10,000',
        program='apex_dpg', flags=CARTPOLE + SMALL_REPLAY,
        budget=('steps', 150_000), threshold=800, settings=REMOVERS),
    'removers_swingup': dict(
        title='Replay removal: FIFO vs the paper\'s eviction by inverse '
              'priority vs lowest priority first; Ape-X DPG on '
              'control:cartpole:swingup, replay of 10,000',
        program='apex_dpg',
        flags=CARTPOLE + SMALL_REPLAY + ['--env=control:cartpole:swingup'],
        budget=('steps', 200_000), threshold=600, settings=REMOVERS),
})

# MinAtar (Young & Tian 2019): the five games with one preset and the same
# frame budget (a MinAtar step is one frame), with all 6 of MinAtar's
# actions as their DQN had (their §4). Its page, beside their DQN's
# returns, is written by results/minatar.py, which runs it.
MINATAR_FRAMES = 1_000_000
ANALYSES['minatar'] = dict(
    title='Ape-X DQN on the five MinAtar games, 1M frames each',
    program='apex_dqn', flags=['--preset=minatar'],
    budget=('steps', MINATAR_FRAMES), threshold=None,
    page='results.minatar',
    settings={game: [f'--env=minatar:{game}:full'] for game in (
        'asterix', 'breakout', 'freeway', 'seaquest', 'space_invaders')})

# The distributional Ape-X DQN (Ape-X C51) on the same five games, the same
# protocol and budget, with its `minatar` preset (Ape-X DQN's, with the
# atoms' support). Its page, beside Young & Tian's DQN and Ape-X DQN's
# runs, is written by results/minatar_c51.py, which runs it.
ANALYSES['minatar_c51'] = dict(
    title='Ape-X C51 on the five MinAtar games, 1M frames each',
    program='apex_c51', flags=['--preset=minatar'],
    budget=('steps', MINATAR_FRAMES), threshold=None,
    page='results.minatar_c51',
    settings=dict(ANALYSES['minatar']['settings']))

# R2D2 on the same five games, the same protocol and budget, with its
# `minatar` preset (an LSTM of 128, sequences of 20 + 40; each setting's
# --env, all 6 actions, overrides the preset's). Its page, beside Young &
# Tian's DQN and Ape-X DQN's runs, is written by results/r2d2_minatar.py,
# which runs it.
ANALYSES['r2d2_minatar'] = dict(
    title='R2D2 on the five MinAtar games, 1M frames each',
    program='r2d2', flags=['--preset=minatar'],
    budget=('steps', MINATAR_FRAMES), threshold=None,
    page='results.r2d2_minatar',
    settings=dict(ANALYSES['minatar']['settings']))

# Ape-X DQN's learner computing in bfloat16 (`--learner_precision=
# bfloat16`) on the same games, protocol and budget as `minatar`, to show
# that learning by steps does not change beyond the seeds' noise. Its page,
# beside the float32 runs of `minatar`, is written by
# results/minatar_bf16.py, which runs it on a CPU with bfloat16 arithmetic
# only.
ANALYSES['minatar_bf16'] = dict(
    title='Ape-X DQN, its learner in bfloat16, on MinAtar, 1M frames each',
    program='apex_dqn',
    flags=['--preset=minatar', '--learner_precision=bfloat16'],
    budget=('steps', MINATAR_FRAMES), threshold=None,
    page='results.minatar_bf16',
    settings=dict(ANALYSES['minatar']['settings']))

# R2D2 on the task a stateless agent cannot see: CartPole with the cart's
# and the pole's velocities taken out of the observation (position and
# angle only), with its `cartpole_hidden` preset; beside it Ape-X DQN with
# its `cartpole` preset on the same observations. Each setting names its
# environment (the R2D2 preset's own) so that a run made with another is
# refused. Its page is written by results/r2d2_hidden_cartpole.py, which
# runs it.
HIDDEN_CARTPOLE = 'gym:CartPole-v1:hide_velocity'
HIDDEN_CARTPOLE_STEPS = 300_000
ANALYSES['r2d2_hidden_cartpole'] = dict(
    title='R2D2 beside Ape-X DQN on CartPole without velocities, '
          f'{HIDDEN_CARTPOLE_STEPS:,} actor steps each',
    program='r2d2', flags=[], budget=('steps', HIDDEN_CARTPOLE_STEPS),
    threshold=475, page='results.r2d2_hidden_cartpole',
    settings={
        'R2D2': dict(program='r2d2', flags=[
            '--preset=cartpole_hidden', f'--env={HIDDEN_CARTPOLE}']),
        'Ape-X DQN': dict(program='apex_dqn', flags=[
            '--preset=cartpole', f'--env={HIDDEN_CARTPOLE}']),
    })

# Ape-X DPG on the paper's own domains (§4.2, App. D: Fig. 3's tasks) at a
# budget that fits 2 cores, with the `control_small` preset. Its page is
# written by results/dpg_control.py, which runs it.
DPG_CONTROL_STEPS = 500_000
ANALYSES['dpg_control'] = dict(
    title='Ape-X DPG on the paper\'s control domains (App. D), '
          f'{DPG_CONTROL_STEPS:,} actor steps each',
    program='apex_dpg', flags=['--preset=control_small'],
    budget=('steps', DPG_CONTROL_STEPS), threshold=None,
    page='results.dpg_control',
    settings={'humanoid_stand': ['--env=control:humanoid:stand'],
              'bring_ball': ['--env=control:manipulator:bring_ball'],
              'humanoid_walk': ['--env=control:humanoid:walk']})

# Ape-X DPG on the state-based table of the DeepMind Control suite at 500K
# simulator steps (CURL, Laskin et al. 2020, Table 1: "State SAC"), with the
# `dmc500k` preset, each task at CURL's action repeat (§5.1: 8 on cartpole,
# 2 on finger and walker, 4 elsewhere) and one update of 256 per 8
# simulator steps (samples_per_insert 32 x the repeat). Its page is written
# by results/dpg_dmc500k.py, which runs it.
DMC500K_FRAMES = 500_000
DMC500K_REPEATS = {'walker:walk': 2, 'cheetah:run': 4, 'finger:spin': 2,
                   'cartpole:swingup': 8, 'reacher:easy': 4,
                   'ball_in_cup:catch': 4}
ANALYSES['dpg_dmc500k'] = dict(
    title='Ape-X DPG on the DeepMind Control table (CURL\'s State SAC), '
          f'{DMC500K_FRAMES:,} simulator steps each',
    program='apex_dpg', flags=['--preset=dmc500k'],
    budget=('frames', DMC500K_FRAMES), threshold=None,
    page='results.dpg_dmc500k',
    settings={task.replace(':', '_'): [
        f'--env=control:{task}:repeat={repeat}',
        f'--samples_per_insert={32 * repeat}']
              for task, repeat in DMC500K_REPEATS.items()})

# What the table's replay ratio costs: cheetah:run, the task furthest behind
# State SAC on its first seed, at one update of 256 per 8 simulator steps
# (the table's), per 4 and per 2 (SAC: per 1), the same 500K simulator
# steps: the return each buys, and its wall-clock on 2 cores.
ANALYSES['dpg_dmc500k_ratio'] = dict(
    title='Ape-X DPG on control:cheetah:run at 500K simulator steps: one '
          'update of 256 per 8, 4 or 2 simulator steps',
    program='apex_dpg',
    flags=['--preset=dmc500k', '--env=control:cheetah:run:repeat=4'],
    budget=('frames', DMC500K_FRAMES), threshold=600,
    settings={f'one update per {steps} simulator steps': [
        f'--samples_per_insert={256 * 4 // steps}'] for steps in (8, 4, 2)})


# D4PG (Barth-Maron et al. 2018) on the same table, the same six tasks at
# CURL's repeats, with its `dmc500k` preset: one update of 256 per 4
# simulator steps (`--samples_per_insert` 64 x the repeat). Run by
# results/d4pg_dmc500k.py.
ANALYSES['d4pg_dmc500k'] = dict(
    title='D4PG on the DeepMind Control table (CURL\'s State SAC), '
          f'{DMC500K_FRAMES:,} simulator steps each',
    program='d4pg', flags=['--preset=dmc500k'],
    budget=('frames', DMC500K_FRAMES), threshold=None,
    page='results.d4pg_dmc500k',
    settings={task.replace(':', '_'): [
        f'--env=control:{task}:repeat={repeat}',
        f'--samples_per_insert={64 * repeat}']
              for task, repeat in DMC500K_REPEATS.items()})

# What each of D4PG's two changes buys, on the two tasks furthest behind
# State SAC in Ape-X DPG's table, seed 0: the categorical critic at Ape-X
# DPG's replay ratio, and Ape-X DPG at D4PG's. Neither and both are the
# two tables' own runs. Run by results/d4pg_dmc500k.py (--ablation).
D4PG_ABLATION_TASKS = ('cheetah:run', 'reacher:easy')
ANALYSES['d4pg_dmc500k_ablation'] = dict(
    title='D4PG\'s categorical critic and replay ratio, each alone, on '
          f'the DeepMind Control table\'s tasks, {DMC500K_FRAMES:,} '
          'simulator steps each',
    program='d4pg', flags=['--preset=dmc500k'],
    budget=('frames', DMC500K_FRAMES), threshold=None,
    page='results.d4pg_dmc500k',
    settings={
        **{f'{task.replace(":", "_")} critic alone': [
            f'--env=control:{task}:repeat={DMC500K_REPEATS[task]}',
            f'--samples_per_insert={32 * DMC500K_REPEATS[task]}']
           for task in D4PG_ABLATION_TASKS},
        **{f'{task.replace(":", "_")} ratio alone': dict(
            program='apex_dpg', flags=[
                f'--env=control:{task}:repeat={DMC500K_REPEATS[task]}',
                '--preset=dmc500k',
                f'--samples_per_insert={64 * DMC500K_REPEATS[task]}'])
           for task in D4PG_ABLATION_TASKS}})

# A3C (Mnih et al. 2016). Its workers: the A3C paper's Table 2 question (the
# speed-up with 1-8 actor-learners) on CartPole, the same step budget (over
# which the learning rate anneals). Beside Ape-X DQN: the same wall-clock
# and the same number of environment processes (4 actors or 4 workers),
# Ape-X's actors running free as in the paper's wall-clock comparisons. A3C
# anneals over --max_actor_steps, which is set beyond what its workers reach
# in the budget here, so that the rate is still positive when time runs out.
A3C_CARTPOLE = ['--preset=cartpole']


# The MinAtar paper's own agents on Breakout (Young & Tian 2019,
# arXiv:1903.03176): their actor-critic with eligibility traces (AC(λ), the
# curve "AC(0.8)", the trace decay examples/AC_lambda.py sets) and their
# DQN, read off the learning curves of the MinAtar repository
# (github.com/kenjyoung/MinAtar at 4241f24, img/learning_curves.gif) as
# results/minatar.py reads its DQN: the curve's pixels' height, averaged
# over the 5 pixel columns at that frame, on the panel's tick scale (about
# +-0.1 here). At the frames the runs here reached in their 20 minutes:
# A3C's about 0.91M, Ape-X DQN's about 4.1M (over its seeds' 3.8M to 4.4M,
# AC(0.8) stays at 17.5 and DQN at 10.0 to 10.1).
MINATAR_BREAKOUT_REFERENCES = dict(
    source='Young & Tian 2019 (arXiv:1903.03176), read off the learning '
           'curves of the MinAtar repository (img/learning_curves.gif, '
           'commit 4241f24)',
    protocol='Their curves are the moving average of the returns of 100 '
             '*training* episodes, over 30 seeds: AC(λ) learns online, with '
             'no replay, acting by sampling its softmax policy (the step '
             'size of each curve is not stated); their DQN at epsilon 0.1 '
             'after its annealing; both with MinAtar\'s sticky actions (p = '
             '0.1). The figures above are final returns of an evaluator '
             'acting with the most likely action (A3C) or at epsilon 0.001 '
             '(Ape-X DQN). Another protocol, so set beside, not compared.',
    rows=[
        ('AC(λ), λ = 0.8 (their "AC(0.8)")', 910_000, 9.4),
        ('AC(λ), λ = 0.8 (their "AC(0.8)")', 4_100_000, 17.4),
        ('DQN', 910_000, 8.8),
        ('DQN', 4_100_000, 9.9),
    ])


def _apex_vs_a3c(task: str, budget, threshold: float, apex, a3c_flags):
  """Ape-X DQN (`apex`: its setting's name and flags; its actors running
  free) beside A3C (`a3c_flags`) on `task`, 4 environment processes each,
  the same wall-clock `budget`."""
  apex_name, apex_flags = apex
  return dict(
      title=f'Ape-X DQN vs A3C on {task}: 4 environment processes each, the '
            'same wall-clock budget',
      program='apex_dqn', flags=[], budget=budget, threshold=threshold,
      settings={
          apex_name: dict(program='apex_dqn',
                          flags=apex_flags + FREE_RUNNING),
          'A3C, 4 workers': dict(program='a3c', flags=a3c_flags),
      })

ANALYSES.update({
    'a3c_workers': dict(
        title='A3C on CartPole with 1, 2, 4 and 8 workers (A3C paper Table '
              '2), the same number of actor steps',
        program='a3c', flags=A3C_CARTPOLE,
        budget=('steps', 200_000), threshold=400,
        settings={f'{n} worker{"s" if n > 1 else ""}': [f'--num_actors={n}']
                  for n in (1, 2, 4, 8)},
        # The A3C paper's Table 2: A3C's speed-up (time to a reference score,
        # averaged over seven Atari games, 16 CPU cores) with 1, 2, 4 and 8
        # threads. The project's text of the paper lost the table's numbers:
        # these are the published table's.
        speedup=dict(source='A3C paper, Table 2 (A3C row; 7 Atari games, '
                            '16-core CPU)',
                     values=[1.0, 2.1, 3.7, 6.9])),
    'a3c_vs_apex': _apex_vs_a3c(
        'CartPole', ('seconds', 600.0), 400,
        ('Ape-X DQN, 4 actors', CARTPOLE + ['--num_actors=4']),
        A3C_CARTPOLE + ['--num_actors=4', '--max_actor_steps=1000000']),
    # MinAtar Breakout: Ape-X DQN's minatar preset (results/minatar.md) with
    # its 16 environments in 4 actor processes instead of 2; A3C as the
    # paper has it (--preset=paper, Supp. §8) with MinAtar's network, 4
    # workers, its learning rate annealed over 2M steps, beyond what they
    # reach here.
    'a3c_vs_apex_minatar': dict(
        _apex_vs_a3c(
            'MinAtar Breakout', ('seconds', 1200.0), 10,
            ('Ape-X DQN, 4 actors x 4 environments',
             ['--preset=minatar', '--num_actors=4', '--envs_per_actor=4']),
            ['--preset=paper', '--env=minatar:breakout', '--num_actors=4',
             '--max_actor_steps=2000000', '--evaluation_period=4000']),
        references=MINATAR_BREAKOUT_REFERENCES),
})


# A3C beyond CartPole (docs/a3c.md, "Beyond CartPole"): on two
# classic-control tasks, the `cartpole` preset, which learns them and then
# loses what it learned, beside the task's own preset. Thresholds: Acrobot-v1
# registers -100 as solved (gymnasium's reward_threshold); Pendulum-v1
# registers none, and -200 is a pendulum swung up and held from most starts.
def _a3c_beside_cartpole(env: str, preset: str, threshold: float):
  """A3C on `env`: the `cartpole` preset beside the task's own `preset`."""
  return dict(
      title=f'A3C on {env}: the cartpole preset vs the {preset} preset, 4 '
            'workers, the same number of actor steps',
      program='a3c', flags=[], budget=('steps', 200_000), threshold=threshold,
      settings={'cartpole preset': ['--preset=cartpole', f'--env={env}'],
                f'{preset} preset': [f'--preset={preset}']})


ANALYSES.update({
    'a3c_acrobot': _a3c_beside_cartpole('gym:Acrobot-v1', 'acrobot', -100),
    'a3c_pendulum': _a3c_beside_cartpole('gym:Pendulum-v1', 'pendulum', -200),
})

# A3C's one configuration on every task: the program's defaults
# (agents/a3c/config.py), each task's own environment, and a budget of its
# own where 200K actor steps is not enough; no setting changes anything
# else. Its page is written by results/a3c_default.py, which runs it. Every
# run logs what moves the parameters (--log_gradient_parts), as
# results/a3c_diagnosis.md's did. MinAtar's budgets are frames (MinAtar has
# no action repeat: a frame is a step), so that the runs stand beside Young
# & Tian's curves (results/a3c_minatar.py).
A3C_TASKS = {
    'cartpole': 'gym:CartPole-v1',
    'acrobot': 'gym:Acrobot-v1',
    'pendulum': 'gym:Pendulum-v1',
    'cartpole_balance': 'control:cartpole:balance',
    'breakout': 'minatar:breakout',
    'space_invaders': 'minatar:space_invaders',
}
A3C_BUDGETS = {
    'pendulum': ('steps', 500_000),
    'cartpole_balance': ('steps', 500_000),
    'breakout': ('frames', 1_000_000),
    'space_invaders': ('frames', 1_000_000),
}
ANALYSES['a3c_default'] = dict(
    title='A3C, one configuration on every task: learned, and kept to the '
          'end of the budget',
    program='a3c', flags=[], budget=('steps', 200_000), threshold=None,
    page='results.a3c_default',
    settings={task: [f'--env={env}', '--num_actors=4',
                     '--evaluation_period=2000', '--evaluation_episodes=10',
                     '--log_gradient_parts']
              for task, env in A3C_TASKS.items()},
    budgets=A3C_BUDGETS)


def _frames_per_step(setting_flags: List[str]) -> int:
  """Frames (simulator steps) per agent step of the environment a setting's
  flags name (its `--env=`; an action repeat's k)."""
  from agents.envs import environments  # pylint: disable=g-import-not-at-top
  names = [flag.split('=', 1)[1] for flag in setting_flags
           if flag.startswith('--env=')]
  if not names:
    raise ValueError('A budget of frames needs the setting\'s --env=.')
  return environments.resolve_any(names[-1]).frames_per_step


def setting_budget(analysis: str, setting: str) -> Tuple[str, float]:
  """A setting's budget: its own (the analysis's `budgets`), else the
  analysis's."""
  spec = ANALYSES[analysis]
  return spec.get('budgets', {}).get(setting, spec['budget'])


def step_budget(analysis: str, setting: str) -> Optional[int]:
  """The actor steps a setting's runs take (scaled by --scale): a budget of
  ('steps', n); of ('frames', n), n over its environment's frames per step
  (CURL's count of simulator steps, an action repeat of k taking k); None
  for a wall-clock budget."""
  spec = ANALYSES[analysis]
  kind, value = setting_budget(analysis, setting)
  if kind == 'steps':
    return int(value * FLAGS.scale)
  if kind == 'frames':
    _, setting_flags = program_and_flags(spec, setting)
    return int(value * FLAGS.scale) // _frames_per_step(setting_flags)
  return None


def _budget_flags(analysis: str, setting: str) -> List[str]:
  steps = step_budget(analysis, setting)
  if steps is not None:
    return [f'--max_actor_steps={steps}']
  seconds = setting_budget(analysis, setting)[1] * FLAGS.scale
  return [f'--max_seconds={seconds:g}']


def program_and_flags(spec, setting: str) -> Tuple[str, List[str]]:
  """A setting's program and flags: its extra flags on the analysis's, or
  (a dict) a program and flags of its own, for analyses that put programs
  side by side."""
  value = spec['settings'][setting]
  if isinstance(value, dict):
    return value['program'], list(value['flags'])
  return spec['program'], [*spec['flags'], *value]


def command(analysis: str, setting: str, seed: int, workdir: str) -> List[str]:
  spec = ANALYSES[analysis]
  program, setting_flags = program_and_flags(spec, setting)
  return [os.path.join('.venv', 'bin', 'python'),
          os.path.join('programs', f'{program}.py'),
          '--lp_launch_type=local_mp', f'--workdir={workdir}',
          *setting_flags, *_budget_flags(analysis, setting), f'--seed={seed}',
          '--log_every=5', '--replay_checkpoint_every=0']


def _slug(setting: str) -> str:
  return ''.join(c if c.isalnum() else '_' for c in setting).strip('_')


def run_directory(analysis: str, setting: str, seed: int) -> str:
  return os.path.join(bank.runs_directory(), analysis, _slug(setting),
                      f'seed{seed}')


finished = bank.finished  # Whether a workdir holds a finished run.


def banked_directory(analysis: str, setting: str, seed: int) -> str:
  """Where the run is banked: the layout of `run_directory` in the bank."""
  return os.path.join(bank.directory(), analysis, _slug(setting),
                      f'seed{seed}')


def banked(analysis: str, setting: str, seed: int) -> bool:
  return finished(banked_directory(analysis, setting, seed))


def finished_directory(analysis: str, setting: str,
                       seed: int) -> Optional[str]:
  """The finished run to read (`bank.choose`): in the runs directory, or
  banked; None if it is neither."""
  return bank.choose(run_directory(analysis, setting, seed),
                     banked_directory(analysis, setting, seed))


def bank_run(analysis: str, setting: str, seed: int):
  """Banks the run of the runs directory if it is finished and its bank
  lacks something of it, saying so; a run that differs from its banked copy
  is said to be refused (the bank keeps its copy)."""
  workdir = run_directory(analysis, setting, seed)
  if not finished(workdir):
    return
  try:
    said = bank.bank(workdir, banked_directory(analysis, setting, seed))
  except bank.Refused as error:
    sys.stderr.write(f'warning: not banked: {error}\n')
    return
  if said:
    print(f'[{analysis}] {setting}, seed {seed}: {said}', flush=True)


def evaluation(workdir: str, file: str, argv: List[str],
               missing: str) -> Dict[str, object]:
  """The JSON `file` of the finished run in `workdir`: an evaluation of
  its final policy that `argv` (run from the repository) writes, made now
  unless already made. A banked run without it cannot have it made (the
  bank keeps no checkpoints): ValueError(`missing`)."""
  path = os.path.join(workdir, file)
  if not os.path.isfile(path) and bank.holds(workdir):
    raise ValueError(missing)
  if not os.path.isfile(path):
    print(' '.join(argv), flush=True)
    subprocess.check_call(argv, cwd=ROOT, env=program_environment())
  with open(path) as f:
    return json.load(f)


def started(workdir: str) -> bool:
  """Whether `workdir` holds a run that a launch with `--workdir` alone can
  resume: its program wrote run.json (the flags it resumes with)."""
  return os.path.isfile(os.path.join(workdir, run_manifest.MANIFEST))


def resume_command(analysis: str, setting: str, workdir: str) -> List[str]:
  """The command that resumes the run in `workdir` from its checkpoints:
  `--workdir` alone, every other flag taken from its run.json
  (docs/checkpoints.md)."""
  program, _ = program_and_flags(ANALYSES[analysis], setting)
  return [os.path.join('.venv', 'bin', 'python'),
          os.path.join('programs', f'{program}.py'),
          '--lp_launch_type=local_mp', f'--workdir={workdir}']


def steps_reached(workdir: str) -> int:
  """The actor steps at which the run's latest launch stopped (its
  stop.json); 0 when it has none."""
  record = run_manifest.read_stop_record(workdir)
  return int(record['counts'].get('actor_steps', 0)) if record else 0


def plan(analysis: str, seeds: List[int]) -> List[Tuple[str, int, str, str]]:
  """What running `seeds` would do now, in order: (setting, seed, step,
  what), the step 'train' (what: its command) or 'banked' (what: where).
  A run finished in the runs directory alone needs nothing."""
  steps = []
  for seed in seeds:
    for setting in ANALYSES[analysis]['settings']:
      workdir = run_directory(analysis, setting, seed)
      if banked(analysis, setting, seed):
        steps.append((setting, seed, 'banked',
                      banked_directory(analysis, setting, seed)))
      elif not finished(workdir):
        steps.append((setting, seed, 'train', ' '.join(
            command(analysis, setting, seed, workdir))))
  return steps


LAUNCHES = 'launches.json'


def _launches(workdir: str) -> List[Dict[str, object]]:
  text = storage.read_text(os.path.join(workdir, LAUNCHES))
  return json.loads(text) if text else []


def _write_launches(workdir: str, launches: List[Dict[str, object]]):
  storage.write_text(os.path.join(workdir, LAUNCHES),
                     json.dumps(launches, indent=2))


def begin_launch(workdir: str, argv: List[str]):
  """Records a launch of `argv` as begun now, before its program starts: a
  driver stopped while it runs (Ctrl-C, kill) leaves the entry, without
  its seconds, for `time_unended_launches`."""
  _write_launches(workdir, _launches(workdir) + [
      {'command': argv, 'began': time.time()}])


def end_launch(workdir: str, status: int) -> List[Dict[str, object]]:
  """Times the launch `begin_launch` recorded last, ended now with exit
  `status`; every launch's record."""
  launches = _launches(workdir)
  last = launches[-1]
  last['seconds'] = time.time() - last.pop('began')
  last['status'] = status
  _write_launches(workdir, launches)
  return launches


def time_unended_launches(workdir: str):
  """Gives a launch that `begin_launch` recorded and no `end_launch` timed
  (its driver was stopped while the program ran, which then stopped on its
  own or by programs/stop.py) its seconds: from its beginning to the last
  write of the run's output.txt, which its program's output went to until
  it ended. Called before a new launch appends to that output."""
  launches = _launches(workdir)
  unended = [launch for launch in launches if 'seconds' not in launch]
  if not unended:
    return
  output = os.path.join(workdir, 'output.txt')
  ended = os.path.getmtime(output) if os.path.isfile(output) else None
  for launch in unended:
    began = launch.pop('began')
    launch['seconds'] = max(0.0, (ended or began) - began)
    launch['status'] = None  # Unknown: its driver was gone.
    launch['timed_from'] = 'the last write of output.txt'
  _write_launches(workdir, launches)


def run(analysis: str, setting: str, seed: int, resume: bool = False) -> str:
  """Runs one setting and seed unless already finished or banked; returns
  the directory of the finished run to read (`finished_directory`).

  An unfinished run is started again from nothing, or, with `resume` (a
  step budget), resumed from its checkpoints (`resume_command`); then a
  launch that stopped before the budget (a Ctrl-C, `programs/stop.py`)
  leaves the run unfinished, for the next call to resume. Each launch's
  wall-clock goes to <workdir>/launches.json (`begin_launch`, `end_launch`:
  a launch whose driver was stopped before it ended is timed when the run
  is next resumed, `time_unended_launches`); finished.json holds their
  sum."""
  workdir = run_directory(analysis, setting, seed)
  if banked(analysis, setting, seed):
    print(f'[{analysis}] {setting}, seed {seed}: banked in '
          f'{banked_directory(analysis, setting, seed)}, not run again.',
          flush=True)
    return finished_directory(analysis, setting, seed)
  if finished(workdir):
    return workdir
  if resume and started(workdir):
    time_unended_launches(workdir)
    argv = resume_command(analysis, setting, workdir)
  else:
    if os.path.isdir(workdir):  # An unfinished run: start it again.
      import shutil  # pylint: disable=g-import-not-at-top
      shutil.rmtree(workdir)
    os.makedirs(workdir)
    argv = command(analysis, setting, seed, workdir)
  print(f'[{analysis}] {setting}, seed {seed}: {" ".join(argv)}', flush=True)
  begin_launch(workdir, argv)
  # Appended to, so that a resumed run's output keeps its earlier launches'.
  with open(os.path.join(workdir, 'output.txt'), 'a') as output:
    status = subprocess.call(argv, cwd=ROOT, env=program_environment(),
                             stdout=output,
                             stderr=subprocess.STDOUT)
  launches = end_launch(workdir, status)
  if status != 0:
    raise RuntimeError(f'{" ".join(argv)} exited with {status}; see '
                       f'{workdir}/output.txt.')
  budget = step_budget(analysis, setting)
  if resume and budget is not None and steps_reached(workdir) < budget:
    raise RuntimeError(
        f'{workdir} stopped at {steps_reached(workdir):,} actor steps, '
        f'before its budget of {budget:,}: run the same command again to '
        'resume it.')
  with open(os.path.join(workdir, 'finished.json'), 'w') as f:
    json.dump({'command': launches[0]['command'],
               'seconds': sum(launch['seconds'] for launch in launches),
               'launches': len(launches)}, f)
  return workdir


def final_counts(workdir: str) -> Dict[str, int]:
  """The program's counts at its end: the counter's 'Final counts: {...}'
  line, which includes the steps the actors took after the stop request
  (else the coordinator's 'Stopping: ... Counts: {...}', taken when its
  budget ran out). Both are in the nodes' logs (logs/counter.log,
  logs/coordinator.log); runs made before the nodes had logs of their own
  have them in the run's output."""
  found = {}
  for name in ('output.txt', os.path.join('logs', 'counter.log'),
               os.path.join('logs', 'coordinator.log')):
    path = os.path.join(workdir, name)
    if not os.path.exists(path):
      continue
    with open(path, errors='replace') as f:
      for line in f:
        if 'Final counts: ' in line:
          marker = 'Final counts: '
        elif 'Stopping: ' in line and 'Counts: ' in line:
          marker = 'Counts: '
        else:
          continue
        counts = line.split(marker, 1)[1]
        found[marker] = json.loads(counts[:counts.index('}') + 1])
  if not found:
    raise ValueError(f'{workdir} has no final counts: the run did not stop '
                     'at its budget.')
  return found.get('Final counts: ', found.get('Counts: '))


def run_figures(workdir: str, threshold: float) -> Dict[str, float]:
  """A finished run's final return, when its running mean return first
  reached `threshold` (actor steps, minutes; None if never), wall-clock,
  frames and updates."""
  curves = curves_lib.run_curves(workdir, FINAL_EPISODES)
  returns = curves['returns']
  with open(os.path.join(workdir, 'finished.json')) as f:
    seconds = json.load(f)['seconds']
  frames_per_step = run_manifest.frames_per_step(workdir)
  counts = final_counts(workdir)
  reached = np.flatnonzero(curves['mean_returns'] >= threshold)
  return {
      'final_return': float(np.mean(returns[-FINAL_EPISODES:]))
                      if len(returns) else float('nan'),
      'returns_from': curves['returns_from'],
      'episodes': int(len(returns)),
      'steps_to_threshold': float(curves['actor_steps'][reached[0]])
                            if len(reached) else None,
      'minutes_to_threshold': float(curves['hours'][reached[0]] * 60.0)
                              if len(reached) else None,
      'wall_clock_minutes': seconds / 60.0,
      'actor_frames': counts.get('actor_steps', 0) * frames_per_step,
      'learner_updates': counts.get('learner_steps', 0),
      # Over the whole run, start-up and stop included.
      'actor_frames_per_second':
          counts.get('actor_steps', 0) * frames_per_step / seconds,
      'learner_updates_per_second': counts.get('learner_steps', 0) / seconds,
  }


def _reached(rows, key: str, form: str) -> str:
  """Median over the seeds that reached the threshold, and how many did."""
  return spread.reached_text([row[key] for row in rows], form)


def speedup_table(spec, figures) -> List[str]:
  """The A3C paper's Table 2 question: each setting's speed-up, the first
  setting's median minutes to the threshold over its own, beside the paper's
  figures; split into data (actor steps to the threshold) and speed (actor
  frames per second), whose ratios multiply to it; and how many of each
  setting's seeds reached the threshold, the medians being over those
  alone. `spec` holds the threshold, the settings in order and the paper's
  `speedup`."""
  settings = list(spec['settings'])
  base = figures.get(settings[0])
  lines = [
      f'Speed-up: the median minutes to reach {spec["threshold"]} of '
      f'"{settings[0]}" over the setting\'s, each median over the seeds that '
      'reached it (the last column: how many of the setting\'s seeds did). '
      'A seed that never reached it is left out, not counted as slow, so a '
      'median over fewer than all seeds is biased fast: it understates the '
      'setting\'s time, and overstates its speed-up where it lost more '
      f'seeds than "{settings[0]}" (understates it where it lost fewer). The '
      'speed-up is about the product of the two ratios after it (not '
      'exactly: medians, and start-up time): actor frames per second '
      '(against the first setting) and the actor steps the first setting '
      'needed over the setting\'s (below 1: more data needed).', '',
      f'| setting | speed-up | {spec["speedup"]["source"]} | frames/s ratio '
      f'| data ratio | seeds that reached {spec["threshold"]} |',
      '|---|---|---|---|---|---|']
  for setting, paper in zip(settings, spec['speedup']['values']):
    rows = figures.get(setting)
    if not rows or not base:
      continue
    median = lambda runs, key: spread.reached([run[key] for run in runs])[0]
    minutes = median(rows, 'minutes_to_threshold')
    base_minutes = median(base, 'minutes_to_threshold')
    steps = median(rows, 'steps_to_threshold')
    base_steps = median(base, 'steps_to_threshold')
    count = spread.reached([row['minutes_to_threshold'] for row in rows])[1]
    speed = (np.mean([r['actor_frames_per_second'] for r in rows]) /
             np.mean([r['actor_frames_per_second'] for r in base]))
    form = lambda x: 'not reached' if x is None else f'{x:.2f}'
    lines.append(
        f'| {setting} | '
        f'{form(base_minutes / minutes if minutes and base_minutes else None)}'
        f' | {paper:g} | {speed:.2f} | '
        f'{form(base_steps / steps if steps and base_steps else None)} | '
        f'{count}/{len(rows)} |')
  return lines


def _budget_text(spec) -> str:
  kind, value = spec['budget']
  if kind == 'steps':
    return f'{int(value * FLAGS.scale):,} actor steps'
  if kind == 'frames':
    return f'{int(value * FLAGS.scale):,} simulator steps'
  return f'{value * FLAGS.scale / 60:g} minutes of wall-clock'


def collect(analysis: str, seeds: List[int]) -> Dict[str, object]:
  """Writes results/<analysis>.png and .json from the finished runs, and
  returns that JSON's content."""
  spec = ANALYSES[analysis]
  groups, figures = {}, {}
  for setting in spec['settings']:
    workdirs = {seed: finished_directory(analysis, setting, seed)
                for seed in seeds}
    workdirs = {seed: w for seed, w in workdirs.items() if w}
    if workdirs:
      groups[setting] = list(workdirs.values())
      figures[setting] = [dict(seed=seed,
                               **run_figures(w, spec['threshold']))
                          for seed, w in workdirs.items()]
  if not groups:
    raise ValueError(f'No finished runs of {analysis!r} yet.')
  curves_lib.plot_groups(groups, os.path.join(RESULTS, f'{analysis}.png'),
                   smoothing=FINAL_EPISODES, title=spec['title'])
  example = command(analysis, next(iter(spec['settings'])), 0, '<workdir>')
  data = {'title': spec['title'], 'budget': _budget_text(spec),
          'scale': FLAGS.scale, 'seeds': seeds,
          'threshold': spec['threshold'], 'command': ' '.join(example)}
  for key in ('speedup', 'references'):
    if key in spec:
      data[key] = spec[key]
  data['settings'] = figures
  write_json(analysis, data)
  return data


def write_json(name: str, data: Dict[str, object]):
  """Writes results/<name>.json as every results script does."""
  with open(os.path.join(RESULTS, f'{name}.json'), 'w') as f:
    json.dump(data, f, indent=2)
    f.write('\n')


def _references(data: Dict[str, object]) -> List[str]:
  """Published figures set beside the page's (`references` of its
  analysis): where they come from, how they differ, and the table."""
  if 'references' not in data:
    return []
  references = data['references']
  return [f'Beside them, the published agents of {references["source"]}. '
          f'{references["protocol"]}', '',
          '| published agent | frames | return |', '|---|---|---|',
          *[f'| {name} | {frames / 1e6:.2f}M | {value:.1f} |'
            for name, frames, value in references['rows']], '']


def render(analysis: str, data: Dict[str, object]) -> str:
  """The page of `analysis` (results/<analysis>.md) from its JSON, `data`,
  alone: first the final returns over seeds, then when each setting reached
  the threshold and how fast it ran, then how it was made."""
  figures = data['settings']
  threshold = data['threshold']
  count = max(len(rows) for rows in figures.values())
  comparisons = []
  if count > 1 and len(figures) > 1:
    (first, first_rows), *others = figures.items()
    finals = lambda rows: [row['final_return'] for row in rows]
    comparisons = [
        f'Each setting against "{first}": the difference of their IQMs of '
        'the final return, its 95% interval (each setting\'s seeds '
        'resampled on their own) and Welch\'s t-test of the means. '
        f'{spread.how_compared(count)}', '',
        *[f'- {setting}: ' + spread.comparison(setting, first, finals(rows),
                                               finals(first_rows))
          for setting, rows in others], '']
  lines = [
      f'# {data["title"]}', '',
      f'**Final return after {data["budget"]}, '
      f'{spread.seeds_phrase(count, "a setting")}.** A run\'s final return is '
      f'the mean of its last {FINAL_EPISODES} evaluation episodes'
      f'{spread.how_stated(count)}.', '',
      *spread.seed_table(
          'setting', 'final return',
          {setting: {row['seed']: row['final_return'] for row in rows}
           for setting, rows in figures.items()}), '',
      *comparisons, *_references(data),
      f'![{analysis}]({analysis}.png)', '',
      f'Reaching {threshold}: when the running mean of {FINAL_EPISODES} '
      f'evaluation episodes first reached it, median over the seeds that '
      'did, with how many of the setting\'s seeds did (a median that leaves '
      'out seeds that never reached it is biased fast). Speeds: the run\'s actor frames and learner updates over its '
      'whole wall-clock (start-up and stop included). Wall-clock, counts '
      'and speeds: means over seeds.', '',
      f'| setting | seeds | actor steps to reach {threshold} | minutes to '
      f'reach {threshold} | wall-clock (min) | actor frames | learner '
      'updates | actor frames/s | learner updates/s |',
      '|---|---|---|---|---|---|---|---|---|',
  ]
  for setting, rows in figures.items():
    mean = lambda key: np.mean([row[key] for row in rows])  # pylint: disable=cell-var-from-loop
    lines.append(
        f'| {setting} | {len(rows)} | '
        f'{_reached(rows, "steps_to_threshold", "{:,.0f}")} | '
        f'{_reached(rows, "minutes_to_threshold", "{:.1f}")} | '
        f'{mean("wall_clock_minutes"):.1f} | {mean("actor_frames"):,.0f} | '
        f'{mean("learner_updates"):,.0f} | '
        f'{mean("actor_frames_per_second"):,.0f} | '
        f'{mean("learner_updates_per_second"):,.1f} |')
  if 'speedup' in data:
    lines += ['', *speedup_table(data, figures)]
  lines += ['', 'Made by:', '', '```sh',
            f'.venv/bin/python -m results.run {analysis} '
            f'--seeds={",".join(map(str, data["seeds"]))}', '```', '',
            'which runs, for each setting and seed, e.g.:', '', '```sh',
            data['command'], '```', '']
  return '\n'.join(lines)


def write_page(name: str, text: str):
  """Writes results/<name>.md, the page whose .png and .json its
  collection has just written, and says so."""
  with open(os.path.join(RESULTS, f'{name}.md'), 'w') as f:
    f.write(text)
  print(f'Wrote results/{name}.png, .json and .md')


_SEED = re.compile(r'seed(\d+)')


def finished_seeds(analysis: str) -> List[int]:
  """Every seed with a finished run of some setting of `analysis`, in the
  runs directory or banked."""
  found = set()
  for setting in ANALYSES[analysis]['settings']:
    for place in (run_directory, banked_directory):
      parent = os.path.dirname(place(analysis, setting, 0))
      names = os.listdir(parent) if os.path.isdir(parent) else []
      found.update(int(match.group(1)) for match in map(_SEED.fullmatch, names)
                   if match and finished(os.path.join(parent, match[0])))
  return sorted(found)


def reported_seeds(analysis: str, seeds: List[int]) -> List[int]:
  """The seeds a page reports: `seeds` and every seed with a finished run
  (`finished_seeds`), so that running some seeds never drops the others'
  runs from the page; said when it adds any."""
  reported = sorted(set(seeds) | set(finished_seeds(analysis)))
  if reported != sorted(seeds):
    print(f'[{analysis}] the page reports seeds '
          f'{",".join(map(str, reported))}: every seed with a finished run, '
          'not only --seeds.', flush=True)
  return reported


def report(analysis: str, seeds: List[int]):
  """Writes results/<analysis>.{png,json,md} from the finished runs."""
  write_page(analysis, render(analysis, collect(analysis, seeds)))


def main(argv):
  if FLAGS.list:
    for name, spec in ANALYSES.items():
      print(f'{name}: {spec["title"]}')
      for setting in spec['settings']:
        print(f'  {setting}: {" ".join(command(name, setting, 0, "<dir>"))}')
    return
  if len(argv) != 2 or argv[1] not in ANALYSES:
    sys.stderr.write(f'error: name one analysis: {", ".join(ANALYSES)} '
                     '(--list shows them).\n')
    sys.exit(2)
  analysis = argv[1]
  if 'page' in ANALYSES[analysis]:
    sys.stderr.write(f'error: {analysis} has a page of its own: run '
                     f'.venv/bin/python -m {ANALYSES[analysis]["page"]} '
                     '(same flags).\n')
    sys.exit(2)
  seeds = [int(seed) for seed in FLAGS.seeds]
  if FLAGS.dry_run:
    for setting, seed, step, what in plan(analysis, seeds):
      print(f'{setting} seed {seed} {step}: {what}')
    return
  if not FLAGS.report_only:
    for seed in seeds:
      for setting in ANALYSES[analysis]['settings']:
        run(analysis, setting, seed)
        if FLAGS.bank:
          bank_run(analysis, setting, seed)
  seeds = reported_seeds(analysis, seeds)
  report(analysis, seeds)
  if FLAGS.bank:
    for seed in seeds:
      for setting in ANALYSES[analysis]['settings']:
        bank_run(analysis, setting, seed)


if __name__ == '__main__':
  app.run(main)
