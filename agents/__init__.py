"""Ape-X DQN and DPG, A3C and D4PG in the style of Acme: the agents, their
replay, environments and networks. It imports nothing of the launch package
(`launch`), which turns its builders into programs.

TensorFlow is imported by the modules that build networks, learners and
actors, and only by them: what a program reads before it loads a builder
(configs, presets, the registries of agents and suites) imports none, and
names a builder or a torso as `module:name` to import when asked for.
"""

