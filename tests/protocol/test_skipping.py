"""Deterministic data skipping cases: what must prune and what must be kept."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import duckdb
import pyarrow as pa
import pytest

from lakequery.protocol.predicates import Compare, Expr, Literal, bind, parse_predicate
from lakequery.protocol.skipping import SkipColumn, prune_mask, skip_columns
from lakequery.protocol.sql_spelling import json_decimals_exact

SCHEMA = pa.schema(
    [
        ("a", pa.int64()),
        ("f", pa.float64()),
        ("s", pa.string()),
        ("t", pa.timestamp("us", tz="UTC")),
        ("n", pa.timestamp("us")),
        ("d", pa.date32()),
        ("dec", pa.decimal128(38, 18)),
        ("st", pa.struct([("x", pa.int32())])),
        ("b", pa.bool_()),
        ("p", pa.string()),
        ("flag", pa.bool_()),
    ]
)
# data columns use physical names in the statistics, as under column mapping
PHYSICAL = {"a": "col-a", "f": "f", "s": "col-s", "t": "t", "n": "n", "d": "d", "dec": "dec"}
COLUMNS = {
    (name,): SkipColumn((name,), SCHEMA.field(name).type, False, (physical,))
    for name, physical in PHYSICAL.items()
}
COLUMNS[("st", "x")] = SkipColumn(("st", "x"), pa.int32(), False, ("col-st", "col-x"))
COLUMNS[("b",)] = SkipColumn(("b",), pa.bool_(), False, ("b",))
COLUMNS[("p",)] = SkipColumn(("p",), pa.string(), True, ("p",))
COLUMNS[("flag",)] = SkipColumn(("flag",), pa.bool_(), True, ("flag",))


def stats(
    rows: int, lo: dict[str, Any], hi: dict[str, Any], nulls: dict[str, int], **extra: Any
) -> str:
    return json.dumps(
        {"numRecords": rows, "minValues": lo, "maxValues": hi, "nullCount": nulls, **extra}
    )


def mask(
    files: pa.Table, text: str | Expr, columns: dict[tuple[str, ...], SkipColumn] = COLUMNS
) -> list[bool]:
    expr = parse_predicate(text) if isinstance(text, str) else text
    result = prune_mask(files, bind(expr, SCHEMA), columns)
    assert isinstance(result, pa.BooleanArray)
    assert result.null_count == 0
    return result.to_pylist()


RANGES = pa.table(
    {
        "stats": [
            stats(10, {"col-a": 0}, {"col-a": 9}, {"col-a": 0}),
            stats(10, {"col-a": 10}, {"col-a": 19}, {"col-a": 2}),
            stats(10, {"col-a": 20}, {"col-a": 29}, {"col-a": 0}),
            stats(3, {"col-a": 5}, {"col-a": 5}, {"col-a": 0}),
        ]
    }
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a >= 10 AND a < 20", [False, True, False, False]),
        ("a = 25", [False, False, True, False]),
        ("25 = a", [False, False, True, False]),
        ("a > 19", [False, False, True, False]),
        ("a <= 9", [True, False, False, True]),
        ("a BETWEEN 6 AND 12", [True, True, False, False]),
        ("a NOT BETWEEN 1 AND 28", [True, False, True, False]),
        ("a IN (1, 25)", [True, False, True, False]),
        ("a IN (NULL)", [False, False, False, False]),
        ("NOT (a < 10)", [False, True, True, False]),
        ("NOT (a >= 10 OR a <= 5)", [True, False, False, False]),
        ("a != 5", [True, True, True, False]),
        ("a NOT IN (5, 7)", [True, True, True, False]),
        ("a NOT IN (1, NULL)", [False, False, False, False]),
        # an OR prunes a file only when every branch prunes it
        ("a < 5 OR a > 25", [True, False, True, False]),
        ("a < 5 OR a + 1 > 100", [True, True, True, True]),  # arithmetic: unknown
        ("a < 5 AND a + 1 > 100", [True, False, False, False]),
        ("a IS NULL", [False, True, False, False]),
        ("a = NULL", [False, False, False, False]),
        ("NOT (a = NULL)", [False, False, False, False]),
        ("a > 2.5 AND a < 9.5", [True, False, False, True]),
    ],
)
def test_ranges(text: str, expected: list[bool]) -> None:
    assert mask(RANGES, text) == expected


def test_a_callers_connection_is_left_as_it_was() -> None:
    """On a caller's connection the files' table is registered under a name of its own
    and unregistered after: a caller's view named like it is neither read nor replaced."""
    con = duckdb.connect()
    con.execute("CREATE TEMP VIEW __lq_files AS SELECT 'callers' AS stats")
    views = "SELECT view_name FROM duckdb_views() WHERE starts_with(view_name, '__lq')"
    before = con.sql(views).fetchall()
    expr = bind(parse_predicate("a >= 10 AND a < 20"), SCHEMA)
    for _ in range(2):
        got = prune_mask(RANGES, expr, COLUMNS, con)
        assert got.to_pylist() == [False, True, False, False]
    assert con.sql(views).fetchall() == before == [("__lq_files",)]
    assert con.sql("SELECT stats FROM __lq_files").fetchall() == [("callers",)]


