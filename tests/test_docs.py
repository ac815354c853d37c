"""The README and docs/ say what runs: every program command shown runs up
to the point of work, every `make` target named exists, every relative
link (and its #anchor) resolves (also on the results pages), the README's
results table is current, and no page (results pages too) carries a date or
a session's diary.

A command of `programs/apex_dqn.py`, `apex_dpg.py` or `a3c.py` gets
`--print_config` (a vertex_ai launch: `--dry_run` with its package in a
temporary directory), which prints what the launch would run with and exits
before anything starts; one of `evaluate.py`, `plot.py` or `stop.py` has
each of its flags checked against the program's own. Placeholders
(`<bucket>`, `<run>`, `$HOME`, ...) are filled with real values.
"""

import functools
import glob
import json
import os
import re
import shlex
import subprocess
import sys
from typing import Dict, List, Set, Tuple

import pytest

import helpers

ROOT = helpers.ROOT
PAGES = ['README.md'] + sorted(
    os.path.relpath(path, ROOT)
    for path in glob.glob(os.path.join(ROOT, 'docs', '*.md')))
# The results pages: their links and their wording are checked as the
# docs' are; their commands are the runs' own (with a <workdir>).
RESULT_PAGES = sorted(
    os.path.relpath(path, ROOT)
    for path in glob.glob(os.path.join(ROOT, 'results', '*.md')))
LAUNCHING = ('apex_dqn', 'apex_c51', 'apex_dpg', 'd4pg', 'a3c', 'r2d2')
PLACEHOLDERS = {'<project number>': '123456789012',
                '<bucket>': 'apex-docs-bucket', '<project>': 'apex-docs',
                '<Game>': 'Breakout', '<game>': 'breakout',
                '<name>': 'apex-runner'}


def _text(page: str) -> str:
  with open(os.path.join(ROOT, page)) as f:
    return f.read()


def _shell_blocks(text: str) -> List[str]:
  return re.findall(r'^```sh\n(.*?)^```', text, re.MULTILINE | re.DOTALL)


def _program_commands() -> List[Tuple[str, str]]:
  """(page, command) for each `python programs/<name>.py` line of a shell
  block, continuation lines joined; a command shown on several pages is
  run once, named by the first."""
  commands, seen = [], set()
  for page in PAGES:
    for block in _shell_blocks(_text(page)):
      for line in block.replace('\\\n', ' ').splitlines():
        words = shlex.split(line, comments=True)
        if (len(words) > 1 and words[0] in ('python', '.venv/bin/python')
            and words[1].startswith('programs/')):
          command = ' '.join(
              word.replace('.venv/bin/python', 'python') for word in words)
          if command not in seen:
            seen.add(command)
            commands.append((page, command))
  return commands


COMMANDS = _program_commands()


def _filled(command: str, tmp_path) -> List[str]:
  home = tmp_path / 'home'
  home.mkdir(exist_ok=True)
  for placeholder, value in PLACEHOLDERS.items():
    command = command.replace(placeholder, value)
  command = re.sub(r'<other_run>', str(tmp_path / 'other_run'), command)
  command = re.sub(r'<run>', str(tmp_path / 'run'), command)
  command = re.sub(r'<job>', str(tmp_path / 'job'), command)
  command = command.replace('$HOME', str(home))
  words = [str(home) + word[1:] if word.startswith('~/') else word
           for word in shlex.split(command)]
  assert not any('<' in word for word in words), (
      f'a placeholder this test does not fill: {command}')
  return words


def _environment(tmp_path) -> Dict[str, str]:
  environment = dict(os.environ, HOME=str(tmp_path / 'home'))
  # No Google Cloud: a plan needs none, and nothing may reach it.
  for name in ('GOOGLE_APPLICATION_CREDENTIALS', 'GOOGLE_CLOUD_PROJECT',
               'GOOGLE_CLOUD_BUCKET_NAME'):
    environment.pop(name, None)
  return environment


@functools.lru_cache(maxsize=None)
def _flags_of(program: str) -> Set[str]:
  """The flags `programs/<program>.py` defines, from its --helpfull."""
  result = subprocess.run(
      [sys.executable, f'programs/{program}.py', '--helpfull'], cwd=ROOT,
      capture_output=True, text=True, timeout=120)
  return set(re.findall(r'--(?:\[no\])?(\w+):', result.stdout))


