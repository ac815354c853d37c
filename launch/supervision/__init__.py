"""Supervision: what keeps a program running, heals it, and stops it.

  launcher.py       launching the program, Ctrl-C, the exit status
  coordinator.py    the stop policy: when the program stops, and in which order
  heartbeat.py      liveness over the program's RPC: the coordinator's heartbeats
  keeper.py         each node's keeper (local_mp, and each Vertex AI replica
                    but the primary), which starts it again in place when it
                    dies (standard library only, and `launch.runs.faults`)
  program_stop.py   a node's loop under Launchpad's stop: ends by itself,
                    interrupted only when stuck
  platforms.py      where the nodes run, and what their processes need there
  local.py          this machine's processes (local_mp): pid files, node
                    watching, the stop watchdog, the supervised replay server
  stop_watchdog.py  the watchdog process itself (standard library only)

It may import the core (`launch.options`, `launch.node_groups`), the run
records (`launch.runs`), the machine (`launch.machine`), the console (the
launcher shows the status, a local node's output goes to its log) and the
cloud (the launcher submits a Vertex AI job).
"""