PARTITIONED = pa.table(
    {
        "partition_values": pa.array(
            [{"p": "x", "flag": True}, {"p": "y", "flag": False}, {"p": None, "flag": None}],
            pa.struct([("p", pa.string()), ("flag", pa.bool_())]),
        ),
        "stats": [stats(5, {"col-a": 0}, {"col-a": 9}, {"col-a": 0}), None, "{not json"],
    }
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("p = 'x'", [True, False, False]),
        ("p != 'x'", [False, True, False]),
        ("NOT (p = 'x')", [False, True, False]),
        ("p IS NULL", [False, False, True]),
        ("p IS NOT NULL", [True, True, False]),
        ("p IN ('y', NULL)", [False, True, False]),
        ("p NOT IN ('y')", [True, False, False]),
        ("p LIKE 'x%'", [True, False, False]),
        ("p NOT LIKE 'x%'", [False, True, False]),
        ("flag", [True, False, False]),
        ("NOT flag", [False, True, False]),
        ("p = 'x' OR p = 'y'", [True, True, False]),
        ("p = 'x' AND a > 100", [False, False, False]),
        ("p = 'y' OR a > 100", [False, True, True]),  # invalid JSON stats: unknown, kept
        ("p = 'y' OR a > 5", [True, True, True]),
        ("a > 100", [False, True, True]),
        ("1 = 0", [False, False, False]),
        ("TRUE", [True, True, True]),
    ],
)
def test_partitions(text: str, expected: list[bool]) -> None:
    assert mask(PARTITIONED, text) == expected


def test_floats_never_prune_on_nan() -> None:
    files = pa.table(
        {
            "stats": [
                stats(3, {"f": 1.0}, {"f": "NaN"}, {"f": 0}),
                stats(3, {"f": 1.0}, {"f": 5.0}, {"f": 0}),
                stats(3, {"f": "-INF"}, {"f": "+INF"}, {"f": 0}),
                stats(3, {"f": "-Infinity"}, {"f": "Infinity"}, {"f": 0}),
                stats(3, {"f": "NaN"}, {"f": "NaN"}, {"f": 0}),
                stats(3, {"f": 2.0}, {"f": "+Infinity"}, {"f": 0}),
            ]
        }
    )
    assert mask(files, "f > 100") == [True, False, True, True, True, True]
    assert mask(files, "f < 0") == [False, False, True, True, True, False]
    assert mask(files, "f = 'NaN'") == [True] * 6  # a NaN literal never prunes
    assert mask(files, "f > 1e308") == [True, False, True, True, True, True]
    assert mask(files, "f < -1e308") == [False, False, True, True, True, False]


