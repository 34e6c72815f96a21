"""Nested field names of written data, spelled as the table spells them.

Delta column names are case-insensitive, nested fields included: the writer's schema check
accepts ``s.X`` for the table's ``s.x``. The projection of nested data onto the table's
types then matched struct fields by exact name and filled the ones it did not find with
nulls, so such values were written as nulls. Decision: before the cast, each struct field
(inside structs, lists and map values too) whose name matches exactly one of the table's
fields only when case is ignored takes the table's spelling, by a zero-copy
``Array.view`` (field names are no part of Arrow's memory layout). A field that matches
none, or matches ambiguously (``X`` and ``x`` both given), keeps its name and meets the
usual checks.

Example:
    >>> import pyarrow as pa
    >>> from lakequery.protocol.schema import PrimitiveType, StructField, StructType
    >>> table_type = StructType((StructField("x", PrimitiveType("integer")),))
    >>> col = pa.array([{"X": 3}], pa.struct([("X", pa.int32())]))
    >>> respelled(col, table_type).to_pylist()
    [{'x': 3}]
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pyarrow as pa

from lakequery.protocol.arrow_types import with_children
from lakequery.protocol.schema import ArrayType, DeltaType, MapType, StructType


def respelled_type(t: pa.DataType, d: DeltaType) -> pa.DataType:
    """``t`` with the struct field names of the Delta type ``d`` where they differ from
    its own in case alone (see the module docstring)."""
    if pa.types.is_struct(t) and isinstance(d, StructType):
        exact = {f.name: f for f in d.fields}
        table_lower = Counter(f.name.lower() for f in d.fields)
        by_lower = {f.name.lower(): f for f in d.fields}
        given_lower = Counter(t.field(i).name.lower() for i in range(t.num_fields))

        def field(f: pa.Field[Any]) -> pa.Field[Any]:
            low = f.name.lower()
            match = exact.get(f.name)
            if match is None and given_lower[low] == 1 and table_lower[low] == 1:
                match = by_lower[low]
            if match is None:
                return f
            return f.with_name(match.name).with_type(respelled_type(f.type, match.type))

        return with_children(t, field)
    if isinstance(d, ArrayType) and (
        pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)
    ):
        return with_children(t, lambda f: f.with_type(respelled_type(f.type, d.element)))
    if pa.types.is_map(t) and isinstance(d, MapType):
        key_name, key, value = t.key_field.name, d.key, d.value
        return with_children(
            t,
            lambda f: f.with_type(respelled_type(f.type, key if f.name == key_name else value)),
        )
    return t


def respelled_fields(schema: pa.Schema, table: StructType) -> list[pa.Field[Any]]:
    """The fields of ``schema`` with nested names respelled as in the table column of the
    same name (top-level names are matched, not changed: the writer aligns them)."""
    by_lower = {f.name.lower(): f for f in table.fields}
    out = []
    for f in schema:
        match = by_lower.get(f.name.lower())
        out.append(f if match is None else f.with_type(respelled_type(f.type, match.type)))
    return out


def respelled(col: Any, d: DeltaType) -> Any:
    """``col`` (an Array or ChunkedArray) viewed with :func:`respelled_type`; itself when
    nothing changes."""
    spelled = respelled_type(col.type, d)
    if spelled == col.type:
        return col
    if isinstance(col, pa.ChunkedArray):
        chunks: list[Any] = [c.view(spelled) for c in col.chunks]
        return pa.chunked_array(chunks, spelled)  # type: ignore[call-overload]
    return col.view(spelled)


__all__ = ["respelled", "respelled_fields", "respelled_type"]
