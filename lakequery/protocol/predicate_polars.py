"""Render predicates as Polars expressions."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from functools import lru_cache, reduce

import polars as pl
import pyarrow as pa

from lakequery.protocol.polars_names import literal_name
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
    like_shape,
)
from lakequery.protocol.predicate_types import (
    exact_scale,
    in_list_type,
    infer_literal_type,
    infer_type,
    integer_arith,
    is_float_expr,
)


@lru_cache(maxsize=256)
def polars_dtype(t: pa.DataType) -> pl.DataType:
    """The Polars dtype Polars itself gives an Arrow column of type ``t``."""
    return pl.from_arrow(pa.nulls(0, t)).dtype  # type: ignore[union-attr,call-overload]


def _literal(lit: Literal) -> pl.Expr:
    t = lit.type if lit.type is not None else infer_literal_type(lit.value)
    value = lit.value
    if isinstance(value, Decimal) and pa.types.is_floating(t):
        value = float(value)
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        value = value.astimezone(dt.timezone.utc)
    return pl.lit(value, dtype=polars_dtype(t))


def _column(path: tuple[str, ...]) -> pl.Expr:
    expr = pl.col(literal_name(path[0]))
    for name in path[1:]:
        expr = expr.struct.field(name)  # (pattern-like field names: the Arrow engine's)
    return expr


def _like(x: pl.Expr, pattern: str) -> pl.Expr:
    kind, text = like_shape(pattern)
    if kind == "equals":
        return x == pl.lit(text, dtype=pl.String)
    if kind == "any":
        return pl.when(x.is_null()).then(None).otherwise(True)
    if kind == "contains":
        return x.str.contains(text, literal=True)
    if kind == "prefix":
        return x.str.starts_with(text)
    if kind == "suffix":
        return x.str.ends_with(text)
    return x.str.contains(text)


class _Renderer:
    def render(self, e: Expr) -> pl.Expr:
        if isinstance(e, Column):
            return _column(e.path)
        if isinstance(e, Literal):
            return _literal(e)
        if isinstance(e, Compare):
            return self.compare(e.op, e.left, e.right)
        if isinstance(e, Arith):
            x, y = self.render(e.left), self.render(e.right)
            if e.op == "/":
                return x.cast(pl.Float64) / y.cast(pl.Float64)
            if integer_arith(e):  # exact, as in DuckDB: Int64 would wrap, and Polars then
                # skips row groups by the wrapped bounds of their statistics
                x, y = x.cast(pl.Int128), y.cast(pl.Int128)
            t, scales = infer_type(e), (exact_scale(e.left), exact_scale(e.right))
            if e.op == "*" and t is not None and pa.types.is_decimal(t) and None not in scales:
                # Polars rounds a product to the larger scale (1.25 * 3.0001 = 3.7501);
                # the left operand at the sum of both keeps it exact, as DuckDB does
                x = x.cast(pl.Decimal(38, sum(s for s in scales if s is not None)))
            if e.op == "+":
                return x + y
            if e.op == "-":
                return x - y
            return x * y
        if isinstance(e, And):
            return reduce(lambda a, b: a & b, [self.render(i) for i in e.items])
        if isinstance(e, Or):
            return reduce(lambda a, b: a | b, [self.render(i) for i in e.items])
        if isinstance(e, Not):
            return ~self.render(e.item)
        if isinstance(e, IsNull):
            x = self.render(e.operand)
            return x.is_not_null() if e.negated else x.is_null()
        if isinstance(e, In):
            result = self.is_in(e)
        elif isinstance(e, Between):
            if e.negated:
                return self.compare("<", e.operand, e.low) | self.compare(">", e.operand, e.high)
            return self.compare(">=", e.operand, e.low) & self.compare("<=", e.operand, e.high)
        else:
            result = _like(self.render(e.operand), e.pattern)
        return ~result if e.negated else result

    def compare(self, op: str, left: Expr, right: Expr) -> pl.Expr:
        x, y = self.render(left), self.render(right)
        if op == "=":
            return x == y
        if op == "!=":
            return x != y
        if op == "<":
            return x < y
        if op == "<=":
            return x <= y
        if op == ">":
            return x > y
        return x >= y

    def is_in(self, e: In) -> pl.Expr:
        if not e.values:
            return pl.lit(False)
        operand_type = in_list_type(e)
        if operand_type is None or is_float_expr(e.operand):
            return reduce(lambda a, b: a | b, [self.compare("=", e.operand, v) for v in e.values])
        present = [v.value for v in e.values if isinstance(v, Literal) and v.value is not None]
        x = self.render(e.operand)
        values = pl.Series(values=pa.array(present, type=operand_type))
        found = pl.when(x.is_null()).then(None).otherwise(x.is_in(values.implode()))
        if len(present) < len(e.values):  # a NULL in the list: no match is NULL
            return pl.when(found).then(True).otherwise(None)
        return found


def to_polars(expr: Expr) -> pl.Expr:
    """Render a predicate as a Polars expression.

    The expression has the same SQL semantics as :func:`to_duckdb_sql`. ``LIKE``
    becomes ``str.starts_with`` / ``ends_with`` / ``contains`` when the pattern allows,
    else an anchored regular expression.

    Args:
        expr: The (preferably bound) predicate.

    Returns:
        A boolean Polars expression.

    Example:
        >>> import polars as pl
        >>> from lakequery.protocol.predicates import parse_predicate, to_polars
        >>> pl.DataFrame({"s": ["ab", "b", None]}).filter(to_polars(parse_predicate("s LIKE 'a%'")))
        shape: (1, 1)
        ┌─────┐
        │ s   │
        │ --- │
        │ str │
        ╞═════╡
        │ ab  │
        └─────┘
    """
    return _Renderer().render(expr)
