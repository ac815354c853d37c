"""A run's fault records: `<workdir>/faults/<writer>.jsonl`, one file per
writer (a node's keeper, the coordinator, the launches), one JSON object a
line. Cloud Storage replaces an object whole, so two replicas appending to
one file would lose lines.

Written by the keepers (`launch.supervision.keeper`) and the coordinator; read by the
coordinator, the terminal's status, the run's manifest and the results'
chaos page. Standard library only: a keeper imports it.
"""

import json
import os
import time
from typing import Dict, List

FAULTS = 'faults'  # <workdir>/faults/<writer>.jsonl
# Where runs of before kept every writer's records (still read).
ONE_FILE = 'faults.jsonl'


def append_fault(workdir: str, record: Dict, writer: str):
  """Appends one line to `<workdir>/faults/<writer>.jsonl` (one write of a
  whole line, appended: the lines of two processes of one writer never
  interleave)."""
  line = json.dumps({'time': round(time.time(), 6), **record}) + '\n'
  directory = os.path.join(workdir, FAULTS)
  os.makedirs(directory, exist_ok=True)
  fd = os.open(os.path.join(directory, f'{writer}.jsonl'),
               os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
  try:
    os.write(fd, line.encode())
  finally:
    os.close(fd)


def _records(path: str) -> List[Dict]:
  try:
    with open(path) as f:
      lines = f.read().splitlines()
  except (FileNotFoundError, NotADirectoryError):
    return []
  records = []
  for line in lines:
    try:
      records.append(json.loads(line))
    except ValueError:  # A last line cut short by a crash.
      continue
  return records


def read_faults(workdir: str) -> List[Dict]:
  """Every writer's records in `<workdir>/faults/` (and an earlier run's
  `faults.jsonl`), oldest first ([] without)."""
  records = _records(os.path.join(workdir, ONE_FILE))
  directory = os.path.join(workdir, FAULTS)
  try:
    names = sorted(os.listdir(directory))
  except (FileNotFoundError, NotADirectoryError):
    names = []
  for name in names:
    if name.endswith('.jsonl'):
      records.extend(_records(os.path.join(directory, name)))
  return sorted(records, key=lambda record: record.get('time', 0))


def this_launch(records: List[Dict]) -> List[Dict]:
  """The records since the last launch's (`launched`)."""
  starts = [index for index, record in enumerate(records)
            if record.get('event') == 'launch']
  return records[starts[-1] + 1:] if starts else records


LAUNCHES = 'launch'  # <workdir>/faults/launch.jsonl


def launched(workdir: str):
  """Records a launch of the run under keepers (the faults' records hold
  every launch's)."""
  append_fault(workdir, {'event': 'launch'}, LAUNCHES)


def restart_counts(records: List[Dict]) -> Dict[str, int]:
  """{node: the times it was started again} in `records`: by its keeper
  after a fault, and by the platform with a keeper of its own (a keeper's
  start after the first: Vertex AI restarting the node's replica)."""
  restarted, started = {}, set()
  for record in records:
    node = record.get('node')
    if record.get('event') == 'start':
      if node in started:
        restarted[node] = restarted.get(node, 0) + 1
      started.add(node)
    elif record.get('event') == 'fault' and not record.get('gave_up'):
      restarted[node] = restarted.get(node, 0) + 1
  return restarted


def restarts_by_node(workdir: str) -> Dict[str, int]:
  """{node: the times it was started again} in this launch."""
  return restart_counts(this_launch(read_faults(workdir)))
