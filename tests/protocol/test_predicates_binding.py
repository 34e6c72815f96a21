"""Binding predicates to a schema: column resolution and literal coercion."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest

from lakequery.errors import PredicateError
from lakequery.protocol.predicates import (
    And,
    Arith,
    Column,
    Compare,
    In,
    Literal,
    bind,
    parse_predicate,
    referenced_columns,
    to_duckdb_sql,
)

UTC = dt.timezone.utc
SCHEMA = pa.schema(
    [
        ("Id", pa.int64()),
        ("small", pa.int8()),
        ("f32", pa.float32()),
        ("f64", pa.float64()),
        ("amount", pa.decimal128(10, 2)),
        ("name", pa.string()),
        ("blob", pa.binary()),
        ("day", pa.date32()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("ntz", pa.timestamp("us")),
        ("flag", pa.bool_()),
        ("s", pa.struct([("x", pa.int32()), ("Inner", pa.struct([("deep", pa.string())]))])),
        ("a.b", pa.int64()),
        ("tags", pa.list_(pa.string())),
    ]
)


def bound_compare(text: str) -> Compare:
    expr = bind(parse_predicate(text), SCHEMA)
    assert isinstance(expr, Compare)
    return expr


def test_columns_resolve_case_insensitively_to_the_schema_spelling() -> None:
    expr = bind(parse_predicate("id = 1 AND S.INNER.Deep = 'x' AND s.x > 0"), SCHEMA)
    assert referenced_columns(expr) == {("Id",), ("s", "Inner", "deep"), ("s", "x")}
    assert isinstance(expr, And)
    first = expr.items[0]
    assert isinstance(first, Compare)
    assert first.left == Column(("Id",), pa.int64())


def test_dotted_top_level_name_is_found_when_no_struct_matches() -> None:
    assert bound_compare("a.b = 1").left == Column(("a.b",), pa.int64())
    assert bound_compare("`a.b` = 1").left == Column(("a.b",), pa.int64())


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("nope = 1", "unknown column 'nope'"),
        ("s.nope = 1", "unknown field 'nope' in struct 's'"),
        ("name.x = 1", "not a struct"),
        ("name = 1", "cannot compare string"),
        ("Id = 'abc'", "cannot compare int"),
        ("day = 'yesterday'", "cannot compare date"),
        ("day = TIMESTAMP '2026-01-01 00:00:00'", "cannot compare date"),
        ("ntz = TIMESTAMP '2026-01-01 00:00:00+01:00'", "zoned timestamp"),
        ("flag = 1", "cannot compare bool"),
        ("name + 1 > 2", "arithmetic needs numbers"),
        ("Id LIKE 'x%'", "LIKE needs a string operand"),
        ("Id", "expected a boolean expression"),
        ("Id = 1 AND name", "expected a boolean expression"),
        ("tags = 'x'", "cannot compare"),
        ("name = day", "cannot compare"),
        ("small + 99999999999999999999 > 0", "out of range"),  # compared: exact (a decimal)
    ],
)
def test_errors(text: str, fragment: str) -> None:
    with pytest.raises(PredicateError) as info:
        bind(parse_predicate(text), SCHEMA)
    assert fragment in str(info.value)


def test_ambiguous_case_insensitive_name_is_an_error() -> None:
    schema = pa.schema([("ab", pa.int64()), ("AB", pa.int64())])
    assert bind(parse_predicate("AB = 1"), schema) == Compare(
        "=", Column(("AB",), pa.int64()), Literal(1, pa.int64())
    )
    with pytest.raises(PredicateError, match="ambiguous"):
        bind(parse_predicate("aB = 1"), schema)


@pytest.mark.parametrize(
    ("text", "literal"),
    [
        ("Id = 3", Literal(3, pa.int64())),
        ("small = 3", Literal(3, pa.int8())),
        ("small = 300", Literal(300, pa.int64())),  # out of int8 range: stays exact
        ("Id = 2.0", Literal(2, pa.int64())),
        ("Id > 2.5", Literal(2.5, pa.float64())),
        ("Id = '7'", Literal(7, pa.int64())),
        ("f64 = 1", Literal(1.0, pa.float64())),
        ("f64 = '-Infinity'", Literal(float("-inf"), pa.float64())),
        ("f32 = 0.1", Literal(float(pa.scalar(0.1, pa.float32()).as_py()), pa.float32())),
        ("f32 < 1e300", Literal(1e300, pa.float64())),  # beyond float32: kept as double
        ("amount = 1.5", Literal(Decimal("1.50"), pa.decimal128(10, 2))),
        ("amount = 3", Literal(Decimal("3.00"), pa.decimal128(10, 2))),
        ("amount < 1.555", Literal(Decimal("1.555"), pa.decimal128(11, 3))),
        ("name = 'x'", Literal("x", pa.string())),
        ("blob = 'x'", Literal(b"x", pa.binary())),
        ("day = '2026-11-01'", Literal(dt.date(2026, 11, 1), pa.date32())),
        ("flag = 'TRUE'", Literal(True, pa.bool_())),
        (
            "ts = '2026-11-01 10:00:00'",
            Literal(dt.datetime(2026, 11, 1, 10, tzinfo=UTC), pa.timestamp("us", "UTC")),
        ),
        (
            "ts = '2026-11-01T02:00:00-08:00'",
            Literal(dt.datetime(2026, 11, 1, 10, tzinfo=UTC), pa.timestamp("us", "UTC")),
        ),
        (
            "ts = DATE '2026-11-01'",
            Literal(dt.datetime(2026, 11, 1, tzinfo=UTC), pa.timestamp("us", "UTC")),
        ),
        (
            "ntz = '2026-11-01 10:00:00.000001'",
            Literal(dt.datetime(2026, 11, 1, 10, 0, 0, 1), pa.timestamp("us")),
        ),
        ("Id = NULL", Literal(None, pa.int64())),
    ],
)
def test_literals_take_the_column_type(text: str, literal: Literal) -> None:
    assert bound_compare(text).right == literal


def test_nan_from_a_string() -> None:
    right = bound_compare("f32 = 'NaN'").right
    assert isinstance(right, Literal) and right.type == pa.float32()
    assert right.value != right.value


def test_literal_on_the_left_and_in_lists_and_arithmetic() -> None:
    expr = bind(
        parse_predicate("'2026-11-01' <= day AND small IN (1, 300) AND small + 1 > 2"), SCHEMA
    )
    assert isinstance(expr, And)
    first, second, third = expr.items
    assert isinstance(first, Compare) and first.left == Literal(dt.date(2026, 11, 1), pa.date32())
    assert isinstance(second, In)
    assert second.values == (Literal(1, pa.int8()), Literal(300, pa.int64()))
    assert isinstance(third, Compare) and isinstance(third.left, Arith)
    # arithmetic integer literals widen to int64 so narrow columns do not overflow
    assert third.left.right == Literal(1, pa.int64())


def test_bound_sql_is_typed() -> None:
    sql = to_duckdb_sql(bind(parse_predicate("amount >= 1.5 AND ts < '2026-11-01Z'"), SCHEMA))
    assert sql == (
        "((\"amount\" >= CAST('1.50' AS DECIMAL(10,2))) AND "
        "(\"ts\" < CAST('2026-11-01 00:00:00.000000+00' AS TIMESTAMPTZ)))"
    )


def test_binding_is_idempotent() -> None:
    expr = bind(parse_predicate("id in (1, 2) and s.x between 1 and 3 or name like 'a%'"), SCHEMA)
    assert bind(expr, SCHEMA) == expr
