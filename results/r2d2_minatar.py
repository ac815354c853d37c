"""R2D2 (docs/r2d2.md) on the five MinAtar games beside Young & Tian's DQN
and Ape-X DQN's runs of the same protocol (a result, not a test): runs
`results.run r2d2_minatar` (results/minatar.py's protocol: all 6 actions,
1M frames, each final policy at epsilon 0.1 over 100 episodes and
near-greedy over 30), and writes results/r2d2_minatar.{png,json,md}.

  .venv/bin/python -m results.r2d2_minatar --seeds=0,1,2 --runs=<dir outside repo>
  .venv/bin/python -m results.r2d2_minatar --seeds=0,1,2 --runs=<dir> --dry_run
  .venv/bin/python -m results.r2d2_minatar --seeds=0,1,2 --report_only
  .venv/bin/python -m results.pages r2d2_minatar    # the page, from its JSON

The same command again carries on where it stopped, and banks each run
(results/page_runs.py), as results/minatar.py does. With no finished run,
banked or in the runs directory, there is no page: `--report_only` says
so and writes nothing.

What the page says (results/minatar_beside.py, shared with Ape-X C51's):
the IQM over games and seeds of each run's matched return over Young &
Tian's DQN at 1M frames, ahead or behind theirs only where its interval
excludes 1 (results/minatar.md's rule); beside Ape-X DQN, the difference
of the two IQMs over the seeds both have, with its stratified-bootstrap
interval. And where the runs depart from the paper: the paper's values
(agents/r2d2/config.py's defaults, each with its source) beside the runs'
recorded flags.
"""

from typing import Dict, List

from absl import app
import numpy as np

from launch.runs import run_manifest
from results import minatar
from results import minatar_beside
from results import page_registry
from results import run
from results import spread

ANALYSIS = 'r2d2_minatar'
OURS = 'R2D2'
AGENT = minatar_beside.Agent(
    ANALYSIS, OURS, '(docs/r2d2.md: Ape-X DQN with an LSTM, learnt from '
    'stored sequences with a burn-in)', '`--preset=minatar` of '
    'programs/r2d2.py: an LSTM of 128, sequences of 20 + 40 steps, batch 32')

# The flags whose defaults are the paper's (agents/r2d2/config.py names
# each one's source: R2D2 §2.3, §3, Table 2), compared with the runs'.
PAPER_FLAGS = (
    'lstm_size', 'dueling_hidden_size', 'trace_length', 'burn_in_length',
    'sequence_period', 'batch_size', 'replay_capacity',
    'target_update_period', 'learning_rate', 'adam_epsilon', 'n_step',
    'discount', 'value_rescaling_epsilon', 'priority_exponent',
    'priority_eta', 'importance_sampling_exponent', 'epsilon_base',
    'epsilon_alpha', 'variable_update_period', 'num_actors')
# What the runs set where the paper gives no value.
OWN_FLAGS = ('envs_per_actor', 'samples_per_insert', 'min_replay_size',
             'evaluation_period', 'evaluation_episodes')
# R2D2 §2.3: "a single GPU-based learner, performing approximately 5
# network updates per second (each update on a mini-batch of 64 length-80
# sequences), and each actor performing ~260 environment steps per second
# on Atari": the paper's replay ratio, which no flag sets.
PAPER_UPDATES_PER_SECOND = 5
PAPER_ACTOR_STEPS_PER_SECOND = 260


def paper_values() -> Dict[str, object]:
  """The paper's value of each of `PAPER_FLAGS`: R2D2Config's defaults,
  and the `paper` preset's 256 actors (one environment each)."""
  from agents.r2d2 import config  # pylint: disable=g-import-not-at-top
  from agents.r2d2 import presets  # pylint: disable=g-import-not-at-top
  defaults = config.R2D2Config()
  values = {name: getattr(defaults, name) for name in PAPER_FLAGS
            if name != 'num_actors'}
  values['num_actors'] = presets.PAPER['num_actors']
  return values


def runs_flags(records: Dict[str, List[Dict[str, object]]]
               ) -> Dict[str, object]:
  """The values of `PAPER_FLAGS` and `OWN_FLAGS` the finished runs were
  made with (their run.json); ValueError if two runs differ in one."""
  flags, first = {}, None
  for game, rows in records.items():
    for row in rows:
      workdir = run.finished_directory(ANALYSIS, game, row['seed'])
      made_with = run_manifest.read_manifest(workdir)['flags']
      values = {name: made_with[name] for name in PAPER_FLAGS + OWN_FLAGS}
      if first is None:
        flags, first = values, workdir
      elif values != flags:
        differing = sorted(name for name in flags
                           if flags[name] != values[name])
        raise ValueError(f'{workdir} was made with other {differing} than '
                         f'{first}: one page shows one configuration.')
  return flags


