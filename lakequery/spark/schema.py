"""Delta schemas as Spark types: the logical schema users see and the physical schema
Spark's Parquet reader is asked for.

A Delta schema string is Spark's own ``StructType`` JSON, so every Delta type maps to the
Spark type of the same name (``timestamp_ntz``, ``variant``, ``void`` = ``NullType``,
``geometry(...)``/``geography(...)``). Two things differ between the two schemas:

- *names*: with column mapping, data files store every struct field (at any depth) under
  its physical name; the logical schema uses the logical names;
- *stored fields*: ``void`` fields are never stored (they are always NULL), partition
  columns are not stored in the data files (their values are in the log).

Geometry and geography columns are read as their stored WKB ``binary`` (Spark's Parquet
reader does not read them as its geospatial types), which is also what lakequery's other
engines return.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from lakequery.protocol.column_mapping import NESTED_IDS_KEY, field_id, physical_name
from lakequery.protocol.schema import (
    ArrayType,
    DeltaType,
    MapType,
    StructField,
    StructType,
    is_geo,
    is_void,
    type_to_json,
)

if TYPE_CHECKING:
    from pyspark.sql import types as T

#: Spark's metadata key that makes its Parquet reader match a field by id
#: (with ``spark.sql.parquet.fieldId.read.enabled``).
SPARK_FIELD_ID_KEY = "parquet.field.id"


def _json_type(t: DeltaType, *, physical: bool, mode: str) -> Any:
    """Spark's JSON form of ``t``; ``physical`` renames struct fields as stored."""
    if is_geo(t):
        return "binary"
    if isinstance(t, StructType):
        return {
            "type": "struct",
            "fields": [
                _json_field(f, physical=physical, mode=mode)
                for f in t.fields
                if not (physical and is_void(f.type))
            ],
        }
    if isinstance(t, ArrayType):
        return {
            "type": "array",
            "elementType": _json_type(t.element, physical=physical, mode=mode),
            "containsNull": t.contains_null,
        }
    if isinstance(t, MapType):
        return {
            "type": "map",
            "keyType": _json_type(t.key, physical=physical, mode=mode),
            "valueType": _json_type(t.value, physical=physical, mode=mode),
            "valueContainsNull": t.value_contains_null,
        }
    return type_to_json(t)


def _json_field(f: StructField, *, physical: bool, mode: str) -> dict[str, Any]:
    metadata: dict[str, Any] = {}
    name = f.name
    if physical:
        name = physical_name(f, mode)
        ident = field_id(f, mode)
        if ident is not None:
            metadata[SPARK_FIELD_ID_KEY] = ident
    return {
        "name": name,
        "type": _json_type(f.type, physical=physical, mode=mode),
        "nullable": True,  # Spark's Arrow checks are strict; nullability is not enforced on read
        "metadata": metadata,
    }


def spark_type(t: DeltaType) -> T.DataType:
    """The Spark type of a Delta type (logical names)."""
    from pyspark.sql.types import _parse_datatype_json_value

    return _parse_datatype_json_value(_json_type(t, physical=False, mode="none"))


def logical_schema(schema: StructType, columns: Collection[str] | None = None) -> T.StructType:
    """The Spark schema of a table's rows (logical names, every field nullable).

    Args:
        schema: The Delta table schema.
        columns: Top-level columns to keep, in this order (default: all).
    """
    from pyspark.sql.types import StructType as SparkStruct

    by_name = {f.name: f for f in schema.fields}
    names = list(by_name) if columns is None else list(columns)
    fields = [_json_field(by_name[n], physical=False, mode="none") for n in names]
    return SparkStruct.fromJson({"type": "struct", "fields": fields})


def physical_schema(
    schema: StructType, mode: str, columns: Collection[str], *, exclude: Collection[str] = ()
) -> T.StructType:
    """The Spark schema to ask Spark's Parquet reader for: the stored (physical) names of
    the top-level ``columns`` (logical names), without ``void`` and ``exclude`` columns.

    Fields carry ``parquet.field.id`` metadata when the table maps columns, so sessions
    with ``spark.sql.parquet.fieldId.read.enabled`` match them by id.
    """
    from pyspark.sql.types import StructType as SparkStruct

    wanted = set(columns)
    fields = [
        _json_field(f, physical=True, mode=mode)
        for f in schema.fields
        if f.name in wanted and f.name not in exclude and not is_void(f.type)
    ]
    return SparkStruct.fromJson({"type": "struct", "fields": fields})


def has_nested_ids(schema: StructType) -> bool:
    """True when some field carries IcebergCompat nested ids (array/map element ids)."""
    return any(NESTED_IDS_KEY in f.metadata for f in schema.fields)


def schema_json(schema: StructType) -> str:
    """The logical Spark schema as JSON text (for ``StructType.fromJson`` on workers)."""
    return json.dumps(_json_type(schema, physical=False, mode="none"))


__all__ = [
    "SPARK_FIELD_ID_KEY",
    "has_nested_ids",
    "is_void",
    "logical_schema",
    "physical_schema",
    "schema_json",
    "spark_type",
]
