"""The launch package: it turns an agent's builder (`agents.builders`) into a
Launchpad program, launches it here or on Google Cloud, and keeps its run's
records. It imports the agents; the agents import nothing of it.

  program.py       the program graph: which nodes, wired how
  node_groups.py   the node groups, each declared once (order, size, labels,
                   watch, heartbeat, stop, keeper, machine)
  nodes.py         what every program's nodes are made of (the stop, the
                   learner's and the actors' loops), and the evaluator
  replay_nodes.py  the nodes of a program with replay: replay, learner,
                   actors
  worker_nodes.py  the nodes of a program of workers: the shared
                   parameters, the workers
  variable_cache.py the variable cachers between the learner and the actors
  coordinator.py   the stop policy: when the program stops, and in which order
  program_stop.py  a node's loop under Launchpad's stop: ends by itself,
                   interrupted only when stuck
  heartbeat.py     liveness over the program's RPC: the coordinator's heartbeats
  platforms.py     where the nodes run, and what their processes need there
  local.py         this machine's processes (local_mp): pid files, node
                   watching, the stop watchdog, the supervised replay server
  stop_watchdog.py the watchdog process itself (standard library only)
  keeper.py        each node's keeper (local_mp, and each Vertex AI
                   replica), which starts it again in place when it dies,
                   and the faults' records (standard library only)
  options.py       the run options (`RunOptions`), one flag each
  command_line.py  flags, presets and resuming; the program built before
                   anything starts
  launcher.py      launching, Ctrl-C, the exit status
  node_output.py, status.py, terminal.py
                   the nodes' output, the live status, the terminal
  entry.py         what every program of programs/ is: an agent behind one main
  private_network.py a local launch's own network namespace (loopback only),
                   made before anything starts
  restore.py       a trained policy read back from a run
  runs/            a run's records and files: storage (local or Cloud
                   Storage), the run manifest, checkpoints and loggers
  cloud/           launching on Google Cloud (Vertex AI), one module per
                   role (its __init__ says which)
"""

import os

# TensorFlow's switch for its oneDNN CPU kernels, read once as it starts.
ONEDNN = 'TF_ENABLE_ONEDNN_OPTS'


def onednn_setting() -> str:
  """The value of `TF_ENABLE_ONEDNN_OPTS` for the nodes: this process's
  own, or '1' (on: see `use_onednn`)."""
  return os.environ.get(ONEDNN, '1')


def use_onednn():
  """Turns on TensorFlow's oneDNN CPU kernels for the processes started
  from now on (and for this one, if TensorFlow has not started yet), unless
  `TF_ENABLE_ONEDNN_OPTS` is set already.

  TensorFlow 2.8 leaves them off on Linux (2.9 turned them on by default).
  On 2 CPU cores the atari_small learner update (batch 64) runs 1.5 times
  as fast with them, an actor's forward pass and environment steps 1.01 to
  1.04 times (`benchmarks/results/onednn.json`, docs/performance.md). The
  launcher calls this just before it starts a local_mp program's nodes, not
  at import: TensorFlow announces oneDNN on stderr as it starts, and a
  launcher's own stderr is for its errors.
  """
  os.environ[ONEDNN] = onednn_setting()
