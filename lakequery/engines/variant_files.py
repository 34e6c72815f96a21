"""How the data files of a scan store its variant columns (digest §8 and §14, variantType).

An unshredded variant is a Parquet group of two binaries, ``metadata`` and ``value``, in one of
two spellings: Spark's plain group, or the same group annotated with Parquet's VARIANT logical
type (DuckDB writes that). The engines see the annotation differently:

* pyarrow ignores it and reads the group as a struct of the stored bytes (what every engine
  must return: the logical type is ``struct<metadata: binary, value: binary>``);
* DuckDB decodes the group into its own VARIANT type, and encoding that again
  (``variant_to_parquet_variant``) does not give back the stored bytes (it sorts metadata
  dictionaries, for one), so the DuckDB engine reads such scans through the Arrow engine;
* Polars cannot parse a footer that holds the annotation, whatever the scan selects, so
  the Polars engine reads such tables through the Arrow engine.

A shredded variant (a ``typed_value`` beside ``metadata`` and ``value``; DuckDB's default
Parquet output) needs the variantShredding feature, which lakequery does not read: it is
refused, never read without its shredded part.

One DuckDB look at the footers of all planned files (``parquet_schema``) tells both; the
answer is cached per file list (data files never change). Only the few files with an element
named ``typed_value`` have their schema walked, along the table's variant columns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import duckdb
import pyarrow as pa

from lakequery.duckdb_databases import private_cursor
from lakequery.engines.sql_types import glob_list_sql
from lakequery.errors import ObjectNotFoundError, UnsupportedFeatureError
from lakequery.protocol.column_mapping import ColumnMappingMode, physical_name
from lakequery.protocol.schema import (
    ArrayType,
    DeltaType,
    MapType,
    StructType,
    has_variant,
    is_arrow_list,
    is_variant,
)

if TYPE_CHECKING:
    from lakequery.scan import Scan


@dataclass(frozen=True)
class VariantFiles:
    """What the footers of a scan's files say about variants."""

    annotated: bool  # some file marks a group with Parquet's VARIANT logical type
    typed_value: tuple[str, ...]  # files holding an element named typed_value


_SEEN: dict[tuple[str, ...], VariantFiles] = {}
_SEEN_MAX = 256


def variant_files(
    scan: Scan, columns: Sequence[str], con: duckdb.DuckDBPyConnection | None = None
) -> VariantFiles | None:
    """The variant layout of the scan's files (None when the table has no variant column).

    Args:
        scan: The scan; its planned files are inspected.
        columns: Logical top-level columns the caller reads: a file that shreds a variant
            inside one of them is refused.
        con: A connection to read the footers on (DuckDB's metadata cache then serves the
            scan); a private cursor when None.

    Raises:
        UnsupportedFeatureError: A file shreds a variant of ``columns`` (variantShredding).
    """
    snap = scan.snapshot
    schema = snap.metadata.schema
    if not has_variant(schema):
        return None
    locations = scan.plan().location_list
    key = tuple(locations)
    found = _SEEN.get(key)
    if found is None:
        found = _inspect(scan, locations, con)
        if len(_SEEN) >= _SEEN_MAX:
            _SEEN.pop(next(iter(_SEEN)))
        _SEEN[key] = found
    wanted = [schema[c] for c in columns if has_variant(schema[c].type)]
    for location in found.typed_value if wanted else ():
        file_schema = _arrow_schema(scan, location)
        for f in wanted:
            i = file_schema.get_field_index(physical_name(f, snap.column_mapping_mode))
            if i < 0:
                continue
            where = _shredded(f.type, file_schema.field(i).type, snap.column_mapping_mode, f.name)
            if where is not None:
                raise UnsupportedFeatureError(
                    "variantShredding",
                    detail=f"data file {location} shreds the variant {where!r} (typed_value)",
                )
    return found


def _inspect(
    scan: Scan, locations: list[str], con: duckdb.DuckDBPyConnection | None
) -> VariantFiles:
    if not locations:
        return VariantFiles(False, ())
    storage = scan.snapshot.storage
    cur = con if con is not None else private_cursor(fixed_joins=False)  # no join
    storage.register_duckdb(cur)
    by_path = {storage.duckdb_path(p): p for p in locations}
    files = glob_list_sql(list(by_path))
    try:
        rows = cur.sql(
            "SELECT file_name, bool_or(duckdb_type = 'VARIANT'), bool_or(name = 'typed_value') "
            f"FROM parquet_schema({files}) GROUP BY file_name"
        ).fetchall()
    except duckdb.IOException as exc:
        missing = next((p for p in locations if p in str(exc)), locations[0])
        raise ObjectNotFoundError(missing, "read data file footer") from exc
    finally:
        if con is None:
            cur.close()
    annotated = any(r[1] for r in rows)
    typed = tuple(sorted(by_path.get(r[0], r[0]) for r in rows if r[2]))
    return VariantFiles(annotated, typed)


def _arrow_schema(scan: Scan, location: str) -> pa.Schema:
    import pyarrow.parquet as pq  # only tables with variant columns get here

    fs, to_fs = scan.snapshot.storage.arrow_filesystem()
    with fs.open_input_file(to_fs(location)) as f:
        return pq.ParquetFile(f).schema_arrow


def _shredded(t: DeltaType, a: Any, mode: ColumnMappingMode, where: str) -> str | None:
    """Where, inside the Delta type ``t`` stored as Arrow type ``a``, a variant group holds
    ``typed_value`` (None: nowhere)."""
    if is_variant(t):
        return where if pa.types.is_struct(a) and a.get_field_index("typed_value") >= 0 else None
    inner: list[tuple[DeltaType, Any, str]] = []
    if isinstance(t, StructType) and pa.types.is_struct(a):
        for f in t.fields:
            i = a.get_field_index(physical_name(f, mode))
            if i >= 0:
                inner.append((f.type, a.field(i).type, f"{where}.{f.name}"))
    elif isinstance(t, ArrayType) and is_arrow_list(a):
        inner.append((t.element, a.value_type, f"{where}.element"))
    elif isinstance(t, MapType) and pa.types.is_map(a):
        inner.append((t.key, a.key_type, f"{where}.key"))
        inner.append((t.value, a.item_type, f"{where}.value"))
    for sub_t, sub_a, sub_where in inner:
        found = _shredded(sub_t, sub_a, mode, sub_where)
        if found is not None:
            return found
    return None
