"""`--preset=paper` against the A3C paper's text, and the presets built on
it: whatever this program's defaults become, `paper` runs the paper's
algorithm and the task presets run what their pages measured."""

import dataclasses

from agents.a3c import presets
from agents.a3c.config import A3CConfig

# Read from the paper (Mnih et al. 2016): Algorithm S3 (the value's gradient
# is that of (R - V)^2), Supp. §7 (shared RMSProp), §8 (t_max 5, gamma 0.99,
# RMSProp decay 0.99, beta 0.01, the learning rate annealed to 0, "all
# non-output layers shared"), §9 (one layer of 200 rectifiers; the mean
# linear, the variance a SoftPlus; beta 1e-4). And the flags the paper has
# nothing of, off.
PAPERS_VALUES = {
    't_max': 5, 'discount': 0.99, 'value_cost': 1.0, 'rmsprop_decay': 0.99,
    'anneal_learning_rate': True, 'shared_torso': True,
    'mlp_hidden_sizes': '200', 'mlp_activation': 'relu',
    'policy_init_scale': 1.0, 'state_independent_variance': False,
    'bounded_mean': False, 'popart': False, 'normalize_rewards': False,
    'normalize_advantages': False, 'center_advantages': False,
    'scale_observations': False,
}
# What the paper leaves open, and the values this project chose for it.
UNPRINTED = {'learning_rate': 7e-4, 'rmsprop_epsilon': 0.1,
             'max_gradient_norm': 40.0}
# Not the algorithm: what is logged and how the evaluator acts.
NOT_THE_ALGORITHM = {'log_gradient_parts', 'evaluation_epsilon'}


def test_the_paper_preset_pins_every_flag_of_the_algorithm():
  fields = {field.name for field in dataclasses.fields(A3CConfig)}
  assert set(presets.PAPER) == fields - NOT_THE_ALGORITHM
  for name, value in {**PAPERS_VALUES, **UNPRINTED}.items():
    assert presets.PAPER[name] == value, name
  config = A3CConfig(**presets.PAPER)
  assert config.entropy_weight(continuous=False) == 0.01
  assert config.entropy_weight(continuous=True) == 1e-4


def test_the_task_presets_run_the_paper_but_for_what_they_name():
  # Each task preset's page was measured on the paper's values: it differs
  # from `paper` only where its comment says it does.
  differences = {
      'cartpole': {'discount': 0.95},
      'acrobot': {'normalize_rewards': True, 'value_cost': 0.5,
                  'entropy_cost': 0.001},
      'pendulum': {'discount': 0.9, 'normalize_rewards': True,
                   'entropy_cost': 0.01},
  }
  for name, changed in differences.items():
    values = presets.PRESETS[name].values
    algorithm = {key: value for key, value in values.items()
                 if key in presets.PAPER}
    assert algorithm == {**presets.PAPER, **changed}, name
