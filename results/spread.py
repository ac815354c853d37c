"""A figure over seeds, as every results page and the README's table state
it: the mean, the sample standard deviation (n - 1: the seeds are a sample
of the runs one could make) and each seed's value. With one seed there is
no spread over seeds, and the text says so instead of giving one.
"""

from typing import Dict, List, Optional, Sequence

import numpy as np


def sample_sd(values: Sequence[float]) -> Optional[float]:
  """The sample standard deviation of `values` (ddof=1); None for one."""
  if len(values) < 2:
    return None
  return float(np.std(values, ddof=1))


def mean_and_sd(values: Sequence[float], form: str = '{:.1f}') -> str:
  """'mean ± sample sd' of `values`, or the value alone for one seed."""
  mean = form.format(float(np.mean(values)))
  sd = sample_sd(values)
  return mean if sd is None else f'{mean} ± {form.format(sd)}'


def seeds_phrase(count: int, each: str) -> str:
  """How many seeds `each` setting has ('3 seeds a setting'), said so that
  one seed is not taken for a spread."""
  if count == 1:
    return f'one seed {each}, so no spread over seeds'
  return f'{count} seeds {each}'


def how_stated(count: int) -> str:
  """What `seed_table` gives for settings of `count` seeds, as a clause
  to end a sentence with ('; over seeds, ...'); nothing for one seed."""
  if count == 1:
    return ''
  return ('; over seeds, the mean ± the sample standard deviation, then each '
          'seed\'s value')


def seed_table(label: str, figure: str, values: Dict[str, Dict[int, float]],
               extra: Optional[Dict[str, List[str]]] = None,
               form: str = '{:.1f}') -> List[str]:
  """A markdown table, one row a setting: the figure over its seeds (mean ±
  sample sd, `mean_and_sd`), then each seed's value in a column of its
  own ('-' where a setting lacks that seed); when every setting has the
  same one seed, its value alone. `values`: setting -> {seed: value};
  `extra`: column title -> one cell a setting, after the seeds."""
  seeds = sorted({seed for by_seed in values.values() for seed in by_seed})
  extra = extra or {}
  if len(seeds) == 1:
    columns = [f'{figure} (seed {seeds[0]})']
    cells = lambda by_seed: [form.format(by_seed[seeds[0]])]
  else:
    columns = [figure, *[f'seed {seed}' for seed in seeds]]
    cells = lambda by_seed: [
        mean_and_sd(list(by_seed.values()), form),
        *[form.format(by_seed[seed]) if seed in by_seed else '-'
          for seed in seeds]]
  lines = ['| ' + ' | '.join([label, *columns, *extra]) + ' |',
           '|' + '---|' * (1 + len(columns) + len(extra))]
  for index, (setting, by_seed) in enumerate(values.items()):
    row = [setting, *cells(by_seed), *[column[index]
                                       for column in extra.values()]]
    lines.append('| ' + ' | '.join(row) + ' |')
  return lines
