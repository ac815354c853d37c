"""Writes the table of run options in docs/running.md from `RunOptions`
(one source: the dataclass's fields and docstrings).
tests/test_command_line.py checks that the page holds what this would write.

  .venv/bin/python scripts/update_flags_table.py
"""

import os

from launch import command_line

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PAGE = os.path.join(ROOT, 'docs', 'running.md')
BEGIN = '<!-- run options: made by scripts/update_flags_table.py -->'
END = '<!-- end of run options -->'


def with_current_table(text: str) -> str:
  """`text` (the page) with the table between BEGIN and END made anew."""
  head, rest = text.split(BEGIN, 1)
  _, tail = rest.split(END, 1)
  return f'{head}{BEGIN}\n{command_line.run_options_table()}\n{END}{tail}'


def main():
  with open(PAGE) as f:
    text = f.read()
  with open(PAGE, 'w') as f:
    f.write(with_current_table(text))


if __name__ == '__main__':
  main()
