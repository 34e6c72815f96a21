"""lakequery predicates as Spark SQL text.

A bound predicate (:func:`lakequery.protocol.predicates.bind`) is rendered with the same
structure as the DuckDB rendering (:func:`~lakequery.protocol.predicate_sql.to_duckdb_sql`)
and Spark's own forms for names and literals: back-quoted identifiers, backslash-escaped
string literals, ``X'..'`` binaries, ``TIMESTAMP_NTZ '..'`` and typed casts. Spark, like
DuckDB, orders NaN above every number and treats NaN = NaN as true, so a row passes in
Spark exactly when it passes in lakequery's other engines.

Example:
    >>> from lakequery.protocol.predicates import parse_predicate
    >>> to_spark_sql(parse_predicate("a > 3 AND s.x LIKE 'it''s%'"))
    "((`a` > 3) AND (`s`.`x` LIKE 'it\\\\'s%'))"
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pyarrow.types as pat

from lakequery.errors import PredicateError
from lakequery.protocol.arrow_types import category, decimal_params
from lakequery.protocol.predicate_ast import Expr, Literal
from lakequery.protocol.predicate_sql import to_duckdb_sql

_INT_NAMES = {8: "TINYINT", 16: "SMALLINT", 32: "INT", 64: "BIGINT"}


def spark_type_name(t: pa.DataType) -> str:
    """The Spark SQL name of a primitive Arrow type (as Delta tables use them)."""
    cat = category(t)
    if cat == "int":
        if not pat.is_signed_integer(t):
            raise PredicateError(str(t), "Spark has no unsigned integer types")
        return _INT_NAMES[t.bit_width]
    if cat == "float":
        return "DOUBLE" if pat.is_float64(t) else "FLOAT"
    if cat == "decimal":
        precision, scale = decimal_params(t)
        return f"DECIMAL({precision},{scale})"
    named = {
        "bool": "BOOLEAN",
        "string": "STRING",
        "binary": "BINARY",
        "date": "DATE",
        "timestamp_tz": "TIMESTAMP",
        "timestamp": "TIMESTAMP_NTZ",
    }
    if cat in named:
        return named[cat]
    raise PredicateError(str(t), f"type {t} is not supported in Spark predicates")


def quote_identifier(name: str) -> str:
    """A back-quoted Spark identifier (embedded back quotes doubled)."""
    return "`" + name.replace("`", "``") + "`"


def quote_string(value: str) -> str:
    """A Spark string literal (Spark un-escapes backslashes in literals by default)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def like_pattern(pattern: str) -> str:
    """A LIKE pattern without escapes as a Spark literal: Spark's escape character ``\\``
    is itself escaped, so it matches only a backslash."""
    return quote_string(pattern.replace("\\", "\\\\"))


def _column(path: tuple[str, ...]) -> str:
    return ".".join(quote_identifier(p) for p in path)


def _timestamp(value: dt.datetime) -> str:
    if value.tzinfo is not None:
        utc = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return f"TIMESTAMP '{utc.isoformat(sep=' ', timespec='microseconds')}Z'"
    return f"TIMESTAMP_NTZ '{value.isoformat(sep=' ', timespec='microseconds')}'"


def spark_literal(lit: Literal) -> str:
    """A typed Spark SQL literal."""
    v, t = lit.value, lit.type
    if v is None:
        return "NULL" if t is None or pat.is_null(t) else f"CAST(NULL AS {spark_type_name(t)})"
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, int):
        return str(v) if t is None else f"CAST({v} AS {spark_type_name(t)})"
    if isinstance(v, float):
        type_name = "DOUBLE" if t is None else spark_type_name(t)
        return f"CAST('{v!r}' AS {type_name})"
    if isinstance(v, Decimal):
        text = format(v, "f")
        return f"CAST('{text}' AS {spark_type_name(t)})" if t is not None else f"{text}BD"
    if isinstance(v, str):
        return quote_string(v)
    if isinstance(v, bytes):
        return f"X'{v.hex()}'"
    if isinstance(v, dt.datetime):
        if t is not None and pat.is_timestamp(t) and t.tz is None and v.tzinfo is not None:
            v = v.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return _timestamp(v)
    if isinstance(v, dt.date):
        return f"DATE '{v.isoformat()}'"
    raise PredicateError(lit, f"literal of Python type {type(v).__name__} has no Spark form")


def ieee_divide(left: str, right: str) -> str:
    """``left / right`` (DOUBLE SQL texts) as IEEE division in Spark SQL, whose own ``/``
    gives NULL for a zero divisor (an error under ANSI mode): a zero divisor gives NaN for
    a zero or NaN dividend, else an infinity signed by both signs (``-0.0`` is negative:
    its text starts with ``-``). Each operand is written once (bound as a lambda's
    argument), so nested divisions grow the text linearly."""
    d, n = "__lq_d.d", "__lq_d.n"
    sign = f"(({n} > 0) = (CAST({d} AS STRING) NOT LIKE '-%'))"
    body = (
        f"CASE WHEN {d} = 0 THEN (CASE WHEN {n} IS NULL THEN CAST(NULL AS DOUBLE) "
        f"WHEN isnan({n}) OR {n} = 0 THEN CAST('NaN' AS DOUBLE) "
        f"WHEN {sign} THEN CAST('Infinity' AS DOUBLE) ELSE CAST('-Infinity' AS DOUBLE) END) "
        f"ELSE {n} / nullif({d}, 0) END"
    )
    pair = f"array(named_struct('n', {left}, 'd', {right}))"
    return f"element_at(transform({pair}, __lq_d -> {body}), 1)"


def to_spark_sql(expr: Expr) -> str:
    """A Spark SQL boolean expression equivalent to ``expr`` (logical column names)."""
    return to_duckdb_sql(
        expr,
        _column,
        literal_sql=spark_literal,
        like_pattern_sql=like_pattern,
        exact_integer_type="DECIMAL(38,0)",  # Spark has no HUGEINT; 38 digits hold a long * long
        divide_sql=ieee_divide,
    )


__all__ = ["like_pattern", "quote_identifier", "quote_string", "spark_literal", "to_spark_sql"]
