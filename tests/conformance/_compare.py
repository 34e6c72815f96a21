"""Compare an Arrow table produced by a reader with a conformance ``expected`` file.

The rules follow ``shared/conformance/README.md`` ("Expected file format"):

* columns: the top-level logical columns, in Delta schema order, with logical names;
* types: one fixed Arrow type per Delta type; representation-only differences are
  normalised away (see :func:`normalise_array`), anything else is a mismatch;
* nullability flags are ignored, values are compared;
* rows: ascending by all columns in schema order, nulls first, temporal values as
  integers, nested values element-wise, NaN after all numbers.

Both sides are sorted with the same canonical key, so the comparison is a multiset
comparison that does not depend on the order of rows in either table (nor on the
order of entries inside a map).

Public entry points: :func:`assert_tables_match`, :func:`normalise_to_schema`,
:func:`canonical_sort`, :func:`row_keys`.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

__all__ = [
    "SchemaMismatch",
    "TableMismatch",
    "assert_tables_match",
    "canonical_sort",
    "normalise_array",
    "normalise_to_schema",
    "row_keys",
]

# How many rows a mismatch report shows per section.
MAX_REPORTED_ROWS = 8
# Longest rendering of a single value in a report.
MAX_VALUE_CHARS = 120


class SchemaMismatch(AssertionError):
    """The actual table cannot be represented in the expected schema without changing values."""


class TableMismatch(AssertionError):
    """The tables have the same schema but different rows."""


# ---------------------------------------------------------------------------------------------
# Type normalisation
# ---------------------------------------------------------------------------------------------


class _CannotNormalise(Exception):
    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")


_STRINGS = (pa.types.is_string, pa.types.is_large_string, pa.types.is_string_view)
_BINARIES = (
    pa.types.is_binary,
    pa.types.is_large_binary,
    pa.types.is_binary_view,
    pa.types.is_fixed_size_binary,
)
_LISTS = (
    pa.types.is_list,
    pa.types.is_large_list,
    pa.types.is_fixed_size_list,
    pa.types.is_list_view,
    pa.types.is_large_list_view,
)


def _is_any(t: pa.DataType, preds: Sequence[Callable[[pa.DataType], bool]]) -> bool:
    return any(p(t) for p in preds)


def _as_array(arr: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(arr, pa.ChunkedArray):
        if arr.num_chunks == 0:
            return pa.array([], type=arr.type)
        if arr.num_chunks == 1:
            return arr.chunk(0)
        # Dictionary chunks may carry different dictionaries: decode before concatenating.
        chunks = [
            c.dictionary_decode() if pa.types.is_dictionary(c.type) else c for c in arr.chunks
        ]
        return pa.concat_arrays(chunks)
    return arr


def _list_parts(arr: pa.Array) -> tuple[pa.Array, pa.Array, pa.Array]:
    """(int32 offsets starting at 0, flattened child values, null mask) of a list-like array.

    Values behind null slots are dropped, so offsets and values describe valid lists only.
    """
    values = arr.flatten()
    return _offsets(arr.value_lengths().fill_null(0).to_pylist()), values, arr.is_null()


def _map_parts(arr: pa.Array) -> tuple[pa.Array, pa.Array, pa.Array, pa.Array]:
    """(offsets, keys, items, null mask) of a map array, or of a list<struct<key, value>>."""
    if not pa.types.is_map(arr.type):
        offsets, entries, mask = _list_parts(arr)
        keys, items = entries.flatten()
        return offsets, keys, items, mask
    # Maps have no flatten kernel, and casting them re-validates nullability of the item
    # type; take the live entry ranges of the (unsliced) children directly instead.
    bounds = arr.offsets.to_pylist()
    valid = arr.is_valid().to_pylist()
    take: list[int] = []
    lengths = []
    for i, ok in enumerate(valid):
        n = bounds[i + 1] - bounds[i] if ok else 0
        take.extend(range(bounds[i], bounds[i] + n))
        lengths.append(n)
    indices = pa.array(take, pa.int64())
    return _offsets(lengths), arr.keys.take(indices), arr.items.take(indices), arr.is_null()


def _offsets(lengths: list[int]) -> pa.Array:
    offsets = [0]
    for n in lengths:
        offsets.append(offsets[-1] + n)
    return pa.array(offsets, pa.int32())


def _unit_cast(arr: pa.Array, target: pa.DataType, path: str) -> pa.Array:
    try:
        return arr.cast(target, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise _CannotNormalise(
            path, f"cannot convert {arr.type} to {target} without changing values ({exc})"
        ) from None


def normalise_array(arr: pa.Array | pa.ChunkedArray, target: pa.DataType, path: str) -> pa.Array:
    """Return ``arr`` as an array of exactly ``target``, or raise if that would change values.

    Accepted representation differences (recursively, at any nesting depth):

    * string / large_string / string_view -> string; binary / large_binary / binary_view /
      fixed_size_binary -> binary;
    * list / large_list / list_view / large_list_view / fixed_size_list -> list (any child
      field name); list<struct<k, v>> -> map<k, v> (polars has no map type); map field names;
    * dictionary-encoded and extension arrays (decoded / storage);
    * timestamp: a different unit if lossless, and a different time-zone label if both sides
      carry a zone (the stored instant is the same); zone-aware vs zone-less is a mismatch;
    * date64 -> date32, time / duration units, if lossless;
    * decimal of the same scale but another precision or width, if every value fits;
    * any all-null column -> null (the ``void`` type).

    Everything else (int32 vs int64, float vs double, string vs binary, decimal scale, field
    names of a struct, ...) is a logical type difference and raises :class:`SchemaMismatch`.
    """
    try:
        return _normalise(_as_array(arr), target, path)
    except _CannotNormalise as exc:
        raise SchemaMismatch(str(exc)) from None


def _normalise(arr: pa.Array, target: pa.DataType, path: str) -> pa.Array:
    src = arr.type
    if isinstance(src, pa.ExtensionType):
        return _normalise(arr.storage, target, path)
    if pa.types.is_dictionary(src):
        return _normalise(arr.dictionary_decode(), target, path)
    if pa.types.is_null(target):
        if arr.null_count != len(arr):
            raise _CannotNormalise(path, f"expected an all-null (void) column, got {src} values")
        return pa.nulls(len(arr), pa.null())
    if pa.types.is_null(src):
        # A null-typed column is valid for any target type only if it is all null, which
        # it always is; represent it in the expected type.
        return pa.nulls(len(arr), target)

    if pa.types.is_string(target):
        if _is_any(src, _STRINGS):
            return arr.cast(pa.string())
    elif pa.types.is_large_string(target) or pa.types.is_string_view(target):
        if _is_any(src, _STRINGS):
            return arr.cast(target)
    elif _is_any(target, _BINARIES):
        if _is_any(src, _BINARIES):
            return _unit_cast(arr, target, path)
    elif pa.types.is_timestamp(target):
        if pa.types.is_timestamp(src):
            if (src.tz is None) != (target.tz is None):
                have = "zone-less" if src.tz is None else f"zone-aware (tz={src.tz})"
                want = "zone-less" if target.tz is None else f"zone-aware (tz={target.tz})"
                raise _CannotNormalise(
                    path, f"expected a {want} timestamp ({target}), got a {have} one ({src})"
                )
            if src.tz != target.tz:
                # Same instants, different label: reinterpret the stored UTC values.
                arr = arr.cast(pa.int64()).cast(pa.timestamp(src.unit, target.tz))
            return _unit_cast(arr, target, path)
    elif pa.types.is_date(target) or pa.types.is_time(target) or pa.types.is_duration(target):
        same_kind = (
            (pa.types.is_date(src) and pa.types.is_date(target))
            or (pa.types.is_time(src) and pa.types.is_time(target))
            or (pa.types.is_duration(src) and pa.types.is_duration(target))
        )
        if same_kind:
            return _unit_cast(arr, target, path)
    elif pa.types.is_decimal(target):
        if pa.types.is_decimal(src):
            if src.scale != target.scale:
                raise _CannotNormalise(
                    path, f"expected {target}, got {src} (a different decimal scale)"
                )
            return _unit_cast(arr, target, path)
    elif pa.types.is_map(target):
        if pa.types.is_map(src) or (
            _is_any(src, _LISTS)
            and pa.types.is_struct(src.value_type)
            and src.value_type.num_fields == 2
        ):
            offsets, key_arr, item_arr, mask = _map_parts(arr)
            keys = _normalise(key_arr, target.key_type, f"{path}.<key>")
            items = _normalise(item_arr, target.item_type, f"{path}.<value>")
            if keys.null_count:
                raise _CannotNormalise(path, "map has null keys")
            return pa.MapArray.from_arrays(offsets, keys, items, type=target, mask=mask)
    elif _is_any(target, _LISTS):
        if _is_any(src, _LISTS):
            offsets, values, mask = _list_parts(arr)
            child = _normalise(values, target.value_type, f"{path}[]")
            result = pa.ListArray.from_arrays(
                offsets, child, type=pa.list_(target.value_field), mask=mask
            )
            return result if pa.types.is_list(target) else _unit_cast(result, target, path)
    elif pa.types.is_struct(target):
        if pa.types.is_struct(src):
            want = [target.field(i).name for i in range(target.num_fields)]
            have = [src.field(i).name for i in range(src.num_fields)]
            if want != have:
                raise _CannotNormalise(path, f"struct fields differ: expected {want}, got {have}")
            children = [
                _normalise(child, target.field(i).type, f"{path}.{want[i]}")
                for i, child in enumerate(arr.flatten())
            ]
            return pa.StructArray.from_arrays(children, fields=list(target), mask=arr.is_null())
    elif src.equals(target):
        # Primitive types (bool, ints, floats, ...) must match exactly.
        return arr

    raise _CannotNormalise(
        path, f"expected {target}, got {src} (not a representation of the same values)"
    )


def normalise_to_schema(actual: pa.Table, schema: pa.Schema) -> pa.Table:
    """Return ``actual`` with exactly ``schema`` (names, order and types), or raise.

    Raises :class:`SchemaMismatch` listing every column that differs.
    """
    want = list(schema.names)
    have = list(actual.column_names)
    if want != have:
        missing = [n for n in want if n not in have]
        extra = [n for n in have if n not in want]
        detail = [f"expected columns {want}", f"     got columns {have}"]
        if missing:
            detail.append(f"missing: {missing}")
        if extra:
            detail.append(f"unexpected: {extra}")
        if not missing and not extra:
            detail.append("same columns, different order (must be Delta schema order)")
        raise SchemaMismatch("column names differ:\n  " + "\n  ".join(detail))
    columns = []
    problems = []
    for field in schema:
        try:
            columns.append(_normalise(_as_array(actual.column(field.name)), field.type, field.name))
        except _CannotNormalise as exc:
            problems.append(str(exc))
    if problems:
        raise SchemaMismatch("column types differ:\n  " + "\n  ".join(problems))
    # Nullability is deliberately not compared: rebuild the schema as all-nullable.
    relaxed = pa.schema([pa.field(f.name, f.type, nullable=True) for f in schema])
    return pa.Table.from_arrays(columns, schema=relaxed)


# ---------------------------------------------------------------------------------------------
# Canonical row keys
# ---------------------------------------------------------------------------------------------

_NULL: tuple[Any, ...] = (0,)


def _value_keys(arr: pa.Array) -> list[tuple[Any, ...]]:
    """One sort/equality key per element: nulls first, NaN after numbers, nested element-wise."""
    t = arr.type
    n = len(arr)
    if isinstance(t, pa.ExtensionType):
        return _value_keys(arr.storage)
    if pa.types.is_dictionary(t):
        return _value_keys(arr.dictionary_decode())
    if pa.types.is_null(t):
        return [_NULL] * n
    valid = arr.is_valid().to_pylist()
    if pa.types.is_floating(t):
        vals = arr.to_pylist()
        return [
            _NULL if not ok else ((1, (1,)) if math.isnan(v) else (1, (0, v)))
            for ok, v in zip(valid, vals, strict=True)
        ]
    if pa.types.is_temporal(t) and not pa.types.is_interval(t):
        width = pa.int32() if (pa.types.is_date32(t) or pa.types.is_time32(t)) else pa.int64()
        ints = pc.cast(arr, width).to_pylist()
        return [(1, v) if ok else _NULL for ok, v in zip(valid, ints, strict=True)]
    if pa.types.is_struct(t):
        children = [_value_keys(c) for c in arr.flatten()]
        rows = zip(*children, strict=True) if children else ([()] * n)
        return [(1, tuple(r)) if ok else _NULL for ok, r in zip(valid, rows, strict=True)]
    if pa.types.is_map(t):
        offsets, key_arr, item_arr, _ = _map_parts(arr)
        pairs = list(zip(_value_keys(key_arr), _value_keys(item_arr), strict=True))
        offs = offsets.to_pylist()
        return [
            (1, tuple(sorted(pairs[offs[i] : offs[i + 1]]))) if valid[i] else _NULL
            for i in range(n)
        ]
    if _is_any(t, _LISTS):
        offsets, values, _ = _list_parts(arr)
        child = _value_keys(values)
        offs = offsets.to_pylist()
        return [(1, tuple(child[offs[i] : offs[i + 1]])) if valid[i] else _NULL for i in range(n)]
    vals = arr.to_pylist()
    return [(1, v) if ok else _NULL for ok, v in zip(valid, vals, strict=True)]


def row_keys(table: pa.Table) -> list[tuple[Any, ...]]:
    """Canonical, hashable, totally ordered key of every row (columns in schema order)."""
    columns = [_value_keys(_as_array(c)) for c in table.columns]
    if not columns:
        return [()] * table.num_rows
    return [tuple(r) for r in zip(*columns, strict=True)]


def canonical_sort(table: pa.Table) -> pa.Table:
    """Rows sorted as the conformance README prescribes (see module docstring)."""
    keys = row_keys(table)
    order = sorted(range(len(keys)), key=keys.__getitem__)
    return table.take(pa.array(order, pa.int64()))


# ---------------------------------------------------------------------------------------------
# Reporting
# ---------------------------------------------------------------------------------------------


def _render_value(col: pa.Array, i: int) -> str:
    scalar = col[i]
    try:
        value = scalar.as_py()
        text = value.isoformat() if isinstance(value, (dt.date, dt.time)) else repr(value)
    except Exception:  # e.g. timestamps outside datetime's range
        try:
            text = f"{scalar.type}({pc.cast(col.slice(i, 1), pa.int64())[0].as_py()})"
        except Exception:
            text = repr(scalar)
    if len(text) > MAX_VALUE_CHARS:
        text = text[: MAX_VALUE_CHARS - 3] + "..."
    return text


def _render_row(table: pa.Table, i: int) -> str:
    cols = [_as_array(c) for c in table.columns]
    parts = [f"{n}={_render_value(c, i)}" for n, c in zip(table.column_names, cols, strict=True)]
    return "{" + ", ".join(parts) + "}"


def _report(
    expected: pa.Table,
    actual: pa.Table,
    exp_keys: list[tuple[Any, ...]],
    act_keys: list[tuple[Any, ...]],
) -> str:
    lines = [f"rows: expected {expected.num_rows}, actual {actual.num_rows}"]
    exp_order = sorted(range(len(exp_keys)), key=exp_keys.__getitem__)
    act_order = sorted(range(len(act_keys)), key=act_keys.__getitem__)

    exp_count = Counter(exp_keys)
    act_count = Counter(act_keys)
    missing = exp_count - act_count
    extra = act_count - exp_count

    def section(title: str, table: pa.Table, keys: list[Any], order: list[int], left: Counter):
        total = sum(left.values())
        lines.append(f"{title}: {total}")
        left = Counter(left)
        shown = 0
        for i in order:
            if shown >= MAX_REPORTED_ROWS:
                lines.append(f"    ... {total - shown} more")
                break
            if left[keys[i]] > 0:
                left[keys[i]] -= 1
                lines.append(f"    {_render_row(table, i)}")
                shown += 1

    section("rows missing from actual (expected only)", expected, exp_keys, exp_order, missing)
    section("unexpected rows in actual (actual only)", actual, act_keys, act_order, extra)

    for pos, (ei, ai) in enumerate(zip(exp_order, act_order, strict=False)):
        if exp_keys[ei] != act_keys[ai]:
            differing = [
                name
                for name, ek, ak in zip(
                    expected.column_names, exp_keys[ei], act_keys[ai], strict=True
                )
                if ek != ak
            ]
            lines.append(f"first difference in canonical row order at sorted row {pos}:")
            lines.append(f"    expected: {_render_row(expected, ei)}")
            lines.append(f"    actual:   {_render_row(actual, ai)}")
            lines.append(f"    differing columns: {differing}")
            for name in differing:
                col_e = _as_array(expected.column(name))
                col_a = _as_array(actual.column(name))
                lines.append(
                    f"      {name}: expected {_render_value(col_e, ei)}, "
                    f"actual {_render_value(col_a, ai)}"
                )
            break
    return "\n  ".join(lines)


def assert_tables_match(actual: pa.Table, expected: pa.Table, *, context: str = "") -> None:
    """Assert ``actual`` holds exactly the rows of ``expected`` (a conformance expected file).

    ``actual`` is first normalised to ``expected.schema`` (:func:`normalise_to_schema`); the
    rows are then compared as multisets via their canonical keys, row count included.
    Raises :class:`SchemaMismatch` or :class:`TableMismatch` with a readable report.
    """
    prefix = f"{context}: " if context else ""
    try:
        normalised = normalise_to_schema(actual, expected.schema)
    except SchemaMismatch as exc:
        raise SchemaMismatch(f"{prefix}{exc}") from None
    # Normalise the expected side too (it only relaxes nullability and combines chunks).
    expected = normalise_to_schema(expected, expected.schema)
    exp_keys = row_keys(expected)
    act_keys = row_keys(normalised)
    if sorted(exp_keys) == sorted(act_keys):
        return
    raise TableMismatch(
        f"{prefix}table content differs from the expected file\n  "
        + _report(expected, normalised, exp_keys, act_keys)
    )
