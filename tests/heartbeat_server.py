"""A Courier server with the nodes' `ping` (and a count of the pings it
served), in a process of its own, for tests/test_heartbeat.py.

  python -m tests.heartbeat_server [port]   # prints its port, then serves
  python -m tests.heartbeat_server --held [port]  # set up, prints "held" and
      # serves once a line comes on its standard input (a node that starts
      # at once)
"""

import os
import sys
import time

import portpicker
from launchpad.nodes.courier import courier_utils


class Pinged:

  def __init__(self):
    self.pings = 0

  def ping(self) -> dict:
    """As a node's (launch.supervision.heartbeat): which process answers, and how many
    pings it has served."""
    self.pings += 1
    return {'pid': os.getpid(), 'pings': self.pings}

  def count(self) -> int:
    return self.pings


def main():
  ports = [argument for argument in sys.argv[1:] if argument != '--held']
  port = int(ports[0]) if ports else portpicker.pick_unused_port()
  server = courier_utils.make_courier_server(Pinged(), port=port)
  if '--held' in sys.argv:
    print('held', flush=True)
    sys.stdin.readline()
  server.Start()
  print(port, flush=True)
  while True:
    time.sleep(60)


if __name__ == '__main__':
  main()
