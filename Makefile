# Single entry points: `make setup`, `make test`, `make check`, `make bench`, `make main`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# Installs only when pyproject.toml or constraints.txt changed since the last install.
# Each target installs what it uses: `make main` the pipeline, hf and serve extras (MAIN_STAMP);
# `make check` those plus dev and quant (TEST_STAMP: ruff, mypy, pytest; no Ray); `make setup` and
# `make check-scale` every extra, Ray's scale extra (~125 MB) included (STAMP).
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test
MAIN_STAMP := $(VENV)/.installed-main
# .ci/install: uv (bootstrapped in the venv by its pip, pinned there) with pip's own index
# settings, falling back to pip; the same pinned packages as pip, several times faster.
# Progress at least every 15 s during long quiet steps (pip, pytest, dvc repro).
BEAT := $(PYTHON) $(CURDIR)/.ci/heartbeat
# Bytecode for every module a recipe's processes import that has none yet (this checkout's
# own, the temporary pipeline copies the e2e tier makes), kept inside the venv, never in the
# checkout: with PYTHONDONTWRITEBYTECODE set (as on the CI host) each of the suite's several
# hundred Python processes (pytest workers, dvc, pipeline stages) would otherwise compile
# everything it imports from source again. Installs run without the prefix (NO_PREFIX), so
# the packages' own bytecode lands in site-packages, where processes outside make find it.
export PYTHONPYCACHEPREFIX := $(abspath $(VENV))/pycache
unexport PYTHONDONTWRITEBYTECODE
NO_PREFIX := env -u PYTHONPYCACHEPREFIX

.PHONY: setup test test-e2e check check-jobs check-scale lint types bench main sweep check-optimisation \
	plots-template gpu-check

$(PY):
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml constraints.txt | $(PY)
	@echo "installing the package with its pipeline, dev, hf, quant, serve and scale extras (a few minutes the first time)"
	$(BEAT) install $(NO_PREFIX) $(PY) .ci/install $(PY) -c constraints.txt -e '.[pipeline,dev,hf,quant,serve,scale]'
	@touch $(STAMP) $(TEST_STAMP) $(MAIN_STAMP)

$(TEST_STAMP): pyproject.toml constraints.txt | $(PY)
	@echo "installing the package with its pipeline, dev, hf, quant and serve extras (what the tests use; no Ray)"
	$(BEAT) install $(NO_PREFIX) $(PY) .ci/install $(PY) -c constraints.txt -e '.[pipeline,dev,hf,quant,serve]'
	@touch $(TEST_STAMP) $(MAIN_STAMP)

$(MAIN_STAMP): pyproject.toml constraints.txt | $(PY)
	@echo "installing the package with its pipeline, hf and serve extras (a few minutes the first time)"
	$(BEAT) install $(NO_PREFIX) $(PY) .ci/install $(PY) -c constraints.txt -e '.[pipeline,hf,serve]'
	@touch $(MAIN_STAMP)

setup: $(STAMP)

# Two test tiers (markers in pyproject.toml), each timed by the heartbeat's "done in" line:
# `make test` the fast default tier (no `slow` test), `make test-e2e` the DVC end-to-end and
# child-process tier (`slow`). Ray's launcher test (`ray`) needs the scale extra: it skips
# with its reason under `make check` and runs under `make check-scale`.
# `make check` runs the e2e tier beside the rest (lint, then the fast tier, then mypy), two
# jobs at a time (CHECK_JOBS), each line carrying its job's label; `make check CHECK_JOBS=1`
# runs them one after another. The e2e tier runs on 2 pytest-xdist workers (E2E_XDIST; a
# test file stays on one worker, in file order; the longest files start first): it is mostly
# child processes (dvc, stages) on one core each, and it is the longer job. The fast tier
# stays in one process unless XDIST is given (`make test XDIST="-n 2 --dist loadfile"`).
# README "Development" and docs/pipeline.md "Time to green" say what each measured.
XDIST ?=
E2E_XDIST ?= -n 2 --dist loadfile --no-loadscope-reorder
CHECK_JOBS ?= 2
test: $(TEST_STAMP)
	$(BEAT) "pytest fast tier" $(PY) -m pytest -q -m "not slow" $(XDIST)

test-e2e: $(TEST_STAMP)
	$(BEAT) "pytest e2e tier" $(PY) -m pytest -q -m "slow and not ray" \
	--durations=10 $(E2E_XDIST)

lint: $(TEST_STAMP)
	$(BEAT) "ruff" sh -c '$(PY) -m ruff check torchscan_stages tests benchmarks && \
	$(PY) -m ruff format --check torchscan_stages tests benchmarks'
	$(PY) .ci/check_syntax

# mypy keeps its cache in .mypy_cache (git-ignored): a rerun checks only what changed.
types: $(TEST_STAMP)
	$(BEAT) "mypy" $(PY) -m mypy

check: $(TEST_STAMP)
	HEARTBEAT_PREFIX=1 $(MAKE) --no-print-directory -j$(CHECK_JOBS) check-jobs

# The order is the start order: lint first (seconds), the e2e tier (the longest) beside it.
check-jobs: lint test-e2e test types

check-scale: setup
	$(BEAT) "pytest ray tier" $(PY) -m pytest -q -m ray

bench: setup
	$(PY) benchmarks/run_all.py

# On a machine with an NVIDIA GPU only: every CUDA test, then the GPU figures
# (prediction vs allocator, CUDA vs CPU operator FLOPs, synchronised passes) in gpu_check.json.
gpu-check: setup
	$(PY) -m pytest -q -rs -m cuda -p no:cacheprovider
	$(PY) benchmarks/gpu_check.py

# The main job: the cached pipeline on the default model, ending with the HTML page.
# Then commit what the README says ("After a run: what to commit").
main: $(MAIN_STAMP)
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(BEAT) "dvc repro" $(VENV)/bin/dvc repro
	@echo "HTML report: $(CURDIR)/reports/index.html"
	@$(PY) -m torchscan_stages.pipeline.commit

# The side pipelines are DVC projects of their own (never in the main one's status or
# metrics): `dvc repro` runs inside their folder.
sweep: setup
	cd pipelines/sweep && PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(BEAT) "dvc repro" dvc repro

check-optimisation: setup
	cd pipelines/check_optimisation && PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(BEAT) "dvc repro" dvc repro

# Rebuild .dvc/plots/offline.html (vega scripts inlined from npm); only to change versions.
plots-template: setup
	$(PY) pipelines/plots/make_offline_template.py
