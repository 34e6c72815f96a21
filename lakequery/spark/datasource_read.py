"""The read side of the ``lakequery`` Spark data source (see :mod:`lakequery.spark.datasource`).

Planning runs in Spark's planner Python worker on the driver: the pinned snapshot (or
change feed range) is scanned whole, and its files are cut into :class:`FilesPartition` s
of roughly equal bytes.

Decision: the reader takes no pushed filter (``pushFilters`` is not implemented, so Spark
evaluates every filter itself and no file is skipped). PySpark 4.2 keeps the read plan
that its filter pushdown returns on the DataFrame's data source and reuses it for the
DataFrame's later queries that push no filter: after ``df.where("id = 3").count()``,
``df.count()`` read the files and rows of ``id = 3`` only (``PythonScanBuilder``'s
``ds.setReadInfo``; upstream keeps it per scan since SPARK-58551, not in a release this
project can test). A read that must skip files uses :func:`lakequery.spark.read`, which
Spark's own Parquet reader prunes. :mod:`lakequery.spark.filters` keeps the tested
translation of Spark's filters for when pushdown is safe again.

A partition carries no data, only what an executor needs to read its files without
touching the log: the table's metadata and protocol as small values and the planned rows
of ``Snapshot.files()`` (path, size, partition values, deletion vector descriptor),
without statistics.

Each executor task rebuilds a metadata-only snapshot from that, reads exactly its files
with lakequery's Arrow engine (:meth:`lakequery.scan.Scan.restricted_to`; deletion vectors
are loaded and applied there), and casts every batch to the Arrow types Spark expects for
the DataFrame's schema (:func:`lakequery.spark.conform.conform_batch`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType as SparkStruct

from lakequery.errors import SchemaMismatchError
from lakequery.log_segment import TableState
from lakequery.metadata import Metadata
from lakequery.protocol.features import Protocol
from lakequery.snapshot import Snapshot
from lakequery.spark.conform import conform_batch, spark_arrow_schema
from lakequery.spark.datasource_options import ReadOptions
from lakequery.spark.schema import logical_schema
from lakequery.storage import Storage, open_storage

if TYPE_CHECKING:
    from lakequery.cdf import ChangeScan
    from lakequery.scan import Scan

#: What opening a file costs, in bytes of reading (Spark's ``openCostInBytes`` default):
#: many small files are packed into one task, each counted this much larger.
OPEN_COST_BYTES = 4 * 1024 * 1024

#: Read tasks planned per core of the cluster (more tasks than cores evens out skew).
TASKS_PER_CORE = 3

#: ``Snapshot.files()`` columns an executor does not need (statistics were used to plan).
_PLANNING_ONLY = (
    "stats",
    "tags",
    "modification_time",
    "base_row_id",
    "default_row_commit_version",
    "clustering_provider",
)


@dataclass(frozen=True)
class ReadUnit:
    """Files of one snapshot an executor reads together.

    Attributes:
        version: the snapshot's version.
        metadata: the snapshot's ``metaData`` action (JSON form; for the change feed the
            synthetic metadata of :mod:`lakequery.cdf` with the change columns).
        protocol: the snapshot's protocol.
        files: the planned rows of ``Snapshot.files()`` (statistics dropped).
    """

    version: int
    metadata: dict[str, Any]
    protocol: Protocol
    files: pa.Table


@dataclass(frozen=True, repr=False)
class FilesPartition(InputPartition):  # type: ignore[misc]  # pyspark is untyped here
    """One Spark read task: files to read, the columns and the row filter.

    Attributes:
        index: the partition's number (for messages).
        units: groups of files, one per snapshot they belong to (one for a table read;
            the change feed reads files of several synthetic snapshots).
        columns: the logical columns to return, in the DataFrame's order.
        filter: the pushed filters lakequery evaluates exactly (Spark applies all of them
            again after the scan).
    """

    index: int
    units: tuple[ReadUnit, ...]
    columns: tuple[str, ...]
    filter: pc.Expression | None

    def __repr__(self) -> str:  # short: Spark may log partitions
        return f"FilesPartition(index={self.index}, files={self.num_files}, bytes={self.num_bytes})"

    @property
    def num_files(self) -> int:
        return sum(u.files.num_rows for u in self.units)

    @property
    def num_bytes(self) -> int:
        return sum(int(pc.sum(u.files.column("size")).as_py() or 0) for u in self.units)


@dataclass(frozen=True)
class Pin:
    """The version (or change feed range) a DataFrame reads, fixed when it is created."""

    version: int | None = None
    starting_version: int | None = None
    ending_version: int | None = None


# -- planning (driver) ----------------------------------------------------------------------


def resolve(options: ReadOptions) -> tuple[Pin, SparkStruct]:
    """Resolves what ``options`` ask for to a :class:`Pin` and the DataFrame's schema."""
    from lakequery.table import DeltaTable

    dt = DeltaTable(options.uri, storage_options=options.storage_options)
    if options.change_feed:
        feed = _changes(dt, options, None)
        meta = feed.scans[0].snapshot.metadata
        pin = Pin(starting_version=feed.starting_version, ending_version=feed.ending_version)
        return pin, logical_schema(meta.schema, feed.columns)
    snap = dt.snapshot(version=options.version, as_of=options.timestamp)
    return Pin(version=snap.version), logical_schema(snap.metadata.schema)


