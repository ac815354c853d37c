"""What a second host can do to a program of this machine: run inside the
test's second-host network namespace (`tests/second_host.py`), it tries a
TCP connection to every port given, at each of the machine's addresses, and
sends each a hostile Courier call: an argument whose `__reduce__` asks the
server to run `touch <marker>` (Courier's deserializer calls what the
caller names). Prints one line, `ATTACK <json>`:

  connected  [[address, port], ...] that accepted a TCP connection
  courier    [[address, port, [method, ...]], ...] that answered as Courier
  ran        whether the marker file exists afterwards

  python tests/attack_probe.py --addresses=198.18.1.1,fd00::1 \
      --ports=4321,4322 --marker=<file>

Standard library and Courier only: nothing of the project.
"""

import argparse
import json
import os
import socket
import threading

CONNECT_SECONDS = 3.0
CALL_SECONDS = 10.0


class Hostile:
  """An argument that the server rebuilds by running a command."""

  def __init__(self, marker: str):
    self._marker = marker

  def __reduce__(self):
    return (os.system, (f'touch {self._marker}',))


def _target(address: str, port: int) -> str:
  return f'[{address}]:{port}' if ':' in address else f'{address}:{port}'


def _connects(address: str, port: int) -> bool:
  try:
    with socket.create_connection((address, port), CONNECT_SECONDS):
      return True
  except OSError:
    return False


def _list_methods(client):
  """The methods the server lists, or None: in a thread of its own, since
  Courier's ListMethods waits for a server that is not there, whatever the
  client's timeout."""
  from courier.python import client as courier_client  # pylint: disable=g-import-not-at-top
  found = []

  def ask():
    try:
      found.append(list(courier_client.list_methods(client)))
    except Exception:  # pylint: disable=broad-except
      pass

  thread = threading.Thread(target=ask, daemon=True)
  thread.start()
  thread.join(CALL_SECONDS)
  return found[0] if found else None


def _courier(address: str, port: int, marker: str, connected: bool):
  """Sends the server at address:port the hostile call (to each method it
  lists, if it lists any); returns those methods, or None if no Courier
  server answered."""
  from courier.python import client as courier_client  # pylint: disable=g-import-not-at-top
  client = courier_client.Client(_target(address, port),
                                 call_timeout=CALL_SECONDS,
                                 wait_for_ready=False)
  methods = _list_methods(client) if connected else None
  try:
    getattr(client, _harmless(methods))(Hostile(marker))
  except Exception:  # pylint: disable=broad-except
    pass  # The call fails once the argument is rebuilt; that is enough.
  return methods


def _harmless(methods):
  """A method to send the hostile argument to: the server rebuilds the
  arguments only of a method it has, and one that stops the program or runs
  a node's loop would end the attack on the other ports."""
  if not methods or 'ping' in methods:
    return 'ping'  # Every node of the program answers heartbeats.
  return next((method for method in methods
               if method not in ('run', 'request_stop', 'stop')), methods[0])


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument('--addresses', required=True)
  parser.add_argument('--ports', required=True)
  parser.add_argument('--marker', required=True)
  args = parser.parse_args()
  addresses = args.addresses.split(',')
  ports = [int(port) for port in args.ports.split(',') if port]
  # Every connection first: a hostile call may end what it reaches.
  connected = [[address, port] for address in addresses for port in ports
               if _connects(address, port)]
  courier = []
  for address in addresses:
    for port in ports:
      methods = _courier(address, port, args.marker,
                         [address, port] in connected)
      if methods is not None:
        courier.append([address, port, methods])
  # A server that rebuilt the argument ran the command before it answered.
  print('ATTACK ' + json.dumps({'connected': connected, 'courier': courier,
                                'ran': os.path.exists(args.marker)}),
        flush=True)


if __name__ == '__main__':
  main()
