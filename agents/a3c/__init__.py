"""A3C (Mnih et al. 2016, "Asynchronous Methods for Deep Reinforcement
Learning"): asynchronous advantage actor-critic, on the same machinery as the
Ape-X agents."""
