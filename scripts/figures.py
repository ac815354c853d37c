"""The measured figures in README.md and docs/, each made from its data.

A figure in prose is written with its source beside it, in a comment that a
rendered page does not show:

  Pong reaches <!-- from results/pong.json: {best_return:+.1f} -->+18.3<!-- end -->
  in <!-- from results/pong.json: {frames / 1e6:.2f}M -->13.49M<!-- end --> frames.

The comment names a JSON file, a CSV file (its `rows`, each a dict of
numbers by column), or a results page that a script makes from its data
(its `text`, and `find(pattern, group=1)`: the group of the pattern's first
match, for the statistics a page works out), from the repository's root,
and a template: text with `{expression:format}` fields, as Python's
`str.format`, whose expressions are read in the file's data: its top-level
keys by name, `data` for the whole, subscripts (`runs[0]['return']`),
arithmetic, comprehensions, and `len`, `min`, `max`, `sum`, `round`, `abs`,
`sorted`, `median`, `mean`, `stdev` (ddof=1), `float`, `int`, `next`. The
text between the comment and `<!-- end -->` is what the template gives.

  .venv/bin/python scripts/figures.py            rewrites every figure
  .venv/bin/python scripts/figures.py --check    lists those out of date
  .venv/bin/python scripts/figures.py --unmarked lists the numbers in prose
                                                 that look measured (a
                                                 decimal, or a unit of
                                                 time, rate, size or ratio)
                                                 and name no source: each is
                                                 a setting, a citation, or a
                                                 figure to mark

tests/test_docs.py checks that every figure is what its data gives: a result
or benchmark regenerated with other figures fails it until the prose is
read again and the figures rewritten.
"""

import csv
import glob
import json
import os
import re
import statistics
import sys
from typing import Any, Dict, Iterator, List, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = ['README.md'] + sorted(
    os.path.relpath(path, ROOT)
    for path in glob.glob(os.path.join(ROOT, 'docs', '*.md')))

FIGURE = re.compile(r'<!-- from (?P<source>[^\s:]+): (?P<template>.*?) -->'
                    r'(?P<shown>.*?)<!-- end -->', re.DOTALL)
# What an expression may call.
_FUNCTIONS = {'len': len, 'min': min, 'max': max, 'sum': sum, 'round': round,
              'abs': abs, 'sorted': sorted, 'median': statistics.median,
              'mean': statistics.mean, 'stdev': statistics.stdev,
              'float': float, 'int': int, 'next': next}


class BadFigure(ValueError):
  """A figure whose source or template cannot be read."""


def _number(text: str):
  """A CSV cell: its number, or its text."""
  try:
    return int(text)
  except ValueError:
    try:
      return float(text)
    except ValueError:
      return text


def _data(source: str, cache: Dict[str, Any]) -> Any:
  if source not in cache:
    path = os.path.join(ROOT, source)
    try:
      with open(path) as f:
        if source.endswith('.md'):  # A page made from data: its text.
          cache[source] = {'text': f.read()}
        elif source.endswith('.csv'):
          cache[source] = {'rows': [{key: _number(value)
                                     for key, value in row.items()}
                                    for row in csv.DictReader(f)]}
        else:
          cache[source] = json.load(f)
    except (OSError, ValueError) as error:
      raise BadFigure(f'its source {source} cannot be read: {error}') from error
  return cache[source]


def _fields(template: str) -> Iterator[Tuple[str, str, str]]:
  """(literal text, expression, format) of each `{expression:format}` of
  `template` (then its literal tail, with an empty expression). Brackets,
  parentheses and quotes nest: a colon inside them is the expression's."""
  literal, index = [], 0
  while index < len(template):
    char = template[index]
    if char != '{':
      literal.append(char)
      index += 1
      continue
    depth, quote, start = 0, None, index + 1
    index = start
    colon = None
    while index < len(template):
      char = template[index]
      if quote:
        quote = None if char == quote else quote
      elif char in '\'"':
        quote = char
      elif char in '([{':
        depth += 1
      elif char in ')]}' and depth:
        depth -= 1
      elif char == '}':
        break
      elif char == ':' and depth == 0:
        colon = index
      index += 1
    else:
      raise BadFigure(f'{template!r}: a field is not closed')
    end = colon if colon is not None else index
    yield ''.join(literal), template[start:end].strip(), (
        template[colon + 1:index] if colon is not None else '')
    literal, index = [], index + 1
  yield ''.join(literal), '', ''


