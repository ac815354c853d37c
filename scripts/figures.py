"""The measured figures in README.md and docs/, each made from its data.

A figure in prose is marked with its name, in comments that a rendered page
does not show:

  Pong reaches <!-- fig pong.best_return -->+18.3<!-- end --> in
  <!-- fig pong.frames -->13.49M<!-- end --> frames.

and docs/figures.txt defines each name once, with its source and its
template, one figure a line:

  # name            source             template
  pong.best_return  results/pong.json  {best_return:+.1f}
  pong.frames       results/pong.json  {frames / 1e6:.2f}M

The name, the source and the template stand apart by spaces; the template
is the rest of the line (its own spaces kept, the line's last ones not). A
line that begins with spaces and `|` goes on with the template above it
after a line break: `  | p = {p}` adds a line break and `p = {p}` (the text
after `| `), for a figure whose shown text breaks a line. Blank lines and
lines that begin with `#` are left alone. A name (letters, digits, `_`,
`.`, `-`) is defined once, each marker names a definition, and each
definition is used by some page: otherwise the check fails, naming the file
and line.

The source is a JSON file, a CSV file (its `rows`, each a dict of numbers
by column), or a results page that a script makes from its data (its
`text`, and `find(pattern, group=1)`: the group of the pattern's first
match, for the statistics a page works out), from the repository's root.
The template is text with `{expression:format}` fields, as Python's
`str.format`, whose expressions are read in the file's data: its top-level
keys by name, `data` for the whole, subscripts (`runs[0]['return']`),
arithmetic, comprehensions, and `len`, `min`, `max`, `sum`, `round`, `abs`,
`sorted`, `median`, `mean`, `stdev` (ddof=1), `float`, `int`, `next`, and
`word(clause)`: the verdict word (ahead, behind, no difference shown, met,
not met, no verdict) of a clause a results page's own test wrote. The text
between the marker and `<!-- end -->` is what the template gives.

A verdict word is a figure too: each ahead, behind, level, met, no
difference, ... of the prose is marked, its template `{word(find(...))}` on
the page that tests it, so that a verdict the data no longer gives fails
the check at the sentence that states it; `NOT_VERDICTS` lists the words'
other uses (behind a firewall, ...).

A figure may also carry its source and template inline, the older form:
`<!-- from results/pong.json: {best_return:+.1f} -->+18.3<!-- end -->`. It
is made and checked as a named one (tests/test_docs.py wants none left);
`--name` moves each into docs/figures.txt under a name made from its
source's stem (with its folder if that is not results/, and `_md` or `_csv`
if it is no JSON) and the keys and names its template's first expression
reads, less containers such as `settings` (results/pong_45min.json and
`{runs[0]['return']:.1f}` give `pong_45min.runs0_return`), short (about
NAME_LENGTH characters), a name made twice getting `_2`, `_3`, ...; a
source and template written more than once get one name.

  .venv/bin/python scripts/figures.py            rewrites every figure
  .venv/bin/python scripts/figures.py --check    lists those out of date
                                                 (and the names unknown or
                                                 unused)
  .venv/bin/python scripts/figures.py --name     names every inline figure
  .venv/bin/python scripts/figures.py --verdicts lists the verdict words
                                                 that no figure gives
  .venv/bin/python scripts/figures.py --unmarked lists the numbers in prose
                                                 that look measured (a
                                                 decimal, or a unit of time,
                                                 rate, size or ratio; signed,
                                                 or a range such as 53-68K
                                                 as one) and name no source:
                                                 each is a setting, a
                                                 citation, or a figure to
                                                 mark

tests/test_docs.py checks that every figure is what its data gives: a result
or benchmark regenerated with other figures fails it until the prose is
read again and the figures rewritten.
"""

import ast
import collections
import csv
import glob
import json
import os
import re
import statistics
import sys
from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Set, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The file of named figures, from ROOT.
NAMED = os.path.join('docs', 'figures.txt')


def pages() -> List[str]:
  """README.md and docs/*.md, from ROOT."""
  return ['README.md'] + sorted(
      os.path.relpath(path, ROOT)
      for path in glob.glob(os.path.join(ROOT, 'docs', '*.md')))