def _changes(dt: Any, options: ReadOptions, pin: Pin | None) -> ChangeScan:
    if pin is not None and pin.starting_version is not None:
        return dt.changes(  # type: ignore[no-any-return]
            starting_version=pin.starting_version, ending_version=pin.ending_version
        )
    return dt.changes(  # type: ignore[no-any-return]
        starting_version=options.starting_version,
        ending_version=options.ending_version,
        starting_timestamp=options.starting_timestamp,
        ending_timestamp=options.ending_timestamp,
    )


def _same_type(a: Any, b: Any) -> bool:
    """Spark types equal up to nullability flags (at any depth)."""

    def relax(node: Any) -> Any:
        if isinstance(node, dict):
            return {
                k: (True if k in ("nullable", "containsNull", "valueContainsNull") else relax(v))
                for k, v in node.items()
                if k != "metadata"
            }
        if isinstance(node, list):
            return [relax(v) for v in node]
        return node

    return bool(relax(a.jsonValue()) == relax(b.jsonValue()))


def output_columns(requested: SparkStruct, table: SparkStruct) -> tuple[str, ...]:
    """The table columns a DataFrame schema names, checked against the table's types.

    A user-given schema (``spark.read.format("lakequery").schema("id long, x string")``)
    may name a subset of the columns in any order: that is the data source's only column
    pruning. Names match case-insensitively; types must be the table's.

    Raises:
        SchemaMismatchError: a column is not in the table or has another type.
    """
    by_name = {f.name.lower(): f for f in table.fields}
    out = []
    for f in requested.fields:
        have = by_name.get(f.name.lower())
        if have is None:
            raise SchemaMismatchError(
                f.name,
                "no such column",
                f.dataType.simpleString(),
                f"the declared schema names a column the table lacks ({table.fieldNames()})",
            )
        if not _same_type(f.dataType, have.dataType):
            raise SchemaMismatchError(
                f.name,
                have.dataType.simpleString(),
                f.dataType.simpleString(),
                "the declared schema must use the table's types",
            )
        out.append(have.name)
    return tuple(out)


def _sorted_files(scan: Scan) -> pa.Table:
    files = scan.plan().files
    files = files.drop_columns([c for c in _PLANNING_ONLY if c in files.column_names])
    if files.num_rows > 1:  # neighbouring paths (one partition directory) share a task
        files = files.take(pc.sort_indices(files, [("path", "ascending")]))
    return files


def target_bytes(total: int, parallelism: int, max_partition_bytes: int) -> int:
    """Bytes per read task: the work spread over :data:`TASKS_PER_CORE` tasks per core,
    at least :data:`OPEN_COST_BYTES`, at most ``max_partition_bytes``."""
    spread = math.ceil(total / max(1, parallelism * TASKS_PER_CORE))
    return max(1, min(max_partition_bytes, max(OPEN_COST_BYTES, spread)))


def pack(sizes: np.ndarray[Any, Any], target: int) -> np.ndarray[Any, Any]:
    """Consecutive bins of about ``target`` bytes (each file costs its size plus
    :data:`OPEN_COST_BYTES`): the bin of each file, numbered from 0 without gaps."""
    if len(sizes) == 0:
        return np.zeros(0, dtype=np.int64)
    cost = sizes.astype(np.int64) + OPEN_COST_BYTES
    starts = np.cumsum(cost) - cost
    bins = starts // max(1, target)
    _, dense = np.unique(bins, return_inverse=True)
    return dense.astype(np.int64)


