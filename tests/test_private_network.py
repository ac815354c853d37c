"""No node of a local run answers another host, tried as an attacker would.

A program launched as users launch it (`python programs/apex_dqn.py
--lp_launch_type=local_mp|local_mt`) runs in a network of its own
(`launch/machine/private_network.py`). While it trains, a second host,
a network namespace of the test's linked to this machine by a veth pair
(`tests/second_host.py`), tries every port that the program's processes
listen on, at this machine's addresses on that link, and sends each a
Courier call whose argument makes the server run `touch <marker>`. None may
connect, and the marker must not appear; a listener of the test's own on
every interface must be reached, or the attempts would prove nothing. The
runs then train on and stop as users stop them: the local_mp one on a
request (programs/stop.py), the local_mt one on Ctrl-C, each stop checked in
full (these are also the program's tests of those stops). The
same attack on a program started with `--allow_network_exposure` where no
namespace can be made connects and runs the command: what every local run
exposed before.

The namespace is made unavailable as a system can make it: a user namespace
of the test's own whose `user.max_net_namespaces` is 0.
"""

import json
import subprocess

import pytest

import helpers
import second_host

SMALL_RUN = ['--preset=cartpole_smoke']
NUM_ACTORS = 2


def _without_namespaces(command):
  """`command` in a user namespace of its own in which no network namespace
  can be made (as where user namespaces are restricted)."""
  return ['unshare', '--user', '--map-root-user', 'sh', '-c',
          'echo 0 > /proc/sys/user/max_net_namespaces && exec "$@"', 'sh',
          *command]


def _check_no_namespaces_here():
  result = subprocess.run(_without_namespaces(['unshare', '--net', 'true']),
                          capture_output=True, text=True, check=False)
  if 'No space left on device' not in result.stderr:
    pytest.skip('cannot make a user namespace without network namespaces '
                f'here: {result.stderr.strip() or result.returncode}')


def _program_pids(program: helpers.Program):
  program.note_processes()
  return [process.pid for process in program.alive()]


def _run_without_namespaces(tmp_path, *flags):
  return subprocess.run(
      _without_namespaces(helpers.script_command('apex_dqn', *flags)),
      capture_output=True, text=True, cwd=helpers.ROOT, timeout=300,
      check=False)


@pytest.mark.parametrize('given', ['--lp_launch_type=local_mp',
                                   '--lp_launch_type local_mt',
                                   'a --flagfile'])
def test_a_launch_that_cannot_be_kept_off_the_network_is_refused(
    tmp_path, given):
  _check_no_namespaces_here()
  workdir = tmp_path / 'run'
  if given == 'a --flagfile':  # As absl reads it: the launch type inside.
    flagfile = tmp_path / 'flags'
    flagfile.write_text('--lp_launch_type=local_mp\n')
    launch = [f'--flagfile={flagfile}']
  else:
    launch = given.split(' ')
  result = _run_without_namespaces(tmp_path, *launch, f'--workdir={workdir}',
                                   *SMALL_RUN)
  assert result.returncode == 2, result.stderr[-3000:]
  lines = result.stderr.strip().splitlines()
  assert len(lines) == 1, result.stderr  # One line: the cause and the fix.
  assert 'user.max_net_namespaces=0' in lines[0]
  assert '--allow_network_exposure' in lines[0]
  assert 'docs/security.md' in lines[0]
  assert not workdir.exists()  # Nothing started, nothing written.


def test_what_starts_no_server_needs_no_namespace(tmp_path):
  _check_no_namespaces_here()
  result = _run_without_namespaces(tmp_path, '--lp_launch_type=local_mp',
                                   *SMALL_RUN, '--print_config')
  assert result.returncode == 0, result.stderr[-3000:]
  assert json.loads(result.stdout)['num_actors'] == NUM_ACTORS


def _train_then_attack(program, workdir, tmp_path):
  """Waits until the program trains (every node has logged, the learner
  after updates), then attacks it from a second host: the report, and the
  ports tried."""
  program.wait_until(lambda: helpers.every_node_logged(workdir, NUM_ACTORS),
                     helpers.START_TIMEOUT, 'a log row of every node')
  report, ports = second_host.attack_processes(_program_pids(program),
                                               str(tmp_path / 'marker'))
  # Replay, counter, learner, coordinator, each actor and the evaluator.
  assert len(ports) >= 4 + NUM_ACTORS, ports
  return report, ports


