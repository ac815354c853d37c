"""Pop-Art's value layer (agents/a3c/popart.py, van Hasselt et al. 2016):
its statistics against a hand-worked moving average, its outputs kept, to
float precision, when the statistics move, and the statistics in the
parameter server's checkpoint."""

import math

import numpy as np
import pytest
import tensorflow as tf
from acme import specs
from acme.tf import utils as tf2_utils

from agents.a3c import networks
from agents.a3c import popart
from agents.a3c.config import A3CConfig
from agents.a3c.learning import A3CParameterServer
from agents.networks.torsos import MLPTorso
from launch.runs import checkpointing


def _head(seed: int) -> popart.PopArtValue:
  tf.random.set_seed(seed)
  head = popart.PopArtValue()
  head(tf.zeros([1, 6]))  # Creates the linear layer's variables.
  return head


def test_statistics_follow_the_returns_by_hand():
  # beta 0.5 from mu 0, nu 1: after 10, mu = 5 and nu = 0.5 + 50 = 50.5;
  # after -4, mu = 2.5 - 2 = 0.5 and nu = 25.25 + 8 = 33.25; sigma =
  # sqrt(33.25 - 0.25) = sqrt(33).
  head = _head(0)
  head.update([10.0, -4.0], step_size=0.5)
  assert float(head.mean.numpy()) == pytest.approx(0.5)
  assert float(head.second_moment.numpy()) == pytest.approx(33.25)
  assert float(head.scale.numpy()) == pytest.approx(math.sqrt(33.0), rel=1e-6)


def test_moving_the_statistics_keeps_every_value():
  head = _head(1)
  embeddings = tf.random.normal([32, 6], seed=2) * 3.0
  before, before_scale = head(embeddings)
  assert float(before_scale[0]) == pytest.approx(1.0)  # sigma starts at 1.
  # Returns of a task that pays -5 a step at gamma 0.99 (about -500), then
  # of another scale: the statistics move by orders of magnitude.
  for targets in ([-480.0, -500.0, -510.0], [2.0, 3.0, 1.0] * 20):
    head.update(targets, step_size=0.1)
    after, after_scale = head(embeddings)
    np.testing.assert_allclose(after.numpy(), before.numpy(), rtol=1e-4,
                               atol=1e-4 * float(after_scale[0]))
  assert float(after_scale[0]) > 10.0  # The scale did move.


def test_the_scale_stays_inside_its_bounds_when_the_returns_do_not_vary():
  head = _head(3)
  head.update([7.0] * 20_000, step_size=0.5)  # nu - mu^2 rounds to ~0.
  assert float(head.mean.numpy()) == pytest.approx(7.0)
  assert float(head.scale.numpy()) == pytest.approx(popart.SCALE_BOUNDS[0])
  values, _ = head(tf.ones([2, 6]))
  assert np.all(np.isfinite(values.numpy()))


def test_the_statistics_are_checkpointed_with_the_shared_parameters(tmp_path):
  # A relaunch resumes Pop-Art where it was: the parameter server's state
  # (launch.runs.checkpointing's checkpointer, as the program's learner node
  # saves it) holds mu and nu beside the value layer they scale.
  spec = specs.Array((3,), np.float32)
  config = A3CConfig(popart=True, popart_step_size=0.1)

  def server(seed):
    tf.random.set_seed(seed)
    network = networks.DiscretePolicyValueNetwork(MLPTorso([4]), 2,
                                                  popart=True)
    tf2_utils.create_variables(network, [spec])
    return A3CParameterServer(network, config)

  first = server(0)
  zeros = [np.zeros(v.shape, np.float32)
           for v in first._network.trainable_variables]  # pylint: disable=protected-access
  first.apply_gradients(zeros, 3, targets=[40.0, 55.0, 61.0])
  head = networks.popart_head(first._network)  # pylint: disable=protected-access
  mean, scale = float(head.mean.numpy()), float(head.scale.numpy())
  by_hand = 0.0
  for target in (40.0, 55.0, 61.0):
    by_hand = 0.9 * by_hand + 0.1 * target
  assert mean == pytest.approx(by_hand, rel=1e-6)
  saver = checkpointing.make_checkpointer(first.state, str(tmp_path),
                                          'learner', 60.0)
  saver.save(force=True)

  second = server(1)
  checkpointing.make_checkpointer(second.state, str(tmp_path), 'learner',
                                  60.0)  # Restores the newest checkpoint.
  restored = networks.popart_head(second._network)  # pylint: disable=protected-access
  assert float(restored.mean.numpy()) == pytest.approx(mean)
  assert float(restored.scale.numpy()) == pytest.approx(scale)
  observations = tf.random.normal([5, 3], seed=4)
  np.testing.assert_allclose(second._network(observations).value.numpy(),  # pylint: disable=protected-access
                             first._network(observations).value.numpy(),  # pylint: disable=protected-access
                             rtol=1e-6)
  # A worker is sent the statistics with the parameters.
  assert len(second.get_variables(['policy'])[0]) == len(
      second._network.trainable_variables) + 2  # pylint: disable=protected-access