def plan_partitions(
    scans: Sequence[Scan],
    columns: tuple[str, ...],
    filter: pc.Expression | None,
    *,
    parallelism: int,
    max_partition_bytes: int,
) -> list[FilesPartition]:
    """The planned files of ``scans`` as read tasks of roughly equal bytes."""
    tables = [_sorted_files(s) for s in scans]
    units_meta = [
        (s.snapshot.version, s.snapshot.metadata.to_action(), s.snapshot.protocol) for s in scans
    ]
    counts = np.array([t.num_rows for t in tables], dtype=np.int64)
    if not counts.sum():
        return []
    sizes = np.concatenate(
        [t.column("size").to_numpy().astype(np.int64) for t in tables if t.num_rows]
    )
    scan_of = np.repeat(np.arange(len(tables), dtype=np.int64), counts)
    row_of = np.concatenate([np.arange(n, dtype=np.int64) for n in counts if n])
    total = int(sizes.sum()) + OPEN_COST_BYTES * len(sizes)
    bins = pack(sizes, target_bytes(total, parallelism, max_partition_bytes))
    # files are ordered scan by scan, so each (bin, scan) run is a slice of one table
    key = bins * len(tables) + scan_of
    starts = np.flatnonzero(np.diff(key, prepend=-1))
    ends = np.append(starts[1:], len(key))
    grouped: dict[int, list[ReadUnit]] = {}
    for lo, hi in zip(starts.tolist(), ends.tolist(), strict=True):
        s = int(scan_of[lo])
        version, meta, proto = units_meta[s]
        # a copy of the rows, not a slice: a pickled slice carries its whole table, and
        # each task's partition is pickled (31,000 files: 4 GB sent to the JVM, which ran
        # out of memory)
        first = int(row_of[lo])
        rows = tables[s].take(np.arange(first, first + hi - lo))
        grouped.setdefault(int(bins[lo]), []).append(ReadUnit(version, meta, proto, rows))
    return [
        FilesPartition(i, tuple(units), columns, filter) for i, units in sorted(grouped.items())
    ]


# -- reading (executors) --------------------------------------------------------------------


def unit_scan(storage: Storage, unit: ReadUnit, columns: Sequence[str], filter: Any) -> Scan:
    """A scan of exactly the unit's files over a metadata-only snapshot (no log read)."""
    state = TableState(
        version=unit.version,
        protocol=unit.protocol,
        metadata=Metadata.from_action(unit.metadata),
        files=pa.table({}),
        txns={},
        domains={},
        segment=None,  # type: ignore[arg-type]  # metadata-only: no log segment behind it
    )
    scan = Snapshot(storage, state).scan(columns=list(columns), filter=filter)
    return scan.restricted_to(unit.files)


def read_partition(
    partition: FilesPartition, uri: str, storage_options: dict[str, Any] | None
) -> Iterator[pa.RecordBatch]:
    """The rows of a partition's files, as lakequery's Arrow engine returns them."""
    storage = open_storage(uri, storage_options)
    for unit in partition.units:
        scan = unit_scan(storage, unit, partition.columns, partition.filter)
        yield from scan.to_arrow_reader()


# -- the reader -----------------------------------------------------------------------------


class DeltaReader(DataSourceReader):  # type: ignore[misc]  # pyspark is untyped here
    """Plans a read on the driver and reads partitions on the executors.

    It is pickled into every read task, so it holds only small values; the snapshot is
    loaded again where planning happens (:meth:`partitions`).
    """

    def __init__(
        self, options: ReadOptions, pin: Pin, schema: SparkStruct, parallelism: int
    ) -> None:
        self.options = options
        self.pin = pin
        self.schema_json = schema.json()
        self.parallelism = parallelism

    def _schema(self) -> SparkStruct:
        return SparkStruct.fromJson(json.loads(self.schema_json))

    def partitions(self) -> list[FilesPartition]:  # type: ignore[override]
        from lakequery.table import DeltaTable

        opts = self.options
        dt = DeltaTable(opts.uri, storage_options=opts.storage_options)
        requested = self._schema()
        if opts.change_feed:
            feed = _changes(dt, opts, self.pin)
            meta = feed.scans[0].snapshot.metadata
            columns = output_columns(requested, logical_schema(meta.schema, feed.columns))
            scans: list[Scan] = list(feed.scans)
        else:
            snap = dt.snapshot(version=self.pin.version)
            columns = output_columns(requested, logical_schema(snap.metadata.schema))
            scans = [snap.scan(columns=list(columns))]
        return plan_partitions(
            scans,
            columns,
            None,
            parallelism=self.parallelism,
            max_partition_bytes=opts.max_partition_bytes,
        )

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, FilesPartition):  # Spark's [None] for an empty plan
            return
        target = spark_arrow_schema(self._schema())
        for batch in read_partition(partition, self.options.uri, self.options.storage_options):
            if batch.num_rows:
                yield conform_batch(batch, target)


__all__ = [
    "DeltaReader",
    "FilesPartition",
    "Pin",
    "ReadUnit",
    "output_columns",
    "pack",
    "plan_partitions",
    "resolve",
    "target_bytes",
]