def test_the_pages_show_program_commands():
  assert len(COMMANDS) >= 20
  shown = {command.split()[1] for _, command in COMMANDS}
  for program in LAUNCHING + ('evaluate', 'plot', 'stop'):
    assert f'programs/{program}.py' in shown


@pytest.mark.parametrize('page, command', COMMANDS,
                         ids=[f'{page}: {command}'
                              for page, command in COMMANDS])
def test_each_program_command_runs_to_the_point_of_work(tmp_path, page,
                                                        command):
  words = _filled(command, tmp_path)
  program = os.path.basename(words[1])[:-len('.py')]
  flags = words[2:]
  if program not in LAUNCHING:
    named = {word[2:].split('=', 1)[0] for word in flags
             if word.startswith('--')}
    unknown = named - _flags_of(program)
    assert not unknown, f'{page}: {program}.py has no flag {unknown}'
    return
  if '--lp_launch_type=vertex_ai' in flags:
    extra = [] if '--dry_run' in flags else ['--dry_run']
    if not any(flag.startswith('--package_dir') for flag in flags):
      extra.append(f'--package_dir={tmp_path / "package"}')
  else:
    extra = [] if '--list_presets' in flags else ['--print_config']
  environment = _environment(tmp_path)
  if page == 'docs/extending.md':  # With the page's plug-ins at hand.
    from tests import test_extending  # pylint: disable=g-import-not-at-top
    (tmp_path / 'user').mkdir()
    test_extending.write_blocks(tmp_path / 'user')
    environment['PYTHONPATH'] = str(tmp_path / 'user')
  result = subprocess.run([sys.executable, words[1], *flags, *extra],
                          cwd=ROOT, env=environment,
                          capture_output=True, text=True, timeout=300)
  assert result.returncode == 0, (
      f'{page}: {command}\n{result.stdout[-2000:]}{result.stderr[-3000:]}')


def _make_targets() -> Set[str]:
  return set(re.findall(r'^([\w-]+):', _text('Makefile'), re.MULTILINE))


@pytest.mark.parametrize('page', PAGES)
def test_each_make_target_named_exists(page):
  named = set(re.findall(r'(?:^|`)make ([a-z][\w-]*)', _text(page),
                         re.MULTILINE))
  assert named <= _make_targets(), (
      f'{page} names make targets the Makefile lacks: '
      f'{named - _make_targets()}')


def _anchors(page: str) -> Set[str]:
  """GitHub's anchors of a page's headings, and its explicit ids."""
  text = re.sub(r'^```.*?^```', '', _text(page), flags=re.MULTILINE | re.DOTALL)
  anchors = set(re.findall(r'<a id="([^"]+)">', text))
  for heading in re.findall(r'^#+ (.+)$', text, re.MULTILINE):
    slug = re.sub(r'[^\w\- ]', '', heading.strip().lower()).replace(' ', '-')
    anchors.add(slug)
  return anchors


@pytest.mark.parametrize('page', PAGES + RESULT_PAGES)
def test_each_relative_link_resolves(page):
  text = re.sub(r'^```.*?^```', '', _text(page),
                flags=re.MULTILINE | re.DOTALL)
  broken = []
  for target in re.findall(r'\]\(([^)\s]+)\)', text):
    if re.match(r'[a-z]+:', target):
      continue
    path, _, anchor = target.partition('#')
    linked = os.path.normpath(
        os.path.join(os.path.dirname(page), path)) if path else page
    if not os.path.exists(os.path.join(ROOT, linked)):
      broken.append(target)
    elif anchor and linked.endswith('.md') and anchor not in _anchors(
        linked):
      broken.append(target)
  assert not broken, f'{page}: links that do not resolve: {broken}'


@pytest.mark.parametrize('page', PAGES + RESULT_PAGES)
def test_no_page_carries_a_date_or_a_session(page):
  text = _text(page)
  months = ('Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec')
  dated = re.findall(rf'\b\d{{1,2}} (?:{months})[a-z]*\b', text)
  dated += re.findall(r'\b20\d\d-[01]\d-[0-3]\d\b', text)  # ISO dates.
  dated += re.findall(r'\b(?:earlier|later|previous|same) (?:session|day)\b',
                      text, re.IGNORECASE)
  assert not dated, f'{page}: {dated}'


