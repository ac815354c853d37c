"""evaluate.py, policy snapshots and plot.py on tiny real runs made here.

Two programs are launched as users launch them (local_mp): Ape-X DQN on
minatar:breakout and Ape-X DPG on control:cartpole:balance (each action
repeated 4 times: 250 agent steps an episode, a video of 251 frames to
render off-screen, not 1,001), checkpointing
every few seconds (so that each leaves learner checkpoints and policy
snapshots). Each is stopped with Ctrl-C once every node has logged what the
tests read (the learner after an update, the actor, the evaluator), its
nodes' log lines have shown a progress and an ETA, and its status an ETA:
none of these waits for another, so no step limit could guarantee them
all.
"""

import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

import helpers

# The module's tests read the runs of one module fixture: under pytest-xdist
# they share a worker, which makes the runs once.
pytestmark = pytest.mark.xdist_group('evaluate_plot_runs')

RUNS = {
    'dqn': ['apex_dqn', '--env=minatar:breakout',
            '--num_actors=1', '--batch_size=32', '--min_replay_size=200',
            '--replay_capacity=5000', '--log_every=1', '--checkpoint_every=5',
            '--evaluation_period=20', '--evaluation_episodes=1',
            '--samples_per_insert=8'],
    'dpg': ['apex_dpg', '--preset=cartpole_smoke', '--num_actors=1',
            '--env=control:cartpole:balance:repeat=4',
            '--checkpoint_every=5'],
}
# Only for the progress and ETA shown: Ctrl-C stops the runs long before
# they could get there.
DISPLAYED_LIMIT = 10**9
DURATION = r'\d+(h\d\dm|m\d\ds|s)'
ETA = r'Eta = ' + DURATION  # In a node's log rows.
STATUS_ETA = rf'ETA {DURATION} \({DISPLAYED_LIMIT:,} actor steps\)'


def _ready(program: helpers.Program, workdir) -> bool:
  return (helpers.every_node_logged(workdir, num_actors=1) and
          re.search(ETA, program.logs()) is not None and
          re.search(STATUS_ETA, program.output()) is not None)


@pytest.fixture(scope='module')
def runs(tmp_path_factory):
  """{name: (workdir, output)} of the two tiny runs, made side by side."""
  directory = tmp_path_factory.mktemp('runs')
  programs = {}
  try:
    for name, (program, *flags) in RUNS.items():
      workdir = str(directory / name)
      programs[name] = (workdir, helpers.Program(
          helpers.program_command(program, f'--workdir={workdir}',
                                  f'--max_actor_steps={DISPLAYED_LIMIT}',
                                  *flags),
          directory / f'{name}.out'))
    made = {}
    for name, (workdir, program) in programs.items():
      program.wait_until(lambda: _ready(program, workdir),  # pylint: disable=cell-var-from-loop
                         helpers.START_TIMEOUT,
                         f'log rows of every node of the {name} run')
      made[name] = (workdir, program.interrupt())
    return made
  finally:
    for _, program in programs.values():
      program.close()


def _evaluate(*flags, timeout=300):
  return helpers.run_script('evaluate', *flags, timeout=timeout,
                            stderr=subprocess.PIPE)


def _evaluate_json(tmp_path, name, *flags):
  output = str(tmp_path / f'{name}.json')
  result = _evaluate(*flags, f'--output={output}')
  assert result.returncode == 0, result.stderr[-3000:]
  with open(output) as f:
    return json.load(f)


def _video_frames(path):
  """(number of frames, frame shape) decoded from an mp4 file."""
  import cv2  # pylint: disable=g-import-not-at-top
  with open(path, 'rb') as f:
    assert f.read(8)[4:8] == b'ftyp', 'not an MP4 (ISO media) file'
  capture = cv2.VideoCapture(path)
  count, shape = 0, None
  while True:
    ok, frame = capture.read()
    if not ok:
      break
    count, shape = count + 1, frame.shape
  return count, shape


def _snapshots(workdir):
  directory = os.path.join(workdir, 'snapshots')
  return sorted(name for name in os.listdir(directory))


