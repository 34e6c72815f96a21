"""Column mapping (digest §12) and the physical <-> logical conversion of file data.

Data files store columns under *physical* names (``delta.columnMapping.physicalName``)
with Parquet field ids (``delta.columnMapping.id``) when column mapping is on, and always
in the *file representation* of special types (``variant`` as a ``{value, metadata}`` group,
``void`` columns absent, timestamps possibly as INT96/nanoseconds, type-widened columns in
their old type). This module builds the Arrow schema of that representation
(:func:`physical_schema`) and turns data read from a file into the table's logical shape
(:func:`to_logical`), or relabels already well-shaped data (:func:`rename_to_logical`).

Example:
    >>> import pyarrow as pa
    >>> from lakequery.protocol.schema import parse_schema
    >>> schema = parse_schema('{"type":"struct","fields":[{"name":"a","type":"integer",'
    ...     '"nullable":true,"metadata":{"delta.columnMapping.id":1,'
    ...     '"delta.columnMapping.physicalName":"col-1"}}]}')
    >>> physical_schema(schema, "name").names
    ['col-1']
    >>> batch = pa.record_batch({"col-1": pa.array([1, 2], pa.int32())})
    >>> to_logical(batch, schema, "name").to_pydict()
    {'a': [1, 2]}
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, Literal, TypeVar, cast

import pyarrow as pa

from lakequery import arrow_kernels as pc
from lakequery.arrow_buffers import int64_array
from lakequery.errors import SchemaError, UnsupportedFeatureError
from lakequery.protocol.arrow_types import holds
from lakequery.protocol.schema import (
    ArrayType,
    DeltaType,
    MapType,
    PrimitiveType,
    StructField,
    StructType,
    is_arrow_list,
    is_variant,
    is_void,
    to_arrow_field,
    to_arrow_type,
)

ColumnMappingMode = Literal["none", "name", "id"]

#: Arrow field-metadata key pyarrow uses for Parquet field ids.
FIELD_ID_KEY = b"PARQUET:field_id"
ID_KEY = "delta.columnMapping.id"
PHYSICAL_NAME_KEY = "delta.columnMapping.physicalName"
NESTED_IDS_KEY = "delta.columnMapping.nested.ids"
#: The table property holding the largest column id ever assigned (it only grows).
MAX_ID_KEY = "delta.columnMapping.maxColumnId"

_MODES: tuple[ColumnMappingMode, ...] = ("none", "name", "id")


def without_column_mapping(schema: StructType) -> StructType:
    """``schema`` without column-mapping ids and physical names at any depth: the form of
    data's schema before it goes into a table (a scan of a column-mapped table carries the
    source's, and the table assigns its own above its ``maxColumnId``)."""
    keys = (ID_KEY, PHYSICAL_NAME_KEY, NESTED_IDS_KEY)

    def visit(t: DeltaType) -> DeltaType:
        if isinstance(t, StructType):
            return StructType(
                tuple(
                    StructField(
                        f.name,
                        visit(f.type),
                        f.nullable,
                        {k: v for k, v in f.metadata.items() if k not in keys},
                    )
                    for f in t.fields
                )
            )
        if isinstance(t, ArrayType):
            return ArrayType(visit(t.element), t.contains_null)
        if isinstance(t, MapType):
            return MapType(visit(t.key), visit(t.value), t.value_contains_null)
        return t

    out = visit(schema)
    assert isinstance(out, StructType)
    return out


def column_mapping_mode(
    configuration: Mapping[str, str], protocol_supports: bool
) -> ColumnMappingMode:
    """The effective column mapping mode of a table.

    Args:
        configuration: ``metaData.configuration``.
        protocol_supports: Whether the protocol supports column mapping (reader >= 2, or the
            ``columnMapping`` feature); the property is ignored otherwise.

    Raises:
        UnsupportedFeatureError: The property holds an unknown mode.
    """
    raw = configuration.get("delta.columnMapping.mode")
    if raw is None or not protocol_supports:
        return "none"
    try:
        return _checked(raw.strip().lower())
    except SchemaError:
        raise UnsupportedFeatureError("columnMapping", detail=f"unknown mode {raw!r}") from None


