"""Arrow types and Python values spelled as DuckDB SQL.

Primitive types and quoting come from :mod:`lakequery.protocol.sql_spelling` and literals
from the predicate renderer (:mod:`lakequery.protocol.predicate_sql`, imported when a
literal is spelled), so filters and scans spell values the same way; this module adds
the nested types scans need.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from lakequery.protocol.sql_spelling import duckdb_type as _primitive_type
from lakequery.protocol.sql_spelling import glob_list_sql as glob_list_sql
from lakequery.protocol.sql_spelling import glob_literal as glob_literal
from lakequery.protocol.sql_spelling import quote_identifier as quote_ident
from lakequery.protocol.sql_spelling import quote_string as quote_str

__all__ = [
    "duckdb_type",
    "glob_list_sql",
    "glob_literal",
    "literal",
    "quote_ident",
    "quote_str",
]


def duckdb_type(t: pa.DataType) -> str:
    """The DuckDB type name for an Arrow type, nested types included."""
    if pa.types.is_null(t):
        return '"NULL"'
    if pa.types.is_struct(t):
        inner = ", ".join(f"{quote_ident(f.name)} {duckdb_type(f.type)}" for f in t)
        return f"STRUCT({inner})"
    if pa.types.is_map(t):
        return f"MAP({duckdb_type(t.key_type)}, {duckdb_type(t.item_type)})"
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return f"{duckdb_type(t.value_type)}[]"
    return _primitive_type(t)


def literal(value: Any, t: pa.DataType) -> str:
    """A typed DuckDB literal for a Python value of Arrow type ``t`` (NULL when None)."""
    from lakequery.protocol.predicate_ast import Literal
    from lakequery.protocol.predicate_sql import sql_literal

    return sql_literal(Literal(value, t))
