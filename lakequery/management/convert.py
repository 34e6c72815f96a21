"""``lq.convert_to_delta``: CONVERT TO DELTA of a folder of Parquet files, in place.

One commit (``CONVERT``) adds every Parquet file under the folder as it is: nothing is
copied or rewritten. What it decides, and how (recorded in ARCHITECTURE.md, "Table
management"):

* **Files**: one recursive listing (:func:`~lakequery.commands.listing.list_tree`); files
  and directories whose name starts with ``_`` or ``.`` are ignored (``_SUCCESS``,
  ``.crc``...), as Spark does. A folder that already has a ``_delta_log`` is refused.
* **Partitions**: ``partition_by`` names the Hive directory levels (``g=1/d=2024-01-01/``)
  in order; every file must sit exactly at that depth. Given as names, each column's type
  is inferred from its (distinct, unescaped) directory values the way Spark infers
  partition types: ``integer`` if every value fits, else ``long``, else ``decimal(p,0)``
  for longer integers, else ``double``, ``date`` (``yyyy-mm-dd``), ``timestamp`` (read as
  UTC), else ``string``; ``__HIVE_DEFAULT_PARTITION__`` is NULL. Given as a
  ``pyarrow.Schema`` or a dict name -> type (Arrow type or Delta type name), the values
  are parsed as that type (a value that does not parse is refused, naming it). Without
  ``partition_by`` every file must be directly in the folder. Partition columns come after
  the data columns in the schema, as in Spark.
* **Schema**: from the Parquet footers only (one footer read per file, concurrently).
  Files may differ in which columns they hold (a missing column reads as NULL); a column
  whose type differs between files is refused with :class:`~lakequery.SchemaMismatchError`
  naming the column, both types and a file of each. Every column is nullable (Spark's
  ``asNullable``).
* **Statistics**: ``numRecords``, ``minValues``/``maxValues`` and ``nullCount`` per file
  from the footers' row-group statistics, never from the data; the same columns and
  string truncation as the writer (:mod:`lakequery.writer.stats`). Float and double
  columns get no min/max: Parquet leaves NaN out of its bounds, so a file holding NaN
  would be skipped wrongly. A row group without bounds leaves its file without min/max
  for that column.
* **Protocol**: :func:`lakequery.writer.new_table.new_table`, as for every new table
  (deletion vectors on unless ``configuration`` says otherwise). Column mapping cannot be
  enabled by CONVERT (the files' column names are their physical names); enable it after.

Example:
    >>> import tempfile, pyarrow as pa, pyarrow.dataset as ds, lakequery as lq
    >>> root = tempfile.mkdtemp()
    >>> data = pa.table({"id": [1, 2, 3], "g": [1, 1, 2]})
    >>> ds.write_dataset(data, root, format="parquet", partitioning=["g"],
    ...                  partitioning_flavor="hive")
    >>> dt = lq.convert_to_delta(root, partition_by=["g"])
    >>> snap = dt.snapshot()
    >>> snap.version, snap.num_files, snap.schema.field("g").type
    (0, 2, DataType(int32))
    >>> snap.scan(filter="g = 2").to_arrow()["id"].to_pylist()
    [3]
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakequery.commands.listing import list_tree
from lakequery.engines.layout import hive_directories, re2_literal
from lakequery.errors import (
    LakeQueryError,
    SchemaError,
    SchemaMismatchError,
    TableAlreadyExistsError,
)
from lakequery.parquet_footers import footer_metadata, schema_fingerprint
from lakequery.protocol.partitions import HIVE_NULL, parse_partition_values
from lakequery.protocol.properties import TableProperties
from lakequery.protocol.schema import (
    DecimalType,
    DeltaType,
    PrimitiveType,
    StructField,
    StructType,
    from_arrow_type,
    parse_type,
)
from lakequery.storage import Storage, TableLocation, open_storage
from lakequery.txn import Transaction
from lakequery.writer.new_table import new_table
from lakequery.writer.partition_values import serialize_partition_values, uri_encode_path
from lakequery.writer.stats import StatsCollector, StatsColumn, configured_stats_columns

if TYPE_CHECKING:
    from lakequery.table import DeltaTable

_HIDDEN_RE = r"(^|/)[_.]"
_INT_RE = r"^[+-]?[0-9]+$"
_DATE_RE = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
_EPOCH_DAY = dt.date(1970, 1, 1)
_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)

PartitionSpec = Sequence[str] | pa.Schema | Mapping[str, Any]


# --- partitions ----------------------------------------------------------------------------------


def _declared_types(partition_by: PartitionSpec | None) -> list[tuple[str, DeltaType | None]]:
    """(name, declared type or None to infer) per partition column, in directory order."""
    if partition_by is None:
        return []
    if isinstance(partition_by, str):
        return [(partition_by, None)]
    if isinstance(partition_by, pa.Schema):
        return [
            (f.name, from_arrow_type(f.type, f"partition column {f.name!r}")) for f in partition_by
        ]
    if isinstance(partition_by, Mapping):
        out: list[tuple[str, DeltaType | None]] = []
        for name, t in partition_by.items():
            where = f"partition column {name!r}"
            out.append(
                (
                    str(name),
                    from_arrow_type(t, where)
                    if isinstance(t, pa.DataType)
                    else parse_type(t, where),
                )
            )
        return out
    return [(str(name), None) for name in partition_by]


def _unescape(values: Any) -> Any:
    """Hive-unescaped directory values (``%XX``), NULL for the Hive default partition;
    unescaped once per distinct value."""
    distinct = pc.unique(values)
    plain = [
        None if v is None or v in (HIVE_NULL, "") else unquote(v) for v in distinct.to_pylist()
    ]
    return pc.take(pa.array(plain, pa.string()), pc.index_in(values, value_set=distinct))


def _fits(values: Any, t: DeltaType, column: str) -> bool:
    try:
        parse_partition_values(values, t, column=column)
    except SchemaError:
        return False
    return True


def infer_partition_type(values: pa.Array[Any], column: str) -> DeltaType:
    """The type Spark infers for a partition column from its directory values.

    Example:
        >>> import pyarrow as pa
        >>> [infer_partition_type(pa.array(v), "c").name for v in (["1", "-2"],
        ...  ["1", "9999999999"], ["1.5", "2"], ["2024-01-31"], ["2024-01-31 10:00:00"],
        ...  ["x", "1"])]
        ['integer', 'long', 'double', 'date', 'timestamp', 'string']
    """
    distinct: Any = pc.drop_null(pc.unique(values))
    if len(distinct) == 0:
        return PrimitiveType("string")
    if pc.all(pc.match_substring_regex(distinct, _INT_RE)).as_py():
        for name in ("integer", "long"):
            if _fits(distinct, PrimitiveType(name), column):
                return PrimitiveType(name)
        digits = pc.max(
            pc.utf8_length(pc.replace_substring_regex(distinct, r"^[+-]?0*", ""))
        ).as_py()
        if digits is not None and digits <= 38:
            return DecimalType(max(int(digits), 1), 0)
    if _fits(distinct, PrimitiveType("double"), column):
        return PrimitiveType("double")
    if pc.all(pc.match_substring_regex(distinct, _DATE_RE)).as_py() and _fits(
        distinct, PrimitiveType("date"), column
    ):
        return PrimitiveType("date")
    if _fits(distinct, PrimitiveType("timestamp"), column):
        return PrimitiveType("timestamp")
    return PrimitiveType("string")


def _partition_values(
    paths: Any, spec: list[tuple[str, DeltaType | None]]
) -> tuple[list[StructField], list[list[str | None]]]:
    """The partition fields and, per column, each file's serialized partition value."""
    if not spec:
        nested = pc.match_substring(paths, "/")
        if pc.any(nested).as_py():
            shown = pc.filter(paths, nested)[0].as_py()
            raise SchemaError(
                f"{shown!r} is in a subdirectory: pass partition_by with the directory "
                "levels' column names (Hive layout k=v/...)"
            )
        return [], []
    levels = hive_directories([name for name, _ in spec])
    matched = pc.extract_regex(paths, f"^{levels}/[^/]+$")
    if matched.null_count:
        shown = pc.filter(paths, pc.is_null(matched))[0].as_py()
        names = "/".join(f"{n}=..." for n, _ in spec)
        raise SchemaError(f"{shown!r} is not at the partition directory level {names}/<file>")
    fields: list[StructField] = []
    serialized: list[list[str | None]] = []
    for i, (name, declared) in enumerate(spec):
        values = _unescape(pc.struct_field(matched, f"v{i}"))
        t = declared if declared is not None else infer_partition_type(values, name)
        typed = parse_partition_values(values, t, column=name)
        fields.append(StructField(name, t, True))
        serialized.append(serialize_partition_values(typed, t, name))
    return fields, serialized