def _checked(mode: str) -> ColumnMappingMode:
    for known in _MODES:
        if mode == known:
            return known
    raise SchemaError(f"unknown column mapping mode {mode!r} (expected none, name or id)")


def physical_name(f: StructField, mode: str) -> str:
    """The name a field has in data files under ``mode``.

    Raises:
        SchemaError: Column mapping is on but the field has no physical name.
    """
    if mode == "none":
        return f.name
    name = f.metadata.get(PHYSICAL_NAME_KEY)
    if not isinstance(name, str) or not name:
        raise SchemaError(f"field {f.name!r} lacks {PHYSICAL_NAME_KEY} (column mapping {mode})")
    return name


def field_id(f: StructField, mode: str) -> int | None:
    """The column-mapping id of a field (None in mode none or when absent).

    Raises:
        SchemaError: Mode is id and the field has no integer id.
    """
    if mode == "none":
        return None
    value = f.metadata.get(ID_KEY)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if mode == "id":
        raise SchemaError(f"field {f.name!r} lacks {ID_KEY} (column mapping id)")
    return None


# --- physical schema ---------------------------------------------------------------------------

#: How Spark stores an unshredded variant: a group of two required binaries, value first.
VARIANT_FILE_TYPE = pa.struct(
    [
        pa.field("value", pa.binary(), nullable=False),
        pa.field("metadata", pa.binary(), nullable=False),
    ]
)


def _id_md(ident: Any) -> dict[bytes, bytes] | None:
    if isinstance(ident, int) and not isinstance(ident, bool):
        return {FIELD_ID_KEY: str(ident).encode()}
    return None


def _physical_type(
    t: DeltaType, mode: ColumnMappingMode, nested_ids: Mapping[str, Any], prefix: str
) -> pa.DataType:
    if is_variant(t):
        return VARIANT_FILE_TYPE
    if isinstance(t, PrimitiveType):
        return to_arrow_type(t)
    if isinstance(t, StructType):
        return pa.struct(_physical_fields(t, mode))
    ids = nested_ids if mode != "none" else {}
    if isinstance(t, ArrayType):
        path = f"{prefix}.element"
        return pa.list_(
            pa.field(
                "element",
                _physical_type(t.element, mode, nested_ids, path),
                nullable=t.contains_null,
                metadata=_id_md(ids.get(path)),
            )
        )
    if isinstance(t, MapType):
        kp, vp = f"{prefix}.key", f"{prefix}.value"
        key = pa.field(
            "key", _physical_type(t.key, mode, nested_ids, kp), False, _id_md(ids.get(kp))
        )
        value = pa.field(
            "value",
            _physical_type(t.value, mode, nested_ids, vp),
            t.value_contains_null,
            _id_md(ids.get(vp)),
        )
        return pa.map_(key, value)  # type: ignore[call-overload,no-any-return]
    raise SchemaError(f"not a Delta type: {t!r}")


def _physical_fields(
    st: StructType, mode: ColumnMappingMode, exclude: Collection[str] = ()
) -> list[pa.Field[Any]]:
    out = []
    for f in st.fields:
        if f.name in exclude or is_void(f.type):
            continue
        name = physical_name(f, mode)
        nested = f.metadata.get(NESTED_IDS_KEY)
        nested_ids: Mapping[str, Any] = nested if isinstance(nested, dict) else {}
        out.append(
            pa.field(
                name,
                _physical_type(f.type, mode, nested_ids, name),
                nullable=f.nullable,
                metadata=_id_md(field_id(f, mode)),
            )
        )
    return out


