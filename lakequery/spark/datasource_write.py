"""The write side of the ``lakequery`` Spark data source (see :mod:`lakequery.spark.datasource`).

Spark runs a Python data source write in three places, each in a Python worker process
of its own, and pickles the writer between them:

1. *planning* (driver): :meth:`LakeQueryDataSource.writer` plans the write with
   :func:`lakequery.writer.plan_write` (mode, schema checks or evolution, new metadata
   and protocol) and returns a :class:`DeltaWriter` holding a :class:`PlannedWrite`:
   small values only, since it travels to every task;
2. *tasks* (executors): :meth:`DeltaWriter.write` writes the task's Arrow batches as
   Parquet files with statistics (:func:`lakequery.writer.data_files.write_data_files`)
   and returns an :class:`AddedFiles` commit message with their ``add`` actions;
3. *commit* (driver): :meth:`DeltaWriter.commit` receives the messages of the task
   attempts Spark's commit coordinator accepted (one per task, so a retried or
   speculative task never contributes twice) and commits them as ONE transaction with
   :func:`lakequery.writer.commit_write`, which retries on concurrent commits that do
   not conflict.

:meth:`DeltaWriter.abort` never deletes anything: Spark also calls it when ``commit``
raised, possibly after the commit file landed, and then the files belong to the table.
Files no version references are left to VACUUM (a failing task's own writer already
removes what it wrote, best effort).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType as SparkStruct

from lakequery.log_segment import load_state
from lakequery.metadata import Metadata
from lakequery.protocol.features import Protocol
from lakequery.snapshot import Snapshot
from lakequery.spark.conform import refuse_variant_columns, spark_arrow_schema
from lakequery.spark.datasource_options import WriteOptions
from lakequery.spark.writing import _nullable_field
from lakequery.storage import open_storage
from lakequery.writer.api import WritePlan, WriteResult, commit_write, plan_write
from lakequery.writer.data_files import write_data_files
from lakequery.writer.identity import refuse_distributed
from lakequery.writer.state import WriteState

log = logging.getLogger("lakequery.spark")


@dataclass(frozen=True)
class AddedFiles(WriterCommitMessage):  # type: ignore[misc]  # pyspark is untyped here
    """What one task attempt wrote: its ``add`` actions (JSON form).

    Attributes:
        adds: the ``add`` actions of the files the task wrote.
        partition: Spark's partition id of the task (-1 when unknown).
        attempt: the task attempt number (-1 when unknown).
    """

    adds: tuple[dict[str, Any], ...]
    partition: int = -1
    attempt: int = -1


@dataclass(frozen=True)
class PlannedWrite:
    """A :class:`~lakequery.writer.WritePlan` as small picklable values: the snapshot is
    kept as its version and loaded again for the commit.

    Attributes:
        uri: the table root.
        storage_options: s3fs arguments.
        read_version: the version the write planned against (None: it creates the table).
        mode: ``append`` or ``overwrite``.
        state: the data file writer's state (None when the write is skipped).
        metadata: the ``metaData`` action to commit (JSON form; None: unchanged).
        protocol: the protocol to commit (None: unchanged).
        predicate: ``replaceWhere``.
        partition_by: partition columns of a table the write creates or replaces.
        app_id: ``txnAppId``.
        app_version: ``txnVersion``.
        skip_reason: why nothing is written, or ``""``.
        target_file_size: bytes per data file.
    """

    uri: str
    storage_options: dict[str, Any] | None
    read_version: int | None
    mode: str
    state: WriteState | None
    metadata: dict[str, Any] | None
    protocol: Protocol | None
    predicate: str | None
    partition_by: tuple[str, ...]
    app_id: str | None
    app_version: int | None
    skip_reason: str
    target_file_size: int | None

    @classmethod
    def of(cls, plan: WritePlan) -> PlannedWrite:
        return cls(
            uri=plan.storage.root,
            storage_options=dict(plan.storage_options) if plan.storage_options else None,
            read_version=plan.snapshot.version if plan.snapshot is not None else None,
            mode=plan.mode,
            state=plan.state,
            metadata=plan.metadata.to_action() if plan.metadata is not None else None,
            protocol=plan.protocol,
            predicate=plan.predicate,
            partition_by=tuple(plan.partition_by),
            app_id=plan.app_id,
            app_version=plan.app_version,
            skip_reason=plan.skip_reason,
            target_file_size=plan.target_file_size,
        )

    def to_plan(self) -> WritePlan:
        """The :class:`~lakequery.writer.WritePlan` again (loads the read snapshot)."""
        storage = open_storage(self.uri, self.storage_options)
        snapshot = None
        if self.read_version is not None:
            snapshot = Snapshot(storage, load_state(storage, self.read_version))
        return WritePlan(
            storage,
            snapshot,
            self.mode,
            self.state,
            metadata=Metadata.from_action(self.metadata) if self.metadata is not None else None,
            protocol=self.protocol,
            predicate=self.predicate,
            partition_by=self.partition_by,
            app_id=self.app_id,
            app_version=self.app_version,
            skip_reason=self.skip_reason,
            storage_options=self.storage_options,
            target_file_size=self.target_file_size,
        )


def arrow_schema(schema: SparkStruct) -> pa.Schema:
    """The Arrow schema to plan a write of rows of ``schema`` with (every field nullable,
    as :func:`lakequery.spark.write` and Spark's Delta writer make a new table's)."""
    refuse_variant_columns(schema)
    return pa.schema([_nullable_field(f) for f in spark_arrow_schema(schema)])


def plan(options: WriteOptions, schema: SparkStruct) -> PlannedWrite:
    """Plans a write of rows of ``schema`` (on the driver); refuses to generate identity
    values (tasks cannot share one sequence)."""
    planned = PlannedWrite.of(
        plan_write(
            options.uri,
            arrow_schema(schema),
            mode=options.mode,
            partition_by=options.partition_by,
            predicate=options.predicate,
            schema_mode=options.schema_mode,
            configuration=options.configuration,
            target_file_size=options.target_file_size,
            storage_options=options.storage_options,
            app_id=options.app_id,
            app_version=options.app_version,
        )
    )
    if planned.state is not None:
        refuse_distributed(planned.state.identity, "the lakequery Spark data source")
    return planned


def _task() -> tuple[int, int]:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        return -1, -1
    return ctx.partitionId(), ctx.attemptNumber()


def _summary(messages: Sequence[WriterCommitMessage | None]) -> tuple[int, int, list[str]]:
    """(tasks with a message, data files, their paths) of the messages."""
    added = [m for m in messages if isinstance(m, AddedFiles)]
    paths = [str(a["path"]) for m in added for a in m.adds]
    return len(added), len(paths), paths


class DeltaWriter(DataSourceArrowWriter):  # type: ignore[misc]  # pyspark is untyped here
    """Writes a task's batches as data files; commits all tasks' files as one version."""

    def __init__(self, planned: PlannedWrite) -> None:
        self.planned = planned

    def write(self, iterator: Iterator[pa.RecordBatch]) -> AddedFiles:
        """Writes this task's rows (executor); nothing is committed here."""
        partition, attempt = _task()
        state = self.planned.state
        if state is None:  # skipped (txnAppId/txnVersion already committed): rows unused
            return AddedFiles((), partition, attempt)
        adds = write_data_files(iterator, state)
        return AddedFiles(tuple(adds), partition, attempt)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:  # type: ignore[override]
        """Commits the files of every task as one transaction (driver).

        Raises:
            CommitError: a message is missing (nothing is committed), or the commit
                conflicts with a concurrent one (see :func:`lakequery.writer.commit_write`).
        """
        from lakequery.errors import CommitError

        missing = sum(1 for m in messages if not isinstance(m, AddedFiles))
        if missing:
            raise CommitError(
                f"write to {self.planned.uri!r}: {missing} of {len(messages)} tasks returned "
                "no commit message; nothing is committed"
            )
        adds = [a for m in messages if isinstance(m, AddedFiles) for a in m.adds]
        result: WriteResult = commit_write(self.planned.to_plan(), adds)
        if result.skipped:
            log.info("write to %s skipped: %s", self.planned.uri, result.message)
        else:
            log.info(
                "write to %s committed version %d: %d files, %d rows",
                self.planned.uri,
                result.version,
                result.num_files,
                result.num_rows,
            )

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:  # type: ignore[override]
        """Logs what the failed write left behind and deletes nothing (driver).

        Spark calls this when a task failed for good, and also when :meth:`commit`
        raised, possibly after its commit file landed: a file named here may then be part
        of the table, so none is deleted. Files no version references are orphans that
        VACUUM removes once they are older than the retention period.
        """
        tasks, files, paths = _summary(messages)
        shown = ", ".join(paths[:5]) + (", ..." if len(paths) > 5 else "")
        log.warning(
            "write to %s aborted; %d data files written by %d tasks were left in place "
            "(never deleted here: if the commit landed they belong to the table, "
            "otherwise VACUUM removes them): %s",
            self.planned.uri,
            files,
            tasks,
            shown or "none",
        )


__all__ = ["AddedFiles", "DeltaWriter", "PlannedWrite", "arrow_schema", "plan"]
