"""Literal typing and coercion of the predicate language (the type categories it uses
are in :mod:`lakequery.protocol.arrow_types`).

The renderers, :func:`~lakequery.protocol.predicates.bind` and data skipping agree on one
rule: a literal compared with (or combined with) a column takes the column's type when
its value converts exactly enough (see :func:`coerce_literal`), so every engine compares
values of the same type.
"""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal, InvalidOperation, localcontext
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.types as pat

from lakequery.errors import PredicateError
from lakequery.protocol.arrow_types import (
    NUMERIC,
    category,
    decimal_params,
    timestamp_params,
    timestamp_type,
)
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
)

_UTC = dt.timezone.utc
_F32_MAX = float(np.finfo(np.float32).max)
_INT64 = pa.int64()
_FLOAT64 = pa.float64()


def parse_iso_timestamp(text: str) -> dt.datetime:
    """Parse ``YYYY-MM-DD[( |T)HH:MM[:SS[.f...]]][Z|±HH[:MM]]`` into a datetime.

    Args:
        text: The timestamp text; at most microsecond precision.

    Returns:
        A naive datetime when the text has no offset, else an aware one converted to UTC.

    Raises:
        ValueError: The text is not such a timestamp.
    """
    s = text.strip()
    if len(s) > 10 and s[10] in "tT ":
        s = s[:10] + "T" + s[11:]
    if s.endswith(("z", "Z")):
        s = s[:-1] + "+00:00"
    frac_start = s.find(".", 11)
    if frac_start > 0:
        frac_end = frac_start + 1
        while frac_end < len(s) and s[frac_end].isdigit():
            frac_end += 1
        if frac_end - frac_start - 1 > 6 and set(s[frac_start + 7 : frac_end]) != {"0"}:
            raise ValueError(f"timestamp {text!r} is more precise than microseconds")
    value = dt.datetime.fromisoformat(s)
    if value.tzinfo is not None:
        value = value.astimezone(dt.timezone.utc)
    return value


def comparable(a: pa.DataType, b: pa.DataType) -> bool:
    """Whether values of the two types can be compared with ``= < >``.

    Args:
        a: One type.
        b: The other type.

    Returns:
        True for two numeric types, two types of the same category (except nested and
        other) and whenever one side is the null type.
    """
    ca, cb = category(a), category(b)
    if "null" in (ca, cb):
        return True
    if ca in NUMERIC and cb in NUMERIC:
        return True
    return ca == cb and ca not in ("nested", "other")


def infer_literal_type(value: Any) -> pa.DataType:
    """The Arrow type a literal value has on its own.

    Args:
        value: A Python literal value.

    Returns:
        ``null``, ``bool``, ``int64`` (``uint64`` / ``decimal128(38, 0)`` when larger),
        ``float64``, ``decimal128(p, s)``, ``string``, ``binary``, ``date32`` or
        ``timestamp[us]`` (``timestamp[us, UTC]`` when timezone-aware).

    Raises:
        PredicateError: The value cannot be a literal.
    """
    if value is None:
        return pa.null()
    if isinstance(value, bool):
        return pa.bool_()
    if isinstance(value, int):
        if -(2**63) <= value < 2**63:
            return _INT64
        if 0 <= value < 2**64:
            return pa.uint64()
        if len(str(abs(value))) <= 38:
            return pa.decimal128(38, 0)
        raise PredicateError(value, "integer literal has more than 38 digits")
    if isinstance(value, float):
        return _FLOAT64
    if isinstance(value, Decimal):
        if not value.is_finite():
            return _FLOAT64
        precision, scale = decimal_shape(value)
        if precision > 38:
            raise PredicateError(value, "decimal literal has more than 38 digits")
        return pa.decimal128(precision, scale)
    if isinstance(value, str):
        return pa.string()
    if isinstance(value, bytes):
        return pa.binary()
    if isinstance(value, dt.datetime):
        return timestamp_type("us", "UTC" if value.tzinfo is not None else None)
    if isinstance(value, dt.date):
        return pa.date32()
    raise PredicateError(value, f"unsupported literal of Python type {type(value).__name__}")


def decimal_shape(value: Decimal) -> tuple[int, int]:
    """The smallest ``(precision, scale)`` holding a finite decimal exactly.

    Args:
        value: A finite decimal.

    Returns:
        ``(precision, scale)`` with ``precision >= 1`` and ``scale >= 0``.
    """
    _, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    scale = max(0, -exponent)
    int_digits = max(0, len(digits) + exponent)
    return max(1, int_digits + scale), scale


def _fail(lit: Literal, target: pa.DataType, context: object) -> PredicateError:
    return PredicateError(
        context, f"cannot compare {category(target)} ({target}) with {lit.value!r}"
    )


