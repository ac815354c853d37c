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
LAUNCHING = ('apex_dqn', 'apex_c51', 'apex_dpg', 'd4pg', 'a3c')
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
  # Each figure marked with its source (scripts/figures.py) shows what its
  # source's data makes now: a result or benchmark made again with other
  # figures fails this until the prose is read again (and the figures
  # rewritten: .venv/bin/python scripts/figures.py).
  figures = _figures()
  stale = figures.stale(page)
  assert not stale, '\n'.join(
      f'{page}:{line}: shows {shown!r}, its data makes {made!r}'
      for line, shown, made in stale) + (
          '\nRead the sentences again, then run '
          '.venv/bin/python scripts/figures.py')


def test_a_figure_is_made_from_its_source(tmp_path):
  # scripts/figures.py itself, against values worked out by hand: a JSON
  # and a CSV source, a nested key, a comprehension, a sample deviation.
  figures = _figures()
  (tmp_path / 'runs.json').write_text(json.dumps(
      {'runs': [{'return': 1.0}, {'return': 2.0}, {'return': 6.0}],
       'budget': {'frames': 13490316}}))
  (tmp_path / 'rows.csv').write_text('round,minutes\n1,0.5\n2,456.7\n')
  root = figures.ROOT
  figures.ROOT = str(tmp_path)
  try:
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
  finally:
    figures.ROOT = root


def test_the_unmarked_numbers_that_look_measured_are_listed(tmp_path):
  figures = _figures()
  (tmp_path / 'page.md').write_text(
      'It took 4 minutes and 13.49M frames; Ape-X §4.1, Python 3.10.13.\n'
      '```sh\nrun --for=7.5\n```\n'
      'A rate of 1,150 frames/s, `--lr=0.5`, 2,390 bytes at 3x the speed,\n'
      'and <!-- from a.json: {b} -->5.5 s<!-- end --> [a](b/1.5.md).\n')
  root = figures.ROOT
  figures.ROOT = str(tmp_path)
  try:
    assert figures.unmarked('page.md') == [
        (1, '4 minutes'), (1, '13.49'), (5, '1,150 frames/s'),
        (5, '2,390 bytes'), (5, '3x')]
  finally:
    figures.ROOT = root


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