def _find(source: str, text: str, pattern: str, group: int) -> str:
  match = re.search(pattern, text)
  if match is None:
    raise BadFigure(f'{source} has nothing that {pattern!r} matches')
  return match.group(group)


def render(source: str, template: str, cache: Dict[str, Any]) -> str:
  """The text `template`'s fields give in the data of `source`."""
  data = _data(source, cache)
  names = {'__builtins__': _FUNCTIONS, 'data': data}
  if isinstance(data, dict):
    names.update({key: value for key, value in data.items()
                  if key.isidentifier()})
  if source.endswith('.md'):
    names['find'] = lambda pattern, group=1: _find(source, data['text'],
                                                   pattern, group)
  out = []
  for literal, field, spec in _fields(template):
    out.append(literal)
    if not field:
      continue
    try:
      value = eval(field, names)  # pylint: disable=eval-used
    except Exception as error:  # pylint: disable=broad-except
      raise BadFigure(f'{{{field}}} is not in {source}: {error!r}') from error
    try:
      out.append(format(value, spec))
    except (TypeError, ValueError) as error:
      raise BadFigure(f'{{{field}:{spec}}} of {value!r}: {error}') from error
  return ''.join(out)


def figures(text: str) -> Iterator[re.Match]:
  return FIGURE.finditer(text)


def stale(page: str) -> List[Tuple[int, str, str]]:
  """(line, shown, made) of every figure of `page` whose shown text is not
  what its data makes; raises BadFigure (naming the page and line) for one
  that cannot be made."""
  with open(os.path.join(ROOT, page)) as f:
    text = f.read()
  cache: Dict[str, Any] = {}
  found = []
  for match in figures(text):
    line = text.count('\n', 0, match.start()) + 1
    try:
      made = render(match['source'], match['template'], cache)
    except BadFigure as error:
      raise BadFigure(f'{page}:{line}: {error}') from error
    if made != match['shown']:
      found.append((line, match['shown'], made))
  return found


def rewritten(text: str) -> str:
  """`text` with every figure made anew from its data."""
  cache: Dict[str, Any] = {}

  def make(match: re.Match) -> str:
    made = render(match['source'], match['template'], cache)
    return (f'<!-- from {match["source"]}: {match["template"]} -->{made}'
            '<!-- end -->')
  return FIGURE.sub(make, text)


# A number in prose that looks measured: a decimal, or a count with a unit
# of time, rate, size or ratio.
_UNITS = (r'(?:[a-z]+/s|µs|ms|s|min|minutes|hours|bytes|GiB|MiB|GB|MB|KB|%|×|'
          r'x)\b')
_LOOKS_MEASURED = re.compile(
    rf'(?<![\w.§/=-])~?(?:\d[\d,]*\.\d+(?: ?{_UNITS})?|'
    rf'\d[\d,]*(?: ?{_UNITS}|[KM]\b))')
# What is not prose: code blocks and spans, marked figures, comments, link
# targets, and version numbers (two dots).
_NOT_PROSE = re.compile(r'```.*?```|`[^`\n]*`|<!--.*?-->.*?<!-- end -->|'
                        r'<!--.*?-->|\]\([^)]*\)|\b\d+\.\d+\.\d+\b',
                        re.DOTALL)


def unmarked(page: str) -> List[Tuple[int, str]]:
  """(line, number) of each number in `page`'s prose that looks measured
  and names no source (see `_LOOKS_MEASURED`)."""
  with open(os.path.join(ROOT, page)) as f:
    text = f.read()
  # Blanked, not removed: the lines keep their numbers.
  prose = _NOT_PROSE.sub(lambda match: re.sub(r'[^\n]', ' ', match.group(0)),
                         text)
  return [(prose.count('\n', 0, match.start()) + 1, match.group(0))
          for match in _LOOKS_MEASURED.finditer(prose)]


def main(argv: List[str]) -> int:
  if '--unmarked' in argv[1:]:
    for page in PAGES:
      for line, number in unmarked(page):
        print(f'{page}:{line}: {number}')
    return 0
  check = '--check' in argv[1:]
  out_of_date = 0
  for page in PAGES:
    path = os.path.join(ROOT, page)
    for line, shown, made in stale(page):
      out_of_date += 1
      print(f'{page}:{line}: shows {shown!r}, its data makes {made!r}')
    if not check:
      with open(path) as f:
        text = f.read()
      new = rewritten(text)
      if new != text:
        with open(path, 'w') as f:
          f.write(new)
  if check:
    return 1 if out_of_date else 0
  print(f'{out_of_date} figure(s) rewritten.')
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv))
