"""A node goes on only once its stop watchdog is watching.

The watchdog times its grace period from when it reads the stop signal; one
whose interpreter is still starting when the stop comes (seconds, on a
loaded machine) would kill the node after Launchpad's own notice ran out.
Here the watchdog's interpreter is started through a wrapper that first
sleeps, as a slow start; the node must not return from
`install_stop_watchdog` before the wrapper has gone on to start it.
"""

import os
import subprocess
import sys
import textwrap

import helpers

_NODE = textwrap.dedent('''
    import os, signal, sys
    from launch.supervision import local
    from tests import stop_probe
    signal.signal(signal.SIGTERM, lambda *_: None)
    sys.executable = sys.argv[1]
    local.install_stop_watchdog()
    print('watchdog started first:', os.path.exists(sys.argv[2]), flush=True)
    os.kill(os.getpid(), signal.SIGTERM)
    stop_probe._hold_the_gil_forever()  # Until the watchdog kills it.
''')


def test_a_node_waits_for_its_slow_starting_watchdog(tmp_path):
  started = tmp_path / 'started'
  wrapper = tmp_path / 'slow_python'
  wrapper.write_text(f'#!/bin/sh\nsleep 2\ntouch {started}\n'
                     f'exec {sys.executable} "$@"\n')
  wrapper.chmod(0o755)
  result = subprocess.run(
      [sys.executable, '-c', _NODE, str(wrapper), str(started)],
      cwd=helpers.ROOT, capture_output=True, text=True, timeout=60,
      env=dict(os.environ, PYTHONPATH=helpers.ROOT))
  assert 'watchdog started first: True' in result.stdout, (
      result.stdout + result.stderr[-3000:])
  # Then the watchdog, not a test timeout, ended the node stuck at its stop.
  assert 'still runs 5 s after the stop request' in result.stderr, (
      result.stderr[-3000:])
  assert result.returncode == -9
