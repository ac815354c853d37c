"""A node's CSV log keeps every value under its own column's name: across a
relaunch whose rows carry columns the file's header lacks (a newer version
of this code resuming a run), and after a process killed mid-row. A node
holds no log file open long (Cloud Storage FUSE uploads a file when it is
closed)."""

import csv
import os

import numpy as np
from acme.utils import loggers as acme_loggers

from launch.console import status
from launch.runs import loggers
from launch.runs import curves
from tests import storage_mounts


def _read(path):
  with open(path, newline='') as f:
    return list(csv.DictReader(f))


def _path(workdir, label='learner'):
  return os.path.join(workdir, 'logs', label, 'logs.csv')


def test_rows_are_read_back_under_their_names(tmp_path):
  log = loggers.CSVLog(str(tmp_path), 'learner')
  log.write({'loss': np.float32(0.5), 'learner_steps': np.int64(10)})
  log.write({'learner_steps': 20, 'loss': 0.25})
  log.close()
  rows = _read(_path(tmp_path))
  assert [(row['learner_steps'], row['loss']) for row in rows] == [
      ('10', '0.5'), ('20', '0.25')]
  with open(_path(tmp_path), newline='') as f:
    assert f.readline().strip() == 'learner_steps,loss'  # Sorted, as Acme's.


def test_a_relaunch_with_more_columns_widens_the_header(tmp_path):
  # The file a launch of the earlier code left: Acme's own CSV logger.
  earlier = acme_loggers.CSVLogger(str(tmp_path), label='learner',
                                   add_uid=False, flush_every=1)
  for step in (1, 2):
    earlier.write({'learner_steps': step, 'loss': step / 10,
                   'walltime': 100.0 + step})
  earlier.close()

  log = loggers.CSVLog(str(tmp_path), 'learner')
  log.write({'learner_steps': 3, 'loss': 0.3, 'walltime': 103.0,
             'parameter_bytes_sent': 4096, 'gradient_norm': 1.5})
  log.write({'learner_steps': 4, 'loss': 0.4, 'walltime': 104.0})
  log.close()

  rows = _read(_path(tmp_path))
  assert list(rows[0]) == ['learner_steps', 'loss', 'walltime',
                           'gradient_norm', 'parameter_bytes_sent']
  assert [dict(row) for row in rows] == [
      {'learner_steps': '1', 'loss': '0.1', 'walltime': '101.0',
       'gradient_norm': '', 'parameter_bytes_sent': ''},
      {'learner_steps': '2', 'loss': '0.2', 'walltime': '102.0',
       'gradient_norm': '', 'parameter_bytes_sent': ''},
      {'learner_steps': '3', 'loss': '0.3', 'walltime': '103.0',
       'gradient_norm': '1.5', 'parameter_bytes_sent': '4096'},
      {'learner_steps': '4', 'loss': '0.4', 'walltime': '104.0',
       'gradient_norm': '', 'parameter_bytes_sent': ''}]
  assert not os.path.exists(_path(tmp_path) + '.widening')

  # Acme's logger, for contrast, writes the new row's values under the old
  # header: 4096 lands in the `loss` column.
  acme = acme_loggers.CSVLogger(str(tmp_path / 'acme'), label='learner',
                                add_uid=False, flush_every=1)
  acme.write({'learner_steps': 1, 'loss': 0.1})
  acme.close()
  acme = acme_loggers.CSVLogger(str(tmp_path / 'acme'), label='learner',
                                add_uid=False, flush_every=1)
  acme.write({'learner_steps': 2, 'loss': 0.2, 'gradient_norm': 4096})
  acme.close()
  assert _read(_path(tmp_path / 'acme'))[1]['learner_steps'] == '4096'

  # What reads the logs: the plot takes the new column as missing where a
  # row lacks it; the status line reads the newest complete row.
  columns = curves.read_log(str(tmp_path), 'learner')
  np.testing.assert_array_equal(columns['learner_steps'], [1, 2, 3, 4])
  assert np.isnan(columns['parameter_bytes_sent']).tolist() == [
      True, True, False, True]
  assert status.newest_rows(_path(tmp_path))[-1]['learner_steps'] == '3'


def test_a_row_cut_by_a_kill_is_dropped_not_glued_to_the_next(tmp_path):
  log = loggers.CSVLog(str(tmp_path), 'actor')
  log.write({'actor_steps': 1, 'episode_return': 2.0})
  log.close()
  with open(_path(tmp_path, 'actor'), 'a') as f:
    f.write('7,3.')  # A process killed while writing its row.
  log = loggers.CSVLog(str(tmp_path), 'actor')
  log.write({'actor_steps': 8, 'episode_return': 9.0})
  log.close()
  assert [dict(row) for row in _read(_path(tmp_path, 'actor'))] == [
      {'actor_steps': '1', 'episode_return': '2.0'},
      {'actor_steps': '8', 'episode_return': '9.0'}]


def test_a_header_cut_by_a_kill_is_written_again(tmp_path):
  os.makedirs(os.path.dirname(_path(tmp_path)))
  with open(_path(tmp_path), 'w') as f:
    f.write('learner_st')
  log = loggers.CSVLog(str(tmp_path), 'learner')
  log.write({'learner_steps': 5})
  log.close()
  assert [dict(row) for row in _read(_path(tmp_path))] == [
      {'learner_steps': '5'}]



def test_a_node_holds_no_log_open_once_its_row_is_written(tmp_path):
  # On Vertex AI a file reaches the bucket when it is closed (Cloud Storage
  # FUSE): a CSV log is closed after each row, a TensorBoard events file by
  # the first row written `file_seconds` or more after it was opened.
  def held():
    return storage_mounts.open_for_writing([os.getpid()], str(tmp_path))

  log = loggers.CSVLog(str(tmp_path), 'learner')
  log.write({'learner_steps': 1, 'loss': 0.5})
  assert not held()
  directory = tmp_path / 'tensorboard' / 'learner'
  kept_open = loggers.TensorBoardLog(str(directory), 'learner',
                                     'learner_steps', file_seconds=3600)
  kept_open.write({'learner_steps': 1, 'loss': 0.5})
  assert len(held()) == 1  # Its events file, until a row an hour later.
  kept_open.close()
  assert not held()
  rotated = loggers.TensorBoardLog(str(directory), 'learner',
                                   'learner_steps', file_seconds=0)
  for step in (2, 3):
    rotated.write({'learner_steps': step, 'loss': 0.5})
    assert not held()
  # One file each logger opened as it was made; one more for the row
  # after the rotated logger's first.
  assert len(list(directory.iterdir())) == 3