PAGES = pages()

# Either form: a name (of docs/figures.txt), or a source and a template.
MARKER = re.compile(r'<!-- (?:fig (?P<name>[\w.-]+)|'
                    r'from (?P<source>[^\s:]+): (?P<template>.*?)) -->'
                    r'(?P<shown>.*?)<!-- end -->', re.DOTALL)
_OPENING = re.compile(r'<!-- (?:fig|from) ')
_NAME = re.compile(r'[\w.-]+')
# What an expression may call.
def word(clause: str) -> str:
  """The verdict word of a results page's verdict `clause` (as
  results/spread.py's `verdict` and the pages' comparisons write it):
  'ahead', 'behind', 'no difference shown', 'met', 'not met' or 'no
  verdict'. A clause it cannot read is an error, not a guess."""
  clause = clause.strip()
  for start, said in (('no difference shown', 'no difference shown'),
                      ('no verdict', 'no verdict'), ('not yet', 'no verdict'),
                      ('not met', 'not met'), ('met', 'met')):
    if clause.startswith(start):
      return said
  if re.search(r'\bahead( of\b|$)', clause):
    return 'ahead'
  if re.search(r'\bbehind\b', clause):
    return 'behind'
  raise BadFigure(f'{clause!r} is no verdict that word() can read')


_FUNCTIONS = {'len': len, 'min': min, 'max': max, 'sum': sum, 'round': round,
              'abs': abs, 'sorted': sorted, 'median': statistics.median,
              'mean': statistics.mean, 'stdev': statistics.stdev,
              'float': float, 'int': int, 'next': next, 'word': word}


class BadFigure(ValueError):
  """A figure whose source or template cannot be read."""


class Definition(NamedTuple):
  """A named figure of docs/figures.txt: what makes it, and where."""
  source: str
  template: str
  line: int


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


def definitions() -> Dict[str, Definition]:
  """The named figures of docs/figures.txt (none if there is no such file),
  by name; raises BadFigure, naming the file and line, for a line that is
  not a definition, a comment or a blank, and for a name defined twice."""
  path = os.path.join(ROOT, NAMED)
  if not os.path.exists(path):
    return {}
  with open(path) as f:
    lines = f.read().splitlines()
  found: Dict[str, Definition] = {}
  last = None
  for number, line in enumerate(lines, 1):
    where = f'{NAMED}:{number}'
    more = re.match(r'\s+\|(?: (?P<text>.*))?$', line)
    if more:
      if last is None:
        raise BadFigure(f'{where}: a `|` line continues no definition')
      found[last] = found[last]._replace(
          template=f'{found[last].template}\n{more["text"] or ""}')
      continue
    last = None
    if not line.strip() or line.lstrip().startswith('#'):
      continue
    parts = line.split(None, 2)
    if len(parts) < 3:
      raise BadFigure(f'{where}: not `name source template`: {line!r}')
    name, source, template = parts[0], parts[1], parts[2].rstrip()
    if not _NAME.fullmatch(name):
      raise BadFigure(f'{where}: {name!r} is not a name (letters, digits, '
                      '`_`, `.`, `-`)')
    if name in found:
      raise BadFigure(f'{where}: {name} is defined again (first at line '
                      f'{found[name].line})')
    found[name] = Definition(source, template, number)
    last = name
  return found


def figures(text: str) -> Iterator[re.Match]:
  """Every figure marked in `text`, named or inline."""
  return MARKER.finditer(text)


def _line(text: str, index: int) -> int:
  return text.count('\n', 0, index) + 1


def markers(page: str, text: str) -> List[Tuple[int, re.Match]]:
  """(line, match) of every figure marked in `text`, the text of `page`;
  raises BadFigure for a marker that opens and is not one."""
  found = list(figures(text))
  starts = {match.start() for match in found}
  for opening in _OPENING.finditer(text):
    if opening.start() not in starts:
      raise BadFigure(
          f'{page}:{_line(text, opening.start())}: a figure marker not '
          'written `<!-- fig NAME -->shown<!-- end -->`: '
          f'{text[opening.start():opening.start() + 60]!r}')
  return [(_line(text, match.start()), match) for match in found]


