# Single entry points: `make setup`, `make test`, `make check`, `make bench`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: setup test check lint types bench main

$(PY):
	$(PYTHON) -m venv $(VENV)

setup: $(PY)
	$(PY) -m pip install -q -c constraints.txt -e '.[pipeline,dev,hf]'

test: setup
	$(PY) -m pytest -q

lint: setup
	$(PY) -m ruff check torchscan_stages tests benchmarks
	$(PY) -m ruff format --check torchscan_stages tests benchmarks

types: setup
	$(PY) -m mypy

check: lint types test

bench: setup
	$(PY) benchmarks/run_all.py

# The main job: the cached pipeline on the embedded default model, ending with the HTML page.
main: setup
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(VENV)/bin/dvc repro
	@echo "HTML report: $(CURDIR)/reports/index.html"