def test_the_readme_results_table_is_made_from_the_results():
  from results import table  # pylint: disable=g-import-not-at-top
  text = _text('README.md')
  assert table.with_current_table(text) == text, (
      'The README\'s results table is out of date: run '
      '.venv/bin/python -m results.table')


def test_the_readme_is_short_and_links_every_docs_page():
  text = _text('README.md')
  assert len(text.splitlines()) <= 250
  for page in PAGES[1:]:
    assert f']({page})' in text, f'the README does not link {page}'


def _figures():
  sys.path.insert(0, os.path.join(ROOT, 'scripts'))
  try:
    import figures  # pylint: disable=g-import-not-at-top
  finally:
    sys.path.pop(0)
  return figures


@pytest.mark.parametrize('page', PAGES)
def test_every_figure_is_what_its_data_makes(page):
  # Each figure marked with its source or its name (scripts/figures.py)
  # shows what its source's data makes now: a result or benchmark made
  # again with other figures fails this until the prose is read again (and
  # the figures rewritten: .venv/bin/python scripts/figures.py).
  figures = _figures()
  stale = figures.stale(page)
  assert not stale, '\n'.join(
      f'{page}:{line}: shows {shown!r}, its data makes {made!r}'
      for line, shown, made in stale) + (
          '\nRead the sentences again, then run '
          '.venv/bin/python scripts/figures.py')


def test_every_named_figure_is_defined_once_and_shown():
  # docs/figures.txt reads (no name defined twice, no line out of form) and
  # each of its names is shown by some page.
  figures = _figures()
  figures.definitions()
  unused = figures.unused()
  assert not unused, '\n'.join(
      f'{figures.NAMED}:{line}: {name} is shown by no page'
      for line, name in unused)


@pytest.mark.parametrize('page', PAGES)
def test_no_page_writes_a_figure_inline(page):
  # A figure is marked by its name, defined in docs/figures.txt: a page's
  # raw text stays readable, and no page mixes the two forms.
  inline = _figures().inline_markers(page)
  assert not inline, (
      f'{page}: {len(inline)} figure(s) written inline, the first at line '
      f'{inline[0][0]}: run .venv/bin/python scripts/figures.py --name')


@pytest.fixture
def figures_at(tmp_path):
  """scripts/figures.py, reading the tree at `tmp_path`."""
  figures = _figures()
  root = figures.ROOT
  figures.ROOT = str(tmp_path)
  yield figures
  figures.ROOT = root


def test_a_figure_is_made_from_its_source(tmp_path, figures_at):
  # scripts/figures.py itself, against values worked out by hand: a JSON
  # and a CSV source, a nested key, a comprehension, a sample deviation.
  figures = figures_at
  (tmp_path / 'runs.json').write_text(json.dumps(
      {'runs': [{'return': 1.0}, {'return': 2.0}, {'return': 6.0}],
       'budget': {'frames': 13490316}}))
  (tmp_path / 'rows.csv').write_text('round,minutes\n1,0.5\n2,456.7\n')
  cache = {}
  assert figures.render(
      'runs.json', "{mean(run['return'] for run in runs):.1f} ± "
      "{stdev(run['return'] for run in runs):.2f}", cache) == '3.0 ± 2.65'
  assert figures.render('runs.json', "{budget['frames'] / 1e6:.2f}M "
                        'frames', cache) == '13.49M frames'
  assert figures.render('rows.csv', "{rows[-1]['minutes'] / 60:.1f} h",
                        cache) == '7.6 h'
  with pytest.raises(figures.BadFigure, match='not in runs.json'):
    figures.render('runs.json', '{missing}', cache)
  text = ('mean <!-- from runs.json: {runs[2]["return"]:.0f} -->5'
          '<!-- end --> of 3')
  assert figures.rewritten(text) == text.replace('-->5<', '-->6<')