def _to_int(lit: Literal, value: int, target: pa.DataType, arith: bool) -> Literal:
    if not arith:
        width = target.bit_width
        low, high = (
            (0, 2**width - 1)
            if pat.is_unsigned_integer(target)
            else (
                -(2 ** (width - 1)),
                2 ** (width - 1) - 1,
            )
        )
        if low <= value <= high:
            return Literal(value, target)
    if -(2**63) <= value < 2**63:
        return Literal(value, _INT64)
    if 0 <= value < 2**64 and pat.is_unsigned_integer(target):
        return Literal(value, pa.uint64())
    if not arith:  # compared, not computed with: exact as a decimal, as DuckDB does
        if abs(value) < 10**38:
            return Literal(Decimal(value), pa.decimal128(38, 0))
        return Literal(float(value), _FLOAT64)
    raise PredicateError(lit.value, f"integer literal {value} is out of range for {target}")


def _parse_number(text: str) -> int | Decimal | float:
    s = text.strip()
    try:
        return int(s)
    except ValueError:
        pass
    try:
        d = Decimal(s)
    except InvalidOperation:
        return float(s)  # raises ValueError when not a number at all
    return d if d.is_finite() else float(s)


def _coerce_number(lit: Literal, value: Any, target: pa.DataType, arith: bool) -> Literal:
    cat = category(target)
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        raise ValueError("not a number")
    if isinstance(value, float) and not math.isfinite(value):
        return Literal(value, target if cat == "float" else _FLOAT64)
    if isinstance(value, Decimal) and not value.is_finite():
        return Literal(float(value), target if cat == "float" else _FLOAT64)
    if cat == "int":
        if isinstance(value, int):
            return _to_int(lit, value, target, arith)
        if value == int(value):
            return _to_int(lit, int(value), target, arith)
        return Literal(float(value), _FLOAT64)
    if cat == "float":
        f = float(value)
        if pat.is_float64(target) or abs(f) > _F32_MAX:
            return Literal(f, _FLOAT64 if not pat.is_float64(target) else target)
        return Literal(float(np.float32(f)), target)
    # decimal target
    with localcontext() as ctx:
        ctx.prec = 200
        d = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
        precision, scale = decimal_params(target)
        exact = d.quantize(Decimal(1).scaleb(-scale))
        if exact == d and decimal_shape(exact)[0] - scale <= precision - scale:
            return Literal(exact, target)
        p_lit, s_lit = decimal_shape(d.normalize())
        new_scale = max(scale, s_lit)
        new_precision = max(precision - scale, p_lit - s_lit) + new_scale
        if new_precision > 38:  # no common decimal type: compare as doubles
            return Literal(float(d), _FLOAT64)
        return Literal(
            d.quantize(Decimal(1).scaleb(-new_scale)), pa.decimal128(new_precision, new_scale)
        )


def _coerce_timestamp(value: Any, target: pa.DataType) -> Literal:
    if isinstance(value, str):
        value = parse_iso_timestamp(value)
    elif isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        value = dt.datetime.combine(value, dt.time())
    if not isinstance(value, dt.datetime):
        raise ValueError("not a timestamp")
    unit, tz = timestamp_params(target)
    if tz is not None:
        value = value.astimezone(_UTC) if value.tzinfo is not None else value.replace(tzinfo=_UTC)
    elif value.tzinfo is not None:
        raise ValueError("a timestamp_ntz column is compared with a zoned timestamp")
    if (unit == "s" and value.microsecond) or (unit == "ms" and value.microsecond % 1000):
        return Literal(value, timestamp_type("us", tz))
    return Literal(value, target)


