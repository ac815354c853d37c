"""A run's records and files:

  storage.py        a workdir on this machine or on Cloud Storage (gs://)
  run_manifest.py   run.json, stop.json, the stop request
  faults.py         the fault records, <workdir>/faults/<writer>.jsonl
  checkpointing.py  checkpoints, the checkpointed counter
  loggers.py        a node's rows: its output (with progress and ETA), CSV,
                    TensorBoard
  curves.py         a run's learning curves and speeds, from its CSV logs

It imports nothing else of `launch`: every other room may read a run's
records.
"""
