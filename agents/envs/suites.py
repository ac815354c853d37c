"""The environment suites: each registers here what it is, once.

An environment is named `<suite>:<rest>` (`atari:Pong`, `gym:CartPole-v1`).
The suite, a `Suite`, says how to resolve the rest of the name into an
`agents.envs.environments.EnvironmentSpec` (which makes its environments),
which forms of name it takes, and what every other layer used to ask of a
kind string:

  the torso of its observations     `torsos`, by kind of torso (below)
  the reward clip of value learning `reward_clip`
  the bounds of a frame's reward    `reward_range`, for a distributional
                                    critic's support
  replay's bytes per transition     `replay_bytes_per_transition`, for the
                                    cloud plan's replay machine
  frames per agent step             `frames_per_step`, for runs recorded
                                    before `run.json` held it
  a video's frames per second       `frames_per_second` of the emulator
  the run options its environments  `options`: each a flag of every program
  take                              (`RunOption`: Atari's
                                    `atari_evaluation`, ...), passed to
                                    its `make` by name
  what made evaluation episodes     `evaluation_note(options)`
  differ
  how an episode started            `episode_start(environment)`: an Atari
                                    game's no-op frames

The built-in suites are the modules of `_BUILT_IN` (atari, minatar, control,
gym), each `agents/envs/<suite>.py`. A suite of your own registers the same
way, from a module of your code:

  suites.register(suites.Suite(
      name='toy', resolve=resolve_toy, forms={'discrete': 'toy:<n> (...)'},
      torsos={'features': 'my_module:MyTorso'}))

and a program imports that module with `--plugins=my_module`, which every
node's process, the run's record and a Vertex AI job's containers then
carry (docs/extending.md).

Kinds of torso (`TORSO_KINDS`), as an agent asks for one:
  'features'  the observation's features, the agent adds its own layers
              (Ape-X DQN's dueling head)
  'dense'     features ending in a dense layer of their own, for heads that
              are one linear layer each (A3C's policy and value)
A suite that names none gets a multi-layer perceptron of the config's
hidden sizes (vector observations).

Nothing here imports TensorFlow: a torso is named as `module:callable`,
called with no arguments, and imported by the agent that builds it.
"""

import dataclasses
import importlib
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union

from agents import plugins
from agents.config import check_flag

# The suites of this package; each registers itself when imported.
_BUILT_IN = ('agents.envs.atari', 'agents.envs.minatar',
             'agents.envs.control', 'agents.envs.gym')

class UnknownEnvironmentError(ValueError):
  """A user-supplied environment name that cannot be used."""


# The actions an environment has; an agent asks for one, or for 'any'.
ACTIONS = ('discrete', 'continuous')
TORSO_KINDS = ('features', 'dense')
# The built-in agents of each kind of actions, as `resolve` advises them
# when its caller gives no `agents_for` (the registry gives every
# registered agent).
BUILT_IN_AGENTS = {'discrete': 'apex_dqn or a3c',
                   'continuous': 'apex_dpg or a3c'}


@dataclasses.dataclass(frozen=True)
class RunOption:
  """A run option of a suite's own. Like the run options every program
  takes (`launch.options.RunOptions`), it is a flag of every program, its
  help in docs/running.md's table, checked before anything starts and
  recorded in the run's `run.json`; its value is passed by name to the
  suite's environments' `make`."""

  name: str
  """The flag's name and `make`'s keyword: the suite's name, `_` and more
  (`atari_training`), so that no two suites' options share one."""
  kind: Any
  """Its type, as the flag parses it: int, float, str or bool, or
  `Optional` of one (the flag then takes `none`)."""
  default: Any
  """Its value where no flag, preset or run record gives one."""
  help: str
  """The flag's help."""
  choices: Tuple[Any, ...] = ()
  """The values it takes, if only these; empty: `check` says."""
  check: Optional[Callable[[Any], bool]] = None
  """Whether a value is in range, where `choices` do not say; None: any
  value of its kind is."""
  must: str = ''
  """What a value in range is, as the refusal of another says it
  (`--<name>=<value> is out of range: it must be <must>.`); by default its
  choices, `a or b`."""

  def __post_init__(self):
    if not self.name.isidentifier():
      raise ValueError(f'Run option {self.name!r}: a name is a flag\'s, '
                       'one word of letters, digits and _.')
    if self.check is not None and not self.must:
      raise ValueError(f'Run option {self.name!r}: a check needs `must`, '
                       'what a value in range is.')

  def validate(self, value):
    """Raises ValueError naming the flag, `value` and what the flag's value
    must be, unless `value` is in range."""
    if self.choices:
      check_flag(self.name, value in self.choices, value,
                 self.must or ' or '.join(str(c) for c in self.choices))
    elif self.check is not None:
      check_flag(self.name, self.check(value), value, self.must)


