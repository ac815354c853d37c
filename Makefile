# Quick start:
#   make train     Ape-X DQN on Pong, local multi-process (Ctrl-C to stop)
#   make test      the quick tier of the test suite: everything but the tests
#                  marked slow (at most about 8 minutes on 2 cores)
#   make test-all  the whole suite: also the learning checks, the fault tests
#                  and the long program runs (about 30 minutes on 2 cores)
#   make bench     throughput benchmarks (about 12 minutes; results in
#                  benchmarks/results/)
PYTHON := .venv/bin/python
TRAIN_FLAGS ?=
# Both tiers print their slowest tests.
PYTEST := $(PYTHON) -m pytest tests -q --durations=15

.PHONY: venv train test test-all bench

venv:
	@scripts/setup_venv.sh

train: venv
	$(PYTHON) programs/apex_dqn.py --lp_launch_type=local_mp $(TRAIN_FLAGS)

test: venv
	$(PYTEST) -m "not slow"

test-all: venv
	$(PYTEST)

bench: venv
	$(PYTHON) benchmarks/program_throughput.py
	$(PYTHON) benchmarks/scaling.py
	$(PYTHON) benchmarks/replay_headroom.py
