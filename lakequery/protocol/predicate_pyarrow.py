"""Render predicates as PyArrow compute expressions.

PyArrow compares floats by IEEE rules (``NaN = NaN`` is false, NaN is unordered) while
DuckDB, Polars and Spark order NaN above every number and equal to itself. The renderer
adds explicit NaN handling to comparisons whose operands may be floating point, so all
three engines select the same rows.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from functools import reduce
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

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
    decimal_shape,
    exact_scale,
    in_list_type,
    infer_literal_type,
    infer_type,
    integer_arith,
    is_float_expr,
)


def scalar_expression(value: pa.Scalar[Any]) -> pc.Expression:
    """A PyArrow expression of a typed scalar."""
    make: Any = pc.scalar
    result: pc.Expression = make(value)
    return result


def _fold(
    op: Callable[[pc.Expression, pc.Expression], pc.Expression], items: list[pc.Expression]
) -> pc.Expression:
    result: pc.Expression = reduce(op, items)
    return result


_TRUE = pc.scalar(True)
_FALSE = pc.scalar(False)
_NULL_BOOL = scalar_expression(pa.scalar(None, type=pa.bool_()))
_ARITH: dict[str, Callable[[pc.Expression, pc.Expression], pc.Expression]] = {
    "+": pc.add_checked,
    "-": pc.subtract_checked,
    "*": pc.multiply_checked,
}
_PLAIN: dict[str, Callable[[pc.Expression, pc.Expression], pc.Expression]] = {
    "=": pc.equal,
    "!=": pc.not_equal,
    "<": pc.less,
    "<=": pc.less_equal,
    ">": pc.greater,
    ">=": pc.greater_equal,
}


def _like(x: pc.Expression, pattern: str) -> pc.Expression:
    # not pc.match_like: pyarrow 26 does not match an escaped backslash in '%\\'
    kind, text = like_shape(pattern)
    result: pc.Expression
    if kind == "equals":
        result = pc.equal(x, scalar_expression(arrow_scalar(Literal(text, pa.string()))))
    elif kind == "any":
        result = pc.if_else(pc.is_valid(x), _TRUE, _NULL_BOOL)
    elif kind == "contains":
        result = pc.match_substring(x, text)
    elif kind == "prefix":
        result = pc.starts_with(x, text)
    elif kind == "suffix":
        result = pc.ends_with(x, text)
    else:
        result = pc.match_substring_regex(x, text)
    return result


def arrow_scalar(lit: Literal) -> pa.Scalar[Any]:
    """The typed Arrow scalar of a literal (type inferred when the literal has none)."""
    t = lit.type if lit.type is not None else infer_literal_type(lit.value)
    value = lit.value
    if isinstance(value, Decimal) and pa.types.is_floating(t):
        value = float(value)
    return pa.scalar(value, type=t)


def _is_nan_literal(expr: Expr) -> bool:
    return isinstance(expr, Literal) and isinstance(expr.value, float) and expr.value != expr.value


def _may_be_nan(expr: Expr) -> bool:
    if isinstance(expr, Literal):
        return _is_nan_literal(expr)
    return is_float_expr(expr)


def _ite(cond: pc.Expression | None, then: pc.Expression, other: pc.Expression) -> pc.Expression:
    return other if cond is None else pc.if_else(cond, then, other)


def _nan_compare(
    op: str,
    x: pc.Expression,
    y: pc.Expression,
    nx: pc.Expression | None,
    ny: pc.Expression | None,
) -> pc.Expression:
    """``x op y`` for non-null operands under the total order with NaN largest.

    ``nx``/``ny`` are ``is_nan`` of the operands, ``None`` when an operand cannot be NaN.
    """
    if op in (">", ">="):
        return _nan_compare("<" if op == ">" else "<=", y, x, ny, nx)
    if op == "!=":
        return pc.invert(_nan_compare("=", x, y, nx, ny))
    plain = _PLAIN[op](x, y)
    if op == "=":
        return _ite(nx, ny if ny is not None else _FALSE, _ite(ny, _FALSE, plain))
    if op == "<":
        return _ite(nx, _FALSE, _ite(ny, _TRUE, plain))
    return _ite(nx, ny if ny is not None else _FALSE, _ite(ny, _TRUE, plain))  # <=


def _decimal_scale(left: Expr, right: Expr) -> int | None:
    """The scale both sides of a comparison are cast to when one holds decimal
    arithmetic (Arrow's common type of, say, decimal(21,4) and decimal(38,2) needs 40
    digits and fails); None when no cast is needed."""
    types = [infer_type(s) for s in (left, right) if isinstance(s, Arith)]
    if not any(t is not None and pa.types.is_decimal(t) for t in types):
        return None
    scales = [exact_scale(left), exact_scale(right)]
    return None if None in scales else max(s for s in scales if s is not None)


class _Renderer:
    def render(self, e: Expr) -> pc.Expression:
        if isinstance(e, Column):
            return pc.field(*e.path)
        if isinstance(e, Literal):
            return scalar_expression(arrow_scalar(e))
        if isinstance(e, Compare):
            return self.compare(e.op, e.left, e.right)
        if isinstance(e, Arith):
            x, y = self.operand(e.left, e), self.operand(e.right, e)
            if e.op == "/":
                return pc.divide(x.cast(pa.float64(), safe=False), y.cast(pa.float64(), safe=False))
            if integer_arith(e):  # in int64 (a bound literal would be cast down to an int32)
                x, y = x.cast(pa.int64()), y.cast(pa.int64())
            return _ARITH[e.op](x, y)
        if isinstance(e, And):
            return _fold(pc.and_kleene, [self.render(i) for i in e.items])
        if isinstance(e, Or):
            return _fold(pc.or_kleene, [self.render(i) for i in e.items])
        if isinstance(e, Not):
            return pc.invert(self.render(e.item))
        if isinstance(e, IsNull):
            x = self.render(e.operand)
            return pc.is_valid(x) if e.negated else pc.is_null(x)
        if isinstance(e, In):
            result = self.is_in(e)
        elif isinstance(e, Between):
            if e.negated:
                return pc.or_kleene(
                    self.compare("<", e.operand, e.low), self.compare(">", e.operand, e.high)
                )
            return pc.and_kleene(
                self.compare(">=", e.operand, e.low), self.compare("<=", e.operand, e.high)
            )
        else:
            result = _like(self.render(e.operand), e.pattern)
        return pc.invert(result) if e.negated else result

    def operand(self, e: Expr, arith: Arith) -> pc.Expression:
        """An operand of ``arith``. Decimal arithmetic runs in ``decimal256`` (Arrow's
        decimal128 results stop at 38 digits: a product of two decimal(20, 2) needs 41)
        with each operand at its own precision; a literal at the narrowest of its value
        (bound as decimal(38, s), it would widen every result)."""
        t = infer_type(arith)
        if t is not None and pa.types.is_float64(t) and arith.op != "/":
            # the type every engine computes in (float32 + int32 stayed float32 here); an
            # explicit cast, as pyarrow's implicit one refuses integers past 2**53
            return self.render(e).cast(t, safe=False)
        if t is None or not pa.types.is_decimal(t) or arith.op == "/":
            return self.render(e)
        if isinstance(e, Literal) and type(e.value) in (int, Decimal):
            value = Decimal(e.value)
            if value.is_finite():
                narrowest = pa.decimal256(*decimal_shape(value))
                return scalar_expression(pa.scalar(value, narrowest))
        own = infer_type(e)
        if isinstance(e, Arith) or own is None:
            return self.render(e)  # an inner product or sum is decimal256 already
        if pa.types.is_decimal(own):
            return self.render(e).cast(pa.decimal256(own.precision, own.scale))
        if pa.types.is_integer(own):
            return self.render(e).cast(pa.decimal256(20, 0))
        return self.render(e)

    def compare(self, op: str, left: Expr, right: Expr) -> pc.Expression:
        x, y = self.render(left), self.render(right)
        types = (infer_type(left), infer_type(right))
        if any(t is not None and pa.types.is_floating(t) for t in types) and types[0] != types[1]:
            # numbers of two kinds compare as doubles (as in DuckDB): pyarrow's implicit
            # cast picks float32 for an integer beside a float literal and refuses values
            # past its exact range
            x, y = x.cast(pa.float64(), safe=False), y.cast(pa.float64(), safe=False)
        scale = _decimal_scale(left, right)
        if scale is not None:  # one exact type (see operand): Arrow finds none by itself
            common = pa.decimal256(76, scale)
            x, y = x.cast(common), y.cast(common)
        if not (_may_be_nan(left) or _may_be_nan(right)):
            return _PLAIN[op](x, y)
        for side in (left, right):
            if isinstance(side, Literal) and side.value is None:
                return _NULL_BOOL
        nx = pc.is_nan(x) if _may_be_nan(left) and not isinstance(left, Literal) else None
        ny = pc.is_nan(y) if _may_be_nan(right) and not isinstance(right, Literal) else None
        if _is_nan_literal(left):
            nx = _TRUE
        if _is_nan_literal(right):
            ny = _TRUE
        core = _nan_compare(op, x, y, nx, ny)
        valid = [pc.is_valid(v) for v, s in ((x, left), (y, right)) if not isinstance(s, Literal)]
        if not valid:
            return core
        masked: pc.Expression = pc.if_else(_fold(pc.and_kleene, valid), core, _NULL_BOOL)
        return masked

    def is_in(self, e: In) -> pc.Expression:
        if not e.values:
            return _FALSE
        operand_type = in_list_type(e)
        if operand_type is None or is_float_expr(e.operand):
            return _fold(pc.or_kleene, [self.compare("=", e.operand, v) for v in e.values])
        x = self.render(e.operand)
        present = [v.value for v in e.values if isinstance(v, Literal) and v.value is not None]
        found = pc.is_in(x, value_set=pa.array(present, type=operand_type), skip_nulls=True)
        result: pc.Expression = pc.if_else(pc.is_valid(x), found, _NULL_BOOL)
        if len(present) < len(e.values):  # a NULL in the list: no match is NULL
            result = pc.if_else(result, _TRUE, _NULL_BOOL)
        return result


def to_pyarrow(expr: Expr) -> pc.Expression:
    """Render a predicate as a PyArrow compute expression.

    The expression has the same SQL semantics as :func:`to_duckdb_sql` (NaN ordered
    above every number, Kleene logic, SQL ``IN``); use it as a filter with
    ``pyarrow.dataset`` or ``Table.filter``.

    Args:
        expr: The (preferably bound) predicate.

    Returns:
        The expression.

    Example:
        >>> import pyarrow as pa
        >>> from lakequery.protocol.predicates import bind, parse_predicate, to_pyarrow
        >>> t = pa.table({"a": [1, 5, None]})
        >>> t.filter(to_pyarrow(bind(parse_predicate("a > 3"), t.schema)))["a"].to_pylist()
        [5]
    """
    return _Renderer().render(expr)
