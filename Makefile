# lakequery developer entry points. Both targets bootstrap .venv on a fresh clone.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck pytest bench bench-env bench-latency clean delta-jars

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
	$(BIN)/python -m pip install --quiet -e ".[dev,spark,cli,notebook]"
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

# A benchmark-only environment (issue 16): the peers lakequery is measured against, in their
# own venv so none of them becomes a dependency. DuckDB 1.5.x because the official `delta`
# extension is on PyPI (`duckdb-extension-delta`) for 1.5.x only; its wheel ships the
# .duckdb_extension file, loaded offline with LOAD '<path>' (nothing is INSTALLed from
# DuckDB's extension server). lakequery itself is installed editable from the working tree.
BENCH_VENV := .venv-bench
BENCH_STAMP := $(BENCH_VENV)/.installed
# pytest, hypothesis and pandas: to run lakequery's tests under DuckDB 1.5 as well.
BENCH_PKGS := "duckdb==1.5.5" "duckdb-extension-delta==1.5.5" polars-deltalake deltalake \
	polars pyarrow pytest hypothesis "pandas<3"

$(BENCH_STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "need $(PYTHON) on PATH"; exit 1; }
	[ -x $(BENCH_VENV)/bin/python ] || $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(BENCH_VENV)/bin/python -m pip install --quiet -e . $(BENCH_PKGS)
	$(BENCH_VENV)/bin/python -c "from benchmarks.bench_latency import delta_connection as c, \
		delta_extension as e; c(e()); print('delta extension loads offline:', e())"
	@touch $(BENCH_STAMP)

bench-env: $(BENCH_STAMP)

bench-latency: $(BENCH_STAMP)
	$(BENCH_VENV)/bin/python -m benchmarks.bench_latency

clean:
	rm -rf $(VENV) $(BENCH_VENV) .pytest_cache .mypy_cache .ruff_cache .cache