# --- schema ------------------------------------------------------------------------------------


def _int96_as_instants(md: pq.FileMetaData) -> pa.Schema:
    """The file's Arrow schema, its INT96 columns (Spark's legacy encoding of an instant,
    its TimestampType, which Arrow reads without a zone) as UTC timestamps, at any depth:
    timestamp columns, not timestamp_ntz ones. Arrow's leaves come in the order of the
    Parquet columns."""
    flags = [md.schema.column(i).physical_type == "INT96" for i in range(md.num_columns)]
    schema = md.schema.to_arrow_schema()
    if not any(flags):
        return schema
    int96 = iter(flags)

    def visit(t: pa.DataType) -> pa.DataType:
        if pa.types.is_struct(t):
            return pa.struct(
                [t.field(i).with_type(visit(t.field(i).type)) for i in range(t.num_fields)]
            )
        if pa.types.is_map(t):
            key, item = t.key_field, t.item_field
            return pa.map_(key.with_type(visit(key.type)), item.with_type(visit(item.type)))  # type: ignore[call-overload,no-any-return]
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            make = pa.list_ if pa.types.is_list(t) else pa.large_list
            return make(t.value_field.with_type(visit(t.value_type)))
        if next(int96) and pa.types.is_timestamp(t) and t.tz is None:
            return pa.timestamp(t.unit, "UTC")
        return t

    return pa.schema([f.with_type(visit(f.type)) for f in schema])


