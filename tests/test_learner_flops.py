"""benchmarks/flops.py's count by hand, against FLOPs worked out on
paper for Mnih et al. 2015's network on 84x84x4 frames."""

import numpy as np
import sonnet as snt
import tensorflow as tf

from agents.networks import torsos
from benchmarks import flops

# 2 x kernel x channels in x channels out x output pixels, layer by layer:
# 8x8x4 -> 32 at stride 4 (20x20 out), 4x4x32 -> 64 at 2 (9x9), 3x3x64 -> 64
# at 1 (7x7).
NATURE_CONVOLUTIONS = [2 * 8 * 8 * 4 * 32 * 20 * 20,    # 6,553,600
                       2 * 4 * 4 * 32 * 64 * 9 * 9,    # 5,308,416
                       2 * 3 * 3 * 64 * 64 * 7 * 7]    # 3,612,672


def test_nature_cnn_and_a_dense_layer_counted_as_on_paper():
  network = snt.Sequential([torsos.NatureCNN(), snt.Linear(512)])
  calls = flops.layer_calls(
      network, [tf.zeros([1, 84, 84, 4], tf.uint8)])
  assert [kind for kind, _, _ in calls] == ['Conv2D'] * 3 + ['Linear']
  assert [output[1:] for _, _, output in calls[:3]] == [
      (20, 20, 32), (9, 9, 64), (7, 7, 64)]
  dense = 2 * 3136 * 512
  assert flops.forward_flops_by_hand(calls) == (
      sum(NATURE_CONVOLUTIONS) + dense)
  assert flops.forward_flops_by_hand(calls[:1]) == (
      NATURE_CONVOLUTIONS[0])


def test_an_update_is_its_passes():
  # Ape-X DQN: 3 forward passes and a backward pass without the first
  # layer's input gradient.
  assert flops.update_flops_by_hand({'q': 100}, {'q': 30}) == (
      3 * 100 + 100 + (100 - 30))
  # DPG: targets p(s'), c(s'); c(s); c's backward; p(s), c(s) again; c's
  # input gradients; p's backward.
  policy, critic = 40, 70
  assert flops.update_flops_by_hand(
      {'policy': policy, 'critic': critic}, {'policy': 10, 'critic': 20}) == (
          policy + critic + critic + (2 * critic - 20) + policy + critic +
          critic + (2 * policy - 10))
  assert np.isclose(flops.update_flops_by_hand(
      {'policy': policy, 'critic': critic}, {'policy': 10, 'critic': 20}),
                    4 * policy + 6 * critic - 30)


def test_each_peak_kernel_computes_the_shape_it_is_counted_for():
  # Two cases whose first convolutions differ in stride: each kernel's
  # output is its case's, and its FLOPs those of that output.
  cases = {
      'atari': dict(batch=2, first_stride=4, layers=[
          ('Conv2D', (8, 8, 4, 32), (1, 20, 20, 32)),
          ('Linear', (3136, 512), (1, 512))]),
      'minatar': dict(batch=3, first_stride=1, layers=[
          ('Conv2D', (3, 3, 4, 16), (1, 8, 8, 16)),
          ('Linear', (1024, 128), (1, 128))]),
  }
  made = flops.kernels('float32', cases)
  outputs = {name: tuple(function().shape) for name, (function, _) in
             made.items()}
  counted = {name: count for name, (_, count) in made.items()}
  assert outputs['conv 2x84x84x4 * (8, 8, 4, 32)'] == (2, 20, 20, 32)
  assert counted['conv 2x84x84x4 * (8, 8, 4, 32)'] == 2 * NATURE_CONVOLUTIONS[0]
  assert outputs['conv 3x10x10x4 * (3, 3, 4, 16)'] == (3, 8, 8, 16)
  assert counted['conv 3x10x10x4 * (3, 3, 4, 16)'] == (
      3 * 2 * 3 * 3 * 4 * 16 * 8 * 8)
  assert outputs['matmul 3x1024x128'] == (3, 128)
  assert counted['matmul 2x3136x512'] == 2 * 2 * 3136 * 512
  assert counted[f'matmul {flops.SQUARE}x{flops.SQUARE}'] == (
      2 * flops.SQUARE ** 3)
