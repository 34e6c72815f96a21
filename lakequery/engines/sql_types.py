"""Arrow types and Python values spelled as DuckDB SQL.

Primitive types and quoting come from :mod:`lakequery.protocol.sql_spelling` and literals
from the predicate renderer (:mod:`lakequery.protocol.predicate_sql`, imported when a
literal is spelled), so filters and scans spell values the same way; this module adds
the nested types scans need.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from lakequery.protocol.sql_spelling import duckdb_type as _primitive_type
from lakequery.protocol.sql_spelling import quote_identifier as quote_ident
from lakequery.protocol.sql_spelling import quote_string as quote_str
from lakequery.protocol.sql_spelling import string_list

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


def glob_literal(path: str) -> str:
    """A path DuckDB's file globbing matches literally (``*``, ``?`` and ``[`` escaped as
    one-character classes); the ``filename`` column still reports the plain path."""
    return path.translate(_GLOB_ESCAPES)


def glob_list_sql(paths: Sequence[str]) -> str:
    """A DuckDB ``VARCHAR[]`` expression of the paths (:func:`string_list`), each escaped
    as by :func:`glob_literal`.

    Example:
        >>> glob_list_sql(["/t/a.parquet", "/t/it's[1].parquet"])
        "['/t/a.parquet', '/t/it''s[[]1].parquet']"
    """
    joined = "".join(paths)
    if "*" in joined or "?" in joined or "[" in joined:  # rare: escaped path by path
        return string_list([glob_literal(p) for p in paths])
    return string_list(paths)


_GLOB_ESCAPES = str.maketrans({"*": "[*]", "?": "[?]", "[": "[[]"})
