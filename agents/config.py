"""What every agent's config answers before anything starts (`AgentConfig`),
presets, and the checks of a flag's value. The Ape-X agents' shared
hyper-parameters are `agents.apex.config.ApeXConfig`.

Nothing here imports TensorFlow: a program checks its flags, presets and
run options with these before it loads its agent's builder.
"""

import dataclasses
from typing import Any, List, Mapping, Optional


@dataclasses.dataclass(frozen=True)
class Preset:
  """A named configuration: values of a program's flags (config fields and
  run options), selected by `--preset=<name>`; a flag given explicitly wins
  over the preset's value."""
  description: str
  values: Mapping[str, Any]


# The activations an MLP torso may have (agents/networks/torsos.py).
MLP_ACTIVATIONS = ('relu', 'tanh')


class AgentConfig:
  """What the launch layer asks of every agent's config (a dataclass whose
  fields are the program's flags)."""

  # Fields that a run's checkpoints depend on: a run cannot be resumed with
  # other values.
  CHECKPOINT_FIELDS = ()

  def validate(self):
    """Raises ValueError naming the first flag whose value is out of
    range."""

  def check_program(self, shape):
    """Raises ValueError for a program (an `agents.builders.ProgramShape`)
    the agent cannot run in, before anything starts. By default none is
    refused."""
    del shape

  def replay_shard_capacity(self) -> Optional[int]:
    """The items one replay server holds; None: the agent has no replay."""
    return None

  def replay_item_bytes(self, suite) -> int:
    """The resident bytes one item of the agent's replay takes, for an
    environment of `suite` (`agents.envs.suites.Suite`): the cloud plan
    sizes the replay machine by it. By default an item is one transition:
    the suite's measured bytes per transition, or the largest any suite
    measured. An agent whose items are other (sequences) says its own."""
    from agents.envs import suites  # pylint: disable=g-import-not-at-top
    return (suite.replay_bytes_per_transition or
            suites.largest_replay_bytes())

  def check_environment(self, environment):
    """Raises ValueError for an environment (`EnvironmentSpec`) the agent's
    flags cannot serve, before anything starts. By default none is
    refused."""
    del environment

  def start_notes(self, launch_type: str) -> List[str]:
    """Lines the program prints before it starts, on what its flags come
    to on this machine under `launch_type` (e.g. the learner's arithmetic).
    By default none."""
    del launch_type
    return []


def parse_layer_sizes(sizes: str) -> List[int]:
  """'400,300' -> [400, 300]: a network's layer sizes, as a flag gives them."""
  return [int(size) for size in sizes.split(',') if size.strip()]


def check_layer_sizes(flag: str, sizes: str, example: str):
  """Raises ValueError naming `--flag` unless `sizes` is comma-separated
  positive integers (`example`: what the message suggests)."""
  check_flag(flag,
             all(size.strip().isdigit() and int(size) > 0
                 for size in sizes.split(',')),
             repr(sizes), f'comma-separated positive integers, e.g. {example}')


def check_choice(flag: str, value: str, choices):
  """Raises ValueError naming `--flag` and its choices unless `value` is one."""
  check_flag(flag, value in choices, repr(value),
             ' or '.join(repr(choice) for choice in choices))


def check_flag(flag: str, ok: bool, value, allowed: str):
  """Raises ValueError naming `--flag` and its allowed range unless `ok`."""
  if not ok:
    raise ValueError(f'--{flag}={value} is out of range: it must be {allowed}.')
