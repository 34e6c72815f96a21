"""Spark's pushed filters (``pyspark.sql.datasource.Filter``) as lakequery predicates.

Not used by the data source's reader on PySpark 4.2, which reuses a filtered query's read
plan for the DataFrame's later queries (see :mod:`lakequery.spark.datasource_read`): kept,
with its tests, for a PySpark release that scopes that plan to its scan.

The ``lakequery`` data source receives the conjuncts of a query's ``WHERE`` clause that
Spark can express as :class:`~pyspark.sql.datasource.Filter` objects (``EqualTo``,
``EqualNullSafe``, ``GreaterThan(OrEqual)``, ``LessThan(OrEqual)``, ``In``, ``IsNull``,
``IsNotNull``, ``Not``, ``StringStartsWith``/``EndsWith``/``Contains``). Each one that has
an exact lakequery equivalent becomes a ``pyarrow.compute.Expression`` (the predicate
language :meth:`lakequery.Snapshot.scan` takes), typed like its column, so it can skip
files (partition values, min/max statistics) and filter rows on the executors.

A filter is *translated* only when lakequery's SQL semantics select exactly the rows
Spark's would: comparisons of booleans, numbers (NaN ordered as in Spark), decimals,
strings and binary (byte order), dates and timestamps; ``IN`` with SQL's NULL rules;
``LIKE`` patterns without ``%``/``_`` in the value. Anything else (nested values as
literals, variant, intervals, a literal that does not fit the column type) is left out:
it is neither used for skipping nor applied early. Spark evaluates every filter again
after the scan either way (the data source reports none as handled), so a filter left
out only costs speed, never correctness.

Example:
    >>> import pyarrow as pa
    >>> from pyspark.sql.datasource import EqualTo, StringStartsWith
    >>> schema = pa.schema([("id", pa.int64()), ("s", pa.string())])
    >>> str(to_expression([EqualTo(("id",), 3), StringStartsWith(("s",), "a_")], schema))
    '(id == 3)'
"""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import logging
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringEndsWith,
    StringStartsWith,
)

from lakequery.errors import PredicateError
from lakequery.protocol.predicates import bind, from_pyarrow_expression

log = logging.getLogger("lakequery.spark")

_COMPARE: dict[type[Filter], Callable[..., pc.Expression]] = {
    EqualTo: pc.equal,
    GreaterThan: pc.greater,
    GreaterThanOrEqual: pc.greater_equal,
    LessThan: pc.less,
    LessThanOrEqual: pc.less_equal,
}
_STRING_MATCH: dict[type[Filter], Callable[..., pc.Expression]] = {
    StringStartsWith: pc.starts_with,
    StringEndsWith: pc.ends_with,
    StringContains: pc.match_substring,
}


class _Untranslatable(Exception):
    """The filter has no exact lakequery equivalent (it is left to Spark alone)."""


def _field_type(schema: pa.Schema, path: Sequence[str]) -> pa.DataType:
    """The Arrow type of a (nested) column, or :class:`_Untranslatable`."""
    index = schema.get_field_index(path[0])
    if index < 0:
        raise _Untranslatable(path)
    t: pa.DataType = schema.field(index).type
    for name in path[1:]:
        if not pa.types.is_struct(t) or t.get_field_index(name) < 0:
            raise _Untranslatable(path)
        t = t.field(t.get_field_index(name)).type
    return t


def _comparable(t: pa.DataType) -> bool:
    """Types whose order and equality are the same in lakequery and Spark."""
    return bool(
        pa.types.is_boolean(t)
        or pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_decimal(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_date(t)
        or pa.types.is_timestamp(t)
    )


def _literal(value: Any, t: pa.DataType) -> pc.Expression:
    """``value`` as a scalar of the column's type; exact or :class:`_Untranslatable`."""
    if value is None:
        return _scalar(pa.scalar(None, t))
    if isinstance(value, bytearray):
        value = bytes(value)
    ok = (
        (pa.types.is_boolean(t) and isinstance(value, bool))
        or (pa.types.is_integer(t) and isinstance(value, int) and not isinstance(value, bool))
        or (pa.types.is_floating(t) and isinstance(value, float | int))
        or (pa.types.is_decimal(t) and isinstance(value, decimal.Decimal | int))
        or ((pa.types.is_string(t) or pa.types.is_large_string(t)) and isinstance(value, str))
        or ((pa.types.is_binary(t) or pa.types.is_large_binary(t)) and isinstance(value, bytes))
        or (pa.types.is_date(t) and type(value) is dt.date)
        or (
            pa.types.is_timestamp(t)
            and isinstance(value, dt.datetime)
            # Spark sends zoned timestamps as aware datetimes, timestamp_ntz as naive ones
            and (value.tzinfo is None) == (t.tz is None)
        )
    )
    if not ok:
        raise _Untranslatable(value)
    try:
        scalar = pa.scalar(value, t)  # safe: raises when the value does not fit
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError):
        raise _Untranslatable(value) from None
    if scalar.as_py() != value and not (isinstance(value, float) and value != value):
        raise _Untranslatable(value)  # e.g. a decimal that lost digits
    return _scalar(scalar)


