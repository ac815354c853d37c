"""The replay plan (`launch.cloud.capacity.replay_load`, which
`--dry_run` prints and docs/replay.md tabulates) against hand-worked
figures, the benchmarks' results and the page's table."""

import os
import re

import pytest

from launch.cloud import capacity
from benchmarks.common import read_result

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_actor_steps_are_interpolated_between_the_measured_k():
  measured = {1: 100.0, 16: 400.0}
  assert capacity.actor_steps_per_second(1, measured) == 100.0
  # A third of the way from K=1 to K=16: 100 + 300 x 5/15.
  assert capacity.actor_steps_per_second(6, measured) == pytest.approx(200.0)
  assert capacity.actor_steps_per_second(16, measured) == 400.0
  # Past the largest K measured, no faster (the emulators take the core).
  assert capacity.actor_steps_per_second(64, measured) == 400.0


def test_the_shards_needed_worked_by_hand():
  costs = dict(insert=100.0, sample=20.0, update=30.0)
  measured = {1: 100.0, 16: 400.0}
  # 10 actors x 100 steps/s = 1,000 inserts/s x 100 us = 0.1 core; the
  # learner's 19 x 512 = 9,728 samples/s x (20 + 30) us = 0.4864 core: 0.5864
  # cores, 2.35 quarter-cores: 3 shards at a quarter of a core each.
  load = capacity.replay_load(10, 1, costs, measured, shard_load=0.25)
  assert load.inserts_per_second == pytest.approx(1000.0)
  assert load.samples_per_second == 9728
  assert load.server_cores == pytest.approx(0.5864)
  assert load.shards == 3
  # At a whole core each, one shard does.
  assert capacity.replay_load(10, 1, costs, measured,
                              shard_load=1.0).shards == 1


def test_the_plans_figures_are_the_benchmarks():
  shards = read_result('replay_shards')
  most = str(max(shards['settings']['shards']))
  for operation, microseconds in shards['server_us_per_transition'][
      most].items():
    assert capacity.REPLAY_SHARD_MICROSECONDS[operation] == pytest.approx(
        microseconds, abs=0.05), operation
  for actors in read_result('program_throughput')['actors']:
    assert capacity.ACTOR_STEPS_PER_SECOND[
        actors['envs_per_actor']] == pytest.approx(
            actors['median_program_steps_per_second'], abs=0.5)
  assert capacity.SHARD_LOAD == shards['settings']['shard_load']


def _page_plan():
  """docs/replay.md's plan table: {(actors, K): (shards, GiB per shard)}."""
  with open(os.path.join(ROOT, 'docs', 'replay.md')) as f:
    page = f.read()
  section = page[page.index('## How many shards'):]
  section = section[:section.index('\n## ', 1)]
  rows = re.findall(
      r'^\| ([\d,]+) \| (\d+) \| [\d,]+ \| [\d,]+ \| [\d.]+ \| (\d+) \| '
      r'([\d.]+) \|', section, re.MULTILINE)
  return {(int(actors.replace(',', '')), int(k)): (int(count), float(gib))
          for actors, k, count, gib in rows}


def test_the_docs_plan_table_is_the_benchmarks_and_the_dry_runs():
  table = _page_plan()
  plan = read_result('replay_shards')['plan']
  assert len(table) == len(plan) == 6
  for row in plan:
    shards, gib = table[(row['actors'], row['envs_per_actor'])]
    assert shards == row['shards']
    assert gib == pytest.approx(row['memory_gib_per_shard'], abs=0.05)
    # What --dry_run proposes, from the figures the code keeps.
    assert capacity.replay_load(row['actors'],
                                row['envs_per_actor']).shards == shards