def test_a_named_figure_is_made_from_its_definition(tmp_path, figures_at):
  # A marker names a figure of docs/figures.txt: it is made, checked and
  # rewritten as an inline one; a template may go on over lines.
  figures = figures_at
  (tmp_path / 'docs').mkdir()
  (tmp_path / 'runs.json').write_text(json.dumps(
      {'runs': [{'return': 1.0}, {'return': 2.0}, {'return': 6.0}]}))
  (tmp_path / 'docs' / 'figures.txt').write_text(
      '# name  source  template\n\n'
      "runs.last    runs.json  {runs[2]['return']:.0f} of {len(runs)}\n"
      "runs.spread  runs.json  {min(r['return'] for r in runs):.1f} to\n"
      "  |   {max(r['return'] for r in runs):.1f}\n")
  page = ('Last <!-- fig runs.last -->5 of 3<!-- end -->, from\n'
          '<!-- fig runs.spread -->1.0 to\n  6.0<!-- end -->.\n')
  (tmp_path / 'README.md').write_text(page)
  assert figures.definitions()['runs.spread'].template == (
      "{min(r['return'] for r in runs):.1f} to\n"
      "  {max(r['return'] for r in runs):.1f}")
  assert figures.stale('README.md') == [(1, '5 of 3', '6 of 3')]
  assert figures.rewritten(page) == page.replace('5 of 3', '6 of 3')
  assert figures.unused() == [] and figures.inline_markers('README.md') == []


def test_a_named_figure_is_defined_once_used_and_known(tmp_path, figures_at):
  # A name defined twice, a marker naming no definition, a definition no
  # page shows: each an error naming its file and line.
  figures = figures_at
  (tmp_path / 'docs').mkdir()
  (tmp_path / 'a.json').write_text('{"b": 1}')
  named = tmp_path / 'docs' / 'figures.txt'
  named.write_text('a.b  a.json  {b}\n\na.b  a.json  {b + 1}\n')
  with pytest.raises(figures.BadFigure,
                     match=r'docs/figures.txt:3: a.b is defined again'):
    figures.definitions()
  named.write_text('a.b  a.json  {b}\na.c  a.json  {b + 1}\n')
  (tmp_path / 'README.md').write_text(
      'One <!-- fig a.b -->1<!-- end -->,\ntwo <!-- fig a.d -->2<!-- end -->.')
  with pytest.raises(figures.BadFigure,
                     match=r'README.md:2: a.d is not defined in '
                     r'docs/figures.txt'):
    figures.stale('README.md')
  assert figures.unused() == [(2, 'a.c')]
  named.write_text('a.b a.json\n')
  with pytest.raises(figures.BadFigure, match='docs/figures.txt:1: not'):
    figures.definitions()


