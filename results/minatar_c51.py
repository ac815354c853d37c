"""Ape-X C51 (the distributional Ape-X DQN) on the five MinAtar games beside
Young & Tian's DQN and Ape-X DQN's runs of the same protocol (a result, not
a test): runs `results.run minatar_c51` (results/minatar.py's protocol: all
6 actions, 1M frames, each final policy at epsilon 0.1 over 100 episodes
and near-greedy over 30), and writes results/minatar_c51.{png,json,md}.

  .venv/bin/python -m results.minatar_c51 --seeds=0,1,2 --runs=<dir outside repo>
  .venv/bin/python -m results.minatar_c51 --seeds=0,1,2 --report_only
  .venv/bin/python -m results.pages minatar_c51    # the page, from its JSON

The same command again carries on where it stopped, and banks each run
(results/page_runs.py), as results/minatar.py does.

The goal: the IQM over games and seeds of each run's matched return over
Young & Tian's DQN at 1M frames at or above `GOAL`, said by its interval;
beside Ape-X DQN, the difference of the two IQMs over the seeds both have,
with its stratified-bootstrap interval (results/minatar_beside.py, shared
with R2D2's page).
"""

from typing import Dict, List

from absl import app

from results import minatar
from results import minatar_beside
from results import page_registry
from results import run
from results import spread

ANALYSIS = 'minatar_c51'
OURS = 'Ape-X C51'
GOAL = 1.3
AGENT = minatar_beside.Agent(
    ANALYSIS, OURS, '(docs/apex_c51.md: Ape-X DQN with C51\'s return '
    'distributions)', '`--preset=minatar` of programs/apex_c51.py: Ape-X '
    'DQN\'s with 51 atoms on [0, 25]')


def collect(seeds: List[int]) -> Dict[str, object]:
  """Writes results/minatar_c51.png and .json from the finished runs, with
  Ape-X DQN's banked runs beside them, and returns that JSON's content."""
  data = minatar.collect(seeds, ANALYSIS)
  minatar_beside.add_apex_dqn(data)
  data['goal'] = GOAL
  run.write_json(ANALYSIS, data)
  return data


def goal_text(figures: minatar_beside.Figures, goal: float) -> str:
  """Where the IQM over Young & Tian's stands against `goal`, by its
  interval."""
  if figures is None:
    return f'Against the goal of {goal:g}x: not yet (fewer than 2 seeds).'
  _, low, high, seeds = figures
  said = spread.against_goal(low, high, goal, seeds)
  return f'Against the goal of {goal:g}x Young & Tian\'s DQN: {said}.'


def render(data: Dict[str, object]) -> str:
  """The page (results/minatar_c51.md) from its JSON, `data`, alone."""
  return minatar_beside.render(
      data, AGENT, lambda figures: goal_text(figures, data['goal']))


def main(argv):
  del argv
  minatar_beside.main(ANALYSIS, collect, render)

page_registry.register(ANALYSIS, render)


if __name__ == '__main__':
  app.run(main)