def _merged_schema(paths: list[str], footers: list[pq.FileMetaData]) -> pa.Schema:
    """The union of the files' columns; a type that differs between files is refused."""
    seen: dict[str, tuple[pa.Field[Any], str]] = {}  # lower name -> (field, first file)
    order: list[str] = []
    done: set[str] = set()
    for path, md in zip(paths, footers, strict=True):
        fingerprint = schema_fingerprint(md)
        if fingerprint in done:
            continue  # one look per distinct footer schema
        done.add(fingerprint)
        for f in _int96_as_instants(md):
            key = f.name.lower()
            if key not in seen:
                seen[key] = (f, path)
                order.append(key)
                continue
            first, where = seen[key]
            if first.name != f.name or not first.type.equals(f.type):
                raise SchemaMismatchError(
                    f.name,
                    f"{first.name}: {first.type} (in {where!r})",
                    f"{f.name}: {f.type} (in {path!r})",
                    "Parquet files of one table must agree on column names and types",
                )
    return pa.schema([pa.field(seen[k][0].name, seen[k][0].type, True) for k in order])


# --- statistics ----------------------------------------------------------------------------------


def _bound(kind: str, value: Any) -> Any:
    """A footer statistic in :class:`StatsCollector` form; ``...`` when unusable."""
    if value is None:
        return ...
    if kind == "int":
        return int(value)
    if kind == "decimal":
        return Decimal(value)
    if kind == "string":
        return value if isinstance(value, str) else ...
    if kind == "date" and isinstance(value, dt.date):
        return (value - _EPOCH_DAY).days
    if kind in ("timestamp", "timestamp_ntz") and isinstance(value, dt.datetime):
        base = _EPOCH_UTC if value.tzinfo is not None else _EPOCH
        return (value - base) // dt.timedelta(microseconds=1)
    return ...  # floats (NaN is left out of Parquet bounds) and anything unexpected


def footer_stats(md: pq.FileMetaData, columns: Sequence[StatsColumn], prefix_length: int) -> str:
    """``add.stats`` JSON of one file from its footer (no data read)."""
    collector = StatsCollector(columns, prefix_length)
    collector.num_records = int(md.num_rows)
    if not md.num_row_groups:
        for i in range(len(columns)):
            collector.add_bounds(i, None, None, 0)
        return collector.to_json()
    first = md.row_group(0)
    index = {tuple(first.column(j).path_in_schema.split(".")): j for j in range(first.num_columns)}
    for i, col in enumerate(columns):
        j = index.get(col.path)
        if j is None:
            # a column the file does not hold is NULL in every row; nested lists/maps have
            # no single chunk whose counts are the column's
            known = not any(p[: len(col.path)] == col.path for p in index)
            nulls = md.num_rows if known else None
            collector.add_bounds(i, None, None, nulls)
            continue
        for g in range(md.num_row_groups):
            group = md.row_group(g)
            if group.num_rows == 0:
                continue
            stats = group.column(j).statistics
            nulls = (
                stats.null_count
                if stats is not None and getattr(stats, "has_null_count", True)
                else None
            )
            if col.kind == "count" or nulls == group.num_rows:
                collector.add_bounds(i, None, None, nulls)
            elif stats is None or not stats.has_min_max:
                collector.add_bounds(i, ..., ..., nulls)
            else:
                collector.add_bounds(
                    i, _bound(col.kind, stats.min), _bound(col.kind, stats.max), nulls
                )
    return collector.to_json()


# --- the command -------------------------------------------------------------------------------


def _footers(storage: Storage, paths: list[str]) -> list[pq.FileMetaData]:
    """Every file's footer; a file that is not Parquet is refused by name."""
    try:
        return footer_metadata(storage, paths)
    except (pa.ArrowInvalid, OSError) as exc:
        if isinstance(exc, LakeQueryError):
            raise
        for path in paths:  # error path only: find the file to name it
            try:
                footer_metadata(storage, [path])
            except (pa.ArrowInvalid, OSError) as one:
                raise SchemaError(f"{path!r} is not a Parquet file: {one}") from exc
        raise


