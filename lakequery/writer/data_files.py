"""Arrow data -> Parquet data files + statistics -> ``add`` actions (the write path's core).

:func:`write_data_files` streams its input: each batch is conformed to the table's logical
schema, checked against the table's constraints, split by partition values and appended
to the open file of its partition; a file is closed once it reaches the target size.
Statistics come from the in-memory batches. It is a pure function of its arguments
apart from creating the data files, so it runs unchanged on Spark executors.

Example:
    >>> import pyarrow as pa
    >>> from lakequery.writer.state import WriteState
    >>> schema = ('{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,'
    ...           '"metadata":{}},{"name":"p","type":"string","nullable":true,"metadata":{}}]}')
    >>> state = WriteState("memory://data-files-example", schema, partition_columns=("p",))
    >>> adds = write_data_files(pa.table({"p": ["a/b", None], "id": [1, 2]}), state, now_ms=0)
    >>> sorted((a["path"].split("/part-")[0], a["partitionValues"]["p"]) for a in adds)
    [('p=__HIVE_DEFAULT_PARTITION__', None), ('p=a%252Fb', 'a/b')]
    >>> sorted(a["stats"] for a in adds)[0]
    '{"numRecords":1,"minValues":{"id":1},"maxValues":{"id":1},"nullCount":{"id":0}}'
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from lakequery import arrow_kernels as pc
from lakequery.arrow_buffers import empty_table, int_values
from lakequery.errors import SchemaError, SchemaMismatchError, StorageError
from lakequery.parquet_footers import SCHEMA_TAG, schema_fingerprint
from lakequery.protocol.column_mapping import (
    has_list_view,
    physical_name,
    physical_schema,
    rename_to_logical,
    to_logical,
)
from lakequery.protocol.schema import (
    ArrayType,
    DeltaType,
    MapType,
    StructType,
    is_void,
    to_arrow_field,
    type_to_json,
    without_void_fields,
)
from lakequery.storage import open_storage
from lakequery.storage.engine_errors import raise_storage_failure
from lakequery.writer.constraints import ConstraintChecker
from lakequery.writer.identity import fill_identity
from lakequery.writer.nested_names import respelled
from lakequery.writer.partition_values import (
    PartitionKey,
    directory_value,
    partition_directory,
    split_by_partition,
    uri_encode_path,
)
from lakequery.writer.schema_evolution import reconcile
from lakequery.writer.state import WriteState
from lakequery.writer.stats import StatsCollector, configured_stats_columns

#: Buffered bytes of one partition that trigger writing a row group.
FLUSH_BYTES = 64 * 1024 * 1024
#: Buffered bytes over all partitions that trigger writing every buffer.
MAX_BUFFERED_BYTES = 256 * 1024 * 1024
#: Files open at once; beyond this the oldest open file is finished.
MAX_OPEN_FILES = 128
#: Rows sampled (with ``adaptive_dictionary``) to decide a column's dictionary encoding.
DICTIONARY_SAMPLE_ROWS = 8192
#: Columns with more distinct values than this share of the sample are written plain.
DICTIONARY_MAX_DISTINCT = 0.5
#: The column of change data files that says what happened to a row (digest §13).
CHANGE_TYPE_COLUMN = "_change_type"
#: Where change data files live, below the table root.
CHANGE_DATA_DIR = "_change_data"

WriteInput = Any  # pa.Table | pa.RecordBatch | pa.RecordBatchReader | Iterable[RecordBatch] | ...


@functools.lru_cache(maxsize=64)
def parquet_statistics_columns(schema: pa.Schema) -> tuple[str, ...]:
    """The Parquet leaf columns that get footer statistics: all but FLOAT/DOUBLE ones.

    Parquet min/max leave NaN out, and DuckDB folds predicates on such bounds at planning
    time (a file holding [1.0, NaN] answers ``f < 3`` with both rows), so DML on DuckDB
    would change rows it must not touch. Delta statistics in the log are unaffected (they
    drop the bounds of a column with NaN), and so is file skipping.
    """
    sink = io.BytesIO()
    pq.write_table(empty_table(schema), sink)
    sink.seek(0)
    leaves = pq.ParquetFile(sink).schema
    return tuple(
        leaves.column(i).path
        for i in range(len(leaves))
        if leaves.column(i).physical_type not in ("FLOAT", "DOUBLE")
    )


def _type_name(t: DeltaType) -> str:
    j = type_to_json(t)
    return j if isinstance(j, str) else json.dumps(j)


# --- input -------------------------------------------------------------------------------------


def iter_batches(data: WriteInput) -> Iterator[pa.RecordBatch]:
    """The record batches of any supported input, lazily.

    Accepts a Table, RecordBatch, RecordBatchReader, pandas DataFrame, anything with
    ``__arrow_c_stream__`` (Polars, DuckDB relations, ...) or ``__arrow_c_array__``, or an
    iterable of RecordBatches / Tables.

    Example:
        >>> [b.num_rows for b in iter_batches(pa.table({"a": [1, 2]}))]
        [2]
    """
    if isinstance(data, pa.RecordBatch):
        yield data
    elif isinstance(data, pa.Table):
        yield from data.to_batches()
    elif isinstance(data, pa.RecordBatchReader):
        yield from data
    elif type(data).__module__.startswith("pandas"):
        from lakequery.writer.inputs import pandas_table

        yield from pandas_table(data).to_batches()
    elif hasattr(data, "__arrow_c_stream__"):
        yield from pa.RecordBatchReader.from_stream(data)
    elif hasattr(data, "__arrow_c_array__"):
        yield pa.record_batch(data)
    elif isinstance(data, Iterable):
        for item in data:
            if isinstance(item, pa.RecordBatch | pa.Table):
                yield from iter_batches(item)
            else:
                raise TypeError(f"expected RecordBatches, got {type(item).__name__}")
    else:
        raise TypeError(f"cannot write a {type(data).__name__}")


def _cast_column(col: Any, f: pa.Field[Any], delta: Any) -> Any:
    if col.type == f.type:
        return col
    if isinstance(col.type, pa.BaseExtensionType):  # its storage (uuid: 16 bytes; json: text)
        chunks: list[Any] = [col] if isinstance(col, pa.Array) else list(col.chunks)
        storage: list[Any] = [c.storage for c in chunks]
        kind: Any = col.type.storage_type
        col = storage[0] if isinstance(col, pa.Array) else pa.chunked_array(storage, kind)
    elif pa.types.is_run_end_encoded(col.type):
        col = pc.run_end_decode(col)
    if col.type == f.type:
        return col
    if pa.types.is_nested(col.type):  # nested names as the table spells them
        col = respelled(col, delta.type)
        if col.type == f.type:
            return col
        if has_list_view(col.type):  # pyarrow's own cast of list views is invalid
            one = pa.RecordBatch.from_arrays([col], names=[f.name])
            return to_logical(one, StructType((delta,)), "none", exact=True).column(0)
    try:
        if pa.types.is_dictionary(col.type) and not pa.types.is_dictionary(f.type):
            # decoded by taking from its values cast first: pyarrow has no take (and so no
            # cast) for dictionaries of view types, which Polars' Categorical/Enum export
            values = col.dictionary
            if values.type != f.type:
                values = pc.cast(values, f.type, safe=True)
            return pc.take(values, col.indices)
        return pc.cast(col, f.type, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        nested = pa.types.is_nested(col.type) and pa.types.is_nested(f.type)
        if nested:  # match struct fields by name, fill missing nullable ones
            try:
                one = pa.RecordBatch.from_arrays([col], names=[f.name])
                return to_logical(one, StructType((delta,)), "none", exact=True).column(0)
            except SchemaError:
                pass
        raise SchemaMismatchError(f.name, _type_name(delta.type), str(col.type), str(exc)) from exc


def conform_batch(
    batch: pa.RecordBatch, schema: StructType, arrow_schema: pa.Schema, generated: Collection[str]
) -> tuple[pa.RecordBatch, list[str]]:
    """Reorders, fills and casts a batch to the table's logical Arrow schema.

    Columns are matched by name (case-insensitively when unambiguous); missing nullable
    columns and missing generated columns become nulls.

    Returns:
        The conformed batch and the generated columns that were missing.

    Raises:
        SchemaMismatchError: An unknown or missing non-nullable column, or a failing cast.

    Example:
        >>> from lakequery.protocol.schema import from_arrow_schema
        >>> target = pa.schema([("a", pa.int64()), ("b", pa.string())])
        >>> out, _ = conform_batch(pa.record_batch({"B": ["x"], "a": pa.array([1], pa.int8())}),
        ...                        from_arrow_schema(target), target, ())
        >>> out.schema.types
        [DataType(int64), DataType(string)]
    """
    names = batch.schema.names
    exact = {n: i for i, n in enumerate(names)}
    lower: dict[str, list[int]] = {}
    for i, n in enumerate(names):
        lower.setdefault(n.lower(), []).append(i)
    used: set[int] = set()
    cols: list[Any] = []
    missing: list[str] = []
    n_rows = batch.num_rows
    for f, delta in zip(arrow_schema, schema.fields, strict=True):
        idx = exact.get(f.name)
        if idx is None and len(lower.get(f.name.lower(), ())) == 1:
            idx = lower[f.name.lower()][0]
        if idx is None:
            if f.name in generated:
                missing.append(f.name)
            elif not f.nullable:
                raise SchemaMismatchError(f.name, _type_name(delta.type) + " NOT NULL", "no column")
            cols.append(pa.nulls(n_rows, f.type))
            continue
        used.add(idx)
        cols.append(_cast_column(batch.column(idx), f, delta))
    for i, n in enumerate(names):
        if i not in used:
            raise SchemaMismatchError(n, "no such column", str(batch.schema.field(i).type))
    return pa.RecordBatch.from_arrays(cols, schema=arrow_schema), missing


def _strict(t: DeltaType) -> bool:
    """Whether a nested type forbids nulls somewhere below its top level."""
    if isinstance(t, StructType):
        return any(not f.nullable or _strict(f.type) for f in t.fields)
    if isinstance(t, ArrayType):
        return not t.contains_null or _strict(t.element)
    if isinstance(t, MapType):
        return not t.value_contains_null or _strict(t.value) or _strict(t.key)
    return False


def _check_nulls(arr: Any, t: DeltaType, nullable: bool, inherited: int, where: str) -> None:
    """Nulls where the schema forbids them (``inherited``: nulls owed to parent structs)."""
    if not nullable and arr.null_count > inherited:
        raise SchemaMismatchError(where, _type_name(t) + " NOT NULL", "null values")
    if not _strict(t):
        return
    if isinstance(t, StructType):
        for f in t.fields:
            child = pc.struct_field(arr, f.name)
            _check_nulls(child, f.type, f.nullable, arr.null_count, f"{where}.{f.name}")
    elif isinstance(t, ArrayType):
        _check_nulls(pc.list_flatten(arr), t.element, t.contains_null, 0, f"{where}.element")
    elif isinstance(t, MapType) and len(arr):
        lo, hi = arr.offsets[0].as_py(), arr.offsets[-1].as_py()
        _check_nulls(
            arr.items.slice(lo, hi - lo), t.value, t.value_contains_null, 0, f"{where}.value"
        )


def _hides_required(t: DeltaType, nullable: bool) -> bool:
    """Whether a NOT NULL field sits below a nullable struct field, list element or map
    value: its nulls under a null parent are allowed, but the Parquet writer refuses them."""
    if isinstance(t, StructType):
        return any(
            (nullable and not f.nullable) or _hides_required(f.type, f.nullable or nullable)
            for f in t.fields
        )
    if isinstance(t, ArrayType):
        return _hides_required(t.element, True)
    if isinstance(t, MapType):
        return _hides_required(t.value, True)
    return False


def _clear_hidden_nulls(arr: Any, t: DeltaType, required: bool = False) -> Any:
    """``arr`` (of Delta type ``t``) with the nulls of NOT NULL fields under null parents
    cleared (``required``: ``arr`` is such a field; :func:`_check_nulls` made sure that its
    nulls all sit under null parents). DuckDB's Arrow output nulls a null struct's children
    too, where pyarrow's conversions leave a placeholder."""
    if isinstance(t, StructType):
        kids = [
            _clear_hidden_nulls(arr.field(i), f.type, not f.nullable)
            for i, f in enumerate(t.fields)
        ]
        mask = arr.is_null() if arr.null_count and not required else None
        return pa.StructArray.from_arrays(kids, fields=list(arr.type), mask=mask)
    buffers = arr.buffers()
    validity = None if required else buffers[0]
    if isinstance(t, ArrayType) and not pa.types.is_fixed_size_list(arr.type):
        values = _clear_hidden_nulls(arr.values, t.element)
        return pa.Array.from_buffers(
            arr.type, len(arr), [validity, buffers[1]], offset=arr.offset, children=[values]
        )
    if isinstance(t, MapType):  # the entries (never null): keys, then cleared values
        entries = arr.values
        value = _clear_hidden_nulls(entries.field(1), t.value)
        cleared = pa.StructArray.from_arrays([entries.field(0), value], fields=list(entries.type))
        return pa.Array.from_buffers(
            arr.type, len(arr), [validity, buffers[1]], offset=arr.offset, children=[cleared]
        )
    if not required or not arr.null_count:
        return arr
    return pa.Array.from_buffers(arr.type, len(arr), [None, *buffers[1:]], 0, arr.offset)