def collect(seeds: List[int]) -> Dict[str, object]:
  """Writes results/r2d2_minatar.png and .json from the finished runs, with
  Ape-X DQN's banked runs beside them and the paper's values beside the
  runs' flags, and returns that JSON's content."""
  data = minatar.collect(seeds, ANALYSIS)
  minatar_beside.add_apex_dqn(data)
  data['paper'] = paper_values()
  data['flags'] = runs_flags(data['games'])
  run.write_json(ANALYSIS, data)
  return data


def theirs_text(figures: minatar_beside.Figures) -> str:
  """What the IQM over Young & Tian's supports, by results/minatar.md's
  rule."""
  if figures is None:
    return 'Against Young & Tian\'s DQN: not yet (fewer than 2 seeds).'
  _, low, high, seeds = figures
  return ('Against Young & Tian\'s DQN (ahead or behind only where the '
          f'interval excludes 1, with {spread.VERDICT_SEEDS} seeds a game or '
          f'more): {minatar.against_one(low, high, seeds, OURS)}.')


def _value(value) -> str:
  if isinstance(value, float) and not value.is_integer():
    return f'{value:g}'
  return f'{int(value):,}' if isinstance(value, (int, float)) else str(value)


def departures(data: Dict[str, object]) -> List[str]:
  """The page's section on where the runs depart from the paper, from the
  paper's values and the runs' flags in `data`."""
  paper, flags, records = data['paper'], data['flags'], data['games']
  differ = [name for name in PAPER_FLAGS if flags[name] != paper[name]]
  kept = [f'`{name}` {_value(paper[name])}' for name in PAPER_FLAGS
          if name not in differ]
  replays = (flags['samples_per_insert'] * flags['trace_length'] /
             flags['sequence_period'])
  paper_replays = (PAPER_UPDATES_PER_SECOND * paper['batch_size'] *
                   paper['trace_length'] /
                   (paper['num_actors'] * PAPER_ACTOR_STEPS_PER_SECOND))
  updates = float(np.mean([row['learner_updates']
                           for rows in records.values() for row in rows]))
  environments = flags['num_actors'] * flags['envs_per_actor']
  return [
      '## Where these runs depart from the paper', '',
      'R2D2\'s paper (Kapturowski et al. 2019) trains on Atari with '
      f'{paper["num_actors"]} actors and a GPU learner. These runs keep its '
      'algorithm (stored states and a burn-in, 5-step double-Q targets '
      'under its value rescaling and no reward clipping, priorities of a '
      'sequence\'s max and mean TD error) and '
      + ('change these of its values (each value\'s reason: '
         'agents/r2d2/presets.py):' if differ else
         'every one of its values named below.'), '',
      *([] if not differ else [
          '| flag | the paper (§2.3, §3, Table 2) | these runs |',
          '|---|---|---|',
          *(f'| `{name}` | {_value(paper[name])} | {_value(flags[name])} |'
            for name in differ), '']),
      f'Kept from the paper: {", ".join(kept) or "nothing"}.', '',
      f'**Replay.** Each step is learnt from in {flags["trace_length"]} / '
      f'{flags["sequence_period"]} = '
      f'{flags["trace_length"] / flags["sequence_period"]:g} sequences, '
      'each sampled about '
      f'{flags["samples_per_insert"]:g} times (`samples_per_insert`): '
      f'about {replays:g} replays a step. The paper sets no ratio: about '
      f'{PAPER_UPDATES_PER_SECOND} updates a second of '
      f'{paper["batch_size"]} sequences of {paper["trace_length"]} steps '
      f'against {paper["num_actors"]} actors of about '
      f'{PAPER_ACTOR_STEPS_PER_SECOND} steps a second (§2.3) make about '
      f'{paper_replays:.1f}. Learning starts at '
      f'{flags["min_replay_size"]:,} sequences (the paper gives no size). '
      f'The runs made {updates:,.0f} updates each on average (their mean), '
      f'so a target copy every {flags["target_update_period"]:,} updates '
      f'is {updates / flags["target_update_period"]:.1f} copies a run, and '
      f'the evaluator played its {flags["evaluation_episodes"]} episodes '
      f'every {flags["evaluation_period"]:,} updates.', '',
      '**Beyond the flags.** The paper\'s LSTM also takes the previous '
      'action and reward; this one takes the torso\'s output only. The '
      'torso is Young & Tian\'s one 3x3 convolution of 16 channels for '
      '10x10 MinAtar images, not Ape-X\'s convolutions on 84x84 Atari '
      f'frames. {environments} environments ({flags["num_actors"]} actors '
      f'x {flags["envs_per_actor"]}) explore with the paper\'s epsilons '
      f'{flags["epsilon_base"]:g}^(1 + {flags["epsilon_alpha"]:g} i / '
      f'{environments - 1}), i over {environments} environments rather '
      f'than {paper["num_actors"]} actors.', '']


def render(data: Dict[str, object]) -> str:
  """The page (results/r2d2_minatar.md) from its JSON, `data`, alone."""
  return minatar_beside.render(data, AGENT, theirs_text, departures(data))


def main(argv):
  del argv
  minatar_beside.main(ANALYSIS, collect, render)

page_registry.register(ANALYSIS, render)


if __name__ == '__main__':
  app.run(main)