def _made(page: str, line: int, match: re.Match,
          named: Dict[str, Definition], cache: Dict[str, Any]) -> str:
  """What the data makes for the figure `match` (of `page`, at `line`)."""
  if match['name'] is not None:
    if match['name'] not in named:
      raise BadFigure(f'{page}:{line}: {match["name"]} is not defined in '
                      f'{NAMED}')
    source, template, _ = named[match['name']]
  else:
    source, template = match['source'], match['template']
  try:
    return render(source, template, cache)
  except BadFigure as error:
    raise BadFigure(f'{page}:{line}: {error}') from error


def stale(page: str) -> List[Tuple[int, str, str]]:
  """(line, shown, made) of every figure of `page` whose shown text is not
  what its data makes; raises BadFigure (naming the page and line) for one
  that cannot be made."""
  with open(os.path.join(ROOT, page)) as f:
    text = f.read()
  named = definitions()
  cache: Dict[str, Any] = {}
  found = []
  for line, match in markers(page, text):
    made = _made(page, line, match, named, cache)
    if made != match['shown']:
      found.append((line, match['shown'], made))
  return found


def rewritten(text: str, page: str = '') -> str:
  """`text` (of `page`) with every figure made anew from its data."""
  named = definitions()
  cache: Dict[str, Any] = {}
  out, end = [], 0
  for line, match in markers(page, text):
    made = _made(page, line, match, named, cache)
    out += [text[end:match.start('shown')], made,
            text[match.end('shown'):match.end()]]
    end = match.end()
  return ''.join(out) + text[end:]


def unused() -> List[Tuple[int, str]]:
  """(line, name) of each definition of docs/figures.txt no page uses."""
  used = set()
  for page in pages():
    with open(os.path.join(ROOT, page)) as f:
      used.update(match['name'] for match in figures(f.read())
                  if match['name'] is not None)
  return sorted((definition.line, name)
                for name, definition in definitions().items()
                if name not in used)


def inline_markers(page: str) -> List[Tuple[int, str, str]]:
  """(line, source, template) of each figure of `page` written in the
  older, inline form."""
  with open(os.path.join(ROOT, page)) as f:
    text = f.read()
  return [(line, match['source'], match['template'])
          for line, match in markers(page, text) if match['name'] is None]


# Naming an inline figure. A name is made of phrases: each key, name or
# condition a template's main expression reads, its words joined by `_`.
# The phrases a name loses: containers and joins, not what is measured.
_GENERIC = {'data', 'settings', 'runs', 'run', 'results', 'programs',
            'cases', 'jobs', 'by_kind', 'games', 'tasks', 'rows', 'windows',
            'preset'}
# Words a shortened phrase does not end with.
_JOINS = {'per', 'to', 'at', 'of', 'and', 'with', 'by', 'in', 'on', 'the'}
# And, if it is long, the aggregate that takes its data.
_AGGREGATES = ('mean', 'median', 'min', 'max', 'sum', 'stdev')
# The longest name `--name` makes (a name of a long stem may be longer).
NAME_LENGTH = 44
# The fewest characters a name keeps after its stem.
_KEY_LENGTH = 24


def _words(text: str) -> List[str]:
  return [word for word in re.split(r'[^a-z0-9]+', text.lower()) if word]


def _phrase(text: str) -> List[str]:
  """`text` as a phrase (none if it has no words)."""
  words = _words(text)
  return ['_'.join(words)] if words else []


def _pattern_phrase(pattern: str) -> List[str]:
  """A regular expression's literal text as a phrase (`-15`: minus15), its
  one-letter words left out but for the last."""
  text = re.sub(r'\(\?P<\w+>|\\.', ' ', pattern)
  text = re.sub(r'\[[^\]]*\]', ' ', text)
  text = re.sub(r'-(?=\d)', ' minus', text)
  words = _words(text)
  words = [word for index, word in enumerate(words)
           if len(word) > 1 or index == len(words) - 1]
  return ['_'.join(words)] if words else []