# --- files -------------------------------------------------------------------------------------


def distinct_values(column: Any) -> int:
    """Distinct values of an Arrow array, null counting as one value (as
    ``pc.count_distinct(mode="all")``). Integer columns are counted by sorting a numpy
    copy: on 8192 mostly distinct int64 values ~30 us against ~190 us for Arrow's hash
    count where numpy's sort is vectorised, 196 against 162 us where it is not (AMD EPYC);
    the writer's dictionary decision mostly settles without a count
    (:func:`more_distinct_than`).

    Example:
        >>> distinct_values(pa.chunked_array([[3, 1, None], [3, None]]))
        3
    """
    if not pa.types.is_integer(column.type):
        return int(pc.count_distinct(column, mode="all").as_py())
    nulls = column.null_count
    # from the buffers: to_numpy imports pandas
    values = int_values(pc.drop_null(column) if nulls else column)
    if not values.size:
        return 1 if nulls else 0
    ordered = np.sort(values)
    return int(np.count_nonzero(ordered[1:] != ordered[:-1])) + 1 + (1 if nulls else 0)


#: The hash that bounds an integer column's distinct count from below: the top 16 bits of
#: the value times an odd constant (2**64 / golden ratio), 65,536 buckets.
_HASH_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)
_HASH_SHIFT = np.uint64(48)


