# lakequery developer entry points. Both targets bootstrap .venv on a fresh clone.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck pytest bench clean delta-jars

# The reference implementation's jars (delta-spark and what it needs beyond PySpark), fetched
# from Maven Central by tests/delta_spark/jars/pom.xml into a cache the tests read.
DELTA_POM := tests/delta_spark/jars/pom.xml
DELTA_JARS := .cache/delta-jars
DELTA_STAMP := $(DELTA_JARS)/.stamp

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

# Fetches the jars unless the stamp is newer than the pom. A shell command rather than a
# recursive make, so that `make -n pytest` only prints.
FETCH_DELTA_JARS = [ $(DELTA_STAMP) -nt $(DELTA_POM) ] || { \
	command -v mvn >/dev/null 2>&1 || { echo "need mvn (Maven) on PATH for the delta-spark jars"; exit 1; }; \
	rm -rf $(DELTA_JARS) && \
	mvn -q -f $(DELTA_POM) dependency:copy-dependencies -DincludeScope=runtime \
		-DoutputDirectory=$(CURDIR)/$(DELTA_JARS) && \
	touch $(DELTA_STAMP); }

delta-jars:
	@$(FETCH_DELTA_JARS)

# Two pytest processes: tests/delta_spark needs a SparkSession with the Delta jars, the rest
# of the suite one without them (lakequery's Spark connector must work without Delta), and a
# process holds one SparkContext. pyproject's norecursedirs keeps tests/delta_spark out of
# the first run. The jars are fetched first; if that fails, both runs still go ahead (the
# delta-spark tests then fail, naming `make delta-jars`); any failure fails the target.
pytest: $(STAMP)
	@status=0; \
	( $(FETCH_DELTA_JARS) ) || status=1; \
	$(BIN)/python -m pytest -q || status=1; \
	$(BIN)/python -m pytest -q tests/delta_spark || status=1; \
	exit $$status

test: lint typecheck pytest

bench: $(STAMP)
	$(BIN)/python -m benchmarks.run_all

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .cache