@pytest.mark.slow  # Reads the two local_mp runs.
@pytest.mark.parametrize('name, episodes, frame_shape', [
    ('dqn', 3, (160, 160, 3)),  # MinAtar's 10x10 screen scaled by 16.
    ('dpg', 1, (240, 320, 3)),  # MuJoCo rendered off-screen.
])
def test_evaluate_reports_returns_and_writes_a_video(runs, tmp_path, name,
                                                     episodes, frame_shape):
  workdir, _ = runs[name]
  video = str(tmp_path / 'episode.mp4')
  result = _evaluate_json(tmp_path, name, f'--workdir={workdir}',
                          f'--episodes={episodes}', f'--video={video}')
  returns = np.array(result['returns'])
  assert len(returns) == len(result['lengths']) == episodes
  assert result['mean'] == pytest.approx(returns.mean())
  assert result['median'] == pytest.approx(np.median(returns))
  # The sample's standard deviation (n - 1); none for one episode.
  assert result['std'] == pytest.approx(
      returns.std(ddof=1) if episodes > 1 else 0.0)
  assert (result['min'], result['max']) == (returns.min(), returns.max())
  if name == 'dpg':  # dm_control's cartpole: 1,000 simulator steps, 4 a step.
    assert result['lengths'] == [250]
  # One frame per agent step, plus the first observation.
  # The video is of the first environment's episode, which need not be
  # the first to end: the result says which it is.
  length = result['lengths'][result['video']['episode']]
  assert _video_frames(video) == (length + 1, frame_shape)
  assert result['video']['frames'] == length + 1


@pytest.mark.slow  # Reads the two local_mp runs.
@pytest.mark.parametrize('name', ['dqn', 'dpg'])
def test_snapshot_and_checkpoint_of_one_step_act_alike(runs, tmp_path, name):
  workdir, _ = runs[name]
  snapshots = _snapshots(workdir)
  # At most two kept, named by learner step, none half-written.
  assert 1 <= len(snapshots) <= 2
  assert all(re.fullmatch(r'policy-\d{10}', s) for s in snapshots), snapshots
  from_checkpoint = _evaluate_json(tmp_path, 'checkpoint',
                                   f'--workdir={workdir}', '--episodes=2')
  newest = os.path.join(workdir, 'snapshots', snapshots[-1])
  from_snapshot = _evaluate_json(tmp_path, 'snapshot',
                                 f'--checkpoint={newest}', '--episodes=2')
  # The final checkpoint and the final snapshot are of the same step.
  assert from_snapshot['learner_steps'] == int(snapshots[-1][len('policy-'):])
  assert from_snapshot['learner_steps'] == from_checkpoint['learner_steps']
  assert from_snapshot['returns'] == from_checkpoint['returns']
  assert from_snapshot['lengths'] == from_checkpoint['lengths']
  # Each names its source within the run, not by this machine's path.
  assert re.fullmatch(r'checkpoints/learner/ckpt-\d+',
                      from_checkpoint['source']), from_checkpoint['source']
  assert from_snapshot['source'] == f'snapshots/{snapshots[-1]}'


LOADER = """
import json, sys
# As for someone who has not installed this project: -I keeps the working
# directory off the path, and this drops the finder of the venv's editable
# install of it (pyproject.toml).
sys.meta_path = [finder for finder in sys.meta_path
                 if not finder.__module__.startswith('__editable__')]
import numpy as np
try:
  import agents
  sys.exit('the project is importable')
except ImportError:
  pass
import tensorflow as tf
policy = tf.saved_model.load(sys.argv[1])
observations = np.load(sys.argv[2])
out = {'metadata': json.loads(policy.metadata.numpy()),
       'actions': policy.act(observations).numpy().tolist()}
if hasattr(policy, 'q_values'):
  out['q_values'] = policy.q_values(observations).numpy().tolist()
print(json.dumps(out))
"""


