"""benchmarks/learner_flops.py's count by hand, against FLOPs worked out on
paper for Mnih et al. 2015's network on 84x84x4 frames."""

import numpy as np
import sonnet as snt
import tensorflow as tf

from agents import torsos
from benchmarks import learner_flops

# 2 x kernel x channels in x channels out x output pixels, layer by layer:
# 8x8x4 -> 32 at stride 4 (20x20 out), 4x4x32 -> 64 at 2 (9x9), 3x3x64 -> 64
# at 1 (7x7).
NATURE_CONVOLUTIONS = [2 * 8 * 8 * 4 * 32 * 20 * 20,    # 6,553,600
                       2 * 4 * 4 * 32 * 64 * 9 * 9,    # 5,308,416
                       2 * 3 * 3 * 64 * 64 * 7 * 7]    # 3,612,672


def test_nature_cnn_and_a_dense_layer_counted_as_on_paper():
  network = snt.Sequential([torsos.NatureCNN(), snt.Linear(512)])
  calls = learner_flops.layer_calls(
      network, [tf.zeros([1, 84, 84, 4], tf.uint8)])
  assert [kind for kind, _, _ in calls] == ['Conv2D'] * 3 + ['Linear']
  assert [output[1:] for _, _, output in calls[:3]] == [
      (20, 20, 32), (9, 9, 64), (7, 7, 64)]
  dense = 2 * 3136 * 512
  assert learner_flops.forward_flops_by_hand(calls) == (
      sum(NATURE_CONVOLUTIONS) + dense)
  assert learner_flops.forward_flops_by_hand(calls[:1]) == (
      NATURE_CONVOLUTIONS[0])


def test_an_update_is_its_passes():
  # Ape-X DQN: 3 forward passes and a backward pass without the first
  # layer's input gradient.
  assert learner_flops.update_flops_by_hand({'q': 100}, {'q': 30}) == (
      3 * 100 + 100 + (100 - 30))
  # DPG: targets p(s'), c(s'); c(s); c's backward; p(s), c(s) again; c's
  # input gradients; p's backward.
  policy, critic = 40, 70
  assert learner_flops.update_flops_by_hand(
      {'policy': policy, 'critic': critic}, {'policy': 10, 'critic': 20}) == (
          policy + critic + critic + (2 * critic - 20) + policy + critic +
          critic + (2 * policy - 10))
  assert np.isclose(learner_flops.update_flops_by_hand(
      {'policy': policy, 'critic': critic}, {'policy': 10, 'critic': 20}),
                    4 * policy + 6 * critic - 30)
