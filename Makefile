# Quick start:
#   make train   Ape-X DQN on Pong, local multi-process (Ctrl-C to stop)
#   make test    the test suite
#   make bench   throughput benchmarks (about 12 minutes; results in
#                benchmarks/results/)
PYTHON := .venv/bin/python
TRAIN_FLAGS ?=

.PHONY: venv train test bench

venv:
	@scripts/setup_venv.sh

train: venv
	$(PYTHON) programs/apex_dqn.py --lp_launch_type=local_mp $(TRAIN_FLAGS)

test: venv
	$(PYTHON) -m pytest tests -q

bench: venv
	$(PYTHON) benchmarks/program_throughput.py
	$(PYTHON) benchmarks/scaling.py
	$(PYTHON) benchmarks/replay_headroom.py
