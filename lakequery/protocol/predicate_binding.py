"""Binding: resolve a predicate's columns against a schema and type its literals."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.types as pat

from lakequery.errors import PredicateError
from lakequery.protocol.arrow_types import NUMERIC, category
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
from lakequery.protocol.predicate_parser import format_predicate
from lakequery.protocol.predicate_types import coerce_literal, comparable, infer_type

_MAX_LISTED = 20


def _match(
    fields: Sequence[pa.Field[Any]], name: str, where: str, context: object
) -> pa.Field[Any] | None:
    exact = [f for f in fields if f.name == name]
    if exact:
        return exact[0]
    folded = [f for f in fields if f.name.casefold() == name.casefold()]
    if len(folded) > 1:
        names = ", ".join(repr(f.name) for f in folded)
        raise PredicateError(context, f"column name {name!r}{where} is ambiguous ({names})")
    return folded[0] if folded else None


def _struct_fields(t: pa.DataType) -> list[pa.Field[Any]] | None:
    if pat.is_struct(t):
        return [t.field(i) for i in range(t.num_fields)]
    return None


def resolve_column(schema: pa.Schema, path: Sequence[str], context: object) -> Column:
    """Resolve a column path against a schema.

    Names match exactly, else case-insensitively (resolved to the schema's spelling).
    Each step goes one struct level deeper; a step may also match a field whose name
    contains dots (``a.b`` finds a top-level field literally named ``a.b`` when there is
    no struct ``a`` with a field ``b``).

    Args:
        schema: The logical schema.
        path: The path as written.
        context: The predicate named in errors.

    Returns:
        The bound column (schema spelling and leaf type).

    Raises:
        PredicateError: No such column, an ambiguous name or a step into a non-struct.
    """
    fields: list[pa.Field[Any]] | None = [schema.field(i) for i in range(len(schema))]
    resolved: list[str] = []
    rest = list(path)
    leaf: pa.Field[Any] | None = None
    while rest:
        if fields is None:
            assert leaf is not None
            raise PredicateError(
                context,
                f"column {'.'.join(resolved)!r} has type {leaf.type}, not a struct, "
                f"so it has no field {rest[0]!r}",
            )
        where = f" in struct {'.'.join(resolved)!r}" if resolved else ""
        found = None
        for k in range(1, len(rest) + 1):
            found = _match(fields, ".".join(rest[:k]), where, context)
            if found is not None:
                rest = rest[k:]
                break
        if found is None:
            names = [f.name for f in fields]
            listed = ", ".join(names[:_MAX_LISTED]) + (", ..." if len(names) > _MAX_LISTED else "")
            what = "field" if resolved else "column"
            raise PredicateError(
                context, f"unknown {what} {rest[0]!r}{where} (available: {listed})"
            )
        resolved.append(found.name)
        leaf = found
        fields = _struct_fields(found.type)
    assert leaf is not None
    return Column(tuple(resolved), leaf.type)


class _Binder:
    def __init__(self, schema: pa.Schema, context: object) -> None:
        self.schema = schema
        self.context = context

    def fail(self, reason: str) -> PredicateError:
        return PredicateError(self.context, reason)

    def boolean(self, expr: Expr) -> Expr:
        bound = self.value(expr)
        if isinstance(bound, Literal) and bound.value is None:
            return Literal(None, pa.bool_())  # a boolean NULL: engines' AND/OR/NOT take no other
        t = infer_type(bound)
        if t is not None and not (pat.is_boolean(t) or pat.is_null(t)):
            raise self.fail(f"expected a boolean expression, got {t} ({_short(expr)})")
        return bound

    def pair(self, a: Expr, b: Expr, *, arith: bool = False) -> tuple[Expr, Expr]:
        """Bind two operands; a literal takes the type of the other side."""
        ba, bb = self.value(a), self.value(b)
        if arith:
            for side in (ba, bb):
                t = infer_type(side)
                if t is not None and category(t) not in (*NUMERIC, "null"):
                    raise self.fail(f"arithmetic needs numbers, got {t} ({_short(side)})")
        if isinstance(ba, Literal) and not isinstance(bb, Literal):
            ba = coerce_literal(ba, infer_type(bb), self.context, arith=arith)
        elif isinstance(bb, Literal) and not isinstance(ba, Literal):
            bb = coerce_literal(bb, infer_type(ba), self.context, arith=arith)
        elif isinstance(ba, Literal) and isinstance(bb, Literal):
            ba = coerce_literal(ba, None, self.context)
            bb = coerce_literal(bb, infer_type(ba), self.context, arith=arith)
        return ba, bb

    def check_comparable(self, a: Expr, b: Expr, what: str) -> None:
        ta, tb = infer_type(a), infer_type(b)
        if ta is None or tb is None:
            return
        if not comparable(ta, tb):
            raise self.fail(f"cannot {what} {ta} ({_short(a)}) with {tb} ({_short(b)})")

    def operand_with(self, operand: Expr, value: Expr) -> Expr:
        bound = self.value(value)
        if isinstance(bound, Literal):
            bound = coerce_literal(bound, infer_type(operand), self.context)
        self.check_comparable(operand, bound, "compare")
        return bound

    def value(self, expr: Expr) -> Expr:
        if isinstance(expr, Column):
            return resolve_column(self.schema, expr.path, self.context)
        if isinstance(expr, Literal):
            return coerce_literal(expr, None, self.context)
        if isinstance(expr, Compare):
            left, right = self.pair(expr.left, expr.right)
            self.check_comparable(left, right, "compare")
            return Compare(expr.op, left, right)
        if isinstance(expr, Arith):
            left, right = self.pair(expr.left, expr.right, arith=True)
            return Arith(expr.op, left, right)
        if isinstance(expr, And):
            return And(tuple(self.boolean(i) for i in expr.items))
        if isinstance(expr, Or):
            return Or(tuple(self.boolean(i) for i in expr.items))
        if isinstance(expr, Not):
            return Not(self.boolean(expr.item))
        if isinstance(expr, IsNull):
            return IsNull(self.value(expr.operand), expr.negated)
        if isinstance(expr, In):
            operand = self.value(expr.operand)
            values = tuple(self.operand_with(operand, v) for v in expr.values)
            return In(operand, values, expr.negated)
        if isinstance(expr, Between):
            operand = self.value(expr.operand)
            low = self.operand_with(operand, expr.low)
            high = self.operand_with(operand, expr.high)
            return Between(operand, low, high, expr.negated)
        assert isinstance(expr, Like)
        operand = self.value(expr.operand)
        t = infer_type(operand)
        if t is not None and category(t) not in ("string", "null"):
            raise self.fail(f"LIKE needs a string operand, got {t} ({_short(operand)})")
        return Like(operand, expr.pattern, expr.negated)


def _short(expr: Expr) -> str:
    if isinstance(expr, Column):
        return "column " + ".".join(expr.path)
    if isinstance(expr, Literal):
        return f"literal {expr.value!r}"
    return type(expr).__name__


def bind(expr: Expr, schema: pa.Schema) -> Expr:
    """Resolve a predicate against a logical schema.

    Columns are resolved (exact name first, then case-insensitively, giving the
    schema's spelling; dotted paths descend into struct fields) and carry their Arrow
    type; literals are coerced to the type of the expression they meet (see
    :func:`~lakequery.protocol.predicate_types.coerce_literal`), so ``day =
    '2026-11-01'`` against a date column compares dates and ``ts > '2026-11-01
    10:00:00'`` against a zoned timestamp column compares UTC instants.

    Args:
        expr: The parsed predicate.
        schema: The table's logical Arrow schema.

    Returns:
        The bound predicate.

    Raises:
        PredicateError: Unknown column (named in the message), a type mismatch that
            cannot be coerced, arithmetic on non-numbers, LIKE on a non-string or a
            non-boolean predicate.

    Example:
        >>> import pyarrow as pa
        >>> from lakequery.protocol.predicates import bind, parse_predicate
        >>> bound = bind(parse_predicate("DAY = '2026-11-01'"), pa.schema([("day", pa.date32())]))
        >>> bound.left.path, bound.right
        (('day',), Literal(value=datetime.date(2026, 11, 1), type=DataType(date32[day])))
    """
    try:
        context: object = format_predicate(expr)
    except PredicateError:
        context = expr
    return _Binder(schema, context).boolean(expr)
