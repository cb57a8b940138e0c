# Everything a new user needs, from a fresh clone:   make demo   and   make test
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DEMO_NAME := demo-sac-$(shell date +%Y%m%d-%H%M%S)
DEMO_SECONDS ?= 180

.PHONY: help install install-bench install-sbx install-pybulletgym image lint format demo test test-fast clean-results

help:  ## list the targets
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | sed 's/:.*##/\t/'

NOTEBOOK_REQUIREMENTS := aws-sagemaker/rl-ray-pybullet/requirements.txt

$(STAMP): requirements.txt requirements-dev.txt $(NOTEBOOK_REQUIREMENTS) pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade --quiet pip
	$(PY) -m pip install --quiet -r requirements-dev.txt -r $(NOTEBOOK_REQUIREMENTS)
	$(PY) -m pip install --quiet --no-deps -e .
	touch $(STAMP)

install: $(STAMP)  ## create .venv and install the pinned requirements and the ddrl core

# The benchmarks' peer (Stable-Baselines3): not a training requirement, but the tests run the
# learning benchmark on a tiny budget, so `make test` installs it.
BENCH_REQUIREMENTS := cte-power/scripts/bench/requirements-bench.txt
BENCH_STAMP := $(VENV)/.installed-bench
$(BENCH_STAMP): $(STAMP) $(BENCH_REQUIREMENTS)
	$(PY) -m pip install --quiet -r $(BENCH_REQUIREMENTS)
	touch $(BENCH_STAMP)

install-bench: $(BENCH_STAMP)  ## also install the benchmarks' peer, Stable-Baselines3

# SBX (SB3 in JAX), the fastest peer, gets a venv of its own: beside our stack its dependencies
# (uvloop, prometheus_client) would change how Ray runs. The throughput benchmark drives it.
SBX_VENV := .venv-sbx
SBX_REQUIREMENTS := cte-power/scripts/bench/requirements-sbx.txt
SBX_STAMP := $(SBX_VENV)/.installed
$(SBX_STAMP): $(SBX_REQUIREMENTS)
	test -x $(SBX_VENV)/bin/python || $(PYTHON) -m venv $(SBX_VENV)
	$(SBX_VENV)/bin/python -m pip install --quiet -r $(SBX_REQUIREMENTS)
	touch $(SBX_STAMP)

install-sbx: $(SBX_STAMP)  ## install SBX, the throughput benchmark's JAX peer, in .venv-sbx

# PyBullet Gymperium is not on PyPI; a copy (MIT) is in ../shared/vendor/pybullet-gym, which CI
# mounts read-only. Its setup.py leaves the robot models out of a regular install, so it is
# installed in editable mode, from a copy kept in .venv/src. Elsewhere: git clone benelot/pybullet-gym.
PYBULLETGYM_SRC ?= ../shared/vendor/pybullet-gym
PYBULLETGYM_STAMP := $(VENV)/.installed-pybulletgym
$(PYBULLETGYM_STAMP): $(STAMP)
	if [ -d "$(PYBULLETGYM_SRC)" ]; then \
		rm -rf $(VENV)/src/pybullet-gym && mkdir -p $(VENV)/src && \
		cp -r "$(PYBULLETGYM_SRC)" $(VENV)/src/pybullet-gym && chmod -R u+w $(VENV)/src/pybullet-gym && \
		$(PY) -m pip install --quiet -e $(VENV)/src/pybullet-gym; \
	else echo "no $(PYBULLETGYM_SRC): the pybulletgym tests will skip"; fi
	touch $(PYBULLETGYM_STAMP)

install-pybulletgym: $(PYBULLETGYM_STAMP)  ## install PyBullet Gymperium from PYBULLETGYM_SRC (the vendored copy)

# The SageMaker training image, built where image registries are out of reach: a debootstrap base
# and the pinned wheels from this machine (needs a Docker daemon; see aws-sagemaker/rl-ray-pybullet).
image: $(STAMP)  ## build the SageMaker training image (ddrl-rl-ray-pybullet:local) offline
	$(PY) -m sagemaker_offline.image

demo: $(STAMP)  ## train SAC on HumanoidBulletEnv-v0 a few minutes; render, summarise, plot it
	cd cte-power && ../$(PY) scripts/train/train-bullet-envs.py \
		--config trainings/pybullet-envs/sac.yaml --name $(DEMO_NAME) \
		--set stop.time_s=$(DEMO_SECONDS) --set checkpoint.every=50
	cd cte-power && ../$(PY) scripts/render/render-bullet.py \
		--checkpoint results/pybullet-envs/$(DEMO_NAME) --max-steps 300 \
		--output ../figures/videos/$(DEMO_NAME).mp4
	cd cte-power && ../$(PY) scripts/plot/summarize-data.py results/pybullet-envs/$(DEMO_NAME)
	cd cte-power && ../$(PY) scripts/plot/plot-results.py results/humanoid/$(DEMO_NAME).csv \
		--output ../figures/plots/$(DEMO_NAME).png
	@echo "Results and checkpoints: cte-power/results/pybullet-envs/$(DEMO_NAME)/"
	@echo "Summary: cte-power/results/humanoid/$(DEMO_NAME).csv"
	@echo "Learning curve: figures/plots/$(DEMO_NAME).png"
	@echo "Video of the trained agent: figures/videos/$(DEMO_NAME).mp4"

# Two workers keep both cores busy (Ray start-up, Slurm, Docker waits); three are slower on 2 cores.
# Tests are spread one by one (every port is a free one); those sharing a costly module fixture
# (the Slurm cluster, a trained agent) carry one xdist_group and run on one worker, which builds it
# once (tests/conftest.py restores the groups that pytest-xdist 3.8 loses under pytest 9.2).
TEST_WORKERS ?= 2
test: $(BENCH_STAMP) $(SBX_STAMP) $(PYBULLETGYM_STAMP)  ## run the whole test suite (what CI runs)
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup

LINTED := cte-power tests aws-sagemaker

lint: $(STAMP)  ## ruff check and ruff format --check (what CI runs first)
	$(VENV)/bin/ruff check $(LINTED)
	$(VENV)/bin/ruff format --check $(LINTED)

format: $(STAMP)  ## apply ruff's fixes and formatting
	$(VENV)/bin/ruff check --fix $(LINTED)
	$(VENV)/bin/ruff format $(LINTED)

test-fast: $(BENCH_STAMP) $(SBX_STAMP) $(PYBULLETGYM_STAMP)  ## only the tests that train nothing
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup -m "not slow"
