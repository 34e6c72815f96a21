"""Arrow types and Python values spelled as DuckDB SQL."""

from __future__ import annotations

import datetime as dt
import decimal
import math
from typing import Any

import pyarrow as pa


def quote_ident(name: str) -> str:
    """A DuckDB identifier, always quoted."""
    return '"' + name.replace('"', '""') + '"'


def quote_str(text: str) -> str:
    """A DuckDB string literal."""
    return "'" + text.replace("'", "''") + "'"


def duckdb_type(t: pa.DataType) -> str:
    """The DuckDB type name for an Arrow type."""
    if pa.types.is_int8(t):
        return "TINYINT"
    if pa.types.is_int16(t):
        return "SMALLINT"
    if pa.types.is_int32(t):
        return "INTEGER"
    if pa.types.is_int64(t):
        return "BIGINT"
    if pa.types.is_float32(t):
        return "FLOAT"
    if pa.types.is_float64(t):
        return "DOUBLE"
    if pa.types.is_boolean(t):
        return "BOOLEAN"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "VARCHAR"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return "BLOB"
    if pa.types.is_date(t):
        return "DATE"
    if pa.types.is_timestamp(t):
        return "TIMESTAMPTZ" if t.tz is not None else "TIMESTAMP"
    if pa.types.is_decimal(t):
        return f"DECIMAL({t.precision}, {t.scale})"
    if pa.types.is_null(t):
        return '"NULL"'
    if pa.types.is_struct(t):
        inner = ", ".join(f"{quote_ident(f.name)} {duckdb_type(f.type)}" for f in t)
        return f"STRUCT({inner})"
    if pa.types.is_map(t):
        return f"MAP({duckdb_type(t.key_type)}, {duckdb_type(t.item_type)})"
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return f"{duckdb_type(t.value_type)}[]"
    raise TypeError(f"no DuckDB type for Arrow type {t}")


def literal(value: Any, t: pa.DataType) -> str:
    """A typed DuckDB literal for a Python value of Arrow type ``t`` (NULL when None)."""
    typ = duckdb_type(t)
    if value is None:
        return f"CAST(NULL AS {typ})"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, bytes):
        return f"from_hex({quote_str(value.hex())})"
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return f"CAST({quote_str(str(value))} AS {typ})"
        return f"CAST({value!r} AS {typ})"
    if isinstance(value, int | decimal.Decimal):
        return f"CAST({quote_str(str(value))} AS {typ})"
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            text = value.astimezone(dt.timezone.utc).replace(tzinfo=None).isoformat()
            return f"CAST({quote_str(text + '+00:00')} AS {typ})"
        return f"CAST({quote_str(value.isoformat())} AS {typ})"
    if isinstance(value, dt.date):
        return f"CAST({quote_str(value.isoformat())} AS {typ})"
    return f"CAST({quote_str(str(value))} AS {typ})"
