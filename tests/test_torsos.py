"""The pixel torsos (agents/networks/torsos.py) against the papers' layer shapes,
hand-computed outputs and a slow numpy reference.

Layer shapes and flattened sizes are checked against the arithmetic of a
VALID convolution, (in - kernel) // stride + 1, done by hand for each paper:
the Nature CNN (Mnih et al. 2015: 32 8x8 filters of stride 4, 64 4x4 of
stride 2, 64 3x3 of stride 1 on 84x84x4), A3C's smaller Atari torso (Mnih et
al. 2013, A3C Supp. §8: 16 8x8/4, 32 4x4/2, 256 units) and MinAtar's (Young &
Tian 2019: 16 3x3 filters of stride 1 on 10x10xC).

Pixel scaling: with every weight 1 and every bias 0, a constant frame's
output is a product of the kernels' sizes times the scaled pixel, computed
by hand; Atari's uint8 pixels are divided by 255, MinAtar's binary ones are
not scaled. Then each torso, with its own random weights, on random frames
and on a real frame of its environment, against a float64 numpy forward
pass that loops over every output position of every convolution
(cross-correlation, as TensorFlow's Conv2D computes it).
"""

import numpy as np
import pytest
import tensorflow as tf

from agents.envs import environments
from agents.envs import suites
from agents.networks import torsos
from agents.a3c import networks as a3c_networks

ATARI_SHAPE = (84, 84, 4)


def conv_layers(torso):
  """[(kernel, bias)] of a torso's layers, in the order they apply (Sonnet
  lists a module's variables layer by layer, each layer's b before its w)."""
  variables = torso.trainable_variables
  return [(w, b) for b, w in zip(variables[0::2], variables[1::2])]


def set_ones(torso):
  """Every weight 1, every bias 0."""
  for w, b in conv_layers(torso):
    w.assign(tf.ones_like(w))
    b.assign(tf.zeros_like(b))


def reference_conv(x: np.ndarray, w: np.ndarray, b: np.ndarray,
                   stride: int) -> np.ndarray:
  """A VALID convolution of one image [H, W, C] by kernels [k, k, C, F],
  one output position at a time, in float64."""
  k = w.shape[0]
  rows = (x.shape[0] - k) // stride + 1
  columns = (x.shape[1] - k) // stride + 1
  out = np.empty((rows, columns, w.shape[3]))
  for i in range(rows):
    for j in range(columns):
      patch = x[i * stride:i * stride + k, j * stride:j * stride + k, :]
      out[i, j] = np.tensordot(patch, w, axes=3) + b
  return out


def reference_forward(torso, image: np.ndarray, strides, scale: float,
                      linear: bool = False) -> np.ndarray:
  """The torso's output for one image, in numpy: `image / scale`, each
  convolution then a ReLU, flattened row by row (H, W, C), then (if
  `linear`) the last layer as a fully connected one and a ReLU."""
  layers = [(w.numpy().astype(np.float64), b.numpy().astype(np.float64))
            for w, b in conv_layers(torso)]
  x = image.astype(np.float64) / scale
  for (w, b), stride in zip(layers, strides):
    x = np.maximum(reference_conv(x, w, b, stride), 0.0)
  x = x.reshape(-1)
  if linear:
    w, b = layers[-1]
    x = np.maximum(x @ w + b, 0.0)
  return x


def real_frames(name: str, steps: int = 30) -> np.ndarray:
  """An observation of `name` after `steps` steps of one repeated action."""
  environment = environments.resolve_discrete(name).make_environment(seed=3)
  try:
    timestep = environment.reset()
    for _ in range(steps):
      timestep = environment.step(np.int32(1))
      if timestep.last():
        timestep = environment.reset()
    return np.asarray(timestep.observation)
  finally:
    environment.close()


def test_nature_cnn_layer_shapes_on_84x84x4():
  torso = torsos.NatureCNN()
  output = torso(tf.zeros((2, *ATARI_SHAPE), tf.uint8))
  # 84 -> (84 - 8) / 4 + 1 = 20 -> (20 - 4) / 2 + 1 = 9 -> (9 - 3) + 1 = 7.
  assert output.shape == (2, 7 * 7 * 64) == (2, 3136)
  assert [(tuple(w.shape), tuple(b.shape)) for w, b in conv_layers(torso)] == [
      ((8, 8, 4, 32), (32,)), ((4, 4, 32, 64), (64,)),
      ((3, 3, 64, 64), (64,))]


