"""A second host on this machine's network, for tests that try a program's
ports as another host would.

The host is a network namespace of the test's own (held open by a `sleep`
process), linked to this machine's network namespace by a veth pair with
addresses from the benchmarking ranges, 198.18.<n>.0/30 and fd00:a9e:<n>::/64:
traffic between the two never leaves the machine. Making the link needs
CAP_NET_ADMIN in this machine's network namespace (root); `open_second_host`
skips the test, saying so, where the test has it not.

`listening_ports` finds every TCP port that the given processes listen on,
from /proc (what `ss -ltnp` shows); `attack_processes` runs
`tests/attack_probe.py` on a second host against them.
"""

import json
import os
import socket
import subprocess
import sys
import threading
import time
from typing import Dict, Iterable, List, Set, Tuple

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROBE = os.path.join(ROOT, 'tests', 'attack_probe.py')
_LISTEN = '0A'  # TCP_LISTEN in /proc/net/tcp's `st` column.


def _ip(*args: str, netns_pid: int = 0):
  command = ['ip', *args]
  if netns_pid:
    command = ['nsenter', f'--net=/proc/{netns_pid}/ns/net', *command]
  subprocess.run(command, check=True, capture_output=True, text=True)


class SecondHost:
  """A network namespace linked to this machine's by a veth pair."""

  def __init__(self):
    n = os.getpid() % 250 + 1
    while os.path.exists(f'/sys/class/net/apexm{n}'):
      n = n % 250 + 1
    self._link = f'apexm{n}'
    self.machine_ipv4 = f'198.18.{n}.1'
    self.machine_ipv6 = f'fd00:a9e:{n}::1'
    self._holder = subprocess.Popen(  # pylint: disable=consider-using-with
        ['unshare', '--net', 'sleep', 'infinity'])
    own = os.readlink('/proc/self/ns/net')
    deadline = time.monotonic() + 30
    while os.readlink(f'/proc/{self._holder.pid}/ns/net') == own:
      if self._holder.poll() is not None or time.monotonic() > deadline:
        raise OSError('unshare --net did not make a namespace')
      time.sleep(0.05)
    try:
      pid = self._holder.pid
      peer = f'apexb{n}'
      _ip('link', 'add', self._link, 'type', 'veth', 'peer', 'name', peer,
          'netns', str(pid))
      _ip('addr', 'add', f'{self.machine_ipv4}/30', 'dev', self._link)
      _ip('-6', 'addr', 'add', f'{self.machine_ipv6}/64', 'dev', self._link,
          'nodad')
      _ip('link', 'set', self._link, 'up')
      _ip('addr', 'add', f'198.18.{n}.2/30', 'dev', peer, netns_pid=pid)
      _ip('-6', 'addr', 'add', f'fd00:a9e:{n}::2/64', 'dev', peer, 'nodad',
          netns_pid=pid)
      _ip('link', 'set', peer, 'up', netns_pid=pid)
      _ip('link', 'set', 'lo', 'up', netns_pid=pid)
    except BaseException:
      self.close()
      raise

  @property
  def machine_addresses(self) -> List[str]:
    return [self.machine_ipv4, self.machine_ipv6]

  def attack(self, ports: Iterable[int], marker: str) -> Dict:
    """Runs the attack probe on this host against `ports` at the machine's
    addresses; its report (`tests/attack_probe.py`)."""
    command = ['nsenter', f'--net=/proc/{self._holder.pid}/ns/net',
               sys.executable, PROBE,
               f'--addresses={",".join(self.machine_addresses)}',
               f'--ports={",".join(str(port) for port in sorted(ports))}',
               f'--marker={marker}']
    result = subprocess.run(command, capture_output=True, text=True,
                            timeout=600, cwd=ROOT, check=False)
    for line in result.stdout.splitlines():
      if line.startswith('ATTACK '):
        return json.loads(line[len('ATTACK '):])
    raise AssertionError(f'the attack probe printed no report:\n'
                         f'{result.stdout[-3000:]}\n{result.stderr[-3000:]}')

  def close(self):
    self._holder.kill()
    self._holder.wait()
    # The veth pair ends with the namespace of its peer; in case it has not:
    subprocess.run(['ip', 'link', 'del', self._link], capture_output=True,
                   check=False)


def open_second_host() -> SecondHost:
  """A second host, or the test skipped with the reason."""
  try:
    return SecondHost()
  except (OSError, subprocess.CalledProcessError) as error:
    detail = getattr(error, 'stderr', '') or error
    pytest.skip(f'cannot link a second host to this machine\'s network '
                f'(needs root, or CAP_NET_ADMIN, and iproute2): {detail}')


def _socket_inodes(pid: int) -> Set[int]:
  inodes = set()
  try:
    names = os.listdir(f'/proc/{pid}/fd')
  except OSError:
    return inodes
  for name in names:
    try:
      target = os.readlink(f'/proc/{pid}/fd/{name}')
    except OSError:
      continue
    if target.startswith('socket:['):
      inodes.add(int(target[len('socket:['):-1]))
  return inodes


def listening_ports(pids: Iterable[int]) -> Set[int]:
  """Every TCP port (IPv4 or IPv6) on which one of the processes `pids`
  listens, in whichever network namespace each is."""
  ports = set()
  for pid in pids:
    inodes = _socket_inodes(pid)
    for table in ('tcp', 'tcp6'):
      try:
        with open(f'/proc/{pid}/net/{table}') as f:
          rows = f.read().splitlines()[1:]
      except OSError:
        continue
      for row in rows:
        fields = row.split()
        if fields[3] == _LISTEN and int(fields[9]) in inodes:
          ports.add(int(fields[1].rsplit(':', 1)[1], 16))
  return ports


class Listener:
  """A TCP server of the test itself on every interface of this machine:
  what the second host must reach, for its failures elsewhere to mean
  anything. It closes each connection it accepts: a Courier call to it then
  fails at once instead of waiting out its timeout."""

  def __init__(self):
    self._socket = socket.create_server(('::', 0), family=socket.AF_INET6,
                                        dualstack_ipv6=True)
    self.port = self._socket.getsockname()[1]
    threading.Thread(target=self._close_each, daemon=True).start()

  def _close_each(self):
    while True:
      try:
        connection, _ = self._socket.accept()
      except OSError:  # Closed.
        return
      connection.close()

  def close(self):
    self._socket.shutdown(socket.SHUT_RDWR)  # Ends the wait in accept().
    self._socket.close()


def attack_processes(pids: Iterable[int], marker: str
                     ) -> Tuple[Dict, Set[int]]:
  """Every port that the processes `pids` listen on, and the report of a
  second host's attack on them (`SecondHost.attack`), checked to have
  reached a listener of the test's own at each of the machine's addresses
  (else its failures would prove nothing). Skips the test where no second
  host can be made."""
  ports = listening_ports(pids)
  host = open_second_host()
  listener = Listener()
  try:
    report = host.attack(ports | {listener.port}, marker)
  finally:
    listener.close()
    host.close()
  for address in host.machine_addresses:
    assert [address, listener.port] in report['connected'], report
  return report, ports
