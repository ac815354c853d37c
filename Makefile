# Quick start:
#   make train   Ape-X DQN on Pong, local multi-process (Ctrl-C to stop)
#   make test    the test suite
PYTHON := .venv/bin/python
TRAIN_FLAGS ?=

.PHONY: venv train test

venv:
	@scripts/setup_venv.sh

train: venv
	$(PYTHON) programs/apex_dqn.py --lp_launch_type=local_mp $(TRAIN_FLAGS)

test: venv
	$(PYTHON) -m pytest tests -q
