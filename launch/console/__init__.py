"""The console: what a user types and sees.

  command_line.py  flags, presets and resuming; the program built before
                   anything starts
  status.py        the run's status, read from the nodes' logs and replay
  terminal.py      the status redrawn in place (Rich), or a plain line
  node_output.py   a local run's node output: a log per node in the workdir,
                   warnings and errors to the terminal

It may import the core (it builds the program), the run records
(`launch.runs`), the machine (`launch.machine`) and the cloud's plan
(`launch.cloud`).
"""
