"""A Courier server with the nodes' `ping` (and a count of the pings it
served), in a process of its own, for tests/test_heartbeat.py.

  python -m tests.heartbeat_server [port]   # prints its port, then serves
"""

import sys
import time

import portpicker
from launchpad.nodes.courier import courier_utils


class Pinged:

  def __init__(self):
    self.pings = 0

  def ping(self) -> bool:
    self.pings += 1
    return True

  def count(self) -> int:
    return self.pings


def main():
  port = int(sys.argv[1]) if len(sys.argv) > 1 else (
      portpicker.pick_unused_port())
  server = courier_utils.make_courier_server(Pinged(), port=port)
  server.Start()
  print(port, flush=True)
  while True:
    time.sleep(60)


if __name__ == '__main__':
  main()