@dataclasses.dataclass(frozen=True)
class Suite:
  """A suite of environments (module docstring)."""

  name: str
  """The prefix of its environments' names: `<name>:<rest>`."""
  resolve: Callable[[str, str], Any]
  """`resolve(env_name, actions)`: the `EnvironmentSpec` of `env_name` (the
  whole name), for an agent of `actions` ('discrete', 'continuous' or
  'any'). Raises `UnknownEnvironmentError(why)`; the registry adds the
  name and the accepted forms to `why`."""
  forms: Mapping[str, str]
  """The forms of name it takes, by the actions of those environments
  ('discrete', 'continuous'): what an error lists as accepted."""
  torsos: Mapping[str, str] = dataclasses.field(default_factory=dict)
  """Its observations' torsos, kind of torso -> `module:callable`."""
  reward_clip: Optional[float] = None
  """Rewards are clipped to [-clip, clip] by value-learning agents unless
  their config says otherwise; None: not clipped."""
  reward_range: Optional[Tuple[float, float]] = None
  """(lowest, highest) reward of one environment frame (an agent step of
  k frames gets at most k times as much), where the suite guarantees them;
  a distributional critic bounds its support with them. None: unknown.
  """
  replay_bytes_per_transition: Optional[int] = None
  """Replay's resident memory per stored transition, measured; None: the
  cloud plan takes the largest measured of any suite."""
  replay_load_measured: bool = False
  """Whether the cloud plan's replay-load figures (docs/replay.md) were
  measured with this suite's transitions."""
  frames_per_step: int = 1
  """Environment frames per agent step (an action repeat)."""
  frames_per_second: Optional[float] = None
  """The emulator's frames per second of real time (videos); None: the
  environment's `control_timestep`, else 10 agent steps/s."""
  options: Tuple[Union[RunOption, str], ...] = ()
  """The keyword options its environments' `make` takes: each a run option
  of its own (`RunOption`), or the name of one given otherwise (a run
  option of every program, `launch.options.RunOptions`; `noops`, which
  `EnvironmentSpec.make_environment` passes for analyses). The other run
  options are not passed."""
  evaluation_note: Optional[Callable[[Mapping[str, Any]], str]] = None
  """What makes its evaluation episodes differ, given the options: said by
  `programs/evaluate.py`."""
  episode_start: Optional[Callable[[Any], Optional[int]]] = None
  """How an episode just begun in an environment started, as a number the
  evaluation records per episode (an Atari game's no-op frames); None: it
  records none."""

  def __post_init__(self):
    if not self.name or ':' in self.name:
      raise ValueError(f'Suite {self.name!r}: a name is one word without '
                       '":" (environments are named <suite>:<rest>).')
    unknown = set(self.forms) - set(ACTIONS)
    if not self.forms or unknown:
      raise ValueError(f'Suite {self.name!r}: forms must be keyed by '
                       f'{" and/or ".join(ACTIONS)}, not {sorted(unknown)}.')
    unknown = set(self.torsos) - set(TORSO_KINDS)
    if unknown:
      raise ValueError(f'Suite {self.name!r}: torsos are keyed by '
                       f'{", ".join(TORSO_KINDS)}, not {sorted(unknown)}.')
    if not all(isinstance(option, (RunOption, str)) for option in
               self.options) or len(set(self.option_names)) < len(
                   self.options):
      raise ValueError(f'Suite {self.name!r}: its options are each a '
                       'RunOption or a name, each name once.')
    for option in self.run_options:
      if not option.name.startswith(f'{self.name}_'):
        raise ValueError(f'Suite {self.name!r}: its run option '
                         f'{option.name!r} must be named {self.name}_<...>.')

  @property
  def actions(self) -> Tuple[str, ...]:
    """The actions its environments may have."""
    return tuple(action for action in ACTIONS if action in self.forms)

  def torso(self, kind: str) -> Optional[Callable[[], Any]]:
    """The factory of its torso of `kind` (`TORSO_KINDS`), imported; None:
    it names none (an MLP serves)."""
    if kind not in TORSO_KINDS:
      raise ValueError(f'No kind of torso {kind!r}: {", ".join(TORSO_KINDS)}.')
    name = self.torsos.get(kind)
    return None if name is None else plugins.load(name)

  @property
  def option_names(self) -> Tuple[str, ...]:
    """The names of the keyword options its environments take."""
    return tuple(getattr(option, 'name', option) for option in self.options)

  @property
  def run_options(self) -> Tuple[RunOption, ...]:
    """The run options of its own, each a flag."""
    return tuple(option for option in self.options
                 if isinstance(option, RunOption))

  def take_options(self, options: Mapping[str, Any]) -> Dict[str, Any]:
    """The options of `options` its environments take."""
    return {name: value for name, value in options.items()
            if name in self.option_names}


