"""The results pages that a script of their own renders, each registered by
that script: its name (the analysis: `results/<name>.json` holds its data,
`results/<name>.md` is the page) and its renderer, data -> the page's text.
`results/pages.py` imports every such script (`PAGE_MODULES`) and renders
through this table; a page no script registers is a plain run's
(`results/run.py`) or a long run's (`results/long_run.py`).

Nothing here imports a page: a page imports this.
"""

import os
from typing import Any, Callable, Dict, Optional

RESULTS = os.path.dirname(os.path.abspath(__file__))

Renderer = Callable[[Dict[str, Any]], str]
_RENDERERS: Dict[str, Renderer] = {}


def page_path(name: str) -> str:
  """results/<name>.md."""
  return os.path.join(RESULTS, f'{name}.md')


def register(name: str, render: Renderer):
  """`render` makes results/<name>.md from results/<name>.json's data."""
  if name in _RENDERERS and _RENDERERS[name] is not render:
    raise ValueError(f'results page {name!r} is registered twice')
  _RENDERERS[name] = render


def renderer(name: str) -> Optional[Renderer]:
  """The renderer registered for `name`, or None."""
  return _RENDERERS.get(name)
