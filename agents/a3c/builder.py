"""Builds A3C's parts (network, shared parameters, workers, evaluator) from
its config, for the program graph (`launch.program`) and for
code that runs A3C in one process (threads, `acme.EnvironmentLoop`).

The program's learner is A3C's parameter server (`make_learner`); its
actors are A3C's workers (`make_worker`), each an actor-learner with one
environment; the evaluator is an `A3CActor` without a server
(`make_actor`). There is no replay: A3C's builder is a builder of workers
(`agents.builders.WorkerBuilder`).
"""

import copy
from typing import Optional, Sequence, Union

import acme
import numpy as np
import sonnet as snt
from acme.tf import utils as tf2_utils
from acme.utils import counting
from acme.utils import loggers

from agents import snapshots
from agents import builders
from agents import variables as variables_lib
from agents.a3c import actor as actor_lib
from agents.a3c import learning
from agents.a3c import networks
from agents.a3c.config import A3CConfig
from agents.envs.environments import EnvironmentSpec


class A3CBuilder(builders.WorkerBuilder):
  """Makes the parts of A3C for one environment and config."""

  name = 'a3c'

  config: A3CConfig
  environment: EnvironmentSpec

  def __init__(self, config: A3CConfig, environment: EnvironmentSpec,
               max_actor_steps: Optional[int] = None, networks=None,
               name: Optional[str] = None):
    """`max_actor_steps`: the run's step budget, over which the learning
    rate anneals to 0 (A3C Supp. §8); None: it stays constant."""
    super().__init__(config, environment, networks, name)
    self.max_actor_steps = max_actor_steps

  def default_networks(self):
    return networks.make_networks

  def for_program(self, shape: builders.ProgramShape) -> 'A3CBuilder':
    """This builder for a program of `shape`: the learning rate anneals
    over its step budget."""
    builder = copy.copy(self)
    builder.max_actor_steps = shape.max_actor_steps
    return builder

  @property
  def continuous(self) -> bool:
    return not np.issubdtype(self.environment.spec.actions.dtype, np.integer)

  def make_network(self) -> snt.Module:
    """A3C's policy and value network (of the network factory) with its
    variables created."""
    network = self.network_factory(self.environment, self.config)
    tf2_utils.create_variables(network, [self.environment.spec.observations])
    return network

  def make_learner(self, counter: Optional[counting.Counter] = None,
                   logger: Optional[loggers.Logger] = None,
                   log_every: float = 0.0) -> learning.A3CParameterServer:
    """The shared parameters and shared RMSProp (the program's learner)."""
    return learning.A3CParameterServer(
        self.make_network(), self.config, total_steps=self.max_actor_steps,
        counter=counter, logger=logger, log_every=log_every)

  def make_worker(self, parameter_server,
                  seed: Optional[int] = None) -> actor_lib.A3CActor:
    """An actor-learner: samples its policy, and sends the gradients of
    every rollout to `parameter_server` (an `A3CParameterServer` or a
    handle to the program's learner)."""
    spec = self.environment.spec
    return actor_lib.A3CActor(self.make_network(), spec.observations,
                              spec.actions, self.config,
                              parameter_server=parameter_server, seed=seed)

  def make_actor(self, variable_source: acme.VariableSource,
                 exploration: Union[float, Sequence[float]],
                 replay_client=None,
                 seed: Optional[int] = None) -> actor_lib.A3CActor:
    """The evaluator: the policy's most likely action, or with probability
    `exploration` a random one (one float per environment for an evaluator
    of several), with parameters pulled from `variable_source` (newest
    first, when it has them)."""
    if replay_client is not None:
      raise ValueError('A3C learns without replay.')
    network = self.make_network()
    spec = self.environment.spec
    client = variables_lib.NewestVariableClient(
        variable_source, {learning.POLICY: network.variables})
    client.update_and_wait()
    return actor_lib.A3CActor(network, spec.observations, spec.actions,
                              self.config, variable_client=client,
                              epsilon=exploration, seed=seed)

  @property
  def evaluation_exploration(self) -> float:
    return self.config.evaluation_epsilon

  def policy_state(self):
    """The part of the parameter server's state that its policy needs,
    newly built (to restore from a checkpoint, then `policy_snapshot`)."""
    return {'network': self.make_network()}

  def policy_snapshot(self, learner_state) -> snapshots.PolicySnapshot:
    """The policy's most likely action (`networks.ModePolicy`)."""
    return snapshots.PolicySnapshot(
        networks.ModePolicy(learner_state['network'],
                            self.environment.spec.actions),
        self.environment, self.name, q_network=False, policy='mode')
