# Single entry points: `make setup`, `make test`, `make check`, `make bench`, `make main`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# Installs only when pyproject.toml or constraints.txt changed since the last install.
# `make main` needs only the pipeline and hf extras (MAIN_STAMP); `make setup` (tests,
# lint, sweeps) installs every extra, Ray's scale extra (~125 MB) included.
STAMP := $(VENV)/.installed
MAIN_STAMP := $(VENV)/.installed-main
# Progress at least every 15 s during long quiet steps (pip, pytest, dvc repro).
BEAT := $(PYTHON) $(CURDIR)/.ci/heartbeat

.PHONY: setup test check lint types bench main sweep check-optimisation plots-template gpu-check

$(PY):
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml constraints.txt | $(PY)
	@echo "installing the package with its pipeline, dev, hf and scale extras (a few minutes the first time)"
	$(BEAT) install $(PY) -m pip install --progress-bar off -c constraints.txt -e '.[pipeline,dev,hf,scale]'
	@touch $(STAMP) $(MAIN_STAMP)

$(MAIN_STAMP): pyproject.toml constraints.txt | $(PY)
	@echo "installing the package with its pipeline and hf extras (a few minutes the first time)"
	$(BEAT) install $(PY) -m pip install --progress-bar off -c constraints.txt -e '.[pipeline,hf]'
	@touch $(MAIN_STAMP)

setup: $(STAMP)

test: setup
	$(BEAT) pytest $(PY) -m pytest -q

lint: setup
	$(PY) -m ruff check torchscan_stages tests benchmarks
	$(PY) -m ruff format --check torchscan_stages tests benchmarks
	$(PY) .ci/check_syntax

types: setup
	$(BEAT) mypy $(PY) -m mypy

check: lint types test

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
	@echo "to keep it: git add dvc.lock metrics plots reports/.gitignore && git commit && dvc push"

# The side pipelines are DVC projects of their own (never in the main one's status or
# metrics): `dvc repro` runs inside their folder.
sweep: setup
	cd pipelines/sweep && PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(BEAT) "dvc repro" dvc repro

check-optimisation: setup
	cd pipelines/check_optimisation && PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(BEAT) "dvc repro" dvc repro

# Rebuild .dvc/plots/offline.html (vega scripts inlined from npm); only to change versions.
plots-template: setup
	$(PY) pipelines/plots/make_offline_template.py
