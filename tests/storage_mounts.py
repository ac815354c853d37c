"""Cloud Storage mounts of an emulated Vertex AI job: one view per replica,
kept in step with a Cloud Storage emulator by Cloud Storage FUSE's rules
(`tests/vertex_emulator.py` says which are emulated and which not).
"""

import os
import shutil
from typing import Callable, Dict, Iterable, List, Optional, Set, Tuple

from launch.runs import storage


# How often the mount views and the bucket are brought in step (a round of
# `BucketMirror.sync`): a closed file reaches the bucket, and an object
# written to the bucket reaches every view, within about two rounds.
SYNC_SECONDS = 1.0


def open_for_writing(pids: Iterable[int], under: str) -> Set[str]:
  """The files under `under` that processes `pids` hold open for writing
  (from /proc/<pid>/fd and the access mode in /proc/<pid>/fdinfo)."""
  prefix = under.rstrip(os.sep) + os.sep
  found = set()
  for pid in pids:
    try:
      descriptors = os.listdir(f'/proc/{pid}/fd')
    except OSError:  # Gone, or not ours to read.
      continue
    for descriptor in descriptors:
      try:
        target = os.readlink(f'/proc/{pid}/fd/{descriptor}')
        if not target.startswith(prefix):
          continue
        with open(f'/proc/{pid}/fdinfo/{descriptor}') as f:
          flags = next(int(line.split()[1], 8) for line in f
                       if line.startswith('flags:'))
      except (OSError, StopIteration):  # Closed meanwhile.
        continue
      if flags & os.O_ACCMODE in (os.O_WRONLY, os.O_RDWR):
        found.add(target)
  return found


# A file's state: (inode, size, modification time in ns); None if missing.
State = Optional[Tuple[int, int, int]]


def _state(path: str) -> State:
  try:
    stat = os.stat(path)
  except FileNotFoundError:
    return None
  return stat.st_ino, stat.st_size, stat.st_mtime_ns


class MountView:
  """One replica's Cloud Storage mount (its /gcs): a directory of its own,
  `<storage_dir>/<replica>`. What the emulator knows of it:

  * `synced`: {object name: (generation, state)}: the bucket's object that
    the view's file last matched, and the file's state then;
  * `staged`: {object name: (copy, state)}: files seen closed (open for
    writing by none of the replica's processes) at the last look, copied
    as they were then; they go up once a later look finds the replica
    still running (a process that dies closes its files: a file seen
    closed just before its replica was killed may have been closed by the
    kill);
  * `closed`: the states (inode, size, modification time) of files whose
    close was so confirmed. A rename keeps a file's state: a closed file
    renamed is still closed.
  """

  def __init__(self, name: str, directory: str, bucket: str):
    self.name = name
    self.directory = directory
    self.root = os.path.join(directory, bucket)
    self.synced: Dict[str, Tuple[int, State]] = {}
    self.staged: Dict[str, Tuple[str, State]] = {}
    self.closed: Set[State] = set()

  def path(self, name: str) -> str:
    return os.path.join(self.root, *name.split('/'))

  def files(self, prefix: str) -> Dict[str, Tuple[str, State]]:
    """{object name: (path, state)} of every file under the workdir."""
    base = os.path.join(self.root, *prefix.split('/'))
    found = {}
    for directory, _, names in os.walk(base):
      for name in names:
        path = os.path.join(directory, name)
        state = _state(path)
        if state is not None:
          found['/'.join(os.path.relpath(path, self.root).split(os.sep))] = (
              path, state)
    return found

  def changed(self, name: str, state: State) -> bool:
    """Whether the file is not what the bucket had of it."""
    return self.synced.get(name, (None, None))[1] != state


