"""Writing classic checkpoints and ``_last_checkpoint`` (digest §2.5, §7).

A checkpoint of version ``v`` restates the reconciled state at ``v`` as one Parquet file
``_delta_log/<v>.checkpoint.parquet``, one row per action (§7.3): protocol, metaData,
the txns (retention applied as the reader does), the live domains, every live ``add``
(``dataChange=false``, with ``stats`` JSON and the typed ``stats_parsed`` /
``partitionValues_parsed`` structs as the table properties ask) and every unexpired
``remove`` (tombstones, without stats or tags). A table whose ``delta.checkpointPolicy``
is ``v2`` gets a classic-named V2 checkpoint: the same rows plus one
``checkpointMetadata`` row.

Replay is the read path's own (:func:`lakequery.log_segment.loaded_log`: one load of the
segment gives the state and then its adds and tombstones; :mod:`lakequery.protocol.replay`),
run in DuckDB; the typed statistics are parsed from
the JSON by ``json_transform`` in DuckDB and partition values by
:func:`lakequery.protocol.partitions.partition_struct`, batch by batch. Rows are written
in row groups of :data:`ROW_GROUP_ROWS` actions.

The file never appears half-written under its final name: locally it is written to a
hidden temporary name in ``_delta_log`` (ignored by log listing) and hard-linked to its
final name (never over an existing file); object stores and memory make a single PUT
visible at once. ``_last_checkpoint`` is overwritten afterwards, with its checksum.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lakequery import arrow_kernels as pc
from lakequery.arrow_buffers import bool_array, empty_table, python_array
from lakequery.commands.progress import ProgressCallback, ProgressReporter
from lakequery.errors import VersionNotFoundError
from lakequery.log_reader import CHECKPOINT, COMMIT_KEYS, COMMITS
from lakequery.log_segment import TableState, load_state, loaded_log, partition_specs
from lakequery.protocol.column_mapping import column_mapping_mode, physical_name
from lakequery.protocol.last_checkpoint import checkpoint_checksum
from lakequery.protocol.partitions import partition_struct
from lakequery.protocol.properties import TableProperties
from lakequery.protocol.replay import replay_adds, replay_tombstones
from lakequery.protocol.schema import (
    ArrayType,
    DecimalType,
    MapType,
    PrimitiveType,
    StructField,
    StructType,
    is_void,
)
from lakequery.protocol.sql_spelling import json_decimal_exact
from lakequery.storage import Storage

__all__ = ["ROW_GROUP_ROWS", "CheckpointInfo", "checkpoint_schema", "write_checkpoint"]

#: Actions per Parquet row group (and per batch while writing).
ROW_GROUP_ROWS = 65_536

_STR_MAP = pa.map_(pa.string(), pa.string())
_DV = pa.struct(
    [
        ("storageType", pa.string()),
        ("pathOrInlineDv", pa.string()),
        ("offset", pa.int32()),
        ("sizeInBytes", pa.int32()),
        ("cardinality", pa.int64()),
    ]
)
_TXN = pa.struct([("appId", pa.string()), ("version", pa.int64()), ("lastUpdated", pa.int64())])
_REMOVE = pa.struct(
    [
        ("path", pa.string()),
        ("deletionTimestamp", pa.int64()),
        ("dataChange", pa.bool_()),
        ("extendedFileMetadata", pa.bool_()),
        ("partitionValues", _STR_MAP),
        ("size", pa.int64()),
        ("deletionVector", _DV),
        ("baseRowId", pa.int64()),
        ("defaultRowCommitVersion", pa.int64()),
    ]
)
_METADATA = pa.struct(
    [
        ("id", pa.string()),
        ("name", pa.string()),
        ("description", pa.string()),
        ("format", pa.struct([("provider", pa.string()), ("options", _STR_MAP)])),
        ("schemaString", pa.string()),
        ("partitionColumns", pa.list_(pa.string())),
        ("configuration", _STR_MAP),
        ("createdTime", pa.int64()),
    ]
)
_PROTOCOL = pa.struct(
    [
        ("minReaderVersion", pa.int32()),
        ("minWriterVersion", pa.int32()),
        ("readerFeatures", pa.list_(pa.string())),
        ("writerFeatures", pa.list_(pa.string())),
    ]
)
_DOMAIN = pa.struct(
    [("domain", pa.string()), ("configuration", pa.string()), ("removed", pa.bool_())]
)
_CHECKPOINT_METADATA = pa.struct([("version", pa.int64()), ("tags", _STR_MAP)])

#: ``add`` fields before the optional ones; ``stats`` is left out when
#: ``delta.checkpoint.writeStatsAsJson`` is false.
_ADD_BASE: tuple[tuple[str, pa.DataType], ...] = (
    ("path", pa.string()),
    ("partitionValues", _STR_MAP),
    ("size", pa.int64()),
    ("modificationTime", pa.int64()),
    ("dataChange", pa.bool_()),
    ("stats", pa.string()),
    ("tags", _STR_MAP),
    ("deletionVector", _DV),
    ("baseRowId", pa.int64()),
    ("defaultRowCommitVersion", pa.int64()),
    ("clusteringProvider", pa.string()),
)

#: Delta types with min/max statistics (digest §10): DuckDB type that ``json_transform``
#: parses the JSON value into, and the Arrow type of the ``stats_parsed`` leaf.
#: Timestamps are parsed from text (any ISO offset) in :func:`_timestamp_sql`.
_BOUNDED: Mapping[str, tuple[str, pa.DataType]] = {
    "byte": ("TINYINT", pa.int8()),
    "short": ("SMALLINT", pa.int16()),
    "integer": ("INTEGER", pa.int32()),
    "long": ("BIGINT", pa.int64()),
    "float": ("FLOAT", pa.float32()),
    "double": ("DOUBLE", pa.float64()),
    "date": ("DATE", pa.date32()),
    "string": ("VARCHAR", pa.string()),
    "timestamp": ("VARCHAR", pa.timestamp("us", tz="UTC")),
    "timestamp_ntz": ("VARCHAR", pa.timestamp("us")),
}

# A zone suffix right after a time of day: Z, +HH, +HHMM or +HH:MM.
_ZONE_RE = r"[0-9]:[0-9]{2}(:[0-9]{2}(\.[0-9]*)?)?\s*(Z|[+-][0-9]{2}(:?[0-9]{2})?)$"

_ADDS_VIEW = "_lq_checkpoint_adds"


@dataclass(frozen=True)
class CheckpointInfo:
    """What :func:`write_checkpoint` wrote.

    Attributes:
        version: The table version the checkpoint captures.
        path: Full location of the checkpoint file.
        num_actions: Rows (actions) in the checkpoint.
        num_add_files: Live ``add`` rows among them.
        size_in_bytes: Size of the checkpoint file.
    """

    version: int
    path: str
    num_actions: int
    num_add_files: int
    size_in_bytes: int


# --------------------------------------------------------------------------------------------
# typed statistics (digest §7.4, §10)
# --------------------------------------------------------------------------------------------


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _lit(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _timestamp_sql(text: str, with_zone: bool) -> str:
    """Microseconds since the epoch (BIGINT) of a timestamp statistic given as text.

    ``timestamp`` values carry an offset (``Z``, ``-08:00``...); one without is taken as
    UTC. ``timestamp_ntz`` values are wall-clock times. Unparseable text gives NULL.
    """
    naive = f"epoch_us(TRY_CAST({text} AS TIMESTAMP))"
    if not with_zone:
        return naive
    upper = f"upper(trim({text}))"
    return (
        f"CASE WHEN regexp_matches({upper}, '{_ZONE_RE}') "
        f"THEN epoch_us(TRY_CAST({upper} AS TIMESTAMPTZ)) ELSE {naive} END"
    )


@dataclass(frozen=True)
class _StatsStruct:
    """One struct of the statistics: how ``json_transform`` reads it from the JSON, the
    SQL building it from what was read, and its Arrow type in the checkpoint."""

    structure: dict[str, Any]
    sql: str
    arrow: pa.StructType


def _pack(ref: str, members: Sequence[tuple[str, str]]) -> str:
    packed = ", ".join(f"{_q(name)} := {expr}" for name, expr in members)
    return f"CASE WHEN {ref} IS NULL THEN NULL ELSE struct_pack({packed}) END"


def _bounds(fields: Sequence[StructField], mode: str, ref: str) -> _StatsStruct | None:
    """``minValues``/``maxValues``: every field with min/max statistics, in its own type."""
    structure: dict[str, Any] = {}
    members: list[tuple[str, str]] = []
    arrow: list[pa.Field[Any]] = []
    for f in fields:
        name = physical_name(f, mode)
        sub = f"{ref}[{_lit(name)}]"
        t = f.type
        typ: pa.DataType
        if isinstance(t, StructType):
            child = _bounds(t.fields, mode, sub)
            if child is None:
                continue
            structure[name], expr, typ = child.structure, child.sql, child.arrow
        elif isinstance(t, DecimalType):
            if not json_decimal_exact(t.precision):
                continue  # DuckDB 1.x would round the bound through a double: left out
            structure[name] = f"DECIMAL({t.precision},{t.scale})"
            expr, typ = sub, pa.decimal128(t.precision, t.scale)
        elif isinstance(t, PrimitiveType) and t.name in _BOUNDED:
            structure[name], typ = _BOUNDED[t.name]
            expr = sub
            if t.name in ("timestamp", "timestamp_ntz"):
                expr = _timestamp_sql(sub, t.name == "timestamp")
        else:
            continue  # boolean, binary, arrays, maps, variant, void: no min/max
        members.append((name, expr))
        arrow.append(pa.field(name, typ))
    if not members:
        return None
    return _StatsStruct(structure, _pack(ref, members), pa.struct(arrow))


def _null_counts(fields: Sequence[StructField], mode: str, ref: str) -> _StatsStruct | None:
    """``nullCount``: a long per leaf (arrays, maps and variants count as leaves)."""
    structure: dict[str, Any] = {}
    members: list[tuple[str, str]] = []
    arrow: list[pa.Field[Any]] = []
    for f in fields:
        name = physical_name(f, mode)
        sub = f"{ref}[{_lit(name)}]"
        t = f.type
        typ: pa.DataType
        if isinstance(t, StructType):
            child = _null_counts(t.fields, mode, sub)
            if child is None:
                continue
            structure[name], expr, typ = child.structure, child.sql, child.arrow
        elif is_void(t):
            continue
        elif isinstance(t, PrimitiveType | ArrayType | MapType):
            structure[name], expr, typ = "BIGINT", sub, pa.int64()
        else:
            continue
        members.append((name, expr))
        arrow.append(pa.field(name, typ))
    if not members:
        return None
    return _StatsStruct(structure, _pack(ref, members), pa.struct(arrow))


#: Deepest column path ``stats_parsed`` holds: Arrow's C interface refuses schemas nested
#: more than 64 levels, and a checkpoint row puts three (``add``, ``stats_parsed``,
#: ``minValues``) above the column. Deeper columns keep their statistics in ``stats``.
MAX_STATS_PARSED_DEPTH = 56


def _indexed(
    schema: StructType,
    partition_columns: Sequence[str],
    mode: str,
    configuration: Mapping[str, str],
) -> list[StructField]:
    """The schema's non-partition fields pruned to the leaves that get statistics under
    ``configuration`` (``delta.dataSkippingNumIndexedCols`` / ``StatsColumns``, as Delta
    Spark's stats schema), at most :data:`MAX_STATS_PARSED_DEPTH` deep."""
    from lakequery.writer.stats import configured_stats_columns

    props = TableProperties(dict(configuration))
    keep = {c.path for c in configured_stats_columns(schema, partition_columns, mode, props)}

    def prune(fields: Sequence[StructField], prefix: tuple[str, ...]) -> list[StructField]:
        out = []
        for f in fields:
            path = (*prefix, f.name)
            if len(path) > MAX_STATS_PARSED_DEPTH:
                continue
            if isinstance(f.type, StructType):
                inner = prune(f.type.fields, path)
                if inner:
                    out.append(replace(f, type=StructType(tuple(inner))))
            elif path in keep:
                out.append(f)
        return out

    parts = set(partition_columns)
    return prune([f for f in schema.fields if f.name not in parts], ())


def stats_struct(
    schema: StructType,
    partition_columns: Sequence[str],
    mode: str,
    *,
    tight_bounds: bool,
    configuration: Mapping[str, str],
    ref: str = "__j",
) -> _StatsStruct:
    """The ``stats_parsed`` struct of a table: ``numRecords``, ``minValues``,
    ``maxValues``, ``nullCount`` (physical names, nesting mirrors the schema's columns
    that get statistics under ``configuration``, :func:`_indexed`) and, with deletion
    vectors, ``tightBounds``. Partition columns have no statistics."""
    data = _indexed(schema, partition_columns, mode, configuration)
    structure: dict[str, Any] = {"numRecords": "BIGINT"}
    members = [("numRecords", f"{ref}['numRecords']")]
    arrow: list[pa.Field[Any]] = [pa.field("numRecords", pa.int64())]
    for key, part in (
        ("minValues", _bounds(data, mode, f"{ref}['minValues']")),
        ("maxValues", _bounds(data, mode, f"{ref}['maxValues']")),
        ("nullCount", _null_counts(data, mode, f"{ref}['nullCount']")),
    ):
        if part is not None:
            structure[key] = part.structure
            members.append((key, part.sql))
            arrow.append(pa.field(key, part.arrow))
    if tight_bounds:
        structure["tightBounds"] = "BOOLEAN"
        members.append(("tightBounds", f"{ref}['tightBounds']"))
        arrow.append(pa.field("tightBounds", pa.bool_()))
    return _StatsStruct(structure, _pack(ref, members), pa.struct(arrow))


# --------------------------------------------------------------------------------------------
# layout
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Layout:
    """The shape of one table's checkpoint."""

    stats_json: bool
    stats: _StatsStruct | None  # None: no stats_parsed
    partitions: list[tuple[str, str, Any]]  # (logical, physical, Delta type)
    partitions_parsed: pa.StructType | None  # None: no partitionValues_parsed
    v2: bool

    @property
    def add_type(self) -> pa.StructType:
        fields = [pa.field(n, t) for n, t in _ADD_BASE if self.stats_json or n != "stats"]
        if self.partitions_parsed is not None:
            fields.append(pa.field("partitionValues_parsed", self.partitions_parsed))
        if self.stats is not None:
            fields.append(pa.field("stats_parsed", self.stats.arrow))
        return pa.struct(fields)

    @property
    def schema(self) -> pa.Schema:
        columns = [
            ("txn", _TXN),
            ("add", self.add_type),
            ("remove", _REMOVE),
            ("metaData", _METADATA),
            ("protocol", _PROTOCOL),
            ("domainMetadata", _DOMAIN),
        ]
        if self.v2:
            columns.append(("checkpointMetadata", _CHECKPOINT_METADATA))
        return pa.schema(columns)


def _layout(state: TableState) -> _Layout:
    props = TableProperties(state.metadata.configuration)
    mode = column_mapping_mode(
        state.metadata.configuration, state.protocol.supports("columnMapping")
    )
    as_struct = props.checkpoint_write_stats_as_struct
    stats = None
    if as_struct:
        stats = stats_struct(
            state.metadata.schema,
            state.metadata.partition_columns,
            mode,
            tight_bounds=state.protocol.supports("deletionVectors"),
            configuration=state.metadata.configuration,
        )
    specs = partition_specs(state.metadata, state.protocol)
    parsed = None
    if as_struct and specs:
        probe = partition_struct(pa.nulls(0, _STR_MAP), specs)
        parsed = pa.struct(
            [pa.field(key, probe.type.field(i).type) for i, (_, key, _) in enumerate(specs)]
        )
    return _Layout(
        stats_json=props.checkpoint_write_stats_as_json,
        stats=stats,
        partitions=specs,
        partitions_parsed=parsed,
        v2=props.checkpoint_policy == "v2",
    )


def checkpoint_schema(storage: Storage, version: int | None = None) -> pa.Schema:
    """The Parquet schema :func:`write_checkpoint` uses for a table at a version (§7.3).

    Example:
        >>> import tempfile, pathlib, lakequery as lq
        >>> from lakequery.checkpoint_writer import checkpoint_schema
        >>> root = lq.demo.build_example_table(pathlib.Path(tempfile.mkdtemp()))
        >>> schema = checkpoint_schema(lq.DeltaTable(str(root)).storage)
        >>> schema.names
        ['txn', 'add', 'remove', 'metaData', 'protocol', 'domainMetadata']
        >>> schema.field("add").type.field("partitionValues_parsed").type
        StructType(struct<day: date32[day]>)
    """
    return _layout(load_state(storage, version, with_files=False)).schema


# --------------------------------------------------------------------------------------------
# rows
# --------------------------------------------------------------------------------------------


def _map_items(value: Mapping[str, Any] | None) -> list[tuple[str, Any]] | None:
    if value is None:
        return None
    return [(str(k), None if v is None else str(v)) for k, v in value.items()]


def _non_file_rows(state: TableState, layout: _Layout) -> dict[str, list[Any]]:
    """protocol, metaData, txn, domainMetadata (and checkpointMetadata) values, each a
    list of action bodies (the txns and domains are few)."""
    p = state.protocol
    protocol = {
        "minReaderVersion": p.min_reader_version,
        "minWriterVersion": p.min_writer_version,
        "readerFeatures": list(p.reader_features or ()) if p.min_reader_version == 3 else None,
        "writerFeatures": list(p.writer_features or ()) if p.min_writer_version == 7 else None,
    }
    m = state.metadata
    metadata = {
        "id": m.id,
        "name": m.name,
        "description": m.description,
        "format": {"provider": m.format_provider, "options": _map_items(m.format_options)},
        "schemaString": m.schema_string,
        "partitionColumns": list(m.partition_columns),
        "configuration": _map_items(m.configuration),
        "createdTime": m.created_time,
    }
    txns = [
        {"appId": app, "version": t.get("version"), "lastUpdated": t.get("lastUpdated")}
        for app, t in sorted(state.txns.items())
    ]
    domains = [
        {"domain": d, "configuration": c, "removed": False}
        for d, c in sorted(state.domains.items())
    ]
    rows: dict[str, list[Any]] = {
        "protocol": [protocol],
        "metaData": [metadata],
        "txn": txns,
        "domainMetadata": domains,
    }
    if layout.v2:
        rows["checkpointMetadata"] = [{"version": state.version, "tags": None}]
    return rows


def _table(schema: pa.Schema, column: str, values: pa.Array[Any]) -> pa.Table:
    """A checkpoint table whose only non-null column is ``column``."""
    n = len(values)
    arrays = [values if f.name == column else pa.nulls(n, f.type) for f in schema]
    return pa.Table.from_arrays(arrays, schema=schema)


def _header(state: TableState, layout: _Layout, schema: pa.Schema) -> Iterator[pa.Table]:
    for column, values in _non_file_rows(state, layout).items():
        if values:
            yield _table(schema, column, python_array(values, schema.field(column).type))


def _struct(children: Sequence[pa.Array[Any]], typ: pa.StructType) -> pa.StructArray:
    fields = [typ.field(i) for i in range(typ.num_fields)]
    cast = [pc.cast(c, f.type) for c, f in zip(children, fields, strict=True)]
    return pa.StructArray.from_arrays(cast, fields=fields)


def _add_sql(layout: _Layout) -> str:
    cols = [
        f"add.{_q(n)} AS {_q(n)}"
        for n, _ in _ADD_BASE
        if n != "dataChange" and (layout.stats_json or n != "stats")
    ]
    cols.insert(4, 'false AS "dataChange"')  # checkpoint rows never change data
    inner = f"SELECT add FROM {_ADDS_VIEW}"
    if layout.stats is not None:
        cols.append(f'{layout.stats.sql} AS "stats_parsed"')
        structure = _lit(json.dumps(layout.stats.structure))
        inner = f"SELECT add, TRY(json_transform(add.stats, {structure})) AS __j FROM {_ADDS_VIEW}"
    return f"SELECT {', '.join(cols)} FROM ({inner})"


def _add_batches(
    con: duckdb.DuckDBPyConnection, adds: pa.Table, layout: _Layout, schema: pa.Schema
) -> Iterator[pa.Table]:
    """The ``add`` rows, batch by batch: DuckDB parses the statistics, pyarrow the
    partition values."""
    if adds.num_rows == 0:
        return
    add_type = layout.add_type
    con.register(_ADDS_VIEW, adds.select(["add"]))
    try:
        reader = con.sql(_add_sql(layout)).to_arrow_reader(batch_size=ROW_GROUP_ROWS)
        for batch in reader:
            columns = dict(zip(batch.schema.names, batch.columns, strict=True))
            if layout.partitions_parsed is not None:
                parsed = partition_struct(columns["partitionValues"], layout.partitions)
                columns["partitionValues_parsed"] = pa.StructArray.from_arrays(
                    parsed.flatten(), fields=list(layout.partitions_parsed)
                )
            children = [columns[f.name] for f in add_type]
            yield _table(schema, "add", _struct(children, add_type))
    finally:
        con.unregister(_ADDS_VIEW)


def _remove_batches(removes: pa.Table, schema: pa.Schema) -> Iterator[pa.Table]:
    column = removes.column("remove")
    for chunk in column.chunks:
        if len(chunk) == 0:
            continue
        assert isinstance(chunk, pa.StructArray)
        children = chunk.flatten()
        names = [chunk.type.field(i).name for i in range(chunk.type.num_fields)]
        by_name = dict(zip(names, children, strict=True))
        by_name["dataChange"] = bool_array(np.zeros(len(chunk), dtype=np.bool_))
        yield _table(schema, "remove", _struct([by_name[f.name] for f in _REMOVE], _REMOVE))


# --------------------------------------------------------------------------------------------
# writing
# --------------------------------------------------------------------------------------------


def _write_tables(sink: Any, schema: pa.Schema, tables: Iterator[pa.Table]) -> tuple[int, int]:
    """Writes the tables as row groups of up to ROW_GROUP_ROWS rows; returns (rows, adds)."""
    rows = adds = 0
    with pq.ParquetWriter(sink, schema, compression="snappy") as writer:
        pending: list[pa.Table] = []
        pending_rows = 0
        for table in tables:
            rows += table.num_rows
            adds += table.num_rows - table.column("add").null_count
            pending.append(table)
            pending_rows += table.num_rows
            if pending_rows >= ROW_GROUP_ROWS:
                writer.write_table(pa.concat_tables(pending), row_group_size=ROW_GROUP_ROWS)
                pending, pending_rows = [], 0
        if pending or rows == 0:
            writer.write_table(
                pa.concat_tables(pending) if pending else empty_table(schema),
                row_group_size=ROW_GROUP_ROWS,
            )
    return rows, adds


def _write_atomically(
    storage: Storage, final: str, schema: pa.Schema, tables: Iterator[pa.Table]
) -> tuple[int, int, int]:
    """Writes the checkpoint so that only a complete file is ever visible as ``final``.

    A checkpoint file that appeared meanwhile (another process checkpointed the same
    version) is kept when it loads, so a file other processes may be reading is never
    replaced; one that does not load is replaced.

    Returns:
        (rows, add rows, bytes) of the file now at ``final``.
    """
    if storage.protocol == "file":
        storage.check_write_directory(storage.join("_delta_log"))
        # A hidden name the log listing ignores (it matches no pattern of digest §2.4).
        tmp = storage.join("_delta_log", f".tmp-{uuid.uuid4().hex}.checkpoint.parquet")
        native, target = tmp.removeprefix("file://"), final.removeprefix("file://")
        try:
            with open(native, "xb") as fh:
                rows, adds = _write_tables(fh, schema, tables)
                fh.flush()
                os.fsync(fh.fileno())
            size = os.path.getsize(native)
            try:
                os.link(native, target)  # atomic, and never over an existing file
            except FileExistsError:
                existing = _loadable_rows(storage, final)
                if existing is not None:
                    return existing, adds, os.path.getsize(target)
                os.replace(native, target)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(native)
        return rows, adds, size
    sink = pa.BufferOutputStream()
    rows, adds = _write_tables(sink, schema, tables)
    data = sink.getvalue().to_pybytes()
    if not storage.put_if_absent(final, data):  # a single PUT: all or nothing
        existing = _loadable_rows(storage, final)
        if existing is not None:
            return existing, adds, storage.size(final)
        storage.put(final, data)
    return rows, adds, len(data)


def _loadable_rows(storage: Storage, path: str) -> int | None:
    """The row count of the Parquet checkpoint at ``path``; None when it does not load."""
    try:
        return _rows_in(storage, path)
    except (OSError, pa.ArrowException):
        return None


def _rows_in(storage: Storage, path: str) -> int:
    """The number of rows (actions) of a Parquet checkpoint, from its footer."""
    fs, to_fs = storage.arrow_filesystem()
    with fs.open_input_file(to_fs(path)) as f:
        return int(pq.ParquetFile(f).metadata.num_rows)


def _last_checkpoint(info: CheckpointInfo) -> bytes:
    doc: dict[str, Any] = {
        "version": info.version,
        "size": info.num_actions,
        "sizeInBytes": info.size_in_bytes,
        "numOfAddFiles": info.num_add_files,
    }
    doc["checksum"] = checkpoint_checksum(doc)
    return json.dumps(doc, separators=(",", ":")).encode("utf-8")


def write_checkpoint(
    storage: Storage, version: int | None = None, *, progress: ProgressCallback | None = None
) -> CheckpointInfo:
    """Writes a classic checkpoint of the table at ``version`` (latest when None), then
    ``_delta_log/_last_checkpoint`` pointing at it.

    The checkpoint holds the reconciled state (digest §7.1): protocol, metaData, txns,
    live domains, live adds with ``dataChange=false`` and unexpired tombstones
    (``delta.deletedFileRetentionDuration``, measured from now). ``add.stats`` is kept
    unless ``delta.checkpoint.writeStatsAsJson=false``; ``stats_parsed`` and, for
    partitioned tables, ``partitionValues_parsed`` are added unless
    ``delta.checkpoint.writeStatsAsStruct=false`` (statistics that do not parse become
    NULL). An existing classic checkpoint of the same version that loads is kept, not
    rewritten (a rewrite would only refresh its tombstones, and replacing a file other
    processes may be reading races with them: DuckDB reads a file's footer and its row
    groups in separate opens), also when another process publishes it while this one
    writes; ``_last_checkpoint`` then points at it.

    Args:
        storage: The table's storage.
        version: The version to capture; its commit file must exist.
        progress: receives :class:`~lakequery.commands.progress.Progress` (actions and
            bytes written so far) as the checkpoint's row batches are written.

    Returns:
        What was written.

    Raises:
        TableNotFoundError: No table at the location.
        VersionNotFoundError: ``version`` cannot be reconstructed or its commit file is
            gone.

    Example:
        >>> import tempfile, pathlib, lakequery as lq
        >>> from lakequery.checkpoint_writer import write_checkpoint
        >>> root = lq.demo.build_example_table(pathlib.Path(tempfile.mkdtemp()))
        >>> info = write_checkpoint(lq.DeltaTable(str(root)).storage)
        >>> info.version, info.num_add_files, info.path.endswith(".checkpoint.parquet")
        (2, 4, True)
    """
    # one load of the segment: its protocol, metadata, txns and domains, then the live
    # adds and tombstones from the same loaded actions; the cursor outlives the block
    # (the add batches are built on it while the file is written)
    con: duckdb.DuckDBPyConnection | None = None
    try:
        with loaded_log(storage, version) as (state, con):
            v = state.version
            if not storage.exists(storage.join("_delta_log", f"{v:020d}.json")):
                raise VersionNotFoundError(
                    storage.root,
                    version=v,
                    detail="its commit file is gone; no checkpoint written",
                )
            layout = _layout(state)
            schema = layout.schema
            cutoff = (
                int(time.time() * 1000)
                - TableProperties(state.metadata.configuration).deleted_file_retention_ms
            )
            # an existing classic checkpoint of this version that loaded: kept, not rewritten
            kept = state.segment.checkpoint
            if kept is not None and (kept.version != v or kept.format != "classic"):
                kept = None
            keys = {"commit_keys": COMMIT_KEYS, "commits": COMMITS, "checkpoint": CHECKPOINT}
            adds = replay_adds(con, **keys)  # kept or not: numOfAddFiles counts them
            removes = None if kept is not None else replay_tombstones(con, **keys, cutoff_ms=cutoff)
        assert con is not None

        def tables() -> Iterator[pa.Table]:
            yield from _header(state, layout, schema)
            yield from _add_batches(con, adds, layout, schema)
            assert removes is not None
            yield from _remove_batches(removes, schema)

        final = storage.join("_delta_log", f"{v:020d}.checkpoint.parquet")
        if kept is not None:
            final = kept.files[0].path
            rows, num_adds, size = _rows_in(storage, final), adds.num_rows, kept.files[0].size
        else:
            with ProgressReporter(
                "CHECKPOINT", 0, 0, callback=progress, unit="actions"
            ) as reporter:

                def reported() -> Iterator[pa.Table]:
                    for table in tables():
                        yield table
                        reporter.advance(table.num_rows, table.nbytes)

                rows, num_adds, size = _write_atomically(storage, final, schema, reported())
    finally:
        if con is not None:
            con.close()
    info = CheckpointInfo(v, final, rows, num_adds, size)
    storage.put(storage.join("_delta_log", "_last_checkpoint"), _last_checkpoint(info))
    return info
