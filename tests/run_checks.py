"""Checks of a finished run's records, shared by the programs' tests."""

import csv
import json
import os
from typing import Dict, List, Sequence


def csv_rows(workdir, label: str) -> List[Dict[str, str]]:
  with open(os.path.join(workdir, 'logs', label, 'logs.csv')) as f:
    return list(csv.DictReader(f))


def check_stopped_at_step_limit(workdir, limit: int, episode_length: int,
                                actor_labels: Sequence[str] = ('actor',
                                                               'actor_1')):
  """The coordinator stopped the program at its step limit (it polls once a
  second; actors send their counts once a second), and the last counts (the
  learner's final row, after the stop) exceed it by no more than a few
  seconds of acting at the actors' logged rates. Actors count an episode's
  steps when it ends: up to an episode (at most `episode_length`) each on
  top."""
  with open(os.path.join(workdir, 'stop.json')) as f:
    stop = json.load(f)
  stopped_at = stop['counts']['actor_steps']
  assert stop['reason'] == (f'reached {stopped_at} actor steps (limit '
                            f'{limit})')
  rate = sum(max(float(row['steps_per_second'])
                 for row in csv_rows(workdir, label))
             for label in actor_labels)
  episodes = len(actor_labels) * episode_length
  assert limit <= stopped_at <= limit + episodes + 3 * rate
  final = max(int(row['actor_steps'])
              for row in csv_rows(workdir, 'learner'))
  assert final <= stopped_at + episodes + 5 * rate, (final, stopped_at, rate)