class BucketMirror:
  """The Cloud Storage mounts of an emulated job whose workdir is on Cloud
  Storage: a view of the workdir's objects for each replica (`MountView`),
  kept in step with a Cloud Storage emulator by Cloud Storage FUSE's rules
  (see the module docstring).

  `processes(replica)` gives the process ids of a running replica, None
  once it has ended; `killed(replica)` whether it ended by SIGKILL (its
  machine lost).
  """

  def __init__(self, workdir: str, storage_dir: str, replicas: List[str],
               processes: Callable[[str], Optional[List[int]]],
               killed: Callable[[str], bool]):
    if not os.environ.get('STORAGE_EMULATOR_HOST'):
      raise ValueError(
          f'the job\'s workdir {workdir} is on Cloud Storage, which this '
          'emulator does not reach: start a Cloud Storage emulator here '
          '(`python -m gcp_storage_emulator start --port=9023`) and set '
          'STORAGE_EMULATOR_HOST=http://127.0.0.1:9023, or package the job '
          'with a local --workdir.')
    from google.cloud import storage as cloud_storage  # pylint: disable=g-import-not-at-top
    self._client = cloud_storage.Client()
    bucket, path = storage.bucket_and_name(workdir)
    self._bucket = self._client.bucket(bucket)
    self._prefix = path.rstrip('/') + '/' if path else ''
    # As /proc names the files a process holds: symbolic links resolved.
    storage_dir = os.path.realpath(storage_dir)
    self.views = [MountView(name, os.path.join(storage_dir, name), bucket)
                  for name in replicas]
    # Downloads and copies to upload, before they take their place.
    self._transfers = os.path.join(storage_dir, '.transfers')
    os.makedirs(self._transfers, exist_ok=True)
    self._copies = 0
    self._processes = processes
    self._killed = killed

  def _objects(self) -> Dict[str, int]:
    """{name: generation} of the workdir's objects."""
    return {blob.name: blob.generation for blob in
            self._client.list_blobs(self._bucket, prefix=self._prefix)}

  def _copy(self, path: str, state: State) -> Optional[str]:
    """A copy of the file as it is in `state`; None if it changed."""
    self._copies += 1
    copy = os.path.join(self._transfers, str(self._copies))
    try:
      shutil.copyfile(path, copy)
    except FileNotFoundError:
      return None
    if _state(path) != state:  # Written to meanwhile: a later round.
      os.remove(copy)
      return None
    return copy

  def _send(self, view: MountView, name: str, copy: str, state: State):
    """Uploads a copy of the view's file `name` as it was in `state`."""
    blob = self._bucket.blob(name)
    blob.upload_from_filename(copy)
    os.remove(copy)
    view.synced[name] = (blob.generation, state)
    view.closed.add(state)

  def _delete(self, view: MountView, name: str, objects: Dict[str, int]):
    """The view removed (or renamed) its file: so goes the object, unless
    the bucket has a newer one than the view had."""
    generation, _ = view.synced.pop(name)
    if objects.get(name) == generation:
      self._bucket.blob(name).delete()
      del objects[name]

  def _push(self, view: MountView, objects: Dict[str, int], final: bool):
    files = view.files(self._prefix)
    staged, view.staged = view.staged, {}
    if final:
      # The replica has ended: every file it closed (all, unless its
      # machine was lost) goes up; what was seen closed at the last look
      # is not confirmed.
      for copy, _ in staged.values():
        os.remove(copy)
      closed = (view.closed if self._killed(view.name) else
                {state for _, state in files.values()})
      for name, (path, state) in sorted(files.items()):
        if state in closed and view.changed(name, state):
          copy = self._copy(path, state)
          if copy:
            self._send(view, name, copy, state)
    else:
      pids = self._processes(view.name)
      if pids is None:  # Ended: what it left is settled at the job's end.
        view.staged = staged
        return
      for name, (copy, state) in sorted(staged.items()):
        self._send(view, name, copy, state)  # Confirmed: it still runs.
      held = open_for_writing(pids, view.root)
      for name, (path, state) in sorted(files.items()):
        if not view.changed(name, state) or (
            path in held and state not in view.closed):
          continue
        copy = self._copy(path, state)
        if copy is None:
          continue
        if state in view.closed:  # A closed file renamed.
          self._send(view, name, copy, state)
        else:
          view.staged[name] = (copy, state)
      view.closed &= {state for _, state in files.values()}
    for name in set(view.synced) - set(files):
      self._delete(view, name, objects)

  def _download(self, name: str, generation: int,
                downloaded: Dict[Tuple[str, int], str]) -> str:
    """The object's bytes in a file of their own, once per generation."""
    if (name, generation) not in downloaded:
      path = os.path.join(self._transfers, f'download-{len(downloaded)}')
      self._bucket.blob(name, generation=generation).download_to_filename(
          path)
      downloaded[name, generation] = path
    return downloaded[name, generation]

  def _pull(self, view: MountView, objects: Dict[str, int],
            downloaded: Dict[Tuple[str, int], str]):
    pids = self._processes(view.name)
    if pids is None:  # Ended: no one reads its view any more.
      return
    held = open_for_writing(pids, view.root)
    for name, generation in sorted(objects.items()):
      synced_generation, synced_state = view.synced.get(name, (None, None))
      if synced_generation == generation:
        continue
      path = view.path(name)
      state = _state(path)
      if (state is not None and state != synced_state) or path in held:
        continue  # The view's own change, not uploaded yet: it wins.
      os.makedirs(os.path.dirname(path), exist_ok=True)
      copy = os.path.join(self._transfers, 'into-view')
      shutil.copyfile(self._download(name, generation, downloaded), copy)
      # Removed, then renamed into place: ext4 writes a file renamed over
      # another out to disk first, milliseconds a copy. No replica reads
      # another's files while they change, so none sees the moment
      # between.
      if state is not None:
        os.remove(path)
      os.rename(copy, path)
      view.synced[name] = (generation, _state(path))
    for name in set(view.synced) - set(objects):
      _, synced_state = view.synced.pop(name)
      path = view.path(name)
      if _state(path) == synced_state and path not in held:
        os.remove(path)  # Deleted in the bucket, and unchanged here.

  def sync(self, final: bool = False) -> int:
    """A round: each view's closed new or changed files uploaded and its
    removed ones deleted, then every change in the bucket copied into each
    view. With `final` (the job has ended), uploads what each replica left
    instead, and copies nothing. Returns how many objects were written or
    deleted."""
    objects = self._objects()
    before = dict(objects)
    for view in self.views:
      self._push(view, objects, final)
    written = self._objects()
    changed = sum(before.get(name) != written.get(name)
                  for name in set(before) | set(written))
    if not final:
      downloaded: Dict[Tuple[str, int], str] = {}
      try:
        for view in self.views:
          self._pull(view, written, downloaded)
      finally:
        for path in downloaded.values():
          os.remove(path)
    return changed
