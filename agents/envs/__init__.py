"""Environments: the suites' factories (Atari, MinAtar, dm_control, gymnasium), guards against failing ones, and the vector actor loop."""