def _data_files(storage: Storage, partition_names: Sequence[str] = ()) -> pa.Table:
    """Listed files that are data: not hidden, not under ``_delta_log``. A directory of a
    declared partition column is not hidden, even when the column's name starts with
    ``_`` or ``.`` (``_g=1/``)."""
    listing = list_tree(storage)
    paths = listing.column("path")
    if pc.any(pc.starts_with(paths, "_delta_log/")).as_py():
        raise TableAlreadyExistsError(storage.root, "it has a _delta_log: it is a Delta table")
    looked_at = paths
    if partition_names:
        names = "|".join(re2_literal(n) for n in partition_names)
        # RE2 has no lookahead: the partition directories are renamed before the test
        looked_at = pc.replace_substring_regex(paths, f"(^|/)(?:{names})=", "\\1p=")
    files = listing.filter(pc.invert(pc.match_substring_regex(looked_at, _HIDDEN_RE)))
    if not files.num_rows:
        raise SchemaError(
            f"no Parquet files under {storage.root!r} (files and directories starting with "
            "'_' or '.' are ignored); use DeltaTable.create for an empty table"
        )
    return files.sort_by("path")


def convert_to_delta(
    uri: TableLocation,
    *,
    partition_by: PartitionSpec | None = None,
    configuration: Mapping[str, str] | None = None,
    name: str | None = None,
    description: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> DeltaTable:
    """CONVERT TO DELTA: makes the Parquet folder at ``uri`` a Delta table, in place.

    Args:
        uri: the folder (local path, ``file://``, ``s3://``, ``memory://``).
        partition_by: the Hive partition columns in directory order: names (types
            inferred from the directory values), or a ``pyarrow.Schema`` / dict name ->
            type (Arrow type or Delta type name) to give the types.
        configuration: table properties of the new table.
        name: table name stored in the metadata.
        description: table description stored in the metadata.
        storage_options: s3fs options for ``s3://`` folders.

    Returns:
        The new :class:`~lakequery.DeltaTable` (version 0).

    Raises:
        TableAlreadyExistsError: the folder has a ``_delta_log``.
        SchemaMismatchError: files disagree on a column's type.
        SchemaError: no data files, a file outside the partition layout, a partition value
            that does not parse as its declared type, a partition column also in the files.
    """
    from lakequery.table import DeltaTable

    storage = open_storage(uri, storage_options)
    stored = dict(configuration or {})
    if (stored.get("delta.columnMapping.mode") or "none").lower() != "none":
        raise SchemaError(
            "CONVERT TO DELTA keeps the files' column names as physical names: enable "
            "column mapping after converting, not in the conversion"
        )
    spec = _declared_types(partition_by)
    files = _data_files(storage, [name for name, _ in spec])
    paths = [str(p) for p in files.column("path").to_pylist()]
    part_fields, part_values = _partition_values(files.column("path"), spec)
    footers = _footers(storage, paths)
    data = _merged_schema(paths, footers)
    clash = {f.name.lower() for f in part_fields} & {n.lower() for n in data.names}
    if clash:
        raise SchemaError(f"partition column(s) {sorted(clash)} are also stored in the files")
    data_fields = tuple(
        StructField(f.name, from_arrow_type(f.type, f"column {f.name!r}"), True) for f in data
    )
    schema = StructType(data_fields + tuple(part_fields))
    metadata, protocol = new_table(
        schema,
        [f.name for f in part_fields],
        stored,
        name=name,
        description=description,
    )
    props = TableProperties(metadata.configuration)
    columns = configured_stats_columns(metadata.schema, metadata.partition_columns, "none", props)
    keys = [f.name for f in part_fields]
    sizes = files.column("size").to_pylist()
    times = files.column("modified_ms").to_pylist()
    adds = [
        {
            "path": uri_encode_path(path),
            "partitionValues": {k: values[i] for k, values in zip(keys, part_values, strict=True)},
            "size": sizes[i],
            "modificationTime": times[i],
            "dataChange": True,
            "stats": footer_stats(md, columns, props.string_prefix_length),
        }
        for i, (path, md) in enumerate(zip(paths, footers, strict=True))
    ]
    txn = Transaction(
        storage,
        None,
        operation="CONVERT",
        parameters={
            "numFiles": len(adds),
            "partitionedBy": json.dumps(keys),
            "collectStats": True,
        },
    )
    txn.set_protocol(protocol)
    txn.set_metadata(metadata)
    txn.add_files(adds)
    txn.metrics = {"numConvertedFiles": len(adds)}
    txn.commit()
    return DeltaTable(uri, storage_options=storage_options)


__all__ = ["convert_to_delta", "footer_stats", "infer_partition_type"]
