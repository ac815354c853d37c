"""Every results page made again from its committed data alone, without the
runs (which stay outside the repository): `results/<name>.md` from
`results/<name>.json` (and, for a long run, its CSV of evaluation rounds),
by the renderer of the script that collected it. pong_45min.md is written
by hand around an opening made from its JSON (`results/pong_45min.py`).
tests/test_results_pages.py checks that every page is what this would write.

  .venv/bin/python -m results.pages              # every page
  .venv/bin/python -m results.pages replay pong  # these pages
"""

import importlib
import json
import os
import sys
from typing import List

from results import long_run
from results import page_registry
from results import run

RESULTS = page_registry.RESULTS
# The scripts that render pages of their own; each registers its page
# (`page_registry.register`) as it is imported.
PAGE_MODULES = ('a3c_default', 'a3c_diagnosis', 'a3c_minatar', 'chaos',
                'd4pg_dmc500k', 'dpg_control', 'dpg_dmc500k', 'minatar',
                'minatar_bf16', 'minatar_c51', 'pong_45min',
                'r2d2_hidden_cartpole', 'r2d2_minatar')
for _module in PAGE_MODULES:
  importlib.import_module(f'results.{_module}')


def names() -> List[str]:
  """Every page that has data: the name of each results/*.json."""
  return sorted(name[:-len('.json')] for name in os.listdir(RESULTS)
                if name.endswith('.json'))


def load(name: str):
  """The page data results/<name>.json."""
  with open(os.path.join(RESULTS, f'{name}.json')) as f:
    return json.load(f)


page_path = page_registry.page_path


def render(name: str) -> str:
  """The text of results/<name>.md, from its data alone: by the renderer
  its script registered, else as a plain run's page (`results/run.py`) or
  a long run's (with its CSV of evaluation rounds)."""
  data = load(name)
  registered = page_registry.renderer(name)
  if registered is not None:
    return registered(data)
  if name in run.ANALYSES:
    return run.render(name, data)
  return long_run.render(name, data, long_run.read_rounds(name))


def main(argv: List[str]):
  chosen = argv[1:] or names()
  unknown = sorted(set(chosen) - set(names()))
  if unknown:
    sys.stderr.write(f'error: no results/<name>.json for {unknown}; the '
                     f'pages with data: {", ".join(names())}.\n')
    sys.exit(2)
  for name in chosen:
    text = render(name)
    with open(page_path(name), 'w') as f:
      f.write(text)
    print(f'Wrote results/{name}.md')


if __name__ == '__main__':
  main(sys.argv)