def physical_schema(schema: StructType, mode: str, *, exclude: Collection[str] = ()) -> pa.Schema:
    """The Arrow schema of the table's columns as stored in Parquet data files.

    Every struct field (top-level and nested, also inside arrays and maps) carries its
    physical name; with column mapping on, fields get ``b"PARQUET:field_id"`` metadata from
    ``delta.columnMapping.id`` (as Spark writes in both name and id mode), and array
    elements / map keys and values get ids from ``delta.columnMapping.nested.ids``
    (IcebergCompatV2). ``void`` fields are left out (never stored) and ``variant`` is the
    ``struct<value: binary, metadata: binary>`` group.

    Args:
        schema: The table schema.
        mode: Column mapping mode (see :func:`column_mapping_mode`).
        exclude: Top-level logical column names to leave out (e.g. partition columns).
    """
    return pa.schema(_physical_fields(schema, _checked(mode), exclude))


def physical_name_map(schema: StructType, mode: str) -> dict[tuple[str, ...], tuple[str, ...]]:
    """Logical path -> physical path for every struct field at any depth.

    Array and map steps are ``element``, ``key`` and ``value`` on both sides.
    """
    out: dict[tuple[str, ...], tuple[str, ...]] = {}
    mode = _checked(mode)

    def walk(t: DeltaType, lp: tuple[str, ...], pp: tuple[str, ...]) -> None:
        if isinstance(t, StructType):
            for f in t.fields:
                lq, pq = (*lp, f.name), (*pp, physical_name(f, mode))
                out[lq] = pq
                walk(f.type, lq, pq)
        elif isinstance(t, ArrayType):
            walk(t.element, (*lp, "element"), (*pp, "element"))
        elif isinstance(t, MapType):
            walk(t.key, (*lp, "key"), (*pp, "key"))
            walk(t.value, (*lp, "value"), (*pp, "value"))

    walk(schema, (), ())
    return out


# --- relabelling ---------------------------------------------------------------------------------

_Data = TypeVar("_Data")


def _same_layout(src: pa.DataType, dst: pa.DataType) -> bool:
    """Equal types up to field names, nullability and metadata (so ``view`` is valid)."""
    if pa.types.is_struct(src) and pa.types.is_struct(dst):
        src_names = [src.field(i).name for i in range(src.num_fields)]
        dst_names = [dst.field(i).name for i in range(dst.num_fields)]
        if src_names != dst_names and sorted(src_names) == sorted(dst_names):
            return False  # same names in another order: match them by name
        return src.num_fields == dst.num_fields and all(
            _same_layout(src.field(i).type, dst.field(i).type) for i in range(src.num_fields)
        )
    if pa.types.is_map(src) and pa.types.is_map(dst):
        return _same_layout(src.key_type, dst.key_type) and _same_layout(
            src.item_type, dst.item_type
        )
    if pa.types.is_list(src) and pa.types.is_list(dst):
        return _same_layout(src.value_type, dst.value_type)
    if pa.types.is_large_list(src) and pa.types.is_large_list(dst):
        return _same_layout(src.value_type, dst.value_type)
    nested = (pa.types.is_struct, pa.types.is_map, pa.types.is_list, pa.types.is_large_list)
    return not any(p(src) or p(dst) for p in nested) and bool(src == dst)


def _relabel_array(arr: Any, target: Any) -> Any:
    if arr.type.equals(target, check_metadata=True):
        return arr
    if _same_layout(arr.type, target):
        return arr.view(target)
    if pa.types.is_struct(arr.type) and pa.types.is_struct(target):
        src_names = [arr.type.field(i).name for i in range(arr.type.num_fields)]
        dst_fields = [target.field(i) for i in range(target.num_fields)]
        if sorted(src_names) != sorted(f.name for f in dst_fields):
            if len(src_names) != len(dst_fields):
                raise SchemaError(f"cannot relabel {arr.type} as {target}")
            order = list(range(len(dst_fields)))
        else:
            order = [src_names.index(f.name) for f in dst_fields]
        children = [
            _relabel_array(arr.field(i), f.type) for i, f in zip(order, dst_fields, strict=True)
        ]
        return _struct(children, dst_fields, arr)
    if pa.types.is_list(arr.type) and pa.types.is_list(target):
        values = _relabel_array(arr.values, target.value_type)
        return pa.ListArray.from_arrays(arr.offsets, values, type=target, mask=_mask(arr))
    if pa.types.is_map(arr.type) and pa.types.is_map(target):
        keys = _relabel_array(arr.keys, target.key_type)
        items = _relabel_array(arr.items, target.item_type)
        return _map_array(arr, keys, items, target)
    raise SchemaError(f"cannot relabel {arr.type} as {target}")