def test_truncated_string_bounds_are_bounds_in_utf8_byte_order() -> None:
    files = pa.table(
        {
            "stats": [
                # true values 'abcz'..'abdz': min truncated, max with tie-breaker U+007F
                stats(2, {"col-s": "abc"}, {"col-s": "abd\x7f"}, {"col-s": 0}),
                # only an emoji: in UTF-16 order it sorts below U+FF61, in UTF-8 above
                stats(1, {"col-s": "😀"}, {"col-s": "😀"}, {"col-s": 0}),
                # max omitted (too long to truncate)
                stats(2, {"col-s": "m"}, {}, {"col-s": 0}),
                # max with the U+10FFFF tie-breaker
                stats(2, {"col-s": "é"}, {"col-s": "éé\U0010ffff"}, {"col-s": 0}),
            ]
        }
    )
    assert mask(files, "s = 'abcz'") == [True, False, False, False]
    assert mask(files, "s > 'abd'") == [True, True, True, True]
    assert mask(files, "s > 'abe'") == [False, True, True, True]
    assert mask(files, "s = '｡'") == [False, False, True, False]
    assert mask(files, "s > '｡'") == [False, True, True, False]
    assert mask(files, "s < 'abc'") == [False, False, False, False]
    assert mask(files, "s >= 'ééé'") == [False, True, True, True]
    assert mask(files, "s LIKE 'abd%'") == [True, False, False, False]
    assert mask(files, "s LIKE 'abb%'") == [False, False, False, False]
    assert mask(files, "s LIKE 'ab_z'") == [True, False, False, False]
    assert mask(files, "s LIKE '😀%'") == [False, True, True, False]
    assert mask(files, "s LIKE '%z'") == [True, True, True, True]
    assert mask(files, "s NOT LIKE 'abc%'") == [True, True, True, True]
    assert mask(files, "s LIKE 'abcz'") == [True, False, False, False]


def test_timestamps_are_truncated_to_milliseconds_and_carry_offsets() -> None:
    files = pa.table(
        {
            "stats": [
                stats(
                    1,
                    {"t": "2026-11-01T10:00:00.123Z"},
                    {"t": "2026-11-01T10:00:00.123Z"},
                    {"t": 0},
                ),
                stats(
                    1,
                    {"t": "2026-11-01T02:00:00.000-08:00"},
                    {"t": "2026-11-01T02:00:00.000-08:00"},
                    {"t": 0},
                ),
                stats(
                    1,
                    {"t": "2026-11-01T15:30:00+05:30"},
                    {"t": "2026-11-01T15:30:00.000+05:30"},
                    {"t": 0},
                ),
            ]
        }
    )
    # file 0 may hold 10:00:00.123999
    assert mask(files, "t > '2026-11-01 10:00:00.123'") == [True, False, False]
    assert mask(files, "t > '2026-11-01 10:00:00.123998'") == [True, False, False]
    assert mask(files, "t > '2026-11-01 10:00:00.124'") == [False, False, False]
    assert mask(files, "t >= TIMESTAMP '2026-11-01 10:00:00+00:00'") == [True, True, True]
    assert mask(files, "t = '2026-11-01T10:00:00.000500Z'") == [False, True, True]
    assert mask(files, "t < '2026-11-01 10:00:00'") == [False, False, False]


def test_timestamp_ntz_without_offset_and_optional_fraction() -> None:
    files = pa.table(
        {
            "stats": [
                stats(1, {"n": "2026-11-01T10:00:00"}, {"n": "2026-11-01T10:00:00"}, {"n": 0}),
                stats(
                    1, {"n": "2026-11-01T10:00:01.5"}, {"n": "2026-11-01T10:00:02.250"}, {"n": 0}
                ),
            ]
        }
    )
    assert mask(files, "n > '2026-11-01 10:00:00.000999'") == [False, True]
    assert mask(files, "n > '2026-11-01 10:00:00.000998'") == [True, True]
    assert mask(files, "n < '2026-11-01 10:00:01.5'") == [True, False]
    assert mask(files, "n > '2026-11-01 10:00:02.250999'") == [False, False]


