"""A trained policy away from its program: read back and evaluated.

  restore.py     a trained policy read back from a run, a learner
                 checkpoint or a policy snapshot (a recurrent one with its
                 state)
  evaluation.py  a restored policy's evaluation episodes (the evaluator's
                 loop), their statistics, a video

It imports the run records (`launch.runs`) and the agents, nothing else of
`launch`. `programs/evaluate.py` and the results' pages use it.
"""
