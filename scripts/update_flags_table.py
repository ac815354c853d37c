"""Writes the tables of run options and of presets in docs/running.md from
their one source: `RunOptions` (the dataclass's fields and docstrings) and
the agent registry (each preset's description).
tests/test_command_line.py checks that the page holds what this would write.

  .venv/bin/python scripts/update_flags_table.py
"""

import os

from launch.console import command_line

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PAGE = os.path.join(ROOT, 'docs', 'running.md')
BEGIN = '<!-- run options: made by scripts/update_flags_table.py -->'
END = '<!-- end of run options -->'
PRESETS_BEGIN = '<!-- presets: made by scripts/update_flags_table.py -->'
PRESETS_END = '<!-- end of presets -->'


def _replaced(text: str, begin: str, end: str, table: str) -> str:
  head, rest = text.split(begin, 1)
  _, tail = rest.split(end, 1)
  return f'{head}{begin}\n{table}\n{end}{tail}'


def with_current_table(text: str) -> str:
  """`text` (the page) with its tables (between BEGIN and END, and between
  PRESETS_BEGIN and PRESETS_END) made anew."""
  text = _replaced(text, BEGIN, END, command_line.run_options_table())
  return _replaced(text, PRESETS_BEGIN, PRESETS_END,
                   command_line.presets_table())


def main():
  with open(PAGE) as f:
    text = f.read()
  with open(PAGE, 'w') as f:
    f.write(with_current_table(text))


if __name__ == '__main__':
  main()