def test_dates_and_exact_decimals() -> None:
    big = "12345678901234567890.123456789012345678"
    files = pa.table(
        {
            "stats": [
                f'{{"numRecords":1,"minValues":{{"d":"2026-11-01","dec":{big}}},'
                f'"maxValues":{{"d":"2026-11-30","dec":{big}}},"nullCount":{{"d":0,"dec":0}}}}'
            ]
        }
    )
    assert mask(files, "d = '2026-11-15'") == [True]
    assert mask(files, "d > DATE '2026-11-30'") == [False]
    assert mask(files, "d < '2026-11-01'") == [False]
    # 17 significant digits of a double could not tell these apart
    assert mask(files, f"dec = {big}") == [True]
    assert mask(files, f"dec > {big[:-1]}7") == [True]
    # DuckDB 1.x parses JSON numbers as doubles: such bounds are unknown there, never
    # rounded into skipping the file that holds the value. DuckDB 2 reads the digits
    # exactly, but a writer may have rounded them (delta-rs writes decimal statistics as
    # doubles): bounds of more than 15 digits are widened by a relative 1e-15
    exact = json_decimals_exact()
    assert mask(files, f"dec > {big}") == [True]
    assert mask(files, f"dec <> {big}") == [True]
    assert mask(files, "dec > 12345678901234600000") == [not exact]  # beyond the margin
    assert mask(files, "dec < 12345678901234500000") == [not exact]
    rounded = big[: big.index(".") - 3] + "000"  # what a double keeps of it
    lossy = pa.table({"stats": [files["stats"][0].as_py().replace(big, rounded)]})
    assert mask(lossy, f"dec = {big}") == [True]
    # a bound at the type's limit cannot move outwards: unknown, not an overflow error
    top = "9" * 20 + "." + "9" * 18
    edge = pa.table({"stats": [files["stats"][0].as_py().replace(big, top)]})
    assert mask(edge, "dec = 1") == [not exact]  # below the (widened) minimum
    assert mask(edge, f"dec = {top}") == [True]


def test_null_counts_with_loose_bounds() -> None:
    files = pa.table(
        {
            "stats": [
                stats(3, {"col-a": 1}, {"col-a": 9}, {"col-a": 1}, tightBounds=False),
                stats(3, {"col-a": 1}, {"col-a": 9}, {"col-a": 0}, tightBounds=False),
                stats(3, {}, {}, {"col-a": 3}, tightBounds=False),
                stats(3, {}, {}, {"col-a": 3}),
            ]
        }
    )
    assert mask(files, "a IS NULL") == [True, False, True, True]
    assert mask(files, "a IS NOT NULL") == [True, True, False, False]
    assert mask(files, "a = 1") == [True, True, False, False]
    assert mask(files, "a != 1") == [True, True, False, False]
    assert mask(files, "NOT (a IS NULL)") == [True, True, False, False]


def test_missing_statistics_keep_files() -> None:
    files = pa.table(
        {
            "stats": [
                None,
                "{}",
                stats(3, {"other": 1}, {"other": 2}, {"other": 0}),
                stats(3, {"col-a": "not a number"}, {"col-a": None}, {}),
                '{"numRecords": 0}',
            ]
        }
    )
    assert mask(files, "a > 100") == [True, True, True, True, False]
    assert mask(files, "a IS NULL") == [True, True, True, True, False]
    # a column without skipping information keeps everything
    assert mask(files, "a > 100", {}) == [True, True, True, True, True]


def test_stats_parsed_is_used_where_stats_is_null() -> None:
    parsed_type = pa.struct(
        [
            ("numRecords", pa.int64()),
            ("minValues", pa.struct([("col-a", pa.int64()), ("t", pa.timestamp("us", "UTC"))])),
            ("maxValues", pa.struct([("col-a", pa.int64()), ("t", pa.timestamp("us", "UTC"))])),
            ("nullCount", pa.struct([("col-a", pa.int64()), ("t", pa.int64())])),
        ]
    )
    moment = dt.datetime(2026, 11, 1, 10, 0, 0, 123000, tzinfo=dt.timezone.utc)
    parsed = {
        "numRecords": 4,
        "minValues": {"col-a": 50, "t": moment},
        "maxValues": {"col-a": 60, "t": moment},
        "nullCount": {"col-a": 0, "t": 0},
    }
    files = pa.table(
        {
            "stats": [None, stats(4, {"col-a": 0}, {"col-a": 1}, {"col-a": 0}), None],
            "stats_parsed": pa.array([parsed, parsed, None], parsed_type),
        }
    )
    assert mask(files, "a > 55") == [True, False, True]
    assert mask(files, "a < 10") == [False, True, True]
    assert mask(files, "t > '2026-11-01 10:00:00.123500'") == [True, True, True]
    assert mask(files, "t > '2026-11-01 10:00:00.124'") == [False, True, True]
    # only stats_parsed, no stats column at all
    only_parsed = files.drop_columns(["stats"])
    assert mask(only_parsed, "a > 55") == [True, True, True]
    assert mask(only_parsed, "a > 60") == [False, False, True]


