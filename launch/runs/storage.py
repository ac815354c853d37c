"""A run's directory wherever it is: on this machine, or on Cloud Storage.

A `--workdir` is either a local directory or `gs://<bucket>/<path>`. Two
parties reach it, in two ways:

* the launcher (on your machine) reads and writes the run's records,
  `run.json`, the stop record and the stop request, with the functions
  here: the file system for a local directory, the Cloud Storage JSON API
  (`google-cloud-storage`, from `make cloud-deps`) for `gs://`;
* the nodes write everything else (logs, TensorBoard, checkpoints, policy
  snapshots, the stop record) as files, with the same code for both: on
  Vertex AI every replica sees each bucket as a directory, /gcs/<bucket>
  (Cloud Storage FUSE), and `node_path` names the files there.

Cloud Storage has objects, not directories: a "directory" here is a name
prefix, and writing an object replaces it whole, so a reader never sees
half of one. The Cloud Storage client honours STORAGE_EMULATOR_HOST (a
local storage emulator, as the tests use).

Standard library only until a `gs://` path is used, so that tools reading
local runs (plot.py) need nothing else.
"""

import os
from typing import Optional

CLOUD = 'gs://'
# Where the replicas of a Vertex AI job see Cloud Storage: gs://<bucket>/<path>
# is the file /gcs/<bucket>/<path> there. This variable moves that mount
# (the Vertex AI emulator sets it to a directory of its own).
MOUNT_VARIABLE = 'APEX_CLOUD_STORAGE_MOUNT'
VERTEX_AI_MOUNT = '/gcs'
CLOUD_SETUP = ('run `gcloud auth application-default login` (and `make '
               'cloud-deps`), or see "On Google Cloud" in '
               'docs/google_cloud.md')


class Unreachable(ValueError):
  """Cloud Storage cannot be reached: no credentials, or no connection."""


def is_cloud(path: Optional[str]) -> bool:
  return bool(path) and path.startswith(CLOUD)


def join(path: str, *names: str) -> str:
  if is_cloud(path):
    return '/'.join([path.rstrip('/'), *names])
  return os.path.join(path, *names)


def node_path(path: str) -> str:
  """The file path under which a node reads and writes `path`: a local path
  as it is; gs://<bucket>/<path> under the replica's Cloud Storage mount."""
  if not is_cloud(path):
    return path
  mount = os.environ.get(MOUNT_VARIABLE, VERTEX_AI_MOUNT)
  return os.path.join(mount, path[len(CLOUD):])


def bucket_and_name(path: str):
  """gs://<bucket>/<name> as (bucket, name)."""
  bucket, _, name = path[len(CLOUD):].partition('/')
  if not bucket:
    raise ValueError(f'{path} names no bucket; give gs://<bucket>/<path>.')
  return bucket, name


_CLIENTS = {}  # STORAGE_EMULATOR_HOST (None: Cloud Storage): its client.


def _client():
  """The Cloud Storage client (one per process and endpoint); ValueError
  naming the set-up when it cannot be made."""
  endpoint = os.environ.get('STORAGE_EMULATOR_HOST')
  if endpoint not in _CLIENTS:
    try:
      from google.auth import exceptions as auth_exceptions  # pylint: disable=g-import-not-at-top
      from google.cloud import storage as cloud_storage  # pylint: disable=g-import-not-at-top
    except ImportError as error:
      raise ValueError(f'a gs:// --workdir needs the Cloud Storage client '
                       f'({error}); run `make cloud-deps`.') from error
    try:
      _CLIENTS[endpoint] = cloud_storage.Client()
    except auth_exceptions.GoogleAuthError as error:
      raise Unreachable(f'Cloud Storage cannot be reached without Google '
                        f'Cloud credentials ({error}); {CLOUD_SETUP}.'
                        ) from error
  return _CLIENTS[endpoint]


