"""Polars adapter: a LazyFrame over ``pl.scan_parquet`` of the pruned files.

Projection and predicate pushdown stay with Polars: the filter is a Polars expression
on logical names applied to lazily renamed scans, and Polars pushes both into its
Parquet reader. Partition columns are literals per partition-value group.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np
import polars as pl
import pyarrow as pa

from lakequery import arrow_kernels as pc
from lakequery.arrow_buffers import bits_array, empty_table, large_list_array
from lakequery.engines.deletion import deleted_rows
from lakequery.engines.layout import (
    MAX_UNION_GROUPS,
    ColumnSpec,
    FileGroup,
    column_specs,
    file_groups,
    hive_layout,
    require_local_files,
)
from lakequery.engines.nested import PolarsRelabelError, has_struct, polars_can_relabel
from lakequery.engines.variant_files import variant_files
from lakequery.errors import DeletionVectorError
from lakequery.protocol.column_mapping import physical_schema
from lakequery.protocol.polars_names import is_pattern, literal_name
from lakequery.protocol.schema import (
    ArrayType,
    DeltaType,
    MapType,
    PrimitiveType,
    StructType,
    TypeChange,
    type_changes,
)
from udfs.dv_mask import keep_bits

if TYPE_CHECKING:
    import numpy.typing as npt

    from lakequery.scan import Scan

#: Polars' own Delta reader passes keep masks to its Parquet scan through this hook; when a
#: Polars release lacks it, scans of files with deletion vectors go through Arrow.
_HAS_DELETION_HOOK = "_deletion_files" in inspect.signature(pl.scan_parquet).parameters

_ROW_INDEX = "__lakequery_row"

_CAST = pl.ScanCastOptions(
    integer_cast=["upcast", "allow-float"],
    float_cast="upcast",
    datetime_cast=["nanosecond-downcast", "millisecond-upcast", "convert-timezone"],
    missing_struct_fields="insert",
    extra_struct_fields="ignore",
    categorical_to_string="allow",  # files other writers kept Arrow's dictionaries in
)


def _dtype(t: pa.DataType) -> pl.DataType:
    # pa.nulls, not Schema.empty_table(): the latter makes pyarrow import pandas
    empty: Any = pa.nulls(0, t)  # type: ignore[call-overload]
    return pl.DataFrame(pa.Table.from_arrays([empty], names=["x"])).schema["x"]


def maps_as_lists(t: pa.DataType) -> pa.DataType:
    """``t`` with every map, at any depth, as the list of key/value structs it is stored as.

    Polars' scan cannot cast map keys (``map<int,int>`` files under a ``map<long,long>``
    schema fail), but it upcasts the same data read as ``list<struct<key, value>>``; the
    projection casts the lists back to maps."""
    if pa.types.is_map(t):
        key = pa.field("key", maps_as_lists(t.key_type), nullable=False)
        value = t.item_field.with_type(maps_as_lists(t.item_type)).with_name("value")
        return pa.list_(pa.field("entries", pa.struct([key, value]), nullable=False))
    if pa.types.is_struct(t):
        return pa.struct(
            [t.field(i).with_type(maps_as_lists(t.field(i).type)) for i in range(t.num_fields)]
        )
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(maps_as_lists(t.value_type)))
    return t


def _widens_map_keys(spec: ColumnSpec, changes: list[TypeChange]) -> bool:
    """Whether a recorded type change of the column lies under a map key."""
    return any(c.path[0] == spec.name and "key" in c.path[1:] + c.field_path for c in changes)


def polars_relabel(expr: pl.Expr, t: DeltaType) -> pl.Expr:
    """Renames struct fields by position to logical names (the scan schema fixes order)."""
    if isinstance(t, StructType):
        out = expr.struct.rename_fields([f.name for f in t.fields])
        inner = [
            polars_relabel(pl.field(f.name), f.type).alias(f.name)
            for f in t.fields
            if has_struct(f.type)
        ]
        return out.struct.with_fields(inner) if inner else out
    if isinstance(t, ArrayType) and has_struct(t.element):
        return expr.list.eval(polars_relabel(pl.element(), t.element))
    if isinstance(t, MapType) and has_struct(t):
        raise PolarsRelabelError("a map holding structs under column mapping")
    return expr


#: A file's deleted row positions and its row count (``numRecords``).
_Deletions: TypeAlias = "tuple[npt.NDArray[np.int64], int]"


def _deletion_callback(
    deletions: dict[str, _Deletions],
) -> Callable[[pl.DataFrame], pl.DataFrame]:
    """Polars' deletion-file hook: per requested path, a keep mask (null: keep all), handed
    over as one Arrow list array whose boolean values a numpy kernel packs straight from
    the deleted positions (no per-row Python objects, no byte-per-row mask)."""

    built: dict[tuple[str, ...], pl.DataFrame] = {}  # the frame is re-collected often

    def callback(requested: pl.DataFrame) -> pl.DataFrame:
        paths = tuple(requested.get_column("path").to_list())
        if paths not in built:
            built[paths] = _selection_vectors(paths)
        return built[paths]

    def _selection_vectors(paths: tuple[str, ...]) -> pl.DataFrame:
        found = [
            deletions.get(p[len("file://") :] if p.startswith("file://") else p) for p in paths
        ]
        sizes = np.array([0 if f is None else f[1] for f in found], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(sizes)])
        # every file's deleted rows as positions in the concatenated masks (rows past a
        # file's row count are ignored, as a mask of that length would)
        positions = [np.empty(0, dtype=np.int64)]
        for f, start in zip(found, offsets[:-1].tolist(), strict=True):
            if f is not None:
                rows, n = f
                positions.append(rows[: np.searchsorted(rows, n)] + start)
        total = int(offsets[-1])
        bits: Any = keep_bits(np.concatenate(positions), total)
        # Arrow arrays from buffers: pa.array's first call imports pandas, and a list
        # array's from_arrays with a mask imports pyarrow.compute
        values = bits_array(bits, total)
        lists = large_list_array(offsets, values, [f is not None for f in found])
        return pl.DataFrame([_polars_series("selection_vector", lists)])

    return callback


class _ArrowCArray:
    """Shows Polars an Arrow array by the Arrow C data interface alone: handed a pyarrow
    array, ``pl.Series`` and ``pl.from_arrow`` import ``pyarrow.compute`` (~18 ms and
    ~9,000 objects in a new process) for a check that concerns chunked dictionaries."""

    def __init__(self, array: pa.Array[Any]) -> None:
        self.array = array

    def __arrow_c_array__(self, requested_schema: object | None = None) -> object:
        return self.array.__arrow_c_array__(requested_schema)


def _polars_series(name: str, array: pa.Array[Any]) -> pl.Series:
    try:
        return pl.Series(name, _ArrowCArray(array)).alias(name)  # the capsule has no name
    except TypeError:  # a Polars without the Arrow C data interface for Series
        out: Any = pl.from_arrow(array)
        return out.alias(name)  # type: ignore[no-any-return]


def _deletions(scan: Scan) -> dict[str, _Deletions]:
    """Location -> deleted rows and row count, for files with deletion vectors."""
    plan = scan.plan()
    deleted = deleted_rows(plan, scan.snapshot.storage)
    if not deleted:
        return {}
    counts = dict(
        zip(plan.locations.to_pylist(), plan.files.column("num_records").to_pylist(), strict=True)
    )
    out = {}
    for loc, rows in deleted.items():
        n = counts.get(loc)
        if n is None:
            raise DeletionVectorError(loc, "-", "a file with a deletion vector lacks numRecords")
        out[loc] = (rows, int(n))
    return out


def _group_frame(
    scan: Scan,
    group: FileGroup,
    specs: list[ColumnSpec],
    phys: pa.Schema,
    deletions: dict[str, _Deletions],
    changes: list[TypeChange],
    *,
    hive: bool = False,
    joined: bool = False,
) -> pl.LazyFrame:
    """One ``scan_parquet`` over a group's files; partition columns are literals, or with
    ``hive`` (every file's directories verified to spell its log values) Polars' own Hive
    columns, or with ``joined`` (the group is the whole plan, each path once) each row's
    file's values picked by the path the scan reports, so one scan can cover all groups:
    an expression, which Polars drops when a query does not use the column (a join it
    would keep: +0.2 s on 5M rows of 100 partitions), and which costs ~15 ns a row where
    used (RESULTS section 8, "sixteenth session")."""
    data_specs = [s for s in specs if not s.partition and not pa.types.is_null(s.type)]
    present = [s for s in data_specs if phys.get_field_index(s.physical) >= 0]
    schema = pl.Schema(
        {
            s.physical: _dtype(
                maps_as_lists(phys.field(s.physical).type)
                if _widens_map_keys(s, changes)
                else phys.field(s.physical).type
            )
            for s in present
        }
    )
    paths, options = scan.snapshot.storage.polars_source(group.locations)
    extra: dict[str, object] = {}
    local = {
        p: deletions[loc] for p, loc in zip(paths, group.locations, strict=True) if loc in deletions
    }
    if local:
        extra["_deletion_files"] = ("delta-deletion-vector", _deletion_callback(local))
    if not present:  # only constants wanted: a row index carries the row count
        extra["row_index_name"] = _ROW_INDEX
    if joined:
        extra["include_file_paths"] = _PATH
    if hive:
        extra["hive_partitioning"] = True
        # every partition column of the table: Polars refuses a directory key missing from
        # the Hive schema; the select below keeps the columns the scan reads
        snap = scan.snapshot
        extra["hive_schema"] = {
            n: _dtype(snap.schema.field(n).type) for n in snap.partition_columns
        }
    else:
        extra["hive_partitioning"] = False
    lf = pl.scan_parquet(
        paths,
        schema=schema,
        missing_columns="insert",
        extra_columns="ignore",
        cast_options=_CAST,
        storage_options=options,
        glob=False,  # file names are literal, even with * ? [ in them
        **extra,  # type: ignore[arg-type]
    )
    if joined:  # each row's file, numbered in plan order (Polars reports paths unchanged)
        number = pl.col(_PATH).cast(pl.Enum(paths)).to_physical()
        values = _partition_values(scan, [s for s in specs if s.partition])
    exprs: list[pl.Expr] = []
    for s in specs:
        if s.partition and hive:
            exprs.append(pl.col(literal_name(s.name)))
        elif s.partition and joined:
            exprs.append(pl.lit(values[s.name]).gather(number).alias(s.name))
        elif s.partition:
            exprs.append(pl.lit(group.values.get(s.name), dtype=_dtype(s.type)).alias(s.name))
        elif any(p is s for p in present):
            col = pl.col(literal_name(s.physical))
            if scan.snapshot.column_mapping_mode != "none" and has_struct(s.delta_type):
                col = polars_relabel(col, s.delta_type)
            exprs.append(col.cast(_dtype(s.type)).alias(s.name))
        else:
            exprs.append(pl.lit(None, dtype=_dtype(s.type)).alias(s.name))
    # with_columns broadcasts literals to the frame's height; select alone would not
    return lf.with_columns(exprs).select([pl.col(literal_name(s.name)) for s in specs])


#: The column naming each row's file in a scan that takes partition values by file.
_PATH = "__lq_path"


def _partition_values(scan: Scan, parts: list[ColumnSpec]) -> dict[str, pl.Series]:
    """Each planned file's value of each partition column of ``parts``, in plan order."""
    values = scan.plan().files.column("partition_values").combine_chunks()
    return {
        s.name: _polars_series(s.name, pc.struct_field(values, s.name)).cast(_dtype(s.type))
        for s in parts
    }


def _filters_pattern_fields(scan: Scan) -> bool:
    """Whether the scan's filter names a struct field called like a Polars pattern (``*``,
    ``^...$``): Polars cannot take such a field out of a struct (it panics), so the Arrow
    engine evaluates the filter."""
    if scan.filter is None:
        return False
    from lakequery.protocol.predicate_ast import referenced_columns  # scans with a filter

    return any(is_pattern(n) for path in referenced_columns(scan.filter) for n in path[1:])


def _stores_partition_columns(scan: Scan) -> bool:
    """Whether data files also hold the partition columns (IcebergCompat materialises them);
    the footer of one file tells, as the choice is table-wide."""
    import pyarrow.parquet as pq  # partitioned tables only

    fs, to_fs = scan.snapshot.storage.arrow_filesystem()
    with fs.open_input_file(to_fs(scan.plan().location_list[0])) as f:
        names = set(pq.ParquetFile(f).schema_arrow.names)
    return any(n in names for n in scan.snapshot.partition_columns)


def _native(spec: ColumnSpec, mode: str, changes: list[TypeChange]) -> bool:
    """Whether Polars' scan can produce this column lazily (else the scan goes via Arrow)."""
    if mode != "none" and not polars_can_relabel(spec.delta_type):
        return False
    for change in (c for c in changes if c.path[0] == spec.name):
        if not (_is_number(change.from_type) and _is_number(change.to_type)):
            return False  # decimal scale / date -> timestamp widening: not a scan cast
    return True


def _is_number(t: DeltaType) -> bool:
    return isinstance(t, PrimitiveType) and t.name in _NUMBERS


_NUMBERS = frozenset({"byte", "short", "integer", "long", "float", "double"})


def _annotated_variants(scan: Scan, specs: list[ColumnSpec]) -> bool:
    """Whether a planned file marks a group with Parquet's VARIANT logical type: Polars
    cannot parse such a footer, whichever columns are read (a file that shreds a variant
    the scan reads is refused; Polars' scan would drop the shredded part)."""
    files = variant_files(scan, [s.name for s in specs if not s.partition])
    return files is not None and files.annotated


def polars_frame(scan: Scan) -> pl.LazyFrame:
    """Builds the scan's LazyFrame.

    Lazy over ``pl.scan_parquet`` except for the rare columns Polars cannot cast or
    relabel while scanning (type-widened decimals or dates, maps of structs under column
    mapping) and for files whose footers Polars cannot parse (variants annotated with
    Parquet's VARIANT logical type): those scans are read through the Arrow engine and
    wrapped.
    """
    plan = scan.plan()
    snap = scan.snapshot
    if not scan.columns and scan.row_tracking_columns is None:
        # ``columns=[]``: one column read (a partition column when there is one: no I/O)
        # and dropped, which keeps the frame's height (``select([])`` would not)
        names = snap.partition_columns or snap.schema.names
        if not names:  # a table without columns (never written to: no file has rows)
            return pl.LazyFrame(scan.to_arrow())
        return polars_frame(scan.with_columns([names[0]])).drop(pl.col(literal_name(names[0])))
    require_local_files(scan)
    specs = column_specs(scan)
    changes = type_changes(snap.metadata.schema)
    deletions = _deletions(scan)
    native = all(_native(s, snap.column_mapping_mode, changes) for s in specs)
    if (
        not native
        or (deletions and not _HAS_DELETION_HOOK)
        or _annotated_variants(scan, specs)
        or scan.row_tracking_columns is not None  # row ids: the Arrow engine's
        or _filters_pattern_fields(scan)
    ):
        return pl.LazyFrame(scan.to_arrow())
    if plan.num_files == 0:
        return pl.LazyFrame(empty_table(scan.output_schema))  # (Schema.empty_table imports pandas)
    try:
        phys = physical_schema(snap.metadata.schema, snap.column_mapping_mode)
        # Polars reads key=value from every directory of a path, the table root's too
        hive_root = "=" not in snap.storage.root
        if hive_root and hive_layout(scan) and not _stores_partition_columns(scan):
            every = FileGroup({}, plan.location_list)
            frames = [_group_frame(scan, every, specs, phys, deletions, changes, hive=True)]
        else:
            groups = file_groups(plan, [s.name for s in specs if s.partition])
            locations = plan.location_list
            joined = len(groups) > MAX_UNION_GROUPS and len(set(locations)) == len(locations)
            if joined:  # (a change feed may read one file twice, under two change types)
                groups = [FileGroup({}, locations)]
            frames = [
                _group_frame(scan, g, specs, phys, deletions, changes, joined=joined)
                for g in groups
            ]
    except NotImplementedError:
        # a store Polars cannot read natively (memory://): stream through Arrow instead
        return pl.LazyFrame(scan.to_arrow())
    lf = pl.concat(frames, how="vertical") if len(frames) > 1 else frames[0]
    if scan.filter is not None:
        from lakequery.protocol.predicates import to_polars  # scans with a filter only

        lf = lf.filter(to_polars(scan.filter))
    return lf.select([pl.col(literal_name(c)) for c in scan.columns])
