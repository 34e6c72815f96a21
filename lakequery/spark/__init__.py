"""lakequery on Apache Spark: read and write Delta tables from PySpark without Delta's jars.

Spark is an engine like the others (DESIGN principle 10): the driver resolves the snapshot
and plans the files with the same planner as DuckDB, Polars and Arrow; the executors read
the Parquet files with Spark's own vectorised reader (deletion vectors applied on the
executors) and write new files with lakequery's writer inside ``mapInArrow``; the driver
commits one transaction.

- :func:`read` -- a Delta table (any version) as a Spark DataFrame.
- :func:`write` -- a DataFrame into a Delta table (append, overwrite, replace where, ...).
- :func:`register` -- the ``lakequery`` Python data source:
  ``spark.read.format("lakequery").load(uri)``, ``df.write.format("lakequery").save(uri)``.
- :func:`ensure_workers` -- fail fast when the Python workers cannot import lakequery
  (every entry point calls it; in local mode it points the workers at this interpreter).

Nothing in lakequery's core imports pyspark; importing this package does not either
(pyspark is imported by the functions that need it).
"""

from __future__ import annotations

from lakequery.spark.datasource import lakequery_errors, register
from lakequery.spark.reading import read, scan_frame
from lakequery.spark.workers import ensure_workers
from lakequery.spark.writing import (
    ADD_ACTION_DDL,
    arrow_schema_of,
    collect_add_actions,
    executor_function,
    write,
)

__all__ = [
    "ADD_ACTION_DDL",
    "arrow_schema_of",
    "collect_add_actions",
    "ensure_workers",
    "executor_function",
    "lakequery_errors",
    "read",
    "register",
    "scan_frame",
    "write",
]