def test_nature_cnn_divides_uint8_pixels_by_255():
  torso = torsos.NatureCNN()
  torso(tf.zeros((1, *ATARI_SHAPE), tf.uint8))
  set_ones(torso)
  frames = np.stack([np.full(ATARI_SHAPE, value, np.uint8)
                     for value in (0, 1, 51, 255)])
  output = torso(frames).numpy()
  # Each output sums 3x3x64 of the second layer's, each of those 4x4x32 of
  # the first's, each of those 8x8x4 pixels / 255.
  inputs_per_output = (8 * 8 * 4) * (4 * 4 * 32) * (3 * 3 * 64)
  assert inputs_per_output == 75_497_472
  assert np.all(output[0] == 0.0)
  np.testing.assert_allclose(output[1], inputs_per_output / 255, rtol=1e-5)
  np.testing.assert_allclose(output[2], inputs_per_output * 0.2, rtol=1e-5)
  # A white frame: every pixel 1.0 exactly.
  assert np.all(output[3] == inputs_per_output)


def test_nature_cnn_against_a_numpy_forward_pass():
  tf.random.set_seed(0)
  torso = torsos.NatureCNN()
  rng = np.random.default_rng(0)
  frames = np.stack([rng.integers(0, 256, ATARI_SHAPE, dtype=np.uint8),
                     rng.integers(0, 256, ATARI_SHAPE, dtype=np.uint8),
                     real_frames('atari:Pong')])
  assert frames[2].shape == ATARI_SHAPE and frames[2].dtype == np.uint8
  assert len(np.unique(frames[2])) > 2  # A real screen, not a blank one.
  output = torso(frames).numpy()
  for frame, row in zip(frames, output):
    expected = reference_forward(torso, frame, strides=(4, 2, 1), scale=255.0)
    assert np.count_nonzero(expected) > 100  # The ReLUs leave something.
    np.testing.assert_allclose(row, expected, rtol=1e-4, atol=1e-5)


