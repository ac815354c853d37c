"""What every agent's networks share:

  torsos.py     the torsos of observations, as each suite names them (Nature
                CNN, A3C's smaller CNN, MinAtar's, an MLP)
  precision.py  the arithmetic the learner's networks compute in: float32,
                or bfloat16 on float32 weights where the CPU has it
"""
