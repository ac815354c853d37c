"""What every Ape-X actor shares: its adder and its parameter pulls."""

from typing import Optional

import acme
import dm_env
from acme.tf import variable_utils

from agents import adders as adders_lib


class ApeXActor(acme.Actor):
  """Base of the agents' actors: subclasses choose actions and `observe`.

  With an adder, the actor writes prioritised n-step transitions; without one
  (the evaluator) it only acts.
  """

  def __init__(self,
               adder: Optional[adders_lib.NStepPrioritizedAdder] = None,
               variable_client: Optional[variable_utils.VariableClient] = None):
    self._adder = adder
    self._variable_client = variable_client

  def observe_first(self, timestep: dm_env.TimeStep):
    if self._adder is not None:
      self._adder.add_first(timestep)

  def update(self, wait: bool = False):
    """Pulls the learner's parameters every `update_period` calls; with
    `wait`, pulls them now and blocks until they are copied."""
    if self._variable_client is None:
      return
    if wait:
      self._variable_client.update_and_wait()
    else:
      self._variable_client.update()
