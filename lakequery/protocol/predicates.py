"""lakequery's predicate language: parse, bind and render filter expressions.

One predicate, written as SQL text (``"a > 3 AND day = '2026-11-01' OR s IS NULL"``) or
given as a PyArrow expression, drives file skipping and the row filters of every engine.
The pieces live in small modules and are re-exported here:

* :mod:`~lakequery.protocol.predicate_ast` - the immutable tree (:class:`Column`,
  :class:`Literal`, :class:`Compare`, :class:`Arith`, :class:`And`, :class:`Or`,
  :class:`Not`, :class:`IsNull`, :class:`In`, :class:`Between`, :class:`Like`) and its
  SQL three-valued semantics;
* :mod:`~lakequery.protocol.predicate_parser` - :func:`parse_predicate`,
  :func:`format_predicate`;
* :mod:`~lakequery.protocol.predicate_from_pyarrow` - :func:`from_pyarrow_expression`;
* :mod:`~lakequery.protocol.predicate_binding` - :func:`bind`;
* :mod:`~lakequery.protocol.predicate_types` - type categories and literal coercion;
* renderers :func:`to_duckdb_sql`, :func:`to_pyarrow`, :func:`to_polars`, which select the
  same rows for a bound predicate.

Example:
    >>> import pyarrow as pa
    >>> from lakequery.protocol.predicates import bind, parse_predicate, to_duckdb_sql
    >>> schema = pa.schema([("a", pa.int32()), ("day", pa.date32())])
    >>> to_duckdb_sql(bind(parse_predicate("A > 3 AND day = '2026-11-01'"), schema))
    '(("a" > CAST(3 AS INTEGER)) AND ("day" = DATE \\'2026-11-01\\'))'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakequery.protocol.predicate_ast import (
    And,
    Arith,
    Between,
    Column,
    Compare,
    Expr,
    In,
    IsNull,
    Like,
    Literal,
    Not,
    Or,
    referenced_columns,
    walk,
)
from lakequery.protocol.predicate_binding import bind, resolve_column
from lakequery.protocol.predicate_from_pyarrow import from_pyarrow_expression
from lakequery.protocol.predicate_parser import format_predicate, parse_predicate
from lakequery.protocol.predicate_sql import to_duckdb_sql

if TYPE_CHECKING:
    import polars as pl
    import pyarrow.compute as pc


def to_pyarrow(expr: Expr) -> pc.Expression:
    """Renders a bound predicate as a ``pyarrow.compute.Expression`` (imported on first use)."""
    from lakequery.protocol.predicate_pyarrow import to_pyarrow as render

    return render(expr)


def to_polars(expr: Expr) -> pl.Expr:
    """Renders a bound predicate as a Polars expression (Polars is imported on first use)."""
    from lakequery.protocol.predicate_polars import to_polars as render

    return render(expr)


__all__ = [
    "And",
    "Arith",
    "Between",
    "Column",
    "Compare",
    "Expr",
    "In",
    "IsNull",
    "Like",
    "Literal",
    "Not",
    "Or",
    "bind",
    "format_predicate",
    "from_pyarrow_expression",
    "parse_predicate",
    "referenced_columns",
    "resolve_column",
    "to_duckdb_sql",
    "to_polars",
    "to_pyarrow",
    "walk",
]
