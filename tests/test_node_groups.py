"""The node groups, declared once (`launch.node_groups`): a built program
has the declared groups, in their order, with the declared sizes and labels;
and a group declared there reaches the cloud plan, the labels, the
heartbeats and the ordered stop with nothing else changed."""

import signal
import sys
import types

import pytest

import helpers
from launch.supervision import heartbeat
from launch import node_groups
from launch.cloud import machines
from launch.cloud.options import CloudOptions

# Builds a program's Launchpad program without launching it (test_mt
# starts nothing until launched) and prints its groups and labels.
_BUILD = """
import json, sys
from absl import flags
import importlib
name, argv = sys.argv[1], sys.argv[1:]
program_module = importlib.import_module('programs.' + name)
flags.FLAGS(argv)
program, options, environment, plan = program_module.ENTRY.build()
from launch.supervision import launcher
print('GROUPS ' + json.dumps({
    'groups': [[group, len(nodes)] for group, nodes in program.groups.items()],
    'labels': sorted(launcher.node_labels(program).values())}))
"""


def _built(tmp_path, name, *flags):
  result = helpers.run([sys.executable, '-c', _BUILD, name,
                        '--lp_launch_type=test_mt',
                        f'--workdir={tmp_path / name}', *flags], 300)
  assert result.returncode == 0, result.stdout[-5000:]
  return helpers.probe_report(result.stdout, 'GROUPS ')


def test_a_built_program_has_the_declared_groups_in_their_order(tmp_path):
  built = _built(tmp_path, 'apex_dqn', '--preset=cartpole_smoke',
                 '--num_actors=3', '--replay_shards=3',
                 '--variable_cachers=2', '--num_evaluators=1')
  # The coordinator's first (on Vertex AI the job's primary replica).
  assert built['groups'] == [['coordinator', 1], ['replay', 3],
                             ['counter', 1], ['learner', 1], ['cacher', 2],
                             ['actor', 3], ['evaluator', 1]]
  assert built['labels'] == sorted([
      'coordinator', 'replay_0', 'replay_1', 'replay_2', 'counter',
      'learner', 'cacher_0', 'cacher_1', 'actor', 'actor_1', 'actor_2',
      'evaluator'])
  # A program of workers: no replay, no cachers.
  built = _built(tmp_path, 'a3c', '--preset=cartpole', '--num_actors=2')
  assert [group for group, _ in built['groups']] == [
      'coordinator', 'counter', 'learner', 'actor', 'evaluator']


def test_undeclared_or_miscounted_groups_are_refused():
  with pytest.raises(ValueError, match=r"\['logger'\] are not declared in "
                     r'launch/node_groups.py'):
    node_groups.check_known(['actor', 'logger'])
  options = types.SimpleNamespace(num_actors=2, variable_cachers=0,
                                  num_evaluators=1)
  declared = node_groups.counts(options, 1)
  assert declared == {'coordinator': 1, 'replay': 1, 'counter': 1,
                      'learner': 1, 'actor': 2, 'evaluator': 1}
  node_groups.check_sizes({'replay': 1, 'counter': 1, 'learner': 1,
                           'cacher': 0, 'actor': 2, 'evaluator': 1}, declared)
  with pytest.raises(ValueError, match='make the declared counts'):
    node_groups.check_sizes({'replay': 1, 'counter': 1, 'learner': 1,
                             'actor': 3, 'evaluator': 1}, declared)


@pytest.fixture
def logger_group(monkeypatch):
  """A group declared in `GROUPS` only: one node the program cannot go on
  without, on the small nodes' machine, stopped after the actors."""
  group = node_groups.NodeGroup(
      'logger', lambda options, shards: options.loggers, 'logger',
      node_groups.EACH, stop_step=1)
  groups = node_groups.GROUPS + (group,)
  monkeypatch.setattr(node_groups, 'GROUPS', groups)
  monkeypatch.setattr(node_groups, 'BY_NAME',
                      {each.name: each for each in groups})
  return group


def test_a_declared_group_reaches_the_plan_labels_heartbeats_and_stop(
    logger_group):
  options = types.SimpleNamespace(num_actors=2, variable_cachers=0,
                                  num_evaluators=0, loggers=2)
  sizes = node_groups.counts(options, 1)
  assert sizes['logger'] == 2
  assert node_groups.labels('logger', 2) == ['logger_0', 'logger_1']
  requests = machines.requests(CloudOptions(), 'gym', 1000)
  assert requests['logger'] == requests['counter']  # The small machine.
  machines.check_plan(requests, list(sizes))
  nodes = {'actor': [0, 1], 'evaluator': [0], 'logger': [0],
           'learner': [0]}
  assert node_groups.stop_steps(nodes) == [['actor', 'evaluator'],
                                           ['logger'], ['learner']]
  assert 'logger' in node_groups.watched(nodes, kept=False)
  # Its node's heartbeats: a real node, killed, is named gone.
  server, port = helpers.start_heartbeat_server()
  try:
    node = types.SimpleNamespace(address=f'localhost:{port}')
    watch = heartbeat.HeartbeatWatch({'logger': [node]}, timeout=2.0,
                                     period=0.2)
    helpers.wait_for(watch.all_answered.is_set, 60, 'its first answer')
    assert watch.dead() is None
    server.send_signal(signal.SIGKILL)
    gone = helpers.wait_for(watch.dead, 60, 'the killed node to be gone')
    assert gone.startswith('the logger has not answered its heartbeats'), (
        gone)
    assert watch.gone_labels() == ['logger']
    watch.close()
  finally:
    helpers.kill_group(server)


def test_every_group_names_a_machine_the_plan_makes():
  requests = machines.requests(CloudOptions(), 'gym', 1000)
  assert sorted(requests) == sorted(group.name
                                    for group in node_groups.GROUPS)


def test_a_label_finds_its_group_also_when_the_name_has_an_underscore(
    monkeypatch):
  saver = node_groups.NodeGroup(
      name='model_saver', count=lambda options, shards: 3,
      title='model saver', needed=node_groups.NONE)
  monkeypatch.setitem(node_groups.BY_NAME, saver.name, saver)
  labels = saver.labels(3)
  assert labels == ['model_saver_0', 'model_saver_1', 'model_saver_2']
  assert {node_groups.group_of(label).name for label in labels} == {
      'model_saver'}
  assert node_groups.group_of(saver.label(0, 1)).name == 'model_saver'
  # The program's own groups, first plain and numbered.
  assert node_groups.group_of('actor').name == 'actor'
  assert node_groups.group_of('actor_3').name == 'actor'
  assert node_groups.group_of('replay_1').name == 'replay'
  assert node_groups.group_of('learner').name == 'learner'
