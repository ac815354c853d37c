"""The distributed programs, one file per role; it knows no agent:

  interfaces.py    what the launch layer needs of a builder: a builder of a
                   program with replay, or of workers
  program.py       the program graph: which nodes, wired how
  nodes.py         what every program's nodes are made of (the stop, the
                   learner's and the actors' loops), and the evaluator
  replay_nodes.py  the nodes of a program with replay: replay, learner,
                   actors
  coordinator.py   the stop policy: when the program stops, and in which order
  program_stop.py  a node's loop under Launchpad's stop: ends by itself,
                   interrupted only when stuck
  heartbeat.py     liveness over the program's RPC: the coordinator's heartbeats
  platforms.py     where the nodes run, and what their processes need there
  local.py         this machine's processes (local_mp): pid files, node
                   watching, the stop watchdog, the supervised replay server
  stop_watchdog.py the watchdog process itself (standard library only)
  options.py       the run options (`RunOptions`), one flag each
  command_line.py  flags, presets and resuming; the program built before
                   anything starts
  launcher.py      launching, Ctrl-C, the exit status
  entry.py         what every program of programs/ is: an agent behind one main
  private_network.py a local launch's own network namespace (loopback only),
                   made before anything starts
  cloud/           launching on Google Cloud (Vertex AI), one module per
                   role (its __init__ says which)
"""
