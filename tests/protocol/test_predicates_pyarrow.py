"""Converting PyArrow compute expressions into predicates."""

from __future__ import annotations

import datetime as dt

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest

from lakequery.errors import PredicateError
from lakequery.protocol.predicates import (
    And,
    Arith,
    Column,
    Compare,
    In,
    IsNull,
    Like,
    Literal,
    Not,
    Or,
    bind,
    from_pyarrow_expression,
    to_duckdb_sql,
)

A, S = Column(("a",)), Column(("s",))
I64 = pa.int64()


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        (pc.field("a") > 3, Compare(">", A, Literal(3, I64))),
        (pc.field("a") == pc.field("b"), Compare("=", A, Column(("b",)))),
        (pc.field("a") != 3, Compare("!=", A, Literal(3, I64))),
        (pc.field("a") <= 3, Compare("<=", A, Literal(3, I64))),
        (pc.field("a") >= 3.5, Compare(">=", A, Literal(3.5, pa.float64()))),
        (pc.field("a") < 3, Compare("<", A, Literal(3, I64))),
        (
            (pc.field("a") > 1) & (pc.field("a") < 5),
            And((Compare(">", A, Literal(1, I64)), Compare("<", A, Literal(5, I64)))),
        ),
        (
            (pc.field("a") > 1) | ~(pc.field("s") == "x"),
            Or((Compare(">", A, Literal(1, I64)), Not(Compare("=", S, Literal("x", pa.string()))))),
        ),
        (pc.field("a").is_null(), IsNull(A)),
        (pc.field("a").is_valid(), IsNull(A, negated=True)),
        (pc.field("st", "x") == 1, Compare("=", Column(("st", "x")), Literal(1, I64))),
        (pc.field(("st", "y", "z")).is_null(), IsNull(Column(("st", "y", "z")))),
        (
            pc.field("a") + 1 > pc.field("b") * 2,
            Compare(
                ">",
                Arith("+", A, Literal(1, I64)),
                Arith("*", Column(("b",)), Literal(2, I64)),
            ),
        ),
        (
            pc.subtract(pc.field("a"), 1) / 2 == 0,
            Compare(
                "=", Arith("/", Arith("-", A, Literal(1, I64)), Literal(2, I64)), Literal(0, I64)
            ),
        ),
        (pc.negate(pc.field("a")) < 0, Compare("<", Arith("-", Literal(0), A), Literal(0, I64))),
        (
            pc.field("d") == pa.scalar(dt.date(2026, 11, 1)),
            Compare("=", Column(("d",)), Literal(dt.date(2026, 11, 1), pa.date32())),
        ),
        (
            pc.field("t")
            < pa.scalar(dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc), pa.timestamp("ns", "UTC")),
            Compare(
                "<",
                Column(("t",)),
                Literal(dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc), pa.timestamp("us", "UTC")),
            ),
        ),
        (pc.match_like(pc.field("s"), "a\\\\b%"), Like(S, "a\\b%")),
        (pc.starts_with(pc.field("s"), "ab"), Like(S, "ab%")),
        (pc.ends_with(pc.field("s"), "ab"), Like(S, "%ab")),
        (pc.match_substring(pc.field("s"), "ab"), Like(S, "%ab%")),
        (pc.scalar(True), Literal(True, pa.bool_())),
    ],
)
def test_common_forms(expr: pc.Expression, expected: object) -> None:
    assert from_pyarrow_expression(expr) == expected


def test_is_in_keeps_pyarrow_null_matching() -> None:
    # default (MATCH): a NULL input matches a NULL in the value set
    assert from_pyarrow_expression(pc.field("a").isin([1, None])) == Or(
        (IsNull(A), In(A, (Literal(1, I64),)))
    )
    # MATCH without NULL in the set, or skip_nulls: a NULL input is FALSE, not NULL
    assert from_pyarrow_expression(pc.field("a").isin([1, 2])) == And(
        (IsNull(A, negated=True), In(A, (Literal(1, I64), Literal(2, I64))))
    )
    skip = pc.is_in(pc.field("a"), value_set=pa.array([1, None]), skip_nulls=True)
    assert from_pyarrow_expression(skip) == And(
        (IsNull(A, negated=True), In(A, (Literal(1, I64),)))
    )


TABLE = pa.table(
    {
        "a": [1, None, 3, 4, -2],
        "b": [1, 2, None, 0, 5],
        "s": ["ab", "a\\b", None, "xab", "b"],
        "st": [{"x": 1}, {"x": None}, None, {"x": 4}, {"x": 1}],
    }
)


DATABASE = duckdb.connect()


@pytest.mark.parametrize(
    "expr",
    [
        pc.field("a") > 2,
        ~(pc.field("a") > 2),
        pc.field("a").isin([1, None]),
        ~pc.field("a").isin([1, None]),
        ~pc.field("a").isin([1, 3]),
        ~pc.is_in(pc.field("a"), value_set=pa.array([1, None]), skip_nulls=True),
        (pc.field("a") > 1) | pc.field("b").is_null(),
        ~((pc.field("a") > 1) & (pc.field("b") < 3)),
        pc.field("st", "x") == 1,
        pc.field("a") * 2 - pc.field("b") >= 1,
        pc.match_like(pc.field("s"), "a\\\\b"),
        ~pc.starts_with(pc.field("s"), "a"),
        pc.ends_with(pc.field("s"), "b") & pc.field("a").is_valid(),
    ],
)
def test_converted_predicate_selects_what_pyarrow_selects(expr: pc.Expression) -> None:
    expected = ds.dataset(TABLE).to_table(filter=expr).to_pylist()
    predicate = bind(from_pyarrow_expression(expr), TABLE.schema)
    con = DATABASE.cursor()
    try:
        sql = f"SELECT * FROM t WHERE {to_duckdb_sql(predicate)}"
        got = con.from_arrow(TABLE).query("t", sql).to_arrow_table().to_pylist()
    finally:
        con.close()
    assert sorted(map(repr, got)) == sorted(map(repr, expected))


@pytest.mark.parametrize(
    ("expr", "fragment"),
    [
        (pc.field("a").cast(pa.string()) == "1", "unsupported pyarrow function 'cast'"),
        (pc.field("a").is_null(nan_is_null=True), "nan_is_null"),
        (pc.match_like(pc.field("s"), "a\\%"), "literal '%'"),
        (pc.match_like(pc.field("s"), "a%", ignore_case=True), "ignore_case"),
        (pc.starts_with(pc.field("s"), "a_"), "'%' or '_'"),
        (pc.field("a") == pa.scalar([1], pa.list_(pa.int64())), "unsupported literal"),
        (pc.invert(pc.Expression._call("and", [pc.field("x"), pc.field("y")])), "non-Kleene"),
        (pc.Expression._call("xor", [pc.field("x"), pc.field("y")]), "'xor'"),
    ],
)
def test_unsupported_forms_raise(expr: pc.Expression, fragment: str) -> None:
    with pytest.raises(PredicateError) as info:
        from_pyarrow_expression(expr)
    assert fragment in str(info.value)


def test_non_kleene_and_outside_negation_is_accepted() -> None:
    expr = pc.Expression._call("and", [pc.field("x"), pc.field("y")])
    assert from_pyarrow_expression(expr) == And((Column(("x",)), Column(("y",))))


def test_rejects_non_expressions() -> None:
    with pytest.raises(PredicateError, match=r"expected a pyarrow\.compute\.Expression"):
        from_pyarrow_expression("a > 1")  # type: ignore[arg-type]