def _phrases(node: ast.AST, bound: Set[str]) -> List[str]:
  """The phrases of an expression's data, in the order of its path: the
  keys and names it reads (`runs[0]['return']`: runs0, return), the
  aggregate that takes them first, and no names it binds itself."""
  def phrases(child: Optional[ast.AST]) -> List[str]:
    return _phrases(child, bound) if child is not None else []

  if isinstance(node, ast.Expression):
    return phrases(node.body)
  if isinstance(node, ast.Name):
    return [] if node.id in bound or node.id == 'data' else _phrase(node.id)
  if isinstance(node, ast.Constant):
    return _phrase(node.value) if isinstance(node.value, str) else []
  if isinstance(node, ast.JoinedStr):
    return _phrase(' '.join(phrase for value in node.values
                            for phrase in phrases(value)))
  if isinstance(node, ast.FormattedValue):
    return phrases(node.value)
  if isinstance(node, ast.Subscript):
    key = node.slice
    index = (key.value if isinstance(key, ast.Constant) else
             -key.operand.value if isinstance(key, ast.UnaryOp) and
             isinstance(key.operand, ast.Constant) else None)
    if isinstance(index, int):
      before = phrases(node.value)
      if index == -1:
        return before + ['last']
      mark = str(index) if index >= 0 else f'm{-index}'
      return before[:-1] + [before[-1] + mark] if before else [mark]
    return phrases(node.value) + phrases(key)
  if isinstance(node, ast.Call):
    function = node.func
    if isinstance(function, ast.Attribute):  # dict.values(), ', '.join().
      return phrases(function.value) or [
          phrase for argument in node.args[:1]
          for phrase in phrases(argument)]
    name = function.id if isinstance(function, ast.Name) else ''
    if name == 'find' and node.args and isinstance(node.args[0], ast.Constant):
      group = node.args[1:2] or [keyword.value for keyword in node.keywords]
      return _pattern_phrase(node.args[0].value) + [
          phrase for argument in group
          if isinstance(argument, ast.Constant) and argument.value != 1
          for phrase in _phrase(str(argument.value))]
    first = ['n'] if name == 'len' else [name] if name in _AGGREGATES else []
    return first + [phrase for argument in node.args[:1]
                    for phrase in phrases(argument)]
  if isinstance(node, (ast.GeneratorExp, ast.ListComp, ast.SetComp)):
    inner = set(bound)
    for generator in node.generators:
      inner |= {name.id for name in ast.walk(generator.target)
                if isinstance(name, ast.Name)}
    out = []
    for generator in node.generators:
      out += _phrases(generator.iter, inner)
    out += _phrases(node.elt, inner)
    for generator in node.generators:  # `w['from_steps'] == 40000`: 40k.
      for condition in generator.ifs:
        for compare in ast.walk(condition):
          if isinstance(compare, ast.Compare) and isinstance(
              compare.ops[0], ast.Eq) and isinstance(
                  compare.comparators[0], ast.Constant) and isinstance(
                      compare.comparators[0].value, int):
            value = compare.comparators[0].value
            out.append(f'{value // 1000}k' if value % 1000 == 0 and value
                       else str(value))
    return out
  if isinstance(node, ast.Lambda):
    return []
  if isinstance(node, ast.IfExp):
    return phrases(node.test) + phrases(node.body) + phrases(node.orelse)
  return [phrase for child in ast.iter_child_nodes(node)
          for phrase in phrases(child)]


def _prefix(source: str) -> str:
  """A source's part of its figures' names: its stem (with its folder's
  name if that is not results/, and its kind if it is not JSON)."""
  folder, base = os.path.split(source)
  stem, extension = os.path.splitext(base)
  parts = [] if os.path.basename(folder) == 'results' else [
      os.path.basename(folder)]
  parts.append(stem)
  if extension not in ('.json', ''):
    parts.append(extension[1:])
  return '_'.join('_'.join(_words(part)) for part in parts)


def _key_phrases(template: str) -> List[str]:
  """The phrases a template's main expression reads: its first field's
  that reads any, or its literal text."""
  for _, field, _ in _fields(template):
    if field:
      try:
        found = _phrases(ast.parse(field, mode='eval'), set())
      except SyntaxError:
        found = _phrase(field)
      if found:
        return list(dict.fromkeys(found))
  return _phrase(template) or ['figure']


