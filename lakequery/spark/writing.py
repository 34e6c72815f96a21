"""Writing Delta tables from PySpark with lakequery's writer running on the executors.

:func:`write` plans the write on the driver (mode, schema checks, new metadata), runs
:func:`lakequery.writer.add_actions.write_batches_to_arrow` inside ``df.mapInArrow`` so
every executor writes its partitions' Parquet files straight to the table location (the
data never passes through the driver), collects only the small ``add`` actions and
commits them as ONE transaction from the driver, with the same modes, schema checks and
conflict handling as :func:`lakequery.write`.

The pieces are public for jobs that assemble their own pipeline:
:func:`arrow_schema_of` gives the Arrow schema to plan with;
:func:`lakequery.writer.plan_write` (driver) gives a :class:`~lakequery.writer.WritePlan`
whose ``state`` is a picklable :class:`~lakequery.writer.WriteState`;
:func:`executor_function` binds that state to the function ``mapInArrow`` runs;
:data:`ADD_ACTION_DDL` is its output schema for Spark; :func:`collect_add_actions` brings
the actions to the driver; and :func:`lakequery.writer.commit_write` commits them.

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

from lakequery.spark.worker_errors import lakequery_errors
from lakequery.spark.workers import ensure_workers
from lakequery.writer.add_actions import (
    add_actions_from_arrow,
    write_batches_to_arrow,
)
from lakequery.writer.api import SchemaMode, WriteMode, WriteResult, commit_write, plan_write
from lakequery.writer.identity import refuse_distributed
from lakequery.writer.state import WriteState

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from lakequery.storage import TableLocation

#: The Spark DDL of the add-action rows the executors return (mirrors ADD_ACTION_SCHEMA).
ADD_ACTION_DDL = (
    "path string, partitionValues map<string,string>, size bigint, "
    "modificationTime bigint, dataChange boolean, stats string, tags map<string,string>"
)


def arrow_schema_of(df: DataFrame, *, nullable: bool = False) -> pa.Schema:
    """The Arrow schema of ``df``'s rows as ``mapInArrow`` hands them to Python.

    Args:
        df: A Spark DataFrame (only its schema is used; no job runs).
        nullable: Make every field nullable, at every nesting level (map keys excepted),
            as Spark's Delta writer does for the schema of a table it creates: Spark marks
            columns NOT NULL from how they are computed (``spark.range``, literals), which
            is no reason to forbid nulls in later writes.

    Returns:
        The Arrow schema (timestamps carry the session time zone).
    """
    from pyspark.sql.pandas.types import to_arrow_schema

    from lakequery.spark.conform import refuse_variant_columns

    refuse_variant_columns(df.schema)
    tz = df.sparkSession.conf.get("spark.sql.session.timeZone") or "UTC"
    try:
        schema: pa.Schema = to_arrow_schema(df.schema, timezone=tz)
    except TypeError:  # PySpark 4.0/4.1 have no timezone parameter (always UTC)
        schema = to_arrow_schema(df.schema)
    if nullable:
        schema = pa.schema([_nullable_field(f) for f in schema]).with_metadata(
            schema.metadata or {}
        )
    return schema


def _nullable_field(f: pa.Field[Any]) -> pa.Field[Any]:
    return f.with_type(_nullable_type(f.type)).with_nullable(True)


def _nullable_type(t: Any) -> Any:
    if pa.types.is_struct(t):
        return pa.struct([_nullable_field(t.field(i)) for i in range(t.num_fields)])
    if pa.types.is_map(t):
        item = _nullable_field(t.item_field)
        return pa.map_(t.key_field.with_type(_nullable_type(t.key_type)), item)
    if pa.types.is_large_list(t):
        return pa.large_list(_nullable_field(t.value_field))
    if pa.types.is_fixed_size_list(t):
        return pa.list_(_nullable_field(t.value_field), t.list_size)
    if pa.types.is_list(t):
        return pa.list_(_nullable_field(t.value_field))
    return t


def executor_function(
    state: WriteState, *, names: Sequence[str] | None = None
) -> functools.partial[Iterator[pa.RecordBatch]]:
    """The picklable function to pass to ``df.mapInArrow(..., ADD_ACTION_DDL)``.

    Each call (one per Spark task) writes that task's rows as data files of the table
    described by ``state`` and yields their ``add`` actions. ``names``: the columns'
    real names, when the DataFrame was given placeholder ones (``mapInArrow`` resolves
    every column by name, and reads ``a.b`` as field ``b`` of ``a``).
    """
    return functools.partial(_write_partition, state=state, names=names)


def _write_partition(
    batches: Iterator[pa.RecordBatch], state: WriteState, names: Sequence[str] | None = None
) -> Iterator[pa.RecordBatch]:
    if names is not None:
        batches = (b.rename_columns(list(names)) for b in batches)
    yield from write_batches_to_arrow(batches, state)


def collect_add_actions(rows: DataFrame) -> list[dict[str, Any]]:
    """Runs the job of a ``mapInArrow(executor_function(...), ADD_ACTION_DDL)`` DataFrame
    and returns the ``add`` actions its tasks produced (only those reach the driver).

    Raises:
        LakeQueryError: A task failed with a lakequery error (e.g.
            :class:`~lakequery.errors.SchemaMismatchError` or
            :class:`~lakequery.errors.ConstraintViolationError`): the same class is raised
            on the driver with the worker's message, chained to Spark's exception.
    """
    with lakequery_errors():
        table: pa.Table = rows.toArrow()
    return add_actions_from_arrow(table)


def write(
    df: DataFrame,
    uri: TableLocation,
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
    name: str | None = None,
    description: str | None = None,
    cluster_by: Sequence[str] | None = None,
) -> WriteResult:
    """Writes a Spark DataFrame to a Delta table; options as in :func:`lakequery.write`
    (``cluster_by``: liquid clustering columns of a new table, see
    :mod:`lakequery.clustering`).

    Each Spark task writes its own files (so a partitioned table gets at least one file
    per task and partition value; repartition by the partition columns first for fewer
    files). Only the ``add`` actions are collected to the driver, which commits them as
    one transaction. The executors open the table location themselves, with
    ``storage_options``. A new table's columns are all nullable, as with Spark's own
    Delta writer.

    Returns:
        The :class:`~lakequery.writer.WriteResult` of the commit.

    Raises:
        TableAlreadyExistsError: ``mode="error"`` and the table exists.
        SchemaMismatchError: The data does not fit the table's schema (found on the
            driver, or by a task: then raised again on the driver with its message).
        ConstraintViolationError: A row breaks a constraint or the overwrite predicate.
        CommitConflictError: A concurrent commit conflicts.
        IdentityColumnError: The table has identity columns whose values the DataFrame
            lacks (tasks cannot share one sequence; see ARCHITECTURE "Identity columns").
    """
    ensure_workers(df.sparkSession)
    plan = plan_write(
        uri,
        arrow_schema_of(df, nullable=True),
        mode=mode,
        partition_by=partition_by,
        predicate=predicate,
        schema_mode=schema_mode,
        configuration=configuration,
        target_file_size=target_file_size,
        storage_options=storage_options,
        app_id=app_id,
        app_version=app_version,
        name=name,
        description=description,
        cluster_by=cluster_by,
    )
    if plan.skipped or plan.state is None:
        return commit_write(plan, [])
    refuse_distributed(plan.state.identity, "lakequery.spark.write")
    names: list[str] | None = None
    if any("." in n or "`" in n for n in df.columns):  # see executor_function
        names = list(df.columns)
        df = df.toDF(*(f"_lq_column_{i}" for i in range(len(names))))
    rows = df.mapInArrow(executor_function(plan.state, names=names), ADD_ACTION_DDL)
    return commit_write(plan, collect_add_actions(rows))


__all__ = [
    "ADD_ACTION_DDL",
    "arrow_schema_of",
    "collect_add_actions",
    "executor_function",
    "write",
]