def test_inline_figures_are_named_and_show_the_same(tmp_path, figures_at):
  # `--name` on a tree of its own: each inline figure is marked by a name
  # read from its source's stem and its template, one name for one source
  # and template, and the pages show what they showed; a second run changes
  # nothing.
  figures = figures_at
  (tmp_path / 'docs').mkdir()
  (tmp_path / 'results').mkdir()
  (tmp_path / 'results' / 'pong_45min.json').write_text(json.dumps(
      {'greedy': -10.0, 'runs': [{'return': 3.5}],
       'settings': {'4 workers': [{'final_return': 2.0}]}}))
  inline = {
      'README.md': (
          'Greedy <!-- from results/pong_45min.json: {greedy:+.1f} -->'
          '-10.0<!-- end -->, a run <!-- from results/pong_45min.json: '
          "{runs[0]['return']:.1f} -->3.5<!-- end -->.\n"),
      'docs/a.md': (
          'Again <!-- from results/pong_45min.json: {greedy:+.1f} -->-10.0'
          '<!-- end -->; <!-- from results/pong_45min.json: {mean(run['
          "'final_return'] for run in settings['4 workers']):.1f} over\n"
          "{len(settings['4 workers'])} -->2.0 over\n1<!-- end --> and "
          '<!-- from results/pong_45min.json: {greedy:.0f} -->-10<!-- end -->'
          '.\n')}
  for page, text in inline.items():
    (tmp_path / page).write_text(text)
  assert figures.name_inline() == (5, 4)
  definitions = figures.definitions()
  assert {name: (definition.source, definition.template)
          for name, definition in definitions.items()} == {
              'pong_45min.greedy': ('results/pong_45min.json',
                                    '{greedy:+.1f}'),
              'pong_45min.greedy_2': ('results/pong_45min.json',
                                      '{greedy:.0f}'),
              'pong_45min.runs0_return': ('results/pong_45min.json',
                                          "{runs[0]['return']:.1f}"),
              'pong_45min.mean_4_workers_final_return': (
                  'results/pong_45min.json',
                  "{mean(run['final_return'] for run in "
                  "settings['4 workers']):.1f} over\n"
                  "{len(settings['4 workers'])}")}
  readme = (tmp_path / 'README.md').read_text()
  assert readme == (
      'Greedy <!-- fig pong_45min.greedy -->-10.0<!-- end -->, a run '
      '<!-- fig pong_45min.runs0_return -->3.5<!-- end -->.\n')
  shown = lambda text: re.sub(r'<!--.*?-->', '', text, flags=re.DOTALL)
  for page, text in inline.items():
    assert shown((tmp_path / page).read_text()) == shown(text)
    assert not figures.stale(page) and not figures.inline_markers(page)
  assert not figures.unused()
  files = {path: path.read_text() for path in tmp_path.rglob('*.*')}
  assert figures.name_inline() == (0, 0)
  assert {path: path.read_text() for path in tmp_path.rglob('*.*')} == files
  # Written inline again: a figure defined keeps its name, a new one joins
  # its source's definitions.
  with open(tmp_path / 'docs' / 'a.md', 'a') as f:
    f.write('<!-- from results/pong_45min.json: {greedy:+.1f} -->-10.0'
            '<!-- end --> <!-- from results/pong_45min.json: {greedy:.2f} -->'
            '-10.00<!-- end -->\n')
  assert figures.name_inline() == (2, 1)
  assert (tmp_path / 'docs' / 'a.md').read_text().endswith(
      '<!-- fig pong_45min.greedy -->-10.0<!-- end --> '
      '<!-- fig pong_45min.greedy_3 -->-10.00<!-- end -->\n')
  lines = (tmp_path / 'docs' / 'figures.txt').read_text().splitlines()
  assert lines[-1].split() == ['pong_45min.greedy_3',
                               'results/pong_45min.json', '{greedy:.2f}']


def test_the_unmarked_numbers_that_look_measured_are_listed(tmp_path,
                                                            figures_at):
  figures = figures_at
  (tmp_path / 'page.md').write_text(
      'It took 4 minutes and 13.49M frames; Ape-X §4.1, Python 3.10.13.\n'
      '```sh\nrun --for=7.5\n```\n'
      'A rate of 1,150 frames/s, `--lr=0.5`, 2,390 bytes at 3x the speed,\n'
      'and <!-- from a.json: {b} -->5.5 s<!-- end --> [a](b/1.5.md).\n'
      'Greedy -10.0, then −14.8; 53-68K steps and 19.8–21.3 in 12%,\n'
      '-14.8 to -20.0 and <!-- fig a.b -->-3.5<!-- end --> (~5 s).\n'
      'Not: x86-64, python3.10, a 2-core VM, n-step, atari-57, --lr=-0.5,\n'
      '`-2.5`, §4.1, 8 actors, Ape-X, 2024, 3-5 seeds, 84×84, 2 × 8.\n')
  assert figures.unmarked('page.md') == [
      (1, '4 minutes'), (1, '13.49M'), (5, '1,150 frames/s'),
      (5, '2,390 bytes'), (5, '3x'), (7, '-10.0'), (7, '−14.8'),
      (7, '53-68K'), (7, '19.8–21.3'), (7, '12%'), (8, '-14.8'),
      (8, '-20.0'), (8, '~5 s')]


def _long_lines(text: str, longest: int) -> List[Tuple[int, int]]:
  """(line, length) of each line of `text` longer than `longest`
  characters, but for code blocks and table rows."""
  found, code = [], False
  for number, line in enumerate(text.splitlines(), 1):
    if line.lstrip().startswith('```'):
      code = not code
    elif not code and not line.lstrip().startswith('|') and (
        len(line) > longest):
      found.append((number, len(line)))
  return found


