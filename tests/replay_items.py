"""Reading a replay table back, item by item, for tests that check what was
written to a real Reverb server."""

import dataclasses
from typing import List

import numpy as np
import reverb

from agents import adders
from agents import replay


def table_size(client: reverb.Client) -> int:
  return client.server_info()[replay.TABLE].current_size


@dataclasses.dataclass
class Item:
  key: int
  priority: float
  observation: np.ndarray
  action: np.ndarray
  n_step_return: np.ndarray
  discount: np.ndarray
  next_observation: np.ndarray


def read_all_items(client: reverb.Client) -> List[Item]:
  """Every item of the table, exactly once: sample one, delete it, repeat.

  Deleting each sampled item makes the enumeration complete and free of
  repeats whatever the (prioritised, random) sampler picks.
  """
  items = []
  for _ in range(table_size(client)):
    sample = next(client.sample(replay.TABLE, 1, emit_timesteps=False,
                                unpack_as_table_signature=True))
    key = int(sample.info.key)
    data = sample.data
    items.append(Item(
        key=key,
        priority=float(sample.info.priority),
        observation=np.asarray(data[adders.OBSERVATION]),
        action=np.asarray(data[adders.ACTION]),
        n_step_return=np.asarray(data[adders.N_STEP_RETURN]),
        discount=np.asarray(data[adders.DISCOUNT]),
        next_observation=np.asarray(data[adders.NEXT_OBSERVATION])))
    client.mutate_priorities(replay.TABLE, deletes=[key])
  assert table_size(client) == 0
  assert len({item.key for item in items}) == len(items)
  return items