def _fitted(phrases: List[str], common: Set[str], length: int) -> str:
  """`phrases` joined by `_`, without the generic ones and those of words
  all common to the source's figures that lead them; then, to fit `length`
  characters, with `per_s` for `per_second`, without aggregates, without
  the common words of all but the last phrase, and then with the longest
  phrase (but the last, while another has words to lose) shortened by its
  last word (and a join it then ends with), one at a time; no word is
  cut."""
  def size() -> int:
    return len('_'.join(phrases))

  def without(phrase: str, lose) -> str:
    return '_'.join(word for word in phrase.split('_')
                    if not lose(word)) or phrase

  phrases = [phrase for phrase in phrases
             if phrase not in _GENERIC] or phrases[-1:]
  while len(phrases) > 1 and set(phrases[0].split('_')) <= common:
    del phrases[0]
  if size() > length:
    phrases = [phrase.replace('per_second', 'per_s') for phrase in phrases]
  if size() > length:
    phrases = [phrase for phrase in phrases
               if phrase not in _AGGREGATES] or phrases
    phrases = [without(phrase, lambda word: word in _AGGREGATES)
               for phrase in phrases]
  if size() > length:
    phrases = [without(phrase, lambda word: word in common)
               for phrase in phrases[:-1]] + phrases[-1:]
  while size() > length:
    shorter = [phrase for phrase in phrases[:-1] if '_' in phrase] or [
        phrase for phrase in phrases if '_' in phrase]
    if not shorter:
      break
    longest = max(shorter, key=len)
    short = longest.rsplit('_', 1)[0]
    while '_' in short and short.rsplit('_', 1)[1] in _JOINS:
      short = short.rsplit('_', 1)[0]
    phrases[phrases.index(longest)] = short
  return '_'.join(list(dict.fromkeys(phrases)))


def name_figures(pairs: List[Tuple[str, str]],
                 taken: Set[str]) -> Dict[Tuple[str, str], str]:
  """A name, not one of `taken`, for each (source, template) of `pairs`: the
  source's stem, a dot, and the phrases of the template's main expression;
  a name made twice gets `_2`, `_3`, ... in the order of `pairs`."""
  by_source: Dict[str, List[Set[str]]] = collections.defaultdict(list)
  for source, template in pairs:
    by_source[source].append({word for phrase in _key_phrases(template)
                              for word in phrase.split('_')})
  common = {}
  for source, sets in by_source.items():
    counts = collections.Counter(word for words in sets for word in words)
    common[source] = {word for word, count in counts.items()
                      if len(sets) > 2 and count > len(sets) / 2}
  names: Dict[Tuple[str, str], str] = {}
  taken = set(taken)
  for source, template in pairs:
    if (source, template) in names:
      continue
    prefix = _prefix(source)
    length = max(NAME_LENGTH - len(prefix) - 1, _KEY_LENGTH)
    key = _fitted(_key_phrases(template), common[source], length)
    name, number = f'{prefix}.{key}', 1
    while name in taken:
      number += 1
      name = f'{prefix}.{key}_{number}'
    taken.add(name)
    names[(source, template)] = name
  return names


def _definition_lines(name: str, source: str, template: str,
                      width: int) -> List[str]:
  first, *more = template.split('\n')
  return [f'{name:<{width}}  {source}  {first}'] + [
      f'  | {line}'.rstrip() for line in more]


_HEADER = """\
# The measured figures of README.md and docs/, each by its name, one a line:
# name, source, template (see scripts/figures.py). A page shows one as
# <!-- fig NAME -->shown<!-- end -->; a `  | ` line goes on with the
# template above it after a line break. Check: scripts/figures.py --check.
"""


def _writable(template: str) -> bool:
  """Whether docs/figures.txt can hold `template` as it is."""
  return template == template.strip() and all(
      line == line.rstrip() for line in template.split('\n'))