def _attacked_run(launch, tmp_path, launch_type: str):
  """A run in a network of its own, launched as users launch it and
  attacked from a second host once it trains: no port of it connects, no
  Courier call reaches it, nothing runs; and it still trains after the
  attack. Returns the program and its workdir."""
  workdir = tmp_path / 'run'
  program = launch('run', helpers.program_command(
      'apex_dqn', f'--workdir={workdir}', *SMALL_RUN,
      launch_type=launch_type))
  report, ports = _train_then_attack(program, workdir, tmp_path)
  reached = [entry for entry in report['connected'] if entry[1] in ports]
  assert not reached, (report, ports)
  assert not report['courier'], report
  assert not report['ran'] and not (tmp_path / 'marker').exists()
  assert 'loopback only' in program.output()
  steps = helpers.last(workdir, 'learner', 'learner_steps')
  program.wait_until(
      lambda: helpers.last(workdir, 'learner', 'learner_steps') > steps,
      helpers.START_TIMEOUT, 'more learner updates after the attack')
  return program, workdir


@pytest.mark.slow  # A training run: make test checks the files' modes.
def test_a_local_mp_run_refuses_a_second_host_and_stops_on_request(
    tmp_path, launch):
  program, workdir = _attacked_run(launch, tmp_path, 'local_mp')
  # It stops from outside its network as users stop it: programs/stop.py,
  # from another terminal (or machine), leaves a request in the workdir; the
  # coordinator finds it there and stops the program in order, as Ctrl-C
  # does.
  result = helpers.run_script('stop', f'--workdir={workdir}',
                              '--reason=stopped by the test', timeout=300)
  assert result.returncode == 0, result.stdout[-3000:]
  assert 'The program is stopping: stopped by the test.' in result.stdout
  assert program.wait_exit(helpers.STOP_BOUND + 30, 'the stop request') == 0
  output = program.output()
  helpers.check_stopped_in_order(output, workdir)
  assert 'The program stopped: stopped by the test.' in output
  assert not program.alive()
  record = json.loads((workdir / 'stop.json').read_text())
  assert record == {**record, 'reason': 'stopped by the test',
                    'failed': False}
  assert not (workdir / 'stop_request.json').exists()  # Taken.
  helpers.check_private_files(workdir)
  # A stopped run is said to be so; a directory without a run is refused.
  result = helpers.run_script('stop', f'--workdir={workdir}', timeout=60)
  assert result.returncode == 0
  assert 'has already stopped: stopped by the test' in result.stdout
  assert not (workdir / 'stop_request.json').exists()
  result = helpers.run_script('stop', f'--workdir={tmp_path / "none"}',
                              timeout=60)
  assert result.returncode == 2
  assert 'is not a run directory' in result.stdout


@pytest.mark.slow
def test_a_local_mt_run_refuses_a_second_host_and_stops_on_ctrl_c(
    tmp_path, launch):
  program, workdir = _attacked_run(launch, tmp_path, 'local_mt')
  # Every node had logged before the attack; Ctrl-C stops the run.
  program.interrupt()
  helpers.check_every_node_logs(workdir, NUM_ACTORS)
  helpers.check_private_files(workdir)


@pytest.mark.slow
def test_an_exposed_program_runs_a_second_hosts_code(tmp_path, launch):
  # What every local run allowed before it had a network of its own, and
  # what --allow_network_exposure still allows: the control of the test
  # above, whose attack must be able to succeed.
  _check_no_namespaces_here()
  workdir = tmp_path / 'run'
  program = launch('run', _without_namespaces(helpers.program_command(
      'apex_dqn', f'--workdir={workdir}', *SMALL_RUN,
      '--allow_network_exposure', '--workdir_access=group')))
  report, ports = _train_then_attack(program, workdir, tmp_path)
  assert 'warning: --allow_network_exposure' in program.output()
  reached = {entry[1] for entry in report['connected'] if entry[1] in ports}
  assert reached == ports, (report, ports)
  assert report['courier'], report
  assert report['ran'] and (tmp_path / 'marker').exists()
  program.interrupt()
  helpers.check_private_files(workdir, 0o750, 0o640)  # Shared on purpose.
