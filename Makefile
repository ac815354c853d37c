# Quick start:
#   make train     Ape-X DQN on Pong, local multi-process (Ctrl-C to stop)
#   make test      the quick tier of the test suite: everything but the tests
#                  marked slow (its time: benchmarks/results/test_tiers.json)
#   make test-all  the whole suite: also the learning checks, the fault tests
#                  and the long program runs (its time: the same file)
#   make cloud-deps  what launching on Google Cloud needs (xmanager; see
#                  docs/google_cloud.md); the tests need it too
#   make bench     throughput benchmarks (about 100 minutes on 2 cores: 30
#                  of them the variable cachers' 6 program runs, 17 and 19
#                  program_limit.py's Pong and MinAtar; results in
#                  benchmarks/results/)
SHELL := /bin/bash
PYTHON := .venv/bin/python
TRAIN_FLAGS ?=
# Both tiers print their 40 slowest tests and the reason of every skip. They
# run on TEST_WORKERS pytest-xdist workers: most of a program test's time is
# its processes importing TensorFlow, one core's worth, so two tests at once
# keep both cores of a small machine busy. Tests that share a module's
# fixture (a run they all read) stay on one worker (`xdist_group`).
TEST_WORKERS ?= 2
PYTEST := $(PYTHON) -m pytest tests -q -rs --durations=40 \
	-n $(TEST_WORKERS) --dist loadgroup

.PHONY: venv cloud-deps train test test-all bench

venv:
	@scripts/setup_venv.sh

cloud-deps:
	@scripts/setup_venv.sh --cloud

# `set -m` runs the program as a job of its own, in the terminal's
# foreground: a Ctrl-C reaches the program (which stops in order and exits 0)
# and not make, which would otherwise end itself with an "Interrupt" error.
train: venv
	@set -m; $(PYTHON) programs/apex_dqn.py --lp_launch_type=local_mp $(TRAIN_FLAGS); \
	status=$$?; exit $$status

test: cloud-deps
	$(PYTEST) -m "not slow"

test-all: cloud-deps
	$(PYTEST)

bench: venv
	$(PYTHON) benchmarks/program_throughput.py
	$(PYTHON) benchmarks/scaling.py
	$(PYTHON) benchmarks/replay_headroom.py
	$(PYTHON) benchmarks/replay_shards.py
	$(PYTHON) benchmarks/learner_xla.py
	$(PYTHON) benchmarks/learner_flops.py
	$(PYTHON) benchmarks/learner_profile.py
	$(PYTHON) benchmarks/checkpoint_cost.py
	$(PYTHON) benchmarks/variable_cachers.py
	$(PYTHON) benchmarks/program_limit.py --preset=atari_small
	$(PYTHON) benchmarks/program_limit.py --preset=minatar
	$(PYTHON) benchmarks/program_precision.py --preset=atari_small
