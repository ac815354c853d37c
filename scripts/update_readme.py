"""Writes the README's table of run options from `RunOptions` (one source:
the dataclass's fields and docstrings). tests/test_command_line.py checks
that the README holds what this would write.

  .venv/bin/python scripts/update_readme.py
"""

import os

from agents.distributed import command_line

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

README = os.path.join(ROOT, 'README.md')
BEGIN = '<!-- run options: made by scripts/update_readme.py -->'
END = '<!-- end of run options -->'


def with_current_table(text: str) -> str:
  """`text` (the README) with the table between BEGIN and END made anew."""
  head, rest = text.split(BEGIN, 1)
  _, tail = rest.split(END, 1)
  return f'{head}{BEGIN}\n{command_line.run_options_table()}\n{END}{tail}'


def main():
  with open(README) as f:
    text = f.read()
  with open(README, 'w') as f:
    f.write(with_current_table(text))


if __name__ == '__main__':
  main()
