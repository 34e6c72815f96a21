"""Writing Delta tables from PySpark with lakequery's writer running on the executors.

:func:`write` plans the write on the driver (mode, schema checks, new metadata), runs
:func:`lakequery.writer.add_actions.write_batches_to_arrow` inside ``df.mapInArrow`` so
every executor writes its partitions' Parquet files straight to the table location (the
data never passes through the driver), collects only the small ``add`` actions and
commits them as ONE transaction from the driver, with the same modes, schema checks and
conflict handling as :func:`lakequery.write`.

The pieces are public for jobs that assemble their own pipeline:
:func:`lakequery.writer.plan_write` (driver) gives a :class:`~lakequery.writer.WritePlan`
whose ``state`` is a picklable :class:`~lakequery.writer.WriteState`;
:func:`~lakequery.writer.add_actions.write_batches_to_arrow` is the executor function;
:data:`ADD_ACTION_DDL` is its output schema for Spark; and
:func:`lakequery.writer.commit_write` commits the collected actions.

Example (needs a Spark session; see the README):

.. code-block:: python

    import lakequery.spark
    df = spark.range(1_000_000).withColumnRenamed("id", "x")
    lakequery.spark.write(df, "/tmp/tables/numbers", mode="append")
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lakequery.writer.add_actions import add_actions_from_arrow, write_batches_to_arrow
from lakequery.writer.api import SchemaMode, WriteMode, WriteResult, commit_write, plan_write
from lakequery.writer.state import WriteState

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: The Spark DDL of the add-action rows the executors return (mirrors ADD_ACTION_SCHEMA).
ADD_ACTION_DDL = (
    "path string, partitionValues map<string,string>, size bigint, "
    "modificationTime bigint, dataChange boolean, stats string, tags map<string,string>"
)


def arrow_schema_of(df: DataFrame) -> pa.Schema:
    """The Arrow schema Spark uses for ``df`` in ``mapInArrow``."""
    from pyspark.sql.pandas.types import to_arrow_schema

    tz = df.sparkSession.conf.get("spark.sql.session.timeZone")
    schema: pa.Schema = to_arrow_schema(df.schema, timezone=tz or "UTC")
    return schema


def executor_function(
    state: WriteState,
) -> functools.partial[Iterator[pa.RecordBatch]]:
    """The picklable function to pass to ``df.mapInArrow(..., ADD_ACTION_DDL)``."""
    return functools.partial(_write_partition, state=state)


def _write_partition(
    batches: Iterator[pa.RecordBatch], state: WriteState
) -> Iterator[pa.RecordBatch]:
    yield from write_batches_to_arrow(batches, state)


def write(
    df: DataFrame,
    uri: str,
    *,
    mode: WriteMode = "error",
    partition_by: Sequence[str] | str | None = None,
    predicate: str | None = None,
    schema_mode: SchemaMode | None = None,
    configuration: Mapping[str, str] | None = None,
    target_file_size: int | None = None,
    storage_options: Mapping[str, Any] | None = None,
    app_id: str | None = None,
    app_version: int | None = None,
) -> WriteResult:
    """Writes a Spark DataFrame to a Delta table; options as in :func:`lakequery.write`.

    Each Spark task writes its own files (so a partitioned table gets at least one file
    per task and partition value; repartition by the partition columns first for fewer
    files). Only the ``add`` actions are collected to the driver, which commits them as
    one transaction.

    Returns:
        The :class:`~lakequery.writer.WriteResult` of the commit.
    """
    plan = plan_write(
        uri,
        arrow_schema_of(df),
        mode=mode,
        partition_by=partition_by,
        predicate=predicate,
        schema_mode=schema_mode,
        configuration=configuration,
        target_file_size=target_file_size,
        storage_options=storage_options,
        app_id=app_id,
        app_version=app_version,
    )
    if plan.skipped or plan.state is None:
        return commit_write(plan, [])
    rows = df.mapInArrow(executor_function(plan.state), ADD_ACTION_DDL)
    table: pa.Table = rows.toArrow()  # only the add actions reach the driver
    return commit_write(plan, add_actions_from_arrow(table))