def test_small_atari_cnn_shapes_and_numpy_forward_pass():
  tf.random.set_seed(1)
  torso = torsos.SmallAtariCNN()
  rng = np.random.default_rng(1)
  frames = rng.integers(0, 256, (2, *ATARI_SHAPE), dtype=np.uint8)
  output = torso(frames).numpy()
  # 84 -> (84 - 8) / 4 + 1 = 20 -> (20 - 4) / 2 + 1 = 9: 9 x 9 x 32 = 2592
  # features into the 256 units.
  assert output.shape == (2, 256)
  assert [(tuple(w.shape), tuple(b.shape)) for w, b in conv_layers(torso)] == [
      ((8, 8, 4, 16), (16,)), ((4, 4, 16, 32), (32,)),
      ((9 * 9 * 32, 256), (256,))]
  for frame, row in zip(frames, output):
    expected = reference_forward(torso, frame, strides=(4, 2), scale=255.0,
                                 linear=True)
    np.testing.assert_allclose(row, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize('channels', [4, 10])  # Breakout's, Seaquest's.
def test_minatar_cnn_shapes_and_unscaled_binary_pixels(channels):
  torso = torsos.MinAtarCNN()
  output = torso(tf.zeros((1, 10, 10, channels), tf.uint8))
  # (10 - 3) / 1 + 1 = 8: 8 x 8 x 16 = 1024 features.
  assert output.shape == (1, 1024)
  assert [(tuple(w.shape), tuple(b.shape)) for w, b in conv_layers(torso)] == [
      ((3, 3, channels, 16), (16,))]
  set_ones(torso)
  # An object in every cell of every channel: 3 x 3 x channels ones under
  # each filter, not divided by anything.
  ones = torso(np.ones((1, 10, 10, channels), np.uint8)).numpy()
  assert np.all(ones == 9 * channels)
  # One object, in the middle cell (4, 4) of the last channel: the 3 x 3
  # windows that cover it are those at rows and columns 2..4 of the 8 x 8
  # output, each of whose 16 filters sees it once.
  frame = np.zeros((1, 10, 10, channels), np.uint8)
  frame[0, 4, 4, channels - 1] = 1
  single = torso(frame).numpy().reshape(8, 8, 16)
  expected = np.zeros((8, 8, 16))
  expected[2:5, 2:5, :] = 1.0
  np.testing.assert_array_equal(single, expected)


def test_minatar_cnn_against_a_numpy_forward_pass_on_a_real_frame():
  tf.random.set_seed(2)
  torso = torsos.MinAtarCNN()
  frame = real_frames('minatar:breakout', steps=5)
  assert frame.shape == (10, 10, 4) and frame.dtype == np.uint8
  assert set(np.unique(frame)) == {0, 1}  # Binary, with objects on it.
  output = torso(frame[None]).numpy()[0]
  expected = reference_forward(torso, frame, strides=(1,), scale=1.0)
  np.testing.assert_allclose(output, expected, rtol=1e-5, atol=1e-6)


def test_each_environment_kind_gets_its_torso():
  # Each suite names its torsos: of kind 'features' (DQN's) and 'dense'
  # (A3C's); vector suites name none and get an MLP.
  atari, minatar, gym = (suites.get(name)
                         for name in ('atari', 'minatar', 'gym'))
  assert isinstance(torsos.make_torso(atari, 'features', [7]),
                    torsos.NatureCNN)
  assert isinstance(torsos.make_torso(minatar, 'features', [7]),
                    torsos.MinAtarCNN)
  mlp = torsos.make_torso(gym, 'features', [7, 5])
  assert isinstance(mlp, torsos.MLPTorso)
  assert mlp(tf.zeros((1, 3))).shape == (1, 5)
  assert isinstance(
      torsos.make_torso(atari, 'dense', [7]),
      torsos.SmallAtariCNN)


def test_a3c_minatar_network_has_young_and_tians_128_unit_layer():
  spec = environments.resolve_discrete('minatar:breakout').spec
  network = a3c_networks.make_network(suites.get('minatar'), spec.actions,
                                      [7])
  outputs = network(tf.zeros((1, *spec.observations.shape), tf.uint8))
  assert outputs.policy.logits.shape == (1, spec.actions.num_values)
  shapes = sorted(tuple(v.shape) for v in network.trainable_variables)
  # The convolution, its 1024 features into 128 units, the two heads.
  assert shapes == sorted([
      (3, 3, 4, 16), (16,), (1024, 128), (128,),
      (128, spec.actions.num_values), (spec.actions.num_values,),
      (128, 1), (1,)])


@pytest.mark.parametrize('activation', ['relu', 'tanh'])
def test_an_mlp_torso_applies_its_activation_after_every_layer(activation):
  # Against numpy: x W1 + b1, the activation, x W2 + b2, the activation.
  torso = torsos.MLPTorso([6, 3], activation=activation)
  observations = np.random.default_rng(0).normal(size=(5, 4)) * 3.0
  output = torso(tf.constant(observations, tf.float32)).numpy()
  apply = {'relu': lambda x: np.maximum(x, 0.0), 'tanh': np.tanh}[activation]
  expected = observations
  b1, w1, b2, w2 = (v.numpy().astype(np.float64)
                    for v in torso.trainable_variables)
  for w, b in ((w1, b1), (w2, b2)):
    expected = apply(expected @ w + b)
  np.testing.assert_allclose(output, expected, rtol=1e-5, atol=1e-6)
  # A suite's own torso (MinAtar's 128 units) keeps its ReLUs whatever the
  # MLPs are given: no output below 0, where tanh gives some.
  minatar = torsos.make_torso(suites.get('minatar'), 'dense', [7], activation)
  frames = np.random.default_rng(1).integers(0, 2, size=(8, 10, 10, 4))
  features = minatar(tf.constant(frames, tf.float32)).numpy()
  assert features.shape == (8, torsos.MINATAR_HIDDEN_SIZE)
  assert features.min() == 0.0 and features.max() > 0.0