def coerce_literal(
    lit: Literal, target: pa.DataType | None, context: object, *, arith: bool = False
) -> Literal:
    """Give a literal the type of the expression it meets.

    Strings are parsed for non-string targets (``'2026-11-01'`` for a date,
    ISO-8601 text for timestamps, numbers, ``'true'``/``'false'``). Naive timestamps meet
    a zoned column as UTC. A value the target type cannot hold exactly keeps a wider type
    of the same family (``1.5`` against an integer column stays a ``float64``; an integer
    beyond the column's range becomes ``int64``, past ``int64`` a ``decimal(38, 0)``; a
    decimal with more digits gets a wider decimal type), so comparisons keep their
    mathematical meaning. Floating point is the one rounding by design: a number met by a
    ``float`` (float32) column becomes the float32 nearest to it, so ``f = 0.1`` matches a
    stored ``0.1f`` in every engine (a double comparison, as in Spark, never would).

    Args:
        lit: The literal.
        target: The type of the other operand (``None``: unknown, infer from the value).
        context: The predicate named in errors.
        arith: The literal is an operand of ``+ - * /``: integers become ``int64`` so that
            arithmetic on narrow integer columns does not overflow.

    Returns:
        A typed literal.

    Raises:
        PredicateError: The value cannot be converted to the target's family.
    """
    value = lit.value
    if target is None or pat.is_null(target):
        return lit if lit.type is not None else Literal(value, infer_literal_type(value))
    if value is None:
        return Literal(None, target)
    cat = category(target)
    try:
        if cat in NUMERIC:
            if isinstance(value, str):
                value = _parse_number(value)
            return _coerce_number(lit, value, target, arith)
        if cat == "bool":
            if isinstance(value, str) and value.strip().lower() in ("true", "false"):
                value = value.strip().lower() == "true"
            if isinstance(value, bool):
                return Literal(value, target)
        elif cat == "string":
            if isinstance(value, str):
                return Literal(value, target)
        elif cat == "binary":
            if isinstance(value, str | bytes):
                return Literal(value.encode() if isinstance(value, str) else value, target)
        elif cat == "date":
            if isinstance(value, str):
                value = dt.date.fromisoformat(value.strip())
            if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
                return Literal(value, target)
        elif cat in ("timestamp", "timestamp_tz"):
            return _coerce_timestamp(value, target)
    except (ValueError, TypeError, OverflowError, InvalidOperation) as exc:
        raise PredicateError(
            context, f"cannot compare {category(target)} ({target}) with {lit.value!r}: {exc}"
        ) from None
    raise _fail(lit, target, context)


def _arith_type(op: str, a: pa.DataType | None, b: pa.DataType | None) -> pa.DataType | None:
    if op == "/":
        return _FLOAT64
    if a is None or b is None:
        return None
    ca, cb = category(a), category(b)
    if "float" in (ca, cb):
        if pat.is_float32(a) and pat.is_float32(b):
            return a
        return _FLOAT64
    if "decimal" in (ca, cb):
        scales = [decimal_params(t)[1] if pat.is_decimal(t) else 0 for t in (a, b)]
        # a product has its operands' scales added (DuckDB's and Arrow's rule), a sum the
        # larger: a literal compared with it is typed at that scale, never rounded to less
        scale = sum(scales) if op == "*" else max(scales)
        return pa.decimal128(38, min(scale, 38))
    if ca == "int" and cb == "int":
        return _INT64
    return a if cb == "null" else b


def exact_scale(e: Expr) -> int | None:
    """The scale Arrow gives ``e`` when it is an exact number (a decimal, or an integer:
    0), else None. Products add their operands' scales, sums keep the larger."""
    if isinstance(e, Arith):
        if e.op == "/":
            return None
        a, b = exact_scale(e.left), exact_scale(e.right)
        if a is None or b is None:
            return None
        return a + b if e.op == "*" else max(a, b)
    if isinstance(e, Literal) and isinstance(e.value, Decimal):
        return decimal_shape(e.value)[1] if e.value.is_finite() else None
    t = infer_type(e)
    if t is None:
        return None
    if pa.types.is_decimal(t):
        return int(t.scale)
    return 0 if pa.types.is_integer(t) else None


def infer_type(expr: Expr) -> pa.DataType | None:
    """The result type of an expression, as far as it is known.

    Args:
        expr: A node (bound trees give exact column types).

    Returns:
        The Arrow type, or ``None`` for an unbound column.
    """
    if isinstance(expr, Column):
        return expr.type
    if isinstance(expr, Literal):
        return expr.type if expr.type is not None else infer_literal_type(expr.value)
    if isinstance(expr, Arith):
        return _arith_type(expr.op, infer_type(expr.left), infer_type(expr.right))
    assert isinstance(expr, Compare | And | Or | Not | IsNull | In | Between | Like)
    return pa.bool_()


def integer_arith(expr: Arith) -> bool:
    """Whether ``expr`` is integer arithmetic, which every engine evaluates in int64 (the
    type :func:`infer_type` gives it), whatever the operands' own integer types."""
    t = infer_type(expr)
    return t is not None and pat.is_integer(t)


def is_float_expr(expr: Expr) -> bool:
    """Whether an expression may produce floating point values (and so NaN)."""
    t = infer_type(expr)
    return t is not None and pat.is_floating(t)


def in_list_type(e: In) -> pa.DataType | None:
    """The type an ``IN`` list can be tested in as one set: the operand's, when every
    value is a literal of that type; else None, and the list is tested as an ``OR`` of
    ``=`` comparisons, each typed on its own (as one set, an engine unifies the values'
    types: DuckDB compared ``i64 IN (2^53 + 1, 0.5)`` in DOUBLE)."""
    operand = infer_type(e.operand)
    if operand is None or not all(isinstance(v, Literal) for v in e.values):
        return None
    types = {v.type for v in e.values if isinstance(v, Literal)}
    return operand if types <= {operand} else None