def name_inline() -> Tuple[int, int]:
  """Moves every inline figure of the pages into docs/figures.txt, each
  marked by its name instead: a source and template already defined keep
  their name, the others get a new one, added after the last definition of
  their source (a new source's at the end, sources in order). (The number
  of figures moved, the number of names made.)"""
  named = definitions()
  known = {(definition.source, definition.template): name
           for name, definition in named.items()}
  texts, pairs = {}, []
  for page in pages():
    with open(os.path.join(ROOT, page)) as f:
      texts[page] = f.read()
    for line, match in markers(page, texts[page]):
      if match['name'] is None:
        if not _writable(match['template']):
          raise BadFigure(f'{page}:{line}: a template with spaces at the end '
                          f'of a line: {match["template"]!r}')
        pairs.append((match['source'], match['template']))
  new = [pair for pair in dict.fromkeys(pairs) if pair not in known]
  known.update(name_figures(new, set(named)))
  if new:
    _add_definitions([(known[pair], *pair) for pair in new], named)
  moved = 0
  for page, text in texts.items():
    def named_marker(match: re.Match) -> str:
      nonlocal moved
      if match['name'] is not None:
        return match.group(0)
      moved += 1
      name = known[(match['source'], match['template'])]
      return f'<!-- fig {name} -->{match["shown"]}<!-- end -->'
    new_text = MARKER.sub(named_marker, text)
    if new_text != text:
      with open(os.path.join(ROOT, page), 'w') as f:
        f.write(new_text)
  return moved, len(new)


def _add_definitions(added: List[Tuple[str, str, str]],
                     named: Dict[str, Definition]) -> None:
  """Writes the definitions `added` (name, source, template) into
  docs/figures.txt, whose definitions now are `named`: each after the last
  of its source's, or, for a source it has none of, at its end (a blank
  line, then the source's definitions), sources in order, names in order."""
  path = os.path.join(ROOT, NAMED)
  if os.path.exists(path):
    with open(path) as f:
      lines = f.read().splitlines()
  else:
    lines = _HEADER.splitlines()
  by_source: Dict[str, List[Tuple[str, str]]] = collections.defaultdict(list)
  for name, source, template in added:
    by_source[source].append((name, template))
  # The last line of each source's definitions (its `|` lines too).
  ends: Dict[str, int] = {}
  for definition in named.values():
    end = definition.line + definition.template.count('\n')
    ends[definition.source] = max(ends.get(definition.source, 0), end)
  after: Dict[int, List[str]] = collections.defaultdict(list)
  tail: List[str] = []
  for source in sorted(by_source):
    group = sorted(by_source[source])
    width = max([len(name) for name, _ in group] + [
        len(name) for name, definition in named.items()
        if definition.source == source])
    block = [line for name, template in group
             for line in _definition_lines(name, source, template, width)]
    if source in ends:
      after[ends[source]] += block
    else:
      tail += [''] + block
  out = []
  for number, line in enumerate(lines, 1):
    out += [line] + after.get(number, [])
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, 'w') as f:
    f.write('\n'.join(out + tail) + '\n')


# A number in prose that looks measured: a decimal, or a count with a unit
# of time, rate, size or ratio (`%`, `×` and `x` written on the number:
# `84×84` and `2 × 8` are sizes and products); signed (`-10.0`, `−14.8`),
# or a range (`53-68K`, `19.8–21.3`) as one.
_NUMBER = r'\d+(?:,\d{3})*(?:\.\d+)?'
_UNITS = (r'(?:[a-z]+/s|µs|ms|s|min|minutes|h|hours?|seconds?|bytes|'
          r'[KMGT]i?B)')
_LOOKS_MEASURED = re.compile(
    rf'(?<![\w.§/=+~−–-])~?(?P<sign>[-−+])?{_NUMBER}'
    rf'(?P<range>[-–]{_NUMBER})?'
    rf'(?P<unit>[KM](?!\w)|%|[×x](?![\w×])| ?{_UNITS}(?!\w))?')
# What is not prose: code blocks and spans, marked figures, comments, link
# targets, and version numbers (two dots).
_NOT_PROSE = re.compile(r'```.*?```|`[^`\n]*`|<!--.*?-->.*?<!-- end -->|'
                        r'<!--.*?-->|\]\([^)]*\)|\b\d+\.\d+\.\d+\b',
                        re.DOTALL)