def more_distinct_than(column: Any, limit: int) -> bool:
    """Whether ``column`` holds more than ``limit`` distinct values (null counting as one),
    as ``distinct_values(column) > limit`` answers it, but for integer columns mostly
    without counting: a value range of at most ``limit`` values answers no, and more than
    ``limit`` occupied buckets of a hash of the values (a lower bound on the distinct
    count) answers yes; only what neither settles is counted (a sort). The writer's
    dictionary decision on 8,192 mostly distinct int64 values: ~0.035 ms against 0.2 ms
    for the sort on a CPU whose numpy sort is not vectorised (benchmarks/RESULTS.md
    section 6).

    Example:
        >>> col = pa.array([1, 2, 2, None])
        >>> more_distinct_than(col, 2), more_distinct_than(col, 3)
        (True, False)
    """
    if not pa.types.is_integer(column.type):
        return distinct_values(column) > limit
    nulls = 1 if column.null_count else 0
    values = int_values(pc.drop_null(column) if nulls else column)
    if values.size + nulls <= limit or not values.size:
        return bool(values.size + nulls > limit)
    if int(values.max()) - int(values.min()) < limit - nulls:  # at most limit values in all
        return False
    seen = np.zeros(1 << 16, dtype=np.bool_)
    # the cast is injective, the product wraps modulo 2**64
    seen[(values.astype(np.uint64) * _HASH_MULTIPLIER) >> _HASH_SHIFT] = True
    if int(np.count_nonzero(seen)) + nulls > limit:
        return True
    return distinct_values(column) > limit


