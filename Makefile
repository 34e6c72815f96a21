# lakequery developer entry points. Both targets bootstrap .venv on a fresh clone.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck pytest bench clean

$(BIN)/python:
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "need $(PYTHON) on PATH"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[dev,spark]"
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m lakequery.demo

lint: $(STAMP)
	$(BIN)/ruff check lakequery udfs tests benchmarks
	$(BIN)/ruff format --check lakequery udfs tests benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	$(BIN)/python -m pytest -q

test: lint typecheck pytest

bench: $(STAMP)
	$(BIN)/python -m benchmarks.run_all

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