def _scalar(value: pa.Scalar[Any]) -> pc.Expression:
    """A typed scalar as an expression (``pc.scalar`` keeps an Arrow scalar's type)."""
    make: Any = pc.scalar
    out: pc.Expression = make(value)
    return out


#: Longest ``IN`` list written out as ORed equalities (under ``NOT`` or with a NULL).
MAX_IN_EQUALITIES = 256


def _any_of(exprs: Sequence[pc.Expression]) -> pc.Expression:
    """Kleene OR of ``exprs`` as a balanced tree (shallow for long lists)."""
    if len(exprs) == 1:
        return exprs[0]
    mid = len(exprs) // 2
    return pc.or_kleene(_any_of(exprs[:mid]), _any_of(exprs[mid:]))


def _in(column: pc.Expression, values: list[Any], t: pa.DataType, negated: bool) -> pc.Expression:
    """SQL ``IN``: TRUE on a match, NULL for a NULL input or, without a match, when the
    list holds a NULL, else FALSE."""
    literals = [_literal(v, t) for v in values]  # each value must be exact in the type
    if not negated and all(v is not None for v in values):
        # Only TRUE selects a row here, so NULL and FALSE may be confused: is_in with
        # skip_nulls makes a NULL input FALSE instead of NULL.
        array = pa.array([bytes(v) if isinstance(v, bytearray) else v for v in values], t)
        return pc.is_in(column, value_set=array, skip_nulls=True)
    if len(values) > MAX_IN_EQUALITIES:
        raise _Untranslatable(values)
    return _any_of([pc.equal(column, lit) for lit in literals])


def _translate(f: Filter, schema: pa.Schema, negated: bool = False) -> pc.Expression:
    """``negated``: the filter sits under an odd number of ``Not`` (NULL and FALSE then
    differ: ``NOT NULL`` is NULL, ``NOT FALSE`` is TRUE)."""
    if isinstance(f, Not):
        return pc.invert(_translate(f.child, schema, not negated))
    path = tuple(getattr(f, "attribute", ()))
    if not path:
        raise _Untranslatable(f)
    t = _field_type(schema, path)
    column = pc.field(*path)
    if isinstance(f, IsNull):
        return pc.is_null(column)
    if isinstance(f, IsNotNull):
        return pc.is_valid(column)
    if not _comparable(t):
        raise _Untranslatable(f)
    compare = _COMPARE.get(type(f))
    if compare is not None:
        if f.value is None:  # comparing with NULL is never TRUE
            return compare(column, _literal(None, t))
        return compare(column, _literal(f.value, t))
    if isinstance(f, EqualNullSafe):
        if f.value is None:
            return pc.is_null(column)
        # TRUE when equal, FALSE otherwise (never NULL), as Spark's <=>
        return pc.and_kleene(pc.is_valid(column), pc.equal(column, _literal(f.value, t)))
    if isinstance(f, In):
        values = list(f.value)
        if not values:
            raise _Untranslatable(f)
        return _in(column, values, t, negated)
    match = _STRING_MATCH.get(type(f))
    if match is not None:
        text = f.value
        if not (pa.types.is_string(t) or pa.types.is_large_string(t)) or not isinstance(text, str):
            raise _Untranslatable(f)
        if "%" in text or "_" in text:  # lakequery's LIKE has no escape character
            raise _Untranslatable(f)
        return match(column, pattern=text)
    raise _Untranslatable(f)


def translate(f: Filter, schema: pa.Schema) -> pc.Expression | None:
    """One Spark filter as an exact lakequery predicate, or None when it has none.

    Args:
        f: A filter Spark pushed.
        schema: The logical Arrow schema of the rows read (lakequery's types).

    Returns:
        The expression, checked to bind against ``schema``; None when the filter has no
        exact equivalent.
    """
    try:
        expr = _translate(f, schema)
        bind(from_pyarrow_expression(expr), schema)
    except (_Untranslatable, PredicateError):
        return None
    except Exception:  # a filter lakequery cannot take is Spark's alone: never fail the read
        log.debug("pushed filter %r not translated", f, exc_info=True)
        return None
    return expr


def to_expression(filters: Sequence[Filter], schema: pa.Schema) -> pc.Expression | None:
    """The conjunction of the filters that translate exactly (None when none does)."""
    exprs = [e for e in (translate(f, schema) for f in filters) if e is not None]
    if not exprs:
        return None
    return functools.reduce(pc.and_kleene, exprs)


__all__ = ["to_expression", "translate"]
