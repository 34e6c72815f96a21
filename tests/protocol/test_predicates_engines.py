"""DuckDB, PyArrow and Polars renderings of a bound predicate select the same rows."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import duckdb
import hypothesis.strategies as st
import polars as pl
import pyarrow as pa
import pyarrow.dataset as ds
import pytest
from hypothesis import HealthCheck, given, settings

from lakequery.protocol.predicates import (
    Column,
    Compare,
    Expr,
    Literal,
    bind,
    parse_predicate,
    to_duckdb_sql,
    to_polars,
    to_pyarrow,
)

UTC = dt.timezone.utc
SCHEMA = pa.schema(
    [
        ("i", pa.int64()),
        ("j", pa.int32()),
        ("f", pa.float64()),
        ("g", pa.float32()),
        ("s", pa.string()),
        ("d", pa.date32()),
        ("t", pa.timestamp("us", tz="UTC")),
        ("n", pa.timestamp("us")),
        ("b", pa.bool_()),
        ("st", pa.struct([("x", pa.int64()), ("y", pa.string())])),
        ("dec", pa.decimal128(9, 2)),
    ]
)
INTS = [-3, -1, 0, 1, 2, 5]
FLOATS = [float("nan"), float("inf"), float("-inf"), -0.0, 0.0, 1.5, -2.25, 1e20, 0.1]
STRINGS = ["", "a", "ab", "abc", "b", "é", "éa", "a%b", "a_b", "a\\b", "it's", "a\nb", "Z", "日本"]
STRINGS += ["(x)%", ".*z", "[a]b", "a\\x", "éé"]
DATES = [dt.date(2026, 1, 1), dt.date(2026, 11, 1), dt.date(1969, 12, 31), dt.date(2000, 2, 29)]
BASE = dt.datetime(2026, 11, 1, 10, 0, 0)
TIMES = [BASE + dt.timedelta(microseconds=k) for k in (0, 1, 999, 1000, -1, 3_600_000_000)]
DECIMALS = ["0.00", "1.50", "-2.25", "1234567.89"]


def nullable(values: list[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), st.sampled_from(values))


@st.composite
def tables(draw: st.DrawFn) -> pa.Table:
    n = draw(st.integers(0, 25))

    def col(values: list[Any]) -> list[Any]:
        return draw(st.lists(nullable(values), min_size=n, max_size=n))

    data = {
        "i": col(INTS),
        "j": col(INTS),
        "f": col(FLOATS),
        "g": col(FLOATS),
        "s": col(STRINGS),
        "d": col(DATES),
        "t": [None if v is None else v.replace(tzinfo=UTC) for v in col(TIMES)],
        "n": col(TIMES),
        "b": col([True, False]),
        "st": [
            None if k is None else {"x": k, "y": y}
            for k, y in zip(col(INTS), col(STRINGS), strict=True)
        ],
        "dec": [None if v is None else Decimal(v) for v in col(DECIMALS)],
    }
    table = pa.table(data, schema=SCHEMA)
    return table.append_column("__rid", pa.array(range(n), pa.int64()))


def _sql_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _float_text(value: float) -> str:
    if value != value or value in (float("inf"), float("-inf")):
        return _sql_string(repr(value))  # coerced from a string literal
    return repr(value)


LITERALS: dict[str, Callable[[st.DrawFn], str]] = {
    "i": lambda draw: str(draw(st.sampled_from([*INTS, 2.5, -0.5]))),
    "j": lambda draw: str(draw(st.sampled_from(INTS))),
    "f": lambda draw: _float_text(draw(st.sampled_from(FLOATS))),
    "g": lambda draw: _float_text(draw(st.sampled_from(FLOATS))),
    "s": lambda draw: _sql_string(draw(st.sampled_from(STRINGS))),
    "d": lambda draw: draw(
        st.sampled_from([f"DATE '{d.isoformat()}'" for d in DATES] + ["'2026-11-01'"])
    ),
    "t": lambda draw: draw(
        st.sampled_from(
            [
                "TIMESTAMP '2026-11-01 10:00:00'",
                "'2026-11-01T10:00:00.000999Z'",
                "'2026-11-01 12:00:00.001+02:00'",
                "TIMESTAMP '2026-11-01 11:00:00+00:00'",
            ]
        )
    ),
    "n": lambda draw: draw(
        st.sampled_from(["TIMESTAMP '2026-11-01 10:00:00.000001'", "'2026-11-01 10:00:00.001'"])
    ),
    "st.x": lambda draw: str(draw(st.sampled_from(INTS))),
    "st.y": lambda draw: _sql_string(draw(st.sampled_from(STRINGS))),
    "dec": lambda draw: draw(st.sampled_from(["1.5", "-2.25", "0", "1234567.891", "3"])),
}
NUMERIC = ["i", "j", "f", "g", "st.x"]
LIKE_PATTERNS = ["a%", "%b", "%a%", "a_b", "_", "%", "", "é%", "a\\b", "%\n%", "a%b%", "__"]
LIKE_PATTERNS += ["%\n_", "é_%", "_'%", "(_)%", "%.*_", "[a]_", "a\\_"]


@st.composite
def atoms(draw: st.DrawFn) -> str:
    column = draw(st.sampled_from([*LITERALS, "b"]))
    if column == "b":
        return draw(st.sampled_from(["b", "b = TRUE", "b != FALSE", "NOT b"]))
    value = LITERALS[column]
    kind = draw(st.sampled_from(["cmp", "cmp", "cmp", "null", "in", "between", "like", "arith"]))
    if kind == "cmp":
        op = draw(st.sampled_from(["=", "!=", "<", "<=", ">", ">="]))
        if draw(st.booleans()):
            return f"{value(draw)} {op} {column}"
        return f"{column} {op} {value(draw)}"
    if kind == "null":
        return f"{column} IS {draw(st.sampled_from(['', 'NOT ']))}NULL"
    if kind == "in":
        values = [value(draw) for _ in range(draw(st.integers(1, 3)))]
        if draw(st.integers(0, 4)) == 0:
            values.append("NULL")
        return f"{column} {draw(st.sampled_from(['', 'NOT ']))}IN ({', '.join(values)})"
    if kind == "between":
        neg = draw(st.sampled_from(["", "NOT "]))
        return f"{column} {neg}BETWEEN {value(draw)} AND {value(draw)}"
    if kind == "like" and column in ("s", "st.y"):
        pattern = _sql_string(draw(st.sampled_from(LIKE_PATTERNS)))
        return f"{column} {draw(st.sampled_from(['', 'NOT ']))}LIKE {pattern}"
    if kind == "arith" and column in NUMERIC:
        other = draw(st.sampled_from(NUMERIC))
        op = draw(st.sampled_from(["+", "-", "*", "/"]))
        cmp = draw(st.sampled_from(["=", "<", ">=", "!="]))
        return f"{column} {op} {other} {cmp} {draw(st.sampled_from(['1', '-0.5', '2.5', 'j']))}"
    return f"{column} = {value(draw)}"


def predicates() -> st.SearchStrategy[str]:
    return st.recursive(
        atoms(),
        lambda inner: st.one_of(
            st.tuples(inner, inner).map(lambda p: f"({p[0]} AND {p[1]})"),
            st.tuples(inner, inner).map(lambda p: f"({p[0]} OR {p[1]})"),
            inner.map(lambda p: f"NOT ({p})"),
        ),
        max_leaves=5,
    )


DATABASE = duckdb.connect()


def select_duckdb(table: pa.Table, expr: Expr) -> list[int]:
    con = DATABASE.cursor()
    try:
        sql = f"SELECT __rid FROM rows WHERE {to_duckdb_sql(expr)} ORDER BY __rid"
        return [r[0] for r in con.from_arrow(table).query("rows", sql).fetchall()]
    finally:
        con.close()


def select_pyarrow(table: pa.Table, expr: Expr) -> list[int]:
    out = ds.dataset(table).to_table(columns=["__rid"], filter=to_pyarrow(expr))
    return sorted(out.column("__rid").to_pylist())


def select_polars(table: pa.Table, expr: Expr) -> list[int]:
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    return sorted(frame.filter(to_polars(expr)).get_column("__rid").to_list())


def select_python(table: pa.Table, keep: Callable[[dict[str, Any]], bool]) -> list[int]:
    return [row["__rid"] for row in table.to_pylist() if keep(row)]


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table=tables(), text=predicates())
def test_engines_select_the_same_rows(table: pa.Table, text: str) -> None:
    expr = bind(parse_predicate(text), SCHEMA)
    expected = select_duckdb(table, expr)
    assert select_pyarrow(table, expr) == expected, text
    assert select_polars(table, expr) == expected, text


FIXED = pa.table(
    {
        "f": [float("nan"), 1.0, None, -0.0, float("inf")],
        "s": ["a\nb", "ab", None, "a_b", "é"],
        "i": [1, None, 3, 0, 2],
        "__rid": [0, 1, 2, 3, 4],
    }
)


@pytest.mark.parametrize(
    ("text", "rows"),
    [
        ("f = 'NaN'", [0]),  # NaN equals itself
        ("f > 1e300", [0, 4]),  # NaN is above every number
        ("f < 'NaN'", [1, 3, 4]),
        ("f != 1", [0, 3, 4]),
        ("f = 0", [3]),  # -0.0 = 0.0
        ("f IN (1, 'NaN')", [0, 1]),
        ("NOT (f IN (1, NULL))", []),  # a NULL in the list: no row is TRUE
        ("i NOT IN (1, 2)", [2, 3]),
        ("NOT (i = NULL)", []),
        ("i / 0 > 1e308", [0, 2, 3, 4]),  # true division: 1 / 0 = inf, 0 / 0 = NaN
        ("i / 2 = 0.5", [0]),
        ("s LIKE 'a_b'", [0, 3]),  # '_' matches a newline, '_' in a pattern is a wildcard
        ("s LIKE 'a%'", [0, 1, 3]),
        ("s LIKE '_'", [4]),  # one character, not one byte
        ("NOT (s LIKE '%b')", [4]),
        ("s NOT BETWEEN 'ab' AND 'b'", [0, 3, 4]),  # UTF-8 byte order
    ],
)
def test_documented_semantics(text: str, rows: list[int]) -> None:
    schema = FIXED.schema.remove(FIXED.schema.get_field_index("__rid"))
    expr = bind(parse_predicate(text), schema)
    assert select_duckdb(FIXED, expr) == rows
    assert select_pyarrow(FIXED, expr) == rows
    assert select_polars(FIXED, expr) == rows


EXACT = pa.table(
    {
        "dec": pa.array([Decimal("0.10"), Decimal("1.10"), None], pa.decimal128(10, 2)),
        "x": [1, 2, 3],
        "a": pa.array([Decimal("1.25"), Decimal("2.50"), Decimal("100.00")], pa.decimal128(20, 2)),
        "b": pa.array([Decimal("3.0001"), Decimal("1"), Decimal("0.5")], pa.decimal128(21, 4)),
        "big": pa.array([Decimal("1" * 38), Decimal(5), Decimal(-7)], pa.decimal128(38, 0)),
        "__rid": [0, 1, 2],
    }
)


@pytest.mark.parametrize(
    ("text", "rows"),
    [
        ("dec * 2 = 0.2", [0]),  # decimal(21,4) against the literal: one exact type
        ("dec * dec > 1", [1]),
        ("dec * 3 + 1 = 4.3", [1]),
        ("dec - 0.05 < 0.1", [0]),
        ("a * b = 3.750125", [0]),  # the product's scale is the sum of both (4 + 2)
        ("a * b > 3", [0, 2]),  # 41 digits: beyond Arrow's decimal128
        ("a * b * a > 1", [0, 1, 2]),
        ("big * 2 > 1", [0, 1]),
        ("x = 1 OR NULL", [0]),  # an untyped NULL operand of AND / OR / NOT
        ("NOT (x = 1 AND NULL)", [1, 2]),
        ("NULL OR NULL", []),
        ("NOT NULL", []),
    ],
)
def test_decimal_arithmetic_and_null_operands(text: str, rows: list[int]) -> None:
    schema = EXACT.schema.remove(EXACT.schema.get_field_index("__rid"))
    expr = bind(parse_predicate(text), schema)
    assert select_duckdb(EXACT, expr) == rows
    assert select_pyarrow(EXACT, expr) == rows
    assert select_polars(EXACT, expr) == rows


def test_strings_with_nul_and_quotes_render_in_sql() -> None:
    table = pa.table({"s": ["a\x00b", "it's", "ab"], "__rid": [0, 1, 2]})
    schema = pa.schema([("s", pa.string())])
    for value, rows in [("a\x00b", [0]), ("it's", [1])]:
        expr = bind(Compare("=", Column(("s",)), Literal(value)), schema)
        assert select_duckdb(table, expr) == rows
        assert select_pyarrow(table, expr) == rows
        assert select_polars(table, expr) == rows


INT32_EDGES = pa.table(
    {"j": pa.array([2**31 - 1, 1, -(2**31), None], pa.int32()), "__rid": [0, 1, 2, 3]}
)


@pytest.mark.parametrize(
    ("text", "rows"),
    [
        ("j * 2 > 0", [0, 1]),  # 2**32 - 2, not an overflow error or a wrapped -2
        ("j + 1 < 0", [2]),
        ("j - 1 > 0", [0]),
        ("j * j > 0", [0, 1, 2]),  # two int32 columns: still int64
        ("j * 2 = 4294967294", [0]),
    ],
)
def test_integer_arithmetic_is_int64_in_every_engine(text: str, rows: list[int]) -> None:
    """pyarrow cast the bound int64 literal down to the int32 column's type and raised
    "overflow"; DuckDB's INTEGER * INTEGER overflows and Polars' wraps."""
    schema = INT32_EDGES.schema.remove(INT32_EDGES.schema.get_field_index("__rid"))
    expr = bind(parse_predicate(text), schema)
    assert select_duckdb(INT32_EDGES, expr) == rows
    assert select_pyarrow(INT32_EDGES, expr) == rows
    assert select_polars(INT32_EDGES, expr) == rows


MIXED = pa.table(
    {
        "i64": pa.array([2**53, 2**53 + 1, 20_000_000, 2**63 - 1], pa.int64()),
        "f32": pa.array([16777216.0, 0.5, 2.0, -1.0], pa.float32()),
        "i32": pa.array([1, 0, 2, 3], pa.int32()),
        "d38": pa.array(
            [
                Decimal("-12345678901234567890.1234567891"),
                Decimal("-12345678901234567890.1234567900"),
                Decimal("12345678901234567890.1234567891"),
                None,
            ],
            pa.decimal128(38, 10),
        ),
        "s": ["A\\", "a\\b", "\\", "x\\\\"],
        "__rid": [0, 1, 2, 3],
    }
)


@pytest.mark.parametrize(
    ("text", "rows"),
    [
        # a negative literal of more than 28 digits stays exact (it was rounded)
        ("d38 = -12345678901234567890.1234567891", [0]),
        ("d38 < -12345678901234567890.1234567895", [1]),
        # an IN list of two types: each value compared in its own (DuckDB unified them
        # to DOUBLE, where 2**53 + 1 equals 2**53)
        ("i64 IN (9007199254740993, 0.5)", [1]),
        ("i64 NOT IN (9007199254740993, 0.5)", [0, 2, 3]),
        ("d38 IN (12345678901234567890.1234567891, 1e30)", [2]),
        # float32 + int32 is a double in every engine (DuckDB and pyarrow kept FLOAT)
        ("f32 + i32 > 16777216", [0]),
        # an integer beside a float compares as a double (pyarrow refused values past
        # float32's exact range)
        ("i64 > 0.5", [0, 1, 2, 3]),
        ("f32 < i64", [0, 1, 2, 3]),
        ("i64 + f32 > 0", [0, 1, 2, 3]),
        # integers beyond int64 are compared exactly, not refused
        ("i64 < 9223372036854775808", [0, 1, 2, 3]),
        ("i64 > -9223372036854775809", [0, 1, 2, 3]),
        ("i64 = 9223372036854775808", []),
        # a backslash is an ordinary character in a pattern (pyarrow's match_like missed it)
        ("s LIKE '%\\'", [0, 2, 3]),
        ("s LIKE '%\\b%'", [1]),
        ("s NOT LIKE '%\\b%'", [0, 2, 3]),
        ("s LIKE 'a\\_'", [1]),
    ],
)
def test_mixed_numbers_and_backslash_patterns(text: str, rows: list[int]) -> None:
    schema = MIXED.schema.remove(MIXED.schema.get_field_index("__rid"))
    expr = bind(parse_predicate(text), schema)
    assert select_duckdb(MIXED, expr) == rows
    assert select_pyarrow(MIXED, expr) == rows
    assert select_polars(MIXED, expr) == rows
