"""recall_dqn (`recall_plugin`) as a program: the three lines of a plug-in
agent's program (docs/extending.md)."""

from launch import entry

ENTRY = entry.ProgramEntry('recall_dqn', plugins='recall_plugin')

if __name__ == '__main__':
  ENTRY.main()