def rename_to_logical(data: _Data, logical: pa.DataType | pa.Schema) -> _Data:
    """Relabel physically named data with logical field names, without copying buffers.

    Struct children are matched by position (as laid out by :func:`physical_schema`), or by
    name when both sides hold the same names in another order (the variant group). Buffers
    are shared (``Array.view``) whenever the layouts agree.

    Args:
        data: An Array, ChunkedArray, RecordBatch or Table.
        logical: The target type (for arrays) or schema (for batches and tables).

    Raises:
        SchemaError: The shapes do not match.
    """
    obj: Any = data
    target: Any = logical
    if isinstance(obj, pa.RecordBatch | pa.Table):
        if not isinstance(target, pa.Schema) or len(target) != obj.num_columns:
            raise SchemaError("rename_to_logical needs a schema with one field per column")
        cols: list[Any] = [
            rename_to_logical(c, f.type) for c, f in zip(obj.columns, target, strict=True)
        ]
        if isinstance(obj, pa.RecordBatch):
            return cast(_Data, pa.RecordBatch.from_arrays(cols, schema=target))
        return cast(_Data, pa.Table.from_arrays(cols, schema=target))
    if isinstance(obj, pa.ChunkedArray):
        chunks = [_relabel_array(c, target) for c in obj.chunks]
        return cast(_Data, pa.chunked_array(chunks, type=target))
    if isinstance(obj, pa.Array):
        return cast(_Data, _relabel_array(obj, target))
    raise SchemaError(f"cannot relabel {type(data).__name__}")


# --- conforming file data to the logical schema ---------------------------------------------


def _arrow(t: DeltaType) -> Any:
    return to_arrow_type(t)


def _map_array(parent: Any, keys: Any, items: Any, target: Any) -> Any:
    return pa.MapArray.from_arrays(  # type: ignore[call-overload]
        parent.offsets, keys, items, type=target, mask=_mask(parent)
    )


def _mask(arr: Any) -> Any:
    return pc.is_null(arr) if arr.null_count else None


def _struct(children: Sequence[Any], fields: Sequence[Any], parent: Any) -> Any:
    if not fields:
        return pa.Array.from_buffers(pa.struct([]), len(parent), [None], children=[])
    return pa.StructArray.from_arrays(list(children), fields=list(fields), mask=_mask(parent))


def _source_field_id(f: Any) -> int | None:
    md = f.metadata or {}
    raw = md.get(FIELD_ID_KEY)
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


class _Lookup:
    """Finds the source (file) field of a Delta field at one struct level."""

    def __init__(self, src: Sequence[Any], mode: ColumnMappingMode) -> None:
        self.mode = mode
        self.by_name: dict[str, int] = {}
        self.by_lower: dict[str, list[int]] = {}
        self.by_id: dict[int, int] = {}
        for i, s in enumerate(src):
            self.by_name.setdefault(s.name, i)
            self.by_lower.setdefault(s.name.lower(), []).append(i)
            ident = _source_field_id(s)
            if ident is not None:
                self.by_id.setdefault(ident, i)

    def find(self, f: StructField) -> int | None:
        if self.mode == "id" and self.by_id:
            ident = field_id(f, self.mode)
            return self.by_id.get(ident) if ident is not None else None
        name = physical_name(f, self.mode)
        if name in self.by_name:
            return self.by_name[name]
        low = self.by_lower.get(name.lower(), [])
        return low[0] if self.mode == "none" and len(low) == 1 else None


