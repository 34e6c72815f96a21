"""The reference implementation in the test suite: one local SparkSession with delta-spark.

This folder runs in a pytest process of its own (``make pytest`` starts it after the main
run; ``python -m pytest tests/delta_spark`` runs it alone): a process holds one
SparkContext, and the rest of the suite deliberately uses one *without* the Delta jars,
because lakequery's own Spark connector must work without them. pyproject's
``norecursedirs`` keeps a plain ``pytest`` from collecting this folder.

The jars come from ``make delta-jars`` (``tests/delta_spark/jars/pom.xml`` → Maven Central →
``.cache/delta-jars``). A missing jar fails the tests that need Spark, naming that target;
nothing here skips.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from lq_tables import BUILDERS
from sparkkit import delta_session


@pytest.fixture(scope="session")
def delta_spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One real local SparkSession with Spark's own Delta Lake (``local[2]``, loopback only).

    Session time zone UTC; VACUUM's retention check is off so tests may vacuum with a short
    retention; Python workers run this interpreter.
    """
    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    session = delta_session(
        "lakequery-delta-spark-tests",
        **{
            "spark.sql.warehouse.dir": str(warehouse),
            "spark.databricks.delta.retentionDurationCheck.enabled": "false",
            # VACUUM lists files in this many tasks (default 10,000: a minute per VACUUM)
            "spark.sql.sources.parallelPartitionDiscovery.parallelism": "2",
        },
    )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def build(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], str]:
    """Builds a kind of lakequery table (``lq_tables.BUILDERS``) once per session; returns
    its location. Tests that change a table copy it first (:func:`sparkkit.copy_table`)."""
    built: dict[str, str] = {}

    def get(name: str) -> str:
        if name not in built:
            uri = str(tmp_path_factory.mktemp("lq") / name)
            BUILDERS[name](uri)
            built[name] = uri
        return built[name]

    return get


@pytest.fixture(scope="session")
def spark(delta_spark: Any) -> Any:
    """The Delta session under the suite's usual name: this process has only one context."""
    return delta_spark