@pytest.mark.slow  # Reads the two local_mp runs.
@pytest.mark.parametrize('name', ['dqn', 'dpg'])
def test_snapshot_loads_without_the_project(runs, tmp_path, name):
  from launch.offline import restore  # pylint: disable=g-import-not-at-top
  workdir, _ = runs[name]
  policy = restore.from_checkpoint(workdir)
  environment = policy.environment.make_environment(seed=3)
  rng = np.random.default_rng(3)
  timestep, observations = environment.reset(), []
  for _ in range(20):
    observations.append(timestep.observation)
    action = (rng.integers(policy.environment.spec.actions.num_values)
              if name == 'dqn' else
              rng.uniform(-1, 1, policy.environment.spec.actions.shape))
    timestep = environment.step(action)
    if timestep.last():
      timestep = environment.reset()
  observations = np.stack(observations)
  np.save(tmp_path / 'observations.npy', observations)
  newest = os.path.join(workdir, 'snapshots', _snapshots(workdir)[-1])
  result = subprocess.run(
      [sys.executable, '-I', '-c', LOADER, newest,
       str(tmp_path / 'observations.npy')],
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120,
      cwd=str(tmp_path), check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  loaded = json.loads(result.stdout.strip().splitlines()[-1])
  with open(os.path.join(workdir, 'run.json')) as f:
    manifest = json.load(f)
  assert loaded['metadata']['program'] == manifest['program']
  assert loaded['metadata']['env'] == manifest['env']
  assert loaded['metadata']['learner_steps'] == policy.learner_steps
  expected = policy.act(observations).numpy()
  if name == 'dqn':
    np.testing.assert_array_equal(loaded['actions'], expected)
    np.testing.assert_allclose(loaded['q_values'],
                               policy.q_values(observations).numpy(),
                               rtol=1e-5, atol=1e-6)
  else:
    np.testing.assert_allclose(loaded['actions'], expected, rtol=1e-5,
                               atol=1e-6)


def _learner_rates(workdir):
  return [float(row['steps_per_second'])
          for row in helpers.rows(workdir, 'learner')]


@pytest.mark.slow  # Reads the two local_mp runs.
def test_plot_draws_the_four_panels_of_every_run(runs, tmp_path):
  from launch.runs import curves  # pylint: disable=g-import-not-at-top
  from matplotlib import image  # pylint: disable=g-import-not-at-top
  workdirs = [runs['dqn'][0], runs['dpg'][0]]
  out = str(tmp_path / 'curves.png')
  result = helpers.run_script('plot', *workdirs, f'--out={out}',
                              '--labels=dqn,dpg', timeout=120)
  assert result.returncode == 0, result.stdout[-3000:]
  assert image.imread(out).shape[:2] == (800, 1200)  # 12x8 in at 100 dpi.
  figure = curves.plot(workdirs, ['dqn', 'dpg'], str(tmp_path / 'again.png'))
  axes = figure.axes
  assert [axis.get_title() for axis in axes] == list(curves.PANELS)
  for axis in axes:
    labels = [text.get_text() for text in axis.get_legend().get_texts()]
    assert any(label.startswith('dqn') for label in labels), labels
    assert any(label.startswith('dpg') for label in labels), labels
  learner_lines = axes[3].get_lines()
  assert len(learner_lines) == 2
  for line, workdir in zip(learner_lines, workdirs):
    np.testing.assert_allclose(line.get_ydata(), _learner_rates(workdir))


@pytest.mark.slow  # Reads the two local_mp runs.
def test_frame_rates_count_the_runs_frames_per_step(runs, tmp_path):
  # Frames per agent step come from the run's record (4 for Atari's frame
  # skip): the same run recorded with 4 plots 4 times the frame rate.
  from launch.runs import curves  # pylint: disable=g-import-not-at-top
  workdir = runs['dqn'][0]
  with open(os.path.join(workdir, 'run.json')) as f:
    assert json.load(f)['frames_per_step'] == 1  # MinAtar has no skip.
  skipped = tmp_path / 'skipped'
  shutil.copytree(workdir, skipped)
  with open(skipped / 'run.json') as f:
    manifest = json.load(f)
  manifest['frames_per_step'] = 4
  with open(skipped / 'run.json', 'w') as f:
    json.dump(manifest, f)
  figure = curves.plot([workdir, str(skipped)], ['one', 'four'],
                     str(tmp_path / 'frames.png'))
  one, four = [line.get_ydata() for line in figure.axes[2].get_lines()]
  assert len(one) and np.max(one) > 0
  np.testing.assert_allclose(four, 4 * one)


@pytest.mark.parametrize('manifest, expected', [
    # Runs recorded before run.json held frames_per_step: from the kind.
    ({'env': 'atari:Pong'}, 'atari skip'),
    ({'env': 'gym:CartPole-v1'}, 1),
    ({'env': 'minatar:breakout'}, 1),
    ({'env': 'control:cartpole:balance'}, 1),
    # A recorded value wins.
    ({'env': 'atari:Pong', 'frames_per_step': 3}, 3),
    (None, 1),  # No manifest: not a run.
])
def test_frames_per_step_of_runs_recorded_without_it(manifest, expected,
                                                     tmp_path):
  from agents.envs import atari  # pylint: disable=g-import-not-at-top
  from launch.runs import run_manifest  # pylint: disable=g-import-not-at-top
  if manifest is not None:
    with open(tmp_path / 'run.json', 'w') as f:
      json.dump(dict(manifest, program='apex_dqn', config={}), f)
  if expected == 'atari skip':
    expected = atari.ATARI_FRAME_SKIP
  assert run_manifest.frames_per_step(str(tmp_path)) == expected


@pytest.mark.slow  # Reads the two local_mp runs.
def test_log_lines_and_status_show_progress_and_eta(runs):
  workdir, stdout = runs['dqn']
  logs = helpers.node_logs(workdir)
  assert re.search(r'Progress = \d+\.\d%', logs)
  assert re.search(ETA, logs)
  assert re.search(STATUS_ETA, stdout)


def test_progress_and_eta_by_hand(monkeypatch):
  from acme.utils import loggers  # pylint: disable=g-import-not-at-top
  from launch.runs import loggers as loggers_lib  # pylint: disable=g-import-not-at-top

  class Rows(loggers.Logger):

    def __init__(self):
      self.rows = []

    def write(self, data):
      self.rows.append(dict(data))

    def close(self):
      pass

  rows = Rows()
  logger = loggers_lib.WithProgress(rows, max_actor_steps=1000)
  for now, steps in [(100.0, 100), (110.0, 300), (4000.0, 400)]:
    monkeypatch.setattr(loggers_lib.time, 'time', lambda now=now: now)
    logger.write({'actor_steps': steps})
  logger.write({'loss': 1.0})  # Rows without the count pass unchanged.
  assert rows.rows[0] == {'actor_steps': 100, 'progress': '10.0%'}
  # 200 steps in 10 s: 700 steps left take 35 s.
  assert rows.rows[1] == {'actor_steps': 300, 'progress': '30.0%',
                          'eta': '35s'}
  # The window keeps the last two points: 100 steps in 3,890 s.
  assert rows.rows[2]['eta'] == loggers_lib.format_duration(600 * 38.9)
  assert rows.rows[2]['eta'] == '6h29m'
  assert rows.rows[3] == {'loss': 1.0}


def _tensorflow_counter_checkpoint(tmp_path) -> str:
  """The directory of a counter's TensorFlow checkpoint, made by a
  process of its own (this one leaves TensorFlow to the programs)."""
  subprocess.run([sys.executable, '-c', (
      'import sys\n'
      'from acme.utils import counting\n'
      'from launch.runs import checkpointing\n'
      'counter = counting.Counter()\n'
      'counter.increment(actor_steps=1)\n'
      'checkpointing.make_checkpointer({"counter": counter}, sys.argv[1], '
      '"counter", 1.0).save(force=True)\n'), str(tmp_path / 'old')],
                 check=True, cwd=helpers.ROOT)
  return str(tmp_path / 'old' / 'checkpoints' / 'counter')


@pytest.mark.slow  # Reads the two local_mp runs.
def test_bad_input_is_refused_with_the_fix(runs, tmp_path):
  workdir, _ = runs['dpg']
  cases = [
      (['--workdir=x', '--video=x.avi'], '--video must name an .mp4'),
      ([], 'pass --workdir'),
      ([f'--workdir={tmp_path / "none"}'], 'does not exist'),
      ([f'--workdir={tmp_path}'], 'not a run directory'),
      ([f'--checkpoint={tmp_path}'], 'No learner checkpoint'),
      # The counter's counts are JSON: no TensorFlow checkpoint there.
      ([f'--checkpoint={workdir}/checkpoints/counter'],
       'No learner checkpoint'),
      # A TensorFlow checkpoint of something else (a counter's, as runs
      # saved them before their counts were JSON).
      ([f'--checkpoint={_tensorflow_counter_checkpoint(tmp_path)}'],
       'is not a learner checkpoint (it holds counter)'),
      ([f'--workdir={workdir}', '--epsilon=0.1'], 'Ape-X DQN policies'),
  ]
  changed = tmp_path / 'changed'
  shutil.copytree(workdir, changed)
  with open(changed / 'run.json') as f:
    manifest = json.load(f)
  manifest['config']['policy_hidden_sizes'] = '64,64'
  with open(changed / 'run.json', 'w') as f:
    json.dump(manifest, f)
  cases.append(([f'--workdir={changed}'], 'does not fit'))
  for flags, message in cases:
    result = _evaluate(*flags)
    assert result.returncode == 2, (flags, result.stderr[-2000:])
    assert message in result.stderr, (flags, result.stderr[-2000:])
    assert 'Traceback' not in result.stderr, flags


def _policy_snapshot(env: str, **config):
  """An untrained Ape-X DQN policy snapshot for `env` (`export` writes it)."""
  from agents.envs import environments  # pylint: disable=g-import-not-at-top
  from agents.apex_dqn.builder import ApeXDQNBuilder  # pylint: disable=g-import-not-at-top
  from agents.apex_dqn.config import ApeXDQNConfig  # pylint: disable=g-import-not-at-top
  builder = ApeXDQNBuilder(ApeXDQNConfig(**config),
                           environments.resolve_discrete(env))
  return builder.policy_snapshot({'network': builder.make_network()})


def _small_cartpole_snapshot():
  return _policy_snapshot('gym:CartPole-v1', mlp_hidden_sizes='8',
                          dueling_hidden_size=8)


def _one_episode_video(tmp_path, name: str, snapshot_path: str):
  """evaluate.py's result for one episode of the snapshot, and its video's
  (frames, frame shape)."""
  video = str(tmp_path / f'{name}.mp4')
  result = _evaluate_json(tmp_path, name, f'--checkpoint={snapshot_path}',
                          '--episodes=1', f'--video={video}')
  return result, _video_frames(video)


def test_video_of_an_atari_policy_snapshot(tmp_path):
  path = _policy_snapshot('atari:Pong').export(str(tmp_path), 7)
  result, video = _one_episode_video(tmp_path, 'pong', path)
  assert result['learner_steps'] == 7
  # The ALE's own 210x160 screen, once per agent step and at the start.
  assert video == (result['lengths'][0] + 1, (210, 160, 3))


def test_video_of_a_cartpole_policy_snapshot(tmp_path):
  # The README's first example: gymnasium draws CartPole itself (pygame).
  path = _small_cartpole_snapshot().export(str(tmp_path), 4)
  result, video = _one_episode_video(tmp_path, 'cartpole', path)
  assert result['learner_steps'] == 4
  # gymnasium's 600x400 drawing, once per agent step and at the start.
  assert video == (result['lengths'][0] + 1, (400, 600, 3))


def test_export_keeps_the_new_snapshot_and_one_other(tmp_path):
  from agents import snapshots  # pylint: disable=g-import-not-at-top
  snapshot = _small_cartpole_snapshot()
  names = lambda: [os.path.basename(p)
                   for p in snapshots.list_snapshots(str(tmp_path))]
  for step in (10, 20, 20):
    snapshot.export(str(tmp_path), step)
  assert names() == ['policy-0000000010', 'policy-0000000020']
  # A run restarted from scratch in the same workdir: its lower step stays,
  # and is the newest.
  path = snapshot.export(str(tmp_path), 3)
  assert os.path.isdir(path)
  assert names() == ['policy-0000000020', 'policy-0000000003']
  assert snapshots.latest_snapshot(str(tmp_path)) == path
  # Past 10 digits of steps.
  path = snapshot.export(str(tmp_path), 12_345_678_901)
  assert names() == ['policy-0000000003', 'policy-12345678901']
  assert snapshots.latest_snapshot(str(tmp_path)) == path


def test_export_renames_no_directory_and_skips_what_a_crash_left(
    tmp_path, monkeypatch):
  # As on Cloud Storage FUSE (Vertex AI's mount of a gs:// workdir), which
  # cannot rename a directory: a snapshot is complete once TensorFlow has
  # written its saved_model.pb, last.
  from agents import snapshots  # pylint: disable=g-import-not-at-top
  renamed = []
  for name in ('rename', 'replace'):
    original = getattr(os, name)

    def no_directories(source, target, *args, _original=original, **kwargs):
      if os.path.isdir(source):
        renamed.append(source)
        raise OSError(95, 'Operation not supported', source)
      return _original(source, target, *args, **kwargs)
    monkeypatch.setattr(os, name, no_directories)
  snapshot = _small_cartpole_snapshot()
  workdir = str(tmp_path)
  snapshot.export(workdir, 5)
  # A crash in the middle of a later export: the variables, no
  # saved_model.pb. It is neither listed nor the latest.
  partial = tmp_path / 'snapshots' / 'policy-0000000009'
  (partial / 'variables').mkdir(parents=True)
  (partial / 'variables' / 'variables.index').write_bytes(b'half')
  assert snapshots.latest_snapshot(workdir).endswith('policy-0000000005')
  with pytest.raises(ValueError, match='not a policy snapshot'):
    snapshots.load(str(partial))
  # The next export clears it away; the same step again is written whole.
  path = snapshot.export(workdir, 9)
  module, metadata = snapshots.load(path)
  assert metadata['learner_steps'] == 9 and hasattr(module, 'act')
  path = snapshot.export(workdir, 11)
  assert [os.path.basename(p) for p in snapshots.list_snapshots(workdir)] == [
      'policy-0000000009', 'policy-0000000011']
  assert sorted(os.listdir(tmp_path / 'snapshots')) == [
      'policy-0000000009', 'policy-0000000011']
  assert not renamed