def _cast_leaf(arr: Any, target: Any, where: str, exact: bool = False) -> Any:
    if arr.type == target:
        return arr
    src = arr.type
    if pa.types.is_dictionary(src):
        # decoded by taking from its values: pyarrow has no cast (nor take) of
        # dictionaries of view types, which Polars' Categorical and Enum export
        values = arr.dictionary
        if pa.types.is_string_view(values.type):
            values = pc.cast(values, pa.string())
        elif pa.types.is_binary_view(values.type):
            values = pc.cast(values, pa.binary())
        arr = pc.take(values, arr.indices)
        src = arr.type
    elif pa.types.is_run_end_encoded(src):
        arr = pc.cast(arr, src.value_type)
        src = arr.type
    safe = True
    if pa.types.is_timestamp(src) and pa.types.is_timestamp(target) and not exact:
        # INT96 / nanosecond files: truncate to the microseconds Delta stores.
        safe = False
    try:
        return pc.cast(arr, target, safe=safe)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise SchemaError(f"column {where!r}: cannot read {src} as {target}: {exc}") from exc


def _conform(
    arr: Any, t: DeltaType, mode: ColumnMappingMode, where: str, exact: bool = False
) -> Any:
    """``arr`` (as read from a file) converted to ``to_arrow_type(t)``; with ``exact``
    (data being written) no timestamp is truncated."""
    target = _arrow(t)
    src = arr.type
    if is_void(t):
        return pa.nulls(len(arr), pa.null())
    if is_variant(t):
        if not pa.types.is_struct(src):
            raise SchemaError(f"column {where!r}: variant stored as {src}")
        names = [src.field(i).name for i in range(src.num_fields)]
        if "typed_value" in names:
            raise UnsupportedFeatureError("variantShredding", detail=f"column {where!r}")
        if "value" not in names or "metadata" not in names:
            raise SchemaError(f"column {where!r}: variant group lacks value/metadata: {src}")
        children = [
            _cast_leaf(arr.field(names.index(n)), pa.binary(), where, exact)
            for n in ("metadata", "value")
        ]
        return _struct(children, [target.field(i) for i in range(2)], arr)
    if isinstance(t, PrimitiveType):
        return _cast_leaf(arr, target, where, exact)
    if isinstance(t, StructType):
        if not pa.types.is_struct(src):
            raise SchemaError(f"column {where!r}: expected a struct, file has {src}")
        lookup = _Lookup([src.field(i) for i in range(src.num_fields)], mode)
        children = []
        for f in t.fields:
            idx = lookup.find(f)
            sub = f"{where}.{f.name}"
            if idx is None:
                children.append(pa.nulls(len(arr), _arrow(f.type)))
            else:
                children.append(_conform(arr.field(idx), f.type, mode, sub, exact))
        return _struct(children, [to_arrow_field(f) for f in t.fields], arr)
    if isinstance(t, ArrayType):
        if not is_arrow_list(src):
            raise SchemaError(f"column {where!r}: expected a list, file has {src}")
        if not pa.types.is_list(src):
            arr = _as_list(arr)
        values = _conform(arr.values, t.element, mode, f"{where}.element", exact)
        return pa.ListArray.from_arrays(arr.offsets, values, type=target, mask=_mask(arr))
    if isinstance(t, MapType):
        if not pa.types.is_map(src):
            raise SchemaError(f"column {where!r}: expected a map, file has {src}")
        keys = _conform(arr.keys, t.key, mode, f"{where}.key", exact)
        items = _conform(arr.items, t.value, mode, f"{where}.value", exact)
        return _map_array(arr, keys, items, target)
    raise SchemaError(f"not a Delta type: {t!r}")


def _is_list_view(t: pa.DataType) -> bool:
    return bool(pa.types.is_list_view(t) or pa.types.is_large_list_view(t))


def has_list_view(t: pa.DataType) -> bool:
    """Whether ``t`` holds a list view at any depth."""
    return holds(t, _is_list_view)