def _cloud_call(path: str, call):
  """Runs `call(bucket)`, turning Cloud Storage's refusals into ValueErrors
  that name the path and what to do."""
  from google.api_core import exceptions as api_exceptions  # pylint: disable=g-import-not-at-top
  from google.auth import exceptions as auth_exceptions  # pylint: disable=g-import-not-at-top
  import requests  # pylint: disable=g-import-not-at-top
  bucket_name, _ = bucket_and_name(path)
  bucket = _client().bucket(bucket_name)
  try:
    return call(bucket)
  except api_exceptions.NotFound as error:
    raise ValueError(f'{path}: the bucket gs://{bucket_name} does not exist '
                     f'({error.message}); create it (`gsutil mb '
                     f'gs://{bucket_name}`) or choose another --workdir.'
                     ) from error
  except api_exceptions.Forbidden as error:
    raise ValueError(f'{path}: Cloud Storage refused access '
                     f'({error.message}); give your account access to '
                     f'gs://{bucket_name} or choose another --workdir.'
                     ) from error
  except auth_exceptions.GoogleAuthError as error:
    raise Unreachable(f'{path}: Google Cloud credentials failed ({error}); '
                      f'{CLOUD_SETUP}.') from error
  except requests.exceptions.ConnectionError as error:
    raise Unreachable(f'{path}: Cloud Storage could not be reached '
                      f'({error}); check the network (or '
                      'STORAGE_EMULATOR_HOST, if you use an emulator).'
                      ) from error


def read_text(path: str) -> Optional[str]:
  """The file's text, or None if there is no such file."""
  if not is_cloud(path):
    try:
      with open(path, encoding='utf-8') as f:
        return f.read()
    except FileNotFoundError:
      return None
  _, name = bucket_and_name(path)

  def read(bucket):
    from google.api_core import exceptions as api_exceptions  # pylint: disable=g-import-not-at-top
    try:
      return bucket.blob(name).download_as_bytes().decode()
    except api_exceptions.NotFound:
      if bucket.exists():
        return None  # No such object; a missing bucket is an error.
      raise
  return _cloud_call(path, read)


def write_text(path: str, text: str):
  """Writes the file whole or not at all: a reader never sees half of it."""
  if not is_cloud(path):
    os.makedirs(os.path.dirname(path) or '.', exist_ok=True)
    temporary = f'{path}.tmp'
    with open(temporary, 'w', encoding='utf-8') as f:
      f.write(text)
    os.replace(temporary, path)
    return
  _, name = bucket_and_name(path)
  _cloud_call(path, lambda bucket: bucket.blob(name).upload_from_string(
      text, content_type='application/json'))


def remove(path: str):
  """Removes the file if it is there."""
  if not is_cloud(path):
    try:
      os.remove(path)
    except FileNotFoundError:
      pass
    return
  _, name = bucket_and_name(path)

  def delete(bucket):
    blob = bucket.blob(name)
    if blob.exists():
      blob.delete()
  _cloud_call(path, delete)


def exists(path: str) -> bool:
  """Whether the file is there."""
  if not is_cloud(path):
    return os.path.lexists(path)
  _, name = bucket_and_name(path)
  return _cloud_call(path, lambda bucket: bucket.blob(name).exists())


def move(path: str, new_path: str):
  """Renames the file, its bytes as they are (on Cloud Storage: a copy made
  by the service, then the original's removal)."""
  if not is_cloud(path):
    os.replace(path, new_path)
    return
  _, name = bucket_and_name(path)
  _, new_name = bucket_and_name(new_path)

  def rename(bucket):
    blob = bucket.blob(name)
    bucket.copy_blob(blob, bucket, new_name)
    blob.delete()
  _cloud_call(path, rename)


def holds_files(directory: str) -> bool:
  """Whether anything is stored under `directory`."""
  if not is_cloud(directory):
    return os.path.isdir(directory) and bool(os.listdir(directory))
  _, name = bucket_and_name(directory)
  prefix = name.rstrip('/') + '/' if name else ''
  return _cloud_call(directory, lambda bucket: any(
      True for _ in bucket.list_blobs(prefix=prefix, max_results=1)))