_SUITES: Dict[str, Suite] = {}


def register(suite: Suite) -> Suite:
  """Adds `suite` to the registry and returns it. Registering a name again
  with the same definition is harmless (a module imported twice); with
  another one it is an error."""
  known = _SUITES.get(suite.name)
  if known is not None and known != suite:
    raise ValueError(f'A suite named {suite.name!r} is registered already; '
                     'choose another name.')
  _SUITES[suite.name] = suite
  return suite


def _load_built_in() -> List[str]:
  return [importlib.import_module(module).SUITE.name for module in _BUILT_IN]


def built_in_names() -> List[str]:
  """The built-in suites' names (those this package registers)."""
  return _load_built_in()


def names() -> List[str]:
  """Every registered suite's name, the built-in ones first."""
  built_in = _load_built_in()
  return built_in + [name for name in _SUITES if name not in built_in]


def get(name: str) -> Suite:
  """The suite named `name`; a ValueError naming the known ones if none."""
  _load_built_in()
  if name not in _SUITES:
    raise ValueError(f'No environment suite {name!r} is registered (known: '
                     f'{", ".join(_SUITES)}); a suite of your own is '
                     'registered by a module named with --plugins.')
  return _SUITES[name]


def run_options(built_in_only: bool = False) -> List[RunOption]:
  """Every registered suite's run options of its own, the built-in suites'
  first (with `built_in_only`, only theirs)."""
  wanted = built_in_names() if built_in_only else names()
  return [option for name in wanted for option in get(name).run_options]


def accepted_forms(actions: str) -> str:
  """The forms of name of every suite with environments of `actions`
  ('any': all of them), as an error lists them."""
  wanted = ACTIONS if actions == 'any' else (actions,)
  return '; '.join(
      suite.forms[action] for action in wanted for suite in
      (get(name) for name in names()) if action in suite.forms)


def largest_replay_bytes() -> int:
  """The largest of the suites' measured bytes per replay transition."""
  return max(get(name).replay_bytes_per_transition or 0 for name in names())


def resolve(env_name: str, actions: str,
            agents_for: Optional[Callable[[Tuple[str, ...]], str]] = None):
  """The `EnvironmentSpec` of `env_name` for an agent of `actions`
  ('discrete', 'continuous' or 'any'). `agents_for(actions)`: the agents
  to advise for a suite of other actions (`agents.registry.agents_for`;
  default: the built-in ones, `BUILT_IN_AGENTS`).

  Raises:
    UnknownEnvironmentError: the name has no suite, the suite has no such
      environment, or not of those actions. The message names the flag's
      value and lists the accepted forms.
  """
  accepted = accepted_forms(actions)

  def fail(why: str):
    return UnknownEnvironmentError(
        f'--env={env_name!r}: {why}. Accepted forms: {accepted}.')

  kind, sep, rest = env_name.partition(':')
  if not sep or not rest:
    raise fail('the name has no <kind>: prefix')
  if kind not in names():
    raise fail(f'unknown kind {kind!r}')
  suite = _SUITES[kind]
  if actions != 'any' and actions not in suite.actions:
    advice = (agents_for(suite.actions) if agents_for else
              ' or '.join(BUILT_IN_AGENTS[action] for action in suite.actions))
    raise fail(f'{kind} environments have {" or ".join(suite.actions)} '
               f'actions; use {advice} for them')
  try:
    return suite.resolve(env_name, actions)
  except UnknownEnvironmentError as error:
    raise fail(str(error)) from None