def _as_list(arr: Any) -> Any:
    """A list array of any flavour as a ``list`` array. List views are rebuilt from their
    values in order and their sizes: pyarrow 26 casts them to an invalid list array (the
    Parquet writer then crashed the process)."""
    if not _is_list_view(arr.type):
        return pc.cast(arr, pa.list_(arr.type.value_field))
    import numpy as np

    sizes = arr.sizes.to_numpy(zero_copy_only=False).astype(np.int64)
    mask = pc.is_null(arr) if arr.null_count else None
    if mask is not None:  # a null entry's size is arbitrary; flatten() skips it
        sizes[mask.to_numpy(zero_copy_only=False)] = 0
    offsets = np.zeros(len(arr) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    large: Any = pa.LargeListArray.from_arrays(  # type: ignore[call-overload]
        int64_array(offsets), arr.flatten(), mask=mask
    )
    return pc.cast(large, pa.list_(arr.type.value_field))


def _conform_column(
    col: Any, t: DeltaType, mode: ColumnMappingMode, where: str, exact: bool = False
) -> Any:
    if isinstance(col, pa.ChunkedArray):
        target = _arrow(t)
        chunks = [_conform(c, t, mode, where, exact) for c in col.chunks]
        return pa.chunked_array(chunks, type=target)
    return _conform(col, t, mode, where, exact)


def to_logical(
    data: _Data,
    schema: StructType,
    mode: str = "none",
    *,
    columns: Sequence[str] | None = None,
    exact: bool = False,
) -> _Data:
    """Convert a RecordBatch or Table read from a data file into the logical shape.

    Columns and nested struct fields are found by logical name (mode none, falling back to
    a unique case-insensitive match), physical name (mode name) or Parquet field id (mode
    id; by physical name when the data carries no field ids at all, as with engines that
    drop them). Missing columns and fields, and ``void`` columns, become nulls; names become
    logical; variant groups become ``struct<metadata, value>``; values are cast to the
    table's types, which covers type widening (int8 -> int64, float -> double, decimal
    precision/scale increase, date -> timestamp_ntz, int -> decimal/double), dictionary
    decoding, large/view types and nanosecond or zone-less timestamps (truncated to
    microseconds). Columns not in the schema are dropped.

    Args:
        data: A RecordBatch or Table with physical column names.
        schema: The table schema.
        mode: Column mapping mode.
        columns: Top-level logical columns to produce, in this order (default: all).
        exact: Data being written rather than read: a timestamp that would lose
            precision or overflow is a ``SchemaError``, never truncated.

    Returns:
        Data of the same kind whose schema is the logical Arrow schema of those columns.

    Raises:
        SchemaError: A column cannot be converted (wrong shape or lossy cast).
        UnsupportedFeatureError: A shredded variant column.
    """
    obj: Any = data
    mode = _checked(mode)
    if not isinstance(obj, pa.RecordBatch | pa.Table):
        raise SchemaError(f"to_logical needs a RecordBatch or Table, got {type(data).__name__}")
    wanted = [schema[c] for c in columns] if columns is not None else list(schema.fields)
    lookup = _Lookup(list(obj.schema), mode)
    n = obj.num_rows
    out_cols: list[Any] = []
    for f in wanted:
        idx = lookup.find(f)
        if idx is None:
            nulls = pa.nulls(n, _arrow(f.type))
            out_cols.append(nulls if isinstance(obj, pa.RecordBatch) else pa.chunked_array([nulls]))
        else:
            out_cols.append(_conform_column(obj.column(idx), f.type, mode, f.name, exact))
    out_schema = pa.schema([to_arrow_field(f) for f in wanted])
    if isinstance(obj, pa.RecordBatch):
        return cast(_Data, pa.RecordBatch.from_arrays(out_cols, schema=out_schema))
    return cast(_Data, pa.Table.from_arrays(out_cols, schema=out_schema))


__all__ = [
    "FIELD_ID_KEY",
    "ID_KEY",
    "MAX_ID_KEY",
    "NESTED_IDS_KEY",
    "PHYSICAL_NAME_KEY",
    "VARIANT_FILE_TYPE",
    "ColumnMappingMode",
    "column_mapping_mode",
    "field_id",
    "physical_name",
    "physical_name_map",
    "physical_schema",
    "rename_to_logical",
    "to_logical",
    "without_column_mapping",
]
