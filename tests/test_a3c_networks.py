"""A3C's networks' options against Sonnet's own layers built from the same
random seed: `--policy_init_scale` multiplies the policy's output layer's
initial weights (logits, or a Gaussian's mean) and nothing else;
`--mlp_activation` reaches the policy's and the value's MLP torsos."""

import numpy as np
import pytest
import tensorflow as tf
from acme import specs

from agents.a3c import networks
from agents.envs import suites

DISCRETE = specs.DiscreteArray(3)
CONTINUOUS = specs.BoundedArray((2,), np.float32, -2.0, 2.0)
OBSERVATIONS = np.random.default_rng(0).normal(size=(6, 4)).astype(np.float32)


def _build(action_spec, seed=3, **options):
  tf.random.set_seed(seed)
  network = networks.make_network(suites.get('gym'), action_spec, [16],
                                  shared_torso=False, **options)
  return network, network(tf.constant(OBSERVATIONS))


@pytest.mark.parametrize('action_spec,layer', [(DISCRETE, 'policy_logits'),
                                               (CONTINUOUS, 'mean')])
def test_the_policy_init_scale_multiplies_only_the_policy_output_layer(
    action_spec, layer):
  default, _ = _build(action_spec)
  scaled, outputs = _build(action_spec, policy_init_scale=0.01)
  pairs = list(zip(default.trainable_variables, scaled.trainable_variables))
  assert [a.name for a, _ in pairs] == [b.name for _, b in pairs]
  scaled_names = set()
  for plain, small in pairs:
    if f'/{layer}/w' in plain.name:
      np.testing.assert_allclose(small.numpy(), 0.01 * plain.numpy(),
                                 rtol=1e-6)
      scaled_names.add(plain.name)
    else:  # Biases start at 0; every other layer as it was.
      np.testing.assert_array_equal(small.numpy(), plain.numpy())
  assert len(scaled_names) == 1
  if action_spec is DISCRETE:
    # Near the uniform policy from the first update.
    probabilities = tf.nn.softmax(outputs.policy.logits).numpy()
    np.testing.assert_allclose(probabilities, 1.0 / 3.0, atol=0.01)


def test_tanh_torsos_give_the_value_a_tanh_embedding():
  # The value is its head's linear function of the value torso's tanh
  # units: recomputed by hand from the variables.
  network, outputs = _build(DISCRETE, mlp_activation='tanh')
  torso = network._value_torso  # pylint: disable=protected-access
  bias, weights = (v.numpy().astype(np.float64)
                   for v in torso.trainable_variables)
  hidden = np.tanh(OBSERVATIONS @ weights + bias)
  head = {v.name.split('/')[-1]: v.numpy().astype(np.float64)
          for v in network.trainable_variables if '/value/' in v.name}
  np.testing.assert_allclose(hidden @ head['w:0'][:, 0] + head['b:0'][0],
                             outputs.value.numpy(), rtol=1e-5, atol=1e-6)
