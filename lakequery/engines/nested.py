"""Physical -> logical relabelling of nested columns (DuckDB SQL; Polars in its engine).

Under column mapping, struct fields at every depth carry physical names in the files.
The walk over the Delta type is shared; each engine supplies how to address a field,
an element and a map entry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import duckdb

from lakequery.engines.sql_types import duckdb_type, quote_ident
from lakequery.protocol.column_mapping import ColumnMappingMode, physical_name
from lakequery.protocol.schema import (
    ArrayType,
    DeltaType,
    MapType,
    StructType,
    is_void,
    to_arrow_type,
)

if TYPE_CHECKING:
    from duckdb import DuckDBPyType


def has_struct(t: DeltaType) -> bool:
    """True when relabelling can matter: the type holds a struct somewhere."""
    if isinstance(t, StructType):
        return True
    if isinstance(t, ArrayType):
        return has_struct(t.element)
    if isinstance(t, MapType):
        return has_struct(t.key) or has_struct(t.value)
    return False


def duckdb_relabel(
    ref: str,
    t: DeltaType,
    mode: ColumnMappingMode,
    stored: str | None = None,
    depth: int = 0,
) -> str:
    """SQL rebuilding ``ref`` (physical layout) with logical names and the table's types.

    ``stored`` is the DuckDB type the file stores ``ref`` as: a struct field it lacks (one
    added to the table by a schema merge after the file was written) reads as NULL, where
    addressing it would be a binder error."""
    have = duckdb.type(stored) if stored is not None else None
    return _relabel(ref, t, mode, have, depth)


def _relabel(
    ref: str, t: DeltaType, mode: ColumnMappingMode, have: DuckDBPyType | None, depth: int
) -> str:
    children = dict(have.children) if have is not None and have.id in ("struct", "map") else {}
    if isinstance(t, StructType):
        members = []
        for f in t.fields:
            physical = physical_name(f, mode)
            if have is not None and physical not in children:
                value = f"CAST(NULL AS {duckdb_type(to_arrow_type(f.type))})"
            else:
                field_ref = f"{ref}.{quote_ident(physical)}"
                value = _relabel(field_ref, f.type, mode, children.get(physical), depth)
            members.append(f"{quote_ident(f.name)} := {value}")
        return f"CASE WHEN {ref} IS NULL THEN NULL ELSE struct_pack({', '.join(members)}) END"
    if isinstance(t, ArrayType) and has_struct(t.element):
        var = f"_e{depth}"
        element = have.children[0][1] if have is not None and have.id == "list" else None
        inner = _relabel(var, t.element, mode, element, depth + 1)
        return f"list_transform({ref}, lambda {var}: {inner})"
    if isinstance(t, MapType) and has_struct(t):
        var = f"_m{depth}"
        key = _relabel(f"{var}.key", t.key, mode, children.get("key"), depth + 1)
        value = _relabel(f"{var}.value", t.value, mode, children.get("value"), depth + 1)
        return (
            f"map_from_entries(list_transform(map_entries({ref}), "
            f"lambda {var}: {{'key': {key}, 'value': {value}}}))"
        )
    return f"CAST({ref} AS {duckdb_type(to_arrow_type(t))})"


class PolarsRelabelError(NotImplementedError):
    """A nested layout Polars expressions cannot relabel lazily."""


def polars_can_relabel(t: DeltaType) -> bool:
    """False for maps that hold structs (Polars has no lazy per-entry rewrite for maps),
    and for structs with a void field (files leave it out: a positional rename of the
    stored fields does not fit)."""
    if isinstance(t, StructType):
        if any(is_void(f.type) for f in t.fields):
            return False
        return all(polars_can_relabel(f.type) for f in t.fields)
    if isinstance(t, ArrayType):
        return polars_can_relabel(t.element)
    if isinstance(t, MapType):
        return not has_struct(t)
    return True
