"""What every Ape-X agent shares (Horgan et al. 2018, and its successors on
the same substrate: D4PG, the distributional Ape-X DQN):

  config.py          ApeXConfig: replay, n-step targets, actors, the learner
  builder.py         ApeXBuilder: the replay table, the learner's dataset,
                     the actors' adders and parameter pulls
  actors.py          ApeXActor: batched acting with one adder per environment
  learning.py        ApeXLearner: sample, IS weights, update, priorities back,
                     target copies (Algorithm 2)
  priorities.py      what a priority is, for the learner and the actors
  distributional.py  categorical value distributions (C51's and D4PG's):
                     the projection of the target, its losses and priorities

Each agent's folder (`agents/apex_dqn/`, ...) builds on these.
"""
