"""The immutable syntax tree of lakequery's predicate language.

A predicate is a tree of small frozen dataclasses. :func:`~lakequery.protocol.predicates.
parse_predicate` builds one from SQL text, :func:`~lakequery.protocol.predicates.bind`
resolves its columns against a schema and types its literals, and the renderers turn a
bound tree into DuckDB SQL, a PyArrow expression or a Polars expression with identical
SQL three-valued semantics.

Semantics shared by every renderer (a row passes a filter only when it is TRUE):

* comparisons with NULL are NULL; ``NOT NULL`` is NULL; AND/OR are Kleene;
* floating point values are totally ordered as in Spark and DuckDB: ``NaN = NaN`` is
  TRUE, NaN is greater than every other value and ``-0.0 = 0.0``;
* ``x IN (v1, ..., vn)`` is ``x = v1 OR ... OR x = vn`` (so a NULL in the list makes a
  non-match NULL); an empty list is FALSE (NOT IN an empty list is TRUE);
* ``LIKE`` has no escape character: ``%`` matches any run of characters (newlines
  included), ``_`` exactly one character, everything else itself; it is case sensitive;
* ``/`` is true division in double precision (``1 / 2 = 0.5``, ``1 / 0 = inf``);
  ``+ - *`` keep the operand type; integer overflow is an error in DuckDB and PyArrow.

Example:
    >>> from lakequery.protocol.predicate_ast import Column, Compare, Literal
    >>> Compare(">", Column(("a",)), Literal(3))
    Compare(op='>', left=Column(path=('a',), type=None), right=Literal(value=3, type=None))
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import pyarrow as pa

from lakequery.errors import PredicateError

COMPARISON_OPS: frozenset[str] = frozenset({"=", "!=", "<", "<=", ">", ">="})
"""Comparison operators of :class:`Compare` (``==`` and ``<>`` are parsed into these)."""

ARITHMETIC_OPS: frozenset[str] = frozenset({"+", "-", "*", "/"})
"""Operators of :class:`Arith`."""

NEGATED_COMPARISON: dict[str, str] = {
    "=": "!=",
    "!=": "=",
    "<": ">=",
    "<=": ">",
    ">": "<=",
    ">=": "<",
}
"""``NOT (a op b)`` is ``a NEGATED_COMPARISON[op] b`` (exact in three-valued logic)."""

MIRRORED_COMPARISON: dict[str, str] = {
    "=": "=",
    "!=": "!=",
    "<": ">",
    "<=": ">=",
    ">": "<",
    ">=": "<=",
}
"""``a op b`` is ``b MIRRORED_COMPARISON[op] a``."""


@dataclass(frozen=True)
class Column:
    """A reference to a (possibly nested) column.

    Attributes:
        path: Field names from the top-level column down to the referenced leaf,
            e.g. ``("s", "x")`` for the field ``x`` of the struct column ``s``.
        type: The column's Arrow type once bound (``None`` before :func:`bind`).
    """

    path: tuple[str, ...]
    type: pa.DataType | None = None

    def __post_init__(self) -> None:
        path = tuple(self.path)
        if not path or not all(isinstance(p, str) for p in path):
            raise PredicateError(self.path, "a column path is a non-empty tuple of names")
        object.__setattr__(self, "path", path)


@dataclass(frozen=True)
class Literal:
    """A constant.

    Attributes:
        value: A Python value: ``None``, ``bool``, ``int``, ``float``,
            ``decimal.Decimal``, ``str``, ``bytes``, ``datetime.date`` or
            ``datetime.datetime`` (timezone-aware for zoned timestamps).
        type: The Arrow type of the constant, or ``None`` when it is still to be
            inferred from the context (:func:`bind` sets it).
    """

    value: Any
    type: pa.DataType | None = None


@dataclass(frozen=True)
class Compare:
    """``left op right`` with ``op`` one of ``= != < <= > >=``."""

    op: str
    left: Expr
    right: Expr

    def __post_init__(self) -> None:
        if self.op not in COMPARISON_OPS:
            raise PredicateError(self.op, f"unknown comparison operator {self.op!r}")


@dataclass(frozen=True)
class Arith:
    """``left op right`` with ``op`` one of ``+ - * /``."""

    op: str
    left: Expr
    right: Expr

    def __post_init__(self) -> None:
        if self.op not in ARITHMETIC_OPS:
            raise PredicateError(self.op, f"unknown arithmetic operator {self.op!r}")


def _as_items(owner: object, items: Sequence[Expr]) -> tuple[Expr, ...]:
    out = tuple(items)
    if not out:
        raise PredicateError(owner, "AND/OR need at least one operand")
    return out


@dataclass(frozen=True)
class And:
    """Kleene conjunction of one or more boolean expressions."""

    items: tuple[Expr, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "items", _as_items("AND", self.items))


@dataclass(frozen=True)
class Or:
    """Kleene disjunction of one or more boolean expressions."""

    items: tuple[Expr, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "items", _as_items("OR", self.items))


@dataclass(frozen=True)
class Not:
    """Kleene negation (``NOT NULL`` is NULL)."""

    item: Expr


@dataclass(frozen=True)
class IsNull:
    """``operand IS NULL`` (``IS NOT NULL`` when ``negated``); never NULL itself."""

    operand: Expr
    negated: bool = False


@dataclass(frozen=True)
class In:
    """``operand [NOT] IN (values...)`` with SQL semantics."""

    operand: Expr
    values: tuple[Expr, ...]
    negated: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", tuple(self.values))


@dataclass(frozen=True)
class Between:
    """``operand [NOT] BETWEEN low AND high`` (both bounds inclusive)."""

    operand: Expr
    low: Expr
    high: Expr
    negated: bool = False


@dataclass(frozen=True)
class Like:
    """``operand [NOT] LIKE pattern`` (``%`` any run, ``_`` one character, no escape)."""

    operand: Expr
    pattern: str
    negated: bool = False


Expr: TypeAlias = Column | Literal | Compare | Arith | And | Or | Not | IsNull | In | Between | Like
"""Any node of the predicate tree."""


def like_shape(pattern: str) -> tuple[str, str]:
    """How engines without SQL's ``LIKE`` test ``pattern`` (``%`` any run, ``_`` one
    character, every other character itself: no escape character): ``(kind, text)`` with
    kind ``equals``, ``prefix``, ``suffix`` or ``contains`` of the text, ``any`` (only
    ``%``: every non-null value), or ``regex`` (an anchored regular expression, every
    character spelled ``\\x{hex}`` but ASCII letters and digits; Rust's and RE2's syntax).

    Example:
        >>> like_shape("ab%"), like_shape("%a.b%"), like_shape("a_c")
        (('prefix', 'ab'), ('contains', 'a.b'), ('regex', '(?s)^a.c$'))
    """
    if "_" not in pattern:
        core = pattern.strip("%")
        if "%" not in core:
            if not pattern or core == pattern:
                return "equals", core
            if not core:
                return "any", ""
            starts, ends = pattern.startswith("%"), pattern.endswith("%")
            kind = "contains" if starts and ends else "suffix" if starts else "prefix"
            return kind, core
    parts = [
        ".*"
        if ch == "%"
        else "."
        if ch == "_"
        else ch
        if ch.isascii() and ch.isalnum()
        else f"\\x{{{ord(ch):X}}}"
        for ch in pattern
    ]
    return "regex", "(?s)^" + "".join(parts) + "$"


def children(expr: Expr) -> tuple[Expr, ...]:
    """The direct sub-expressions of ``expr`` in evaluation order.

    Args:
        expr: Any node.

    Returns:
        The child nodes (empty for columns and literals).
    """
    if isinstance(expr, Compare | Arith):
        return (expr.left, expr.right)
    if isinstance(expr, And | Or):
        return expr.items
    if isinstance(expr, Not):
        return (expr.item,)
    if isinstance(expr, IsNull | Like):
        return (expr.operand,)
    if isinstance(expr, In):
        return (expr.operand, *expr.values)
    if isinstance(expr, Between):
        return (expr.operand, expr.low, expr.high)
    return ()


def walk(expr: Expr) -> Iterator[Expr]:
    """Yield ``expr`` and all its descendants, depth first, parents before children.

    Args:
        expr: The root node.

    Yields:
        Every node of the tree.
    """
    stack = [expr]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(children(node)))


def referenced_columns(expr: Expr) -> set[tuple[str, ...]]:
    """The paths of all columns an expression refers to.

    Args:
        expr: A predicate (bound or not).

    Returns:
        The set of column paths, e.g. ``{("a",), ("s", "x")}``.

    Example:
        >>> from lakequery.protocol.predicates import parse_predicate
        >>> sorted(referenced_columns(parse_predicate("a > 1 OR s.x IS NULL")))
        [('a',), ('s', 'x')]
    """
    return {node.path for node in walk(expr) if isinstance(node, Column)}
