"""The launch package: it turns an agent's builder (`agents.builders`) into a
Launchpad program, launches it here or on Google Cloud, and keeps its run's
records. It imports the agents; the agents import nothing of it.

Its top level is the core, the counterpart of Acme's
`make_distributed_experiment`: which nodes a program has and how they are
wired, and what they are made of.

  program.py        the program graph: which nodes, wired how
  node_groups.py    the node groups, each declared once (order, size, labels,
                    watch, heartbeat, stop, keeper, machine)
  nodes.py          what every program's nodes are made of (the stop, the
                    learner's and the actors' loops), and the evaluator
  replay_nodes.py   the nodes of a program with replay: replay, learner,
                    actors
  worker_nodes.py   the nodes of a program of workers: the shared
                    parameters, the workers
  variable_cache.py the variable cachers between the learner and the actors
  options.py        the run options (`RunOptions`, and the values of the
                    environment suites' own), one flag each
  entry.py          what every program of programs/ is: an agent behind one
                    main

Its rooms, each a package whose docstring says what it holds and what it
may import:

  supervision/      keeping the program running, healing it, stopping it
  console/          the command line, the live status, the terminal
  machine/          what a local launch takes of this machine: its own
                    network, its cores
  offline/          a trained policy read back and evaluated
  runs/             a run's records and files: storage (local or Cloud
                    Storage), the run manifest, fault records, checkpoints
                    and loggers
  cloud/            launching on Google Cloud (Vertex AI), one module per
                    role
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