def _measured(match: re.Match) -> bool:
  return bool(match['unit']) or '.' in match.group(0)


def _prose(page: str) -> str:
  """`page`'s text with all but its prose (`_NOT_PROSE`) blanked, not
  removed: the lines keep their numbers."""
  with open(os.path.join(ROOT, page)) as f:
    text = f.read()
  return _NOT_PROSE.sub(lambda match: re.sub(r'[^\n]', ' ', match.group(0)),
                        text)


def unmarked(page: str) -> List[Tuple[int, str]]:
  """(line, number) of each number in `page`'s prose that looks measured
  and names no source (see `_LOOKS_MEASURED`): a range such as `53-68K` is
  one number."""
  prose = _prose(page)
  return [(_line(prose, match.start()), match.group(0))
          for match in _LOOKS_MEASURED.finditer(prose) if _measured(match)]


# A verdict word in prose: what a comparison or a goal says of its data.
_VERDICT = re.compile(r'\b(?:ahead|behind|level with|on par|no difference|'
                      r'not met|met|beats?|beaten|outperforms?|'
                      r'(?:better|worse) than)\b', re.IGNORECASE)
# The same words where they are no verdict: a phrase of a page's line that
# holds one, said once here so that a new one is read before it is added.
NOT_VERDICTS = (
    r'behind a firewall', r'minute[^.]*\)\s+behind;', r'streams? ahead',
    r'chunks ahead', r'run ahead of the ratio', r'whose level is off',
    r'furthest behind', r'\| met \|', r'which by itself would still meet')


def unmarked_verdicts(page: str) -> List[Tuple[int, str]]:
  """(line, word) of each verdict word of `page`'s prose (`_VERDICT`) that
  no figure gives and no phrase of `NOT_VERDICTS` explains: a verdict is a
  figure too, made from its data (`word`) like any other."""
  prose = _prose(page)
  found = []
  for match in _VERDICT.finditer(prose):
    # The phrase may run over a line break: the line and its neighbours,
    # and a phrase that explains the word must cover it.
    line_start = prose.rfind('\n', 0, match.start()) + 1
    start = prose.rfind('\n', 0, max(0, line_start - 1)) + 1
    end = prose.find('\n', prose.find('\n', match.end()) + 1)
    window = prose[start:end if end >= 0 else None]
    at = match.start() - start
    if not any(found_phrase.start() <= at < found_phrase.end()
               for phrase in NOT_VERDICTS
               for found_phrase in re.finditer(
                   phrase.replace(' ', r'\s+'), window)):
      found.append((_line(prose, match.start()), match.group(0)))
  return found


def main(argv: List[str]) -> int:
  try:
    if '--unmarked' in argv[1:]:
      for page in pages():
        for line, number in unmarked(page):
          print(f'{page}:{line}: {number}')
      return 0
    if '--verdicts' in argv[1:]:
      for page in pages():
        for line, said in unmarked_verdicts(page):
          print(f'{page}:{line}: {said}')
      return 0
    if '--name' in argv[1:]:
      moved, made = name_inline()
      print(f'{moved} figure(s) named, {made} name(s) added to {NAMED}.')
      return 0
    check = '--check' in argv[1:]
    out_of_date = 0
    for page in pages():
      for line, shown, made in stale(page):
        out_of_date += 1
        print(f'{page}:{line}: shows {shown!r}, its data makes {made!r}')
      if not check:
        path = os.path.join(ROOT, page)
        with open(path) as f:
          text = f.read()
        new = rewritten(text, page)
        if new != text:
          with open(path, 'w') as f:
            f.write(new)
    spare = unused()
    for line, name in spare:
      print(f'{NAMED}:{line}: {name} is shown by no page')
    if check:
      return 1 if out_of_date or spare else 0
    print(f'{out_of_date} figure(s) rewritten.')
    return 1 if spare else 0
  except BadFigure as error:
    print(error, file=sys.stderr)
    return 1


if __name__ == '__main__':
  sys.exit(main(sys.argv))