def test_nested_and_boolean_columns() -> None:
    files = pa.table(
        {
            "stats": [
                json.dumps(
                    {
                        "numRecords": 2,
                        "minValues": {"col-st": {"col-x": 3}},
                        "maxValues": {"col-st": {"col-x": 4}},
                        "nullCount": {"col-st": {"col-x": 0}, "b": 2},
                    }
                ),
                json.dumps({"numRecords": 2, "nullCount": {"b": 0}}),
            ]
        }
    )
    assert mask(files, "st.x = 3") == [True, True]
    assert mask(files, "st.x > 4") == [False, True]
    assert mask(files, "st.x IS NULL") == [False, True]
    assert mask(files, "b") == [False, True]  # all NULL: never TRUE
    assert mask(files, "NOT b") == [False, True]
    assert mask(files, "b IS NULL") == [True, False]


def test_unbound_literal_is_coerced_to_the_column_type() -> None:
    expr = Compare(">", parse_predicate("d"), Literal("2026-12-01"))
    files = pa.table({"stats": [stats(1, {"d": "2026-11-01"}, {"d": "2026-11-30"}, {"d": 0})]})
    assert prune_mask(files, expr, COLUMNS).to_pylist() == [False]


def test_empty_file_list_and_connection_reuse() -> None:
    empty = RANGES.slice(0, 0)
    assert prune_mask(empty, bind(parse_predicate("a > 1"), SCHEMA), COLUMNS).to_pylist() == []
    con = duckdb.connect()
    try:
        result = prune_mask(RANGES, bind(parse_predicate("a > 19"), SCHEMA), COLUMNS, con)
        assert result.to_pylist() == [False, False, True, False]
        views = con.sql("SELECT count(*) FROM duckdb_views() WHERE NOT internal").fetchall()
        assert views == [(0,)]
    finally:
        con.close()


def test_many_files_in_order() -> None:
    count = 5000
    files = pa.table(
        {"stats": [stats(1, {"col-a": k}, {"col-a": k}, {"col-a": 0}) for k in range(count)]}
    )
    result = prune_mask(files, bind(parse_predicate("a >= 4990 OR a < 3"), SCHEMA), COLUMNS)
    keep = [k for k, flag in enumerate(result.to_pylist()) if flag]
    assert keep == [0, 1, 2, *range(4990, 5000)]


def test_skip_columns_describes_a_schema() -> None:
    schema = pa.schema(
        [("a", pa.int64()), ("st", pa.struct([("x", pa.int32())])), ("p", pa.string())]
    )
    cols = skip_columns(schema, ["p"], {("a",): ("col-a",), ("st", "x"): ("col-st", "col-x")})
    assert cols == {
        ("a",): SkipColumn(("a",), pa.int64(), False, ("col-a",)),
        ("st",): SkipColumn(("st",), schema.field("st").type, False, ("st",)),
        ("st", "x"): SkipColumn(("st", "x"), pa.int32(), False, ("col-st", "col-x")),
        ("p",): SkipColumn(("p",), pa.string(), True, ("p",)),
    }
    files = pa.table(
        {
            "stats": [stats(2, {"col-a": 1}, {"col-a": 2}, {"col-a": 0})] * 2,
            "partition_values": pa.array([{"p": "x"}, {"p": "y"}]),
        }
    )
    expr = bind(parse_predicate("a > 1 AND p = 'y'"), schema)
    assert prune_mask(files, expr, cols).to_pylist() == [False, True]
    assert prune_mask(files, bind(parse_predicate("a > 2"), schema), cols).to_pylist() == [
        False,
        False,
    ]


def test_float_statistics_of_a_column_widened_to_double() -> None:
    # written while the column was float: 3.4 is the float 3.4000000953674316
    files = pa.table({"stats": [stats(1, {"f": 3.4}, {"f": 3.4}, {"f": 0})]})
    assert mask(files, "f = 3.4000000953674316e0") == [True]
    assert mask(files, "f = 3.4e0") == [True]
    assert mask(files, "f > 3.40001e0") == [False]
    assert mask(files, "f < 3.39999e0") == [False]