@dataclass
class _OpenFile:
    relative: str
    sink: Any
    writer: pq.ParquetWriter
    stats: StatsCollector


@dataclass
class _Buffer:
    batches: list[pa.RecordBatch] = field(default_factory=list)
    rows: int = 0
    nbytes: int = 0


class _Writer:
    """The state of one :func:`write_data_files` call."""

    def __init__(self, state: WriteState, now_ms: int | None) -> None:
        self.state = state
        self.now_ms = now_ms
        schema, mode = state.schema, state.column_mapping_mode
        parts = state.partition_columns
        self.schema = schema
        self.part_types = [schema[c].type for c in parts]
        self.part_names = [physical_name(schema[c], mode) for c in parts]
        self.data_columns = [
            f.name for f in schema.fields if f.name not in parts and not is_void(f.type)
        ]
        self.physical = physical_schema(schema, mode, exclude=parts)
        self.hiding_required = [
            f for f in schema.fields if f.name not in parts and _hides_required(f.type, f.nullable)
        ]
        # void fields of structs are not stored either (the batches are cast without them)
        stored = [without_void_fields(schema[c]) for c in self.data_columns]
        self.nested_void = any(f is not schema[f.name] for f in stored)
        self.data_schema = pa.schema(
            [
                to_arrow_field(f) if f is not schema[f.name] else state.arrow_schema.field(f.name)
                for f in stored
            ]
        )
        self.change_data = state.change_data
        if self.change_data:
            # Change rows are copies of table rows plus their change type; no statistics.
            change = pa.field(CHANGE_TYPE_COLUMN, pa.string())
            self.data_columns.append(CHANGE_TYPE_COLUMN)
            self.physical = self.physical.append(change)
            self.data_schema = self.data_schema.append(change)
        for name in state.materialized_columns:
            self.data_columns.append(name)
            self.physical = self.physical.append(pa.field(name, pa.int64()))
            self.data_schema = self.data_schema.append(pa.field(name, pa.int64()))
        props = state.table_properties
        self.stats_columns = (
            [] if self.change_data else configured_stats_columns(schema, parts, mode, props)
        )
        self.prefix_length = props.string_prefix_length
        # Change rows copy rows that were (or become) table rows: nothing to check again.
        self.checker = (
            ConstraintChecker(StructType(()), {})
            if self.change_data
            else ConstraintChecker(schema, state.properties(), state.extra_constraints)
        )
        fmt = state.properties().get("delta.parquet.format.version", "1.0.0")
        self.page_version = "2.0" if fmt.startswith("2") else "1.0"
        storage = open_storage(state.table_uri, state.options())
        self.join = storage.join
        self.check_directory = storage.check_write_directory
        self.checked_directories: set[str] = set()  # once per directory and writer
        self.fs: pafs.FileSystem
        self.fs_path: Callable[[str], str]
        # Only a local table has directories to make: on an object store a "directory" is
        # a key prefix, and s3fs's recursive mkdir creates a missing bucket (a misspelt
        # bucket name would appear in the account instead of the write failing).
        self.make_directories = storage.protocol == "file"
        if self.make_directories:
            self.fs, self.fs_path = pafs.LocalFileSystem(), str
        else:
            self.fs, self.fs_path = storage.arrow_filesystem()
        self.flush_bytes = min(FLUSH_BYTES, state.target_file_size)
        self.buffers: dict[PartitionKey, _Buffer] = {}
        self.buffered = 0
        self.open: dict[PartitionKey, _OpenFile] = {}
        self.adds: list[dict[str, Any]] = []
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="lakequery-stats")
        self.identity = state.identity
        self.filled = {*self.checker.generated, *(name for name, _, _ in self.identity)}
        self.identity_rows = 0  # identity values generated so far
        self.checked_shapes: list[pa.Schema] = []  # batch schemas held to the table's

    def _check_shape(self, schema: pa.Schema) -> None:
        """Holds each batch shape to the table's schema once, as the plan held the data's
        (``reconcile``): a stream is planned from its first batch, and conforming a later
        one casts its structs to the table's, which drops fields the table lacks (and
        values of void fields) without a word."""
        if schema not in self.checked_shapes:
            reconcile(self.schema, schema)
            self.checked_shapes.append(schema)

    def write(self, batch: pa.RecordBatch) -> None:
        change_type = None
        if self.change_data:
            index = batch.schema.get_field_index(CHANGE_TYPE_COLUMN)
            if index < 0:
                raise SchemaError(f"change data rows need a {CHANGE_TYPE_COLUMN!r} column")
            change_type = pc.cast(batch.column(index), pa.string())
            batch = batch.remove_column(index)
        carried: list[Any] = []
        for name in self.state.materialized_columns:
            index = batch.schema.get_field_index(name)
            if index < 0:
                carried.append(pa.nulls(batch.num_rows, pa.int64()))
            else:
                carried.append(pc.cast(batch.column(index), pa.int64()))
                batch = batch.remove_column(index)
        self._check_shape(batch.schema)
        batch, missing = conform_batch(batch, self.schema, self.state.arrow_schema, self.filled)
        if self.identity:
            generate = tuple(g for g in self.identity if g[0] in missing)
            batch = fill_identity(batch, generate, self.identity_rows)
            self.identity_rows += batch.num_rows
        if self.checker.active:
            batch = self.checker.apply(batch, missing)
        if change_type is not None:
            batch = batch.append_column(CHANGE_TYPE_COLUMN, change_type)
        for name, values in zip(self.state.materialized_columns, carried, strict=True):
            batch = batch.append_column(name, values)
        for f in self.schema.fields:
            _check_nulls(batch.column(f.name), f.type, f.nullable, 0, f.name)
        for f in self.hiding_required:
            i = batch.schema.get_field_index(f.name)
            column = _clear_hidden_nulls(batch.column(i), f.type, not f.nullable)
            batch = batch.set_column(i, batch.schema.field(i), column)
        limit = self.state.max_rows_per_row_group
        for key, group in split_by_partition(batch, self.state.partition_columns, self.part_types):
            whole = group.select(self.data_columns)
            if self.nested_void:
                whole = whole.cast(self.data_schema)
            # A batch larger than a flush is cut into flush-sized slices, so that files
            # roll over near target_file_size even when the input is one huge batch.
            # Slices of at most one row group keep row groups whole (not 1M + a remainder).
            step = max(1, min(whole.num_rows, limit))
            if whole.nbytes > self.flush_bytes and whole.num_rows > 1:
                step = max(1, min(step, whole.num_rows * self.flush_bytes // whole.nbytes))
            for start in range(0, whole.num_rows, step):
                data = whole.slice(start, step)
                buf = self.buffers.setdefault(key, _Buffer())
                size = data.nbytes
                buf.batches.append(data)
                buf.rows += data.num_rows
                buf.nbytes += size
                self.buffered += size
                if buf.rows >= limit or buf.nbytes >= self.flush_bytes:
                    self._flush(key)
        if self.buffered >= MAX_BUFFERED_BYTES:
            for key in list(self.buffers):
                self._flush(key)

    def _flush(self, key: PartitionKey, *, whole_groups: bool = True) -> None:
        buf = self.buffers.pop(key)
        self.buffered -= buf.nbytes
        table = pa.Table.from_batches(buf.batches, schema=self.data_schema)
        limit = self.state.max_rows_per_row_group
        full = (table.num_rows // limit) * limit
        if whole_groups and 0 < full < table.num_rows:
            # Write whole row groups only; the remainder waits for more rows.
            rest = table.slice(full)
            table = table.slice(0, full)
            nbytes = rest.nbytes
            self.buffers[key] = _Buffer(rest.to_batches(), rest.num_rows, nbytes)
            self.buffered += nbytes
        out = self.open.get(key) or self._open(key, table)
        # Statistics run on a helper thread while the Parquet writer encodes the same
        # table (both release the GIL), so they cost almost nothing on two cores.
        gathering = self.pool.submit(out.stats.update, table)
        try:
            out.writer.write_table(
                # no relabelling when the names already are the physical ones (the
                # relabel walks every column, ~0.1 ms per file)
                table
                if table.schema.equals(self.physical)
                else rename_to_logical(table, self.physical),
                row_group_size=self.state.max_rows_per_row_group,
            )
        finally:
            gathering.result()
        if out.sink.tell() >= self.state.target_file_size:
            self._close(key)

    def _dictionary(self, table: pa.Table) -> bool | list[str]:
        """``use_dictionary`` for a file starting with ``table``: with
        ``adaptive_dictionary``, the (flat) columns whose first rows are not mostly
        distinct."""
        if (
            not self.state.adaptive_dictionary
            or table.num_columns != len(self.physical)
            or any(pa.types.is_nested(f.type) for f in self.physical)
        ):
            return True
        sample = table.slice(0, DICTIONARY_SAMPLE_ROWS)
        keep = []
        limit = int(sample.num_rows * DICTIONARY_MAX_DISTINCT)
        for i, f in enumerate(self.physical):
            if not more_distinct_than(sample.column(i), limit):
                keep.append(f.name)
        return keep

    def _open(self, key: PartitionKey, first: pa.Table) -> _OpenFile:
        if len(self.open) >= MAX_OPEN_FILES:
            self._close(next(iter(self.open)))
        directory = partition_directory(
            [
                (name, directory_value(value, t))
                for name, value, t in zip(self.part_names, key, self.part_types, strict=True)
            ]
        )
        kind = "cdc" if self.change_data else "part"
        name = f"{kind}-00000-{uuid.uuid4()}{self.state.file_suffix}"
        relative = f"{directory}/{name}" if directory else name
        if self.change_data:
            relative = f"{CHANGE_DATA_DIR}/{relative}"
        path = self.fs_path(self.join(relative))
        parent = path.rsplit("/", 1)[0]
        if parent not in self.checked_directories:  # never write through a link out
            self.check_directory(self.join(relative).rsplit("/", 1)[0])
            self.checked_directories.add(parent)
        if self.make_directories:
            self.fs.create_dir(parent, recursive=True)
        sink = self.fs.open_output_stream(path)
        writer = pq.ParquetWriter(
            sink,
            self.physical,
            compression=cast(Any, self.state.parquet_codec),
            data_page_version=cast(Any, self.page_version),
            write_statistics=list(parquet_statistics_columns(self.physical)),
            use_dictionary=cast(Any, self._dictionary(first)),
        )
        stats = StatsCollector(self.stats_columns, self.prefix_length)
        self.open[key] = out = _OpenFile(relative, sink, writer, stats)
        return out

    def _close(self, key: PartitionKey) -> None:
        out = self.open.pop(key)
        out.writer.close()
        size = out.sink.tell()
        out.sink.close()
        action: dict[str, Any] = {
            "path": uri_encode_path(out.relative),
            "partitionValues": dict(zip(self.part_names, key, strict=True)),
            "size": size,
        }
        if self.change_data:
            action["dataChange"] = False
        else:
            # readers skip footer reads for files whose stored schema is known equal
            action["tags"] = {SCHEMA_TAG: schema_fingerprint(out.writer.writer.metadata)}
            action["modificationTime"] = (
                self.now_ms if self.now_ms is not None else int(time.time() * 1000)
            )
            action["dataChange"] = self.state.data_change
            action["stats"] = out.stats.to_json()
        self.adds.append(action)

    def finish(self, *, release: bool = True) -> list[dict[str, Any]]:
        """Closes every file and returns their actions; ``release=False`` keeps the
        writer's resources (constraint checker, statistics thread) for another input."""
        for key in list(self.buffers):
            self._flush(key, whole_groups=False)
        for key in list(self.open):
            self._close(key)
        adds, self.adds = self.adds, []
        if release:
            self.release()
        return adds

    def abort(self) -> None:
        for out in self.open.values():
            for closing in (out.writer.close, out.sink.close):
                with contextlib.suppress(Exception):  # best effort: the files are orphans
                    closing()
        self.open.clear()
        self.buffers.clear()
        self.buffered = 0
        self.adds = []
        self.release()

    def release(self) -> None:
        self.checker.close()
        self.pool.shutdown()


def _write_all(writer: _Writer, data: WriteInput, state: WriteState, *, release: bool) -> Any:
    try:
        for batch in iter_batches(data):
            if batch.num_rows:
                writer.write(batch)
        return writer.finish(release=release)
    except BaseException as exc:
        writer.abort()
        if isinstance(exc, FileNotFoundError) and not isinstance(exc, StorageError):
            # writing, not reading: the bucket (or the local root) is missing
            reason = f"{type(exc).__name__}: {exc}"
            raise StorageError(state.table_uri, "write data file", reason) from exc
        if isinstance(exc, Exception):
            raise_storage_failure(exc, state.table_uri, "write data file")
        raise


class DataFilesWriter:
    """:func:`write_data_files` for many inputs of one table and state, set up once.

    Each :meth:`write` returns what ``write_data_files(data, state)`` would, and writes
    the same files; the setup (schema conversion, statistics columns, constraint
    checker, storage, the statistics thread) is shared by the calls, which OPTIMIZE
    makes once per output file (at ~100 files per partition the setup had cost about
    as much as encoding a small file). Identity values continue from one call to the
    next, as in one stream. Not thread-safe: one writer per thread. A failed write
    releases the writer; later writes raise.

    Example:
        >>> from lakequery.writer.state import WriteState
        >>> s = ('{"type":"struct","fields":[{"name":"x","type":"long","nullable":true,'
        ...      '"metadata":{}}]}')
        >>> with DataFilesWriter(WriteState("memory://dfw-doc", s)) as w:
        ...     [len(w.write(pa.table({"x": [i]}))) for i in range(3)]
        [1, 1, 1]
    """

    def __init__(self, state: WriteState, *, now_ms: int | None = None) -> None:
        self.state = state
        self._writer: _Writer | None = _Writer(state, now_ms)

    def write(self, data: WriteInput) -> list[dict[str, Any]]:
        """Writes ``data`` into new files (closed before returning) and returns their
        ``add`` (or ``cdc``) actions."""
        if self._writer is None:
            raise RuntimeError("this DataFilesWriter is closed")
        writer = self._writer
        try:
            adds: list[dict[str, Any]] = _write_all(writer, data, self.state, release=False)
        except BaseException:
            self._writer = None  # aborted: released
            raise
        return adds

    def close(self) -> None:
        if self._writer is not None:
            self._writer.release()
            self._writer = None

    def __enter__(self) -> DataFilesWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_data_files(
    data: WriteInput, state: WriteState, *, now_ms: int | None = None
) -> list[dict[str, Any]]:
    """Writes data as Parquet data files of a table and returns their ``add`` actions.

    Args:
        data: A Table, RecordBatch, RecordBatchReader, iterable of RecordBatches, pandas
            or Polars DataFrame, or any object with ``__arrow_c_stream__``; logical
            column names in any order.
        state: The table facts (see :class:`~lakequery.writer.state.WriteState`).
        now_ms: ``modificationTime`` of the actions (default: when each file is closed).

    Returns:
        ``add`` actions in JSON form (``path``, ``partitionValues``, ``size``,
        ``modificationTime``, ``dataChange``, ``stats``); with ``state.change_data``,
        ``cdc`` actions (``path``, ``partitionValues``, ``size``, ``dataChange``).
        Nothing is committed.

    Raises:
        SchemaMismatchError: The data does not fit the table schema.
        ConstraintViolationError: A row breaks an invariant, CHECK constraint or
            generated column expression.
        UnsupportedFeatureError: A constraint expression cannot be evaluated.

    Example:
        >>> import pyarrow as pa
        >>> from lakequery.writer.state import WriteState
        >>> s = '{"type":"struct","fields":[{"name":"x","type":"double","nullable":true,"metadata":{}}]}'
        >>> [a["path"].endswith(".c000.zstd.parquet") for a in
        ...  write_data_files(pa.table({"x": [1.0]}), WriteState("memory://wdf-doc", s))]
        [True]
    """
    adds: list[dict[str, Any]] = _write_all(_Writer(state, now_ms), data, state, release=True)
    return adds


__all__ = [
    "DataFilesWriter",
    "conform_batch",
    "distinct_values",
    "iter_batches",
    "more_distinct_than",
    "write_data_files",
]