@pytest.mark.parametrize('page', PAGES)
def test_every_verdict_word_is_made_from_its_data(page):
  # A verdict (ahead, behind, level, met, no difference, ...) is a figure
  # too: each is a marked figure, its word read from the clause that its
  # results page's own test wrote (scripts/figures.py's `word`), so that a
  # verdict the data no longer gives fails the figure's check at the
  # sentence that states it. The words' other uses are listed once, in
  # figures.py's NOT_VERDICTS.
  found = _figures().unmarked_verdicts(page)
  assert not found, '\n'.join(
      f'{page}:{line}: "{said}" is a verdict that names no figure: mark it '
      '(a figure whose template is {word(find(...))} on its results page), '
      'or add the phrase to NOT_VERDICTS if it is no verdict'
      for line, said in found)


def test_a_verdict_word_follows_its_pages_test(tmp_path, figures_at):
  figures = figures_at
  # The words of results/spread.py's verdicts and the goals', by hand.
  assert figures.word('`atari_small` ahead of the starting point') == 'ahead'
  assert figures.word('A3C, 4 workers behind Ape-X DQN') == 'behind'
  assert figures.word('no difference shown (the interval holds 0)') == (
      'no difference shown')
  assert figures.word('no verdict from 2 seeds (one needs 3 at least)') == (
      'no verdict')
  assert figures.word('not met: the interval lies below') == 'not met'
  with pytest.raises(figures.BadFigure, match='no verdict that word'):
    figures.word('0.4 [0.2, 0.8]')
  # A results page whose comparison says ahead, and a doc that says so.
  (tmp_path / 'result.md').write_text(
      '- b: 5.3 [3.3, 7.2], Welch\'s p = 0.01: b ahead of a\n')
  (tmp_path / 'page.md').write_text(
      'The preset is\n<!-- from result.md: '
      "{word(find(r'- b: .*?p = [0-9.]+: (.*)'))} -->ahead<!-- end --> of "
      'its start, behind a firewall.\nIt is ahead, and behind a firewall.\n')
  assert figures.stale('page.md') == []
  # Only the unmarked verdict is listed; the marked one and the phrases
  # that are no verdict are not.
  assert figures.unmarked_verdicts('page.md') == [(3, 'ahead')]
  # The page's test no longer finds a difference: the sentence's figure is
  # stale at its line.
  (tmp_path / 'result.md').write_text(
      '- b: 2.1 [-0.4, 4.6], Welch\'s p = 0.21: no difference shown (the '
      'interval holds 0)\n')
  assert figures.stale('page.md') == [(2, 'ahead', 'no difference shown')]


def test_the_readme_lines_are_short_with_their_figures_named():
  # The README is read raw too: a line of prose (not code, not a table
  # row) is at most 160 characters, which a figure marked inline with its
  # source and template can pass alone.
  long = _long_lines(_text('README.md'), 160)
  assert not long, 'README.md lines longer than 160 characters: ' + ', '.join(
      f'{line} ({length})' for line, length in long)


# The folders of code whose every module docs/architecture.md names.
CODE_FOLDERS = ('agents', 'launch', 'programs', 'results', 'benchmarks',
                'scripts', 'examples')


def test_the_architecture_page_names_every_module():
  # Each module of the project's code (its file name, without .py), as the
  # page's tree or its folder's line names it.
  with open(os.path.join(helpers.ROOT, 'docs', 'architecture.md')) as f:
    page = f.read()
  named = set(re.findall(r'[A-Za-z_][A-Za-z0-9_]*', page))
  missing = []
  for folder in CODE_FOLDERS:
    for directory, subdirectories, files in os.walk(
        os.path.join(helpers.ROOT, folder)):
      subdirectories[:] = [name for name in subdirectories
                           if name not in ('__pycache__', 'banked')]
      for name in files:
        stem, extension = os.path.splitext(name)
        if extension in ('.py', '.sh') and stem != '__init__' and (
            stem not in named):
          missing.append(os.path.relpath(os.path.join(directory, name),
                                         helpers.ROOT))
  assert not missing, ('docs/architecture.md names no '
                       f'{", ".join(sorted(missing))}')
