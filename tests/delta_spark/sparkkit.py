"""Helpers for the delta-spark interop tests: where the reference's jars are, and how rows of
Spark-Delta and lakequery are compared."""

from __future__ import annotations

import datetime as dt
import math
import shutil
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from tablekit import read_engines

import lakequery as lq
from lakequery.log_segment import list_log
from lakequery.protocol.log_files import earliest_version

REPO = Path(__file__).resolve().parents[2]
#: Where ``make delta-jars`` puts delta-spark and its runtime dependencies.
JAR_DIR = REPO / ".cache" / "delta-jars"
#: The reference implementation under test; tests/delta_spark/jars/pom.xml pins the same.
DELTA_VERSION = "4.4.0"
SPARK_BINARY = "4.2"
SCALA_BINARY = "2.13"
DELTA_SPARK_JAR = f"delta-spark_{SPARK_BINARY}_{SCALA_BINARY}-{DELTA_VERSION}.jar"
REQUIRED_JARS = (DELTA_SPARK_JAR, f"delta-storage-{DELTA_VERSION}.jar")


def delta_jars() -> list[Path]:
    """Every jar of the cache; fails the calling test when delta-spark is not there."""
    jars = sorted(JAR_DIR.glob("*.jar")) if JAR_DIR.is_dir() else []
    missing = [name for name in REQUIRED_JARS if not (JAR_DIR / name).is_file()]
    if missing:
        pytest.fail(
            f"delta-spark jars missing from {JAR_DIR}: {', '.join(missing)}. "
            "Run `make delta-jars` (Maven fetches them from Maven Central; `make test` and "
            "`make pytest` do this first).",
            pytrace=False,
        )
    return jars


# --------------------------------------------------------------------------------------------
# comparing rows
# --------------------------------------------------------------------------------------------


def delta_session(app: str, **conf: str) -> Any:
    """A local Spark session (``local[2]``, loopback only, no UI) with Spark's own Delta
    Lake: the jars of :func:`delta_jars`, its SQL extension and catalog, session time zone
    UTC, Arrow on, 2 shuffle partitions and a snapshot's state rebuilt in 2 partitions
    (the default 50 dominates small tables on one machine). Python workers run this
    interpreter. ``conf`` adds or overrides settings."""
    import os
    import sys

    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"  # never bind to another interface
    settings = {
        "spark.jars": ",".join(str(j) for j in delta_jars()),
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.databricks.delta.snapshotPartitions": "2",
    } | conf
    builder = SparkSession.builder.master("local[2]").appName(app)
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def _norm(v: Any) -> Any:
    """A value in a form that compares equal across the two readers' Arrow types."""
    if isinstance(v, float):
        return "NaN" if math.isnan(v) else v
    if isinstance(v, dt.datetime):
        return v.astimezone(dt.timezone.utc) if v.tzinfo else v
    if isinstance(v, dict):
        return tuple(sorted((k, _norm(x)) for k, x in v.items()))
    if isinstance(v, list):
        if v and all(isinstance(x, tuple) and len(x) == 2 for x in v):  # a map's entries
            return ("map", tuple(sorted(((_norm(k), _norm(x)) for k, x in v), key=repr)))
        return tuple(_norm(x) for x in v)
    return v


def canon(table: pa.Table, columns: Sequence[str] | None = None) -> list[tuple[Any, ...]]:
    """The rows of ``table`` as a sorted list of normalised tuples (a multiset)."""
    names = list(columns) if columns is not None else table.column_names
    out = [tuple(_norm(r[c]) for c in names) for r in table.select(names).to_pylist()]
    return sorted(out, key=repr)


def assert_same_rows(actual: pa.Table, expected: pa.Table, what: str) -> None:
    """Same column names in the same order and the same multiset of rows."""
    assert actual.column_names == expected.column_names, (
        f"{what}: columns {actual.column_names} vs {expected.column_names}"
    )
    a, e = canon(actual), canon(expected)
    if a != e:
        extra = Counter(map(repr, a)) - Counter(map(repr, e))
        missing = Counter(map(repr, e)) - Counter(map(repr, a))
        raise AssertionError(
            f"{what}: {len(a)} rows vs {len(e)} expected\n"
            f"  missing: {list(missing.elements())[:8]}\n"
            f"  extra:   {list(extra.elements())[:8]}"
        )


# --------------------------------------------------------------------------------------------
# reading both ways
# --------------------------------------------------------------------------------------------


def spark_read(
    spark: Any,
    uri: str,
    *,
    version: int | None = None,
    timestamp: str | None = None,
    where: str | None = None,
) -> pa.Table:
    """Spark-Delta's read of the table (at a version or time), as Arrow."""
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    if timestamp is not None:
        reader = reader.option("timestampAsOf", timestamp)
    df = reader.load(uri)
    if where is not None:
        df = df.where(where)
    out: pa.Table = df.toArrow()
    return out


def spark_changes(spark: Any, uri: str, start: int, end: int) -> pa.Table:
    """Spark-Delta's change data feed of versions ``start..end``, as Arrow."""
    df = (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", start)
        .option("endingVersion", end)
        .load(uri)
    )
    out: pa.Table = df.toArrow()
    return out


def lq_read(uri: str, *, version: int | None = None, where: str | None = None) -> pa.Table:
    """lakequery's own read (Arrow engine)."""
    return lq.DeltaTable(uri).snapshot(version=version).scan(filter=where).to_arrow()


def lq_engines(uri: str, version: int | None = None) -> dict[str, pa.Table]:
    """The table as lakequery's Arrow, DuckDB and Polars engines read it."""
    return read_engines(uri, version)


def reconstructable_versions(uri: str) -> list[int]:
    """Every version lakequery can rebuild from the log as it is now."""
    storage = lq.DeltaTable(uri).storage
    listing = list_log(storage, 0)
    first = earliest_version(listing)
    assert first is not None, f"{uri}: no reconstructable version"
    last = max(c.version for c in listing.commits)
    return list(range(first, last + 1))


def delta_sql(spark: Any, statement: str, uri: str) -> Any:
    """Runs ``statement`` with ``{t}`` replaced by the table's path identifier."""
    return spark.sql(statement.format(t=f"delta.`{uri}`"))


def copy_table(uri: str, dest: Path) -> str:
    """A copy of a table (file times kept, so commit timestamps stay the same)."""
    shutil.copytree(uri, dest, copy_function=shutil.copy2)
    return str(dest)


#: DESCRIBE DETAIL columns compared as they are (properties and features separately).
DETAIL_COLUMNS = (
    "format",
    "id",
    "name",
    "description",
    "partitionColumns",
    "clusteringColumns",
    "numFiles",
    "sizeInBytes",
    "minReaderVersion",
    "minWriterVersion",
)


def assert_same_detail(spark: Any, uri: str, what: str = "") -> None:
    """Spark's DESCRIBE DETAIL equals ``DeltaTable.detail().to_dict()`` column by column."""
    (theirs,) = delta_sql(spark, "DESCRIBE DETAIL {t}", uri).toArrow().to_pylist()
    ours = lq.DeltaTable(uri).detail().to_dict()
    for column in DETAIL_COLUMNS:
        assert theirs[column] == ours[column], f"{what}: DESCRIBE DETAIL {column}"
    assert dict(theirs["properties"]) == ours["properties"], what
    assert sorted(theirs["tableFeatures"]) == ours["tableFeatures"], what
