"""Arrow type categories: the classes of types the predicate language, data skipping and
the SQL renderers treat alike, and the parameters of decimal and timestamp types.

A leaf module (pyarrow only), so that spelling a type as SQL does not import the
predicate language."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.types as pat

_DECIMAL_TYPES = (pa.Decimal32Type, pa.Decimal64Type, pa.Decimal128Type, pa.Decimal256Type)


def decimal_params(t: pa.DataType) -> tuple[int, int]:
    """``(precision, scale)`` of a decimal type."""
    assert isinstance(t, _DECIMAL_TYPES)
    return int(t.precision), int(t.scale)


def timestamp_params(t: pa.DataType) -> tuple[str, str | None]:
    """``(unit, tz)`` of a timestamp type."""
    assert isinstance(t, pa.TimestampType)
    return str(t.unit), t.tz


def timestamp_type(unit: str, tz: str | None) -> pa.DataType:
    """``pa.timestamp(unit, tz)`` (typed loosely for mypy)."""
    make: Any = pa.timestamp
    result: pa.DataType = make(unit, tz=tz)
    return result


def category(t: pa.DataType) -> str:
    """Classify an Arrow type for comparison purposes.

    Args:
        t: An Arrow type.

    Returns:
        One of ``int``, ``float``, ``decimal``, ``bool``, ``string``, ``binary``,
        ``date``, ``timestamp`` (no zone), ``timestamp_tz``, ``null``, ``nested`` or
        ``other``.
    """
    if pat.is_integer(t):
        return "int"
    if pat.is_floating(t):
        return "float"
    if pat.is_decimal(t):
        return "decimal"
    if pat.is_boolean(t):
        return "bool"
    if pat.is_string(t) or pat.is_large_string(t) or pat.is_string_view(t):
        return "string"
    if (
        pat.is_binary(t)
        or pat.is_large_binary(t)
        or pat.is_fixed_size_binary(t)
        or pat.is_binary_view(t)
    ):
        return "binary"
    if pat.is_date(t):
        return "date"
    if pat.is_timestamp(t):
        return "timestamp_tz" if timestamp_params(t)[1] is not None else "timestamp"
    if pat.is_null(t):
        return "null"
    if pat.is_nested(t):
        return "nested"
    return "other"


NUMERIC = frozenset({"int", "float", "decimal"})


def holds(t: pa.DataType, test: Callable[[pa.DataType], bool]) -> bool:
    """Whether ``t`` or a type nested in it at any depth (struct fields, list and list
    view elements, map keys and values) passes ``test``."""
    return test(t) or any(holds(t.field(i).type, test) for i in range(t.num_fields))


def with_children(t: pa.DataType, child: Any) -> pa.DataType:
    """``t`` (a struct, list, large or fixed-size list, or map; other types are returned
    as they are) with each child field replaced by ``child(field)``: the one place that
    rebuilds a nested type around new children, for every transformation of the types
    nested in it."""
    if pat.is_struct(t):
        return pa.struct([child(t.field(i)) for i in range(t.num_fields)])
    if pat.is_map(t):
        mapped: Any = pa.map_(child(t.key_field), child(t.item_field), t.keys_sorted)
        return mapped  # type: ignore[no-any-return]
    out: Any = t
    if pat.is_large_list(t):
        out = pa.large_list(child(t.value_field))
    elif pat.is_fixed_size_list(t):
        out = pa.list_(child(t.value_field), t.list_size)
    elif pat.is_list(t):
        out = pa.list_(child(t.value_field))
    return out  # type: ignore[no-any-return]


__all__ = [
    "NUMERIC",
    "category",
    "decimal_params",
    "holds",
    "timestamp_params",
    "timestamp_type",
    "with_children",
]
