"""Every results page made again from its committed data alone, without the
runs (which stay outside the repository): `results/<name>.md` from
`results/<name>.json` (and, for a long run, its CSV of evaluation rounds),
by the renderer of the script that collected it. pong_45min.md is written
by hand around an opening made from its JSON (`results/pong_45min.py`).
tests/test_results_pages.py checks that every page is what this would write.

  .venv/bin/python -m results.pages              # every page
  .venv/bin/python -m results.pages replay pong  # these pages
"""

import json
import os
import sys
from typing import List

from results import a3c_default
from results import a3c_diagnosis
from results import a3c_minatar
from results import chaos
from results import dpg_control
from results import d4pg_dmc500k
from results import dpg_dmc500k
from results import long_run
from results import minatar
from results import minatar_c51
from results import pong_45min
from results import run

RESULTS = os.path.dirname(os.path.abspath(__file__))


def names() -> List[str]:
  """Every page that has data: the name of each results/*.json."""
  return sorted(name[:-len('.json')] for name in os.listdir(RESULTS)
                if name.endswith('.json'))


def load(name: str):
  """The page data results/<name>.json."""
  with open(os.path.join(RESULTS, f'{name}.json')) as f:
    return json.load(f)


def page_path(name: str) -> str:
  return os.path.join(RESULTS, f'{name}.md')


def render(name: str) -> str:
  """The text of results/<name>.md, from its data alone."""
  data = load(name)
  if name == minatar.ANALYSIS:
    return minatar.render(data)
  if name == minatar_c51.ANALYSIS:
    return minatar_c51.render(data)
  if name == dpg_control.ANALYSIS:
    return dpg_control.render(data)
  if name == dpg_dmc500k.ANALYSIS:
    return dpg_dmc500k.render(data)
  if name == d4pg_dmc500k.ANALYSIS:
    return d4pg_dmc500k.render(data)
  if name == chaos.ANALYSIS:
    return chaos.render(data)
  if name == a3c_diagnosis.ANALYSIS:
    return a3c_diagnosis.render(data)
  if name == a3c_default.ANALYSIS:
    return a3c_default.render(data)
  if name == a3c_minatar.ANALYSIS:
    return a3c_minatar.render(data)
  if name == pong_45min.NAME:
    with open(page_path(name)) as f:
      return pong_45min.with_current_opening(f.read(), data)
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
