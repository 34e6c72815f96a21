"""Render predicates as DuckDB SQL."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from decimal import Decimal

import pyarrow.types as pat

from lakequery.errors import PredicateError
from lakequery.protocol.arrow_types import timestamp_type
from lakequery.protocol.predicate_ast import (
    And,
    Arith,
    Between,
    Column,
    Compare,
    Expr,
    In,
    IsNull,
    Literal,
    Not,
    Or,
)
from lakequery.protocol.predicate_types import in_list_type, infer_type, integer_arith
from lakequery.protocol.sql_spelling import duckdb_type, quote_identifier, quote_string

_SQL_OPS = {"=": "=", "!=": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


def _timestamp_text(value: dt.datetime) -> str:
    if value.tzinfo is not None:
        value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return value.isoformat(sep=" ", timespec="microseconds") + "+00"
    return value.isoformat(sep=" ", timespec="microseconds")


def sql_literal(lit: Literal) -> str:
    """Render a literal as a typed DuckDB SQL literal.

    Args:
        lit: The literal (typed or not).

    Returns:
        SQL text, e.g. ``CAST(3 AS INTEGER)``, ``DATE '2026-11-01'``, ``'it''s'``.

    Raises:
        PredicateError: The value has no SQL form.
    """
    v, t = lit.value, lit.type
    if v is None:
        return "NULL" if t is None or pat.is_null(t) else f"CAST(NULL AS {duckdb_type(t)})"
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, int):
        return str(v) if t is None else f"CAST({v} AS {duckdb_type(t)})"
    if isinstance(v, float):
        text = repr(v)
        type_name = "DOUBLE" if t is None else duckdb_type(t)
        return f"CAST('{text}' AS {type_name})"
    if isinstance(v, Decimal):
        text = format(v, "f")
        return text if t is None else f"CAST('{text}' AS {duckdb_type(t)})"
    if isinstance(v, str):
        return quote_string(v)
    if isinstance(v, bytes):
        return f"unhex('{v.hex()}')"
    if isinstance(v, dt.datetime):
        if t is None:
            t = timestamp_type("us", "UTC" if v.tzinfo is not None else None)
        return f"CAST('{_timestamp_text(v)}' AS {duckdb_type(t)})"
    if isinstance(v, dt.date):
        return f"DATE '{v.isoformat()}'"
    raise PredicateError(lit, f"literal of Python type {type(v).__name__} has no SQL form")


def default_column_sql(path: tuple[str, ...]) -> str:
    """``"a"."b"`` for the path ``("a", "b")``."""
    return ".".join(quote_identifier(p) for p in path)


def to_duckdb_sql(
    expr: Expr,
    column_sql: Callable[[tuple[str, ...]], str] | None = None,
    *,
    literal_sql: Callable[[Literal], str] = sql_literal,
    like_pattern_sql: Callable[[str], str] = quote_string,
    exact_integer_type: str = "HUGEINT",
    divide_sql: Callable[[str, str], str] | None = None,
) -> str:
    """Render a predicate as a DuckDB SQL boolean expression.

    The other SQL dialects lakequery renders (Spark SQL, :mod:`lakequery.spark.predicate`)
    share this structure and pass their own column, literal and LIKE-pattern forms.

    Args:
        expr: The (preferably bound) predicate.
        column_sql: Maps a column path to SQL; default quotes each name (``"a"."b"``).
        literal_sql: Renders a literal (default: typed DuckDB literals).
        like_pattern_sql: Renders a LIKE pattern (``%``/``_`` wildcards, no escape) as a
            string literal of the dialect.
        exact_integer_type: The dialect's type that holds integer ``+ - *`` of two
            longs exactly.
        divide_sql: Renders ``/`` of two DOUBLE operands (SQL texts) as IEEE division
            (``x / 0`` is an infinity or NaN, as in DuckDB, Polars and Arrow), for a
            dialect whose ``/`` differs; None: the operator itself.

    Returns:
        SQL text with every compound parenthesised and literals typed.

    Raises:
        PredicateError: A literal has no SQL form.

    Example:
        >>> from lakequery.protocol.predicates import parse_predicate, to_duckdb_sql
        >>> to_duckdb_sql(parse_predicate("a > 3 AND s.x LIKE 'ab%'"))
        '(("a" > 3) AND ("s"."x" LIKE \\'ab%\\'))'
    """
    col = column_sql or default_column_sql

    def r(e: Expr) -> str:
        if isinstance(e, Column):
            return col(e.path)
        if isinstance(e, Literal):
            return literal_sql(e)
        if isinstance(e, Compare):
            return f"({r(e.left)} {_SQL_OPS[e.op]} {r(e.right)})"
        if isinstance(e, Arith):
            if e.op == "/":
                left, right = f"CAST({r(e.left)} AS DOUBLE)", f"CAST({r(e.right)} AS DOUBLE)"
                return divide_sql(left, right) if divide_sql else f"({left} / {right})"
            if integer_arith(e):  # exact, as in Polars (BIGINT * BIGINT overflows)
                wide = exact_integer_type
                return f"(CAST({r(e.left)} AS {wide}) {e.op} CAST({r(e.right)} AS {wide}))"
            t = infer_type(e)
            if t is not None and pat.is_float64(t):  # DuckDB's FLOAT + INTEGER would be FLOAT
                return f"(CAST({r(e.left)} AS DOUBLE) {e.op} CAST({r(e.right)} AS DOUBLE))"
            return f"({r(e.left)} {e.op} {r(e.right)})"
        if isinstance(e, And | Or):
            word = " AND " if isinstance(e, And) else " OR "
            return "(" + word.join(r(i) for i in e.items) + ")"
        if isinstance(e, Not):
            return f"(NOT {r(e.item)})"
        neg = " NOT" if e.negated else ""
        if isinstance(e, IsNull):
            return f"({r(e.operand)} IS{neg} NULL)"
        if isinstance(e, In):
            if not e.values:
                return "TRUE" if e.negated else "FALSE"
            if in_list_type(e) is None:  # each value compared in its own type
                ors = " OR ".join(f"({r(e.operand)} = {r(v)})" for v in e.values)
                return f"(NOT ({ors}))" if e.negated else f"({ors})"
            values = [v for v in e.values if not (isinstance(v, Literal) and v.value is None)]
            if len(values) == len(e.values):
                return f"({r(e.operand)}{neg} IN ({', '.join(r(v) for v in values)}))"
            # A NULL in the list makes every non-match NULL: spelled without it (DuckDB
            # 2.0 fails internally on a NULL in an IN list pushed into a Parquet scan of
            # a struct field, and invalidates its database).
            if not values:
                return "CAST(NULL AS BOOLEAN)"
            match = f"({r(e.operand)} IN ({', '.join(r(v) for v in values)}))"
            return f"(CASE WHEN {match} THEN {'FALSE' if e.negated else 'TRUE'} END)"
        if isinstance(e, Between):
            x = r(e.operand)
            if e.negated:
                return f"(({x} < {r(e.low)}) OR ({x} > {r(e.high)}))"
            return f"(({x} >= {r(e.low)}) AND ({x} <= {r(e.high)}))"
        return f"({r(e.operand)}{neg} LIKE {like_pattern_sql(e.pattern)})"

    return r(expr)
