"""Per-file statistics: truncation rules, column selection and a property test that
recomputes every statistic independently (DuckDB over the written Parquet file)."""

from __future__ import annotations

import datetime as dt
import json
import tempfile
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from writekit import make_state

from lakequery.protocol.schema import from_arrow_schema
from lakequery.writer.data_files import write_data_files
from lakequery.writer.stats import StatsCollector, stats_columns, truncate_max, truncate_min

MAX = "\U0010ffff"


# --- truncation ---------------------------------------------------------------------------------


def test_truncate_min_rules() -> None:
    assert truncate_min("a" * 32) == "a" * 32
    assert truncate_min("a" * 40) == "a" * 32
    # The 32nd unit is the high half of a surrogate pair: keep the pair (33 units).
    text = "a" * 31 + "😀" + "zzz"
    assert truncate_min(text) == "a" * 31 + "😀"
    assert truncate_min("é" * 40, 3) == "ééé"


def test_truncate_max_rules() -> None:
    assert truncate_max("a" * 32) == "a" * 32
    assert truncate_max("a" * 33) == "a" * 32 + "\x7f"
    assert truncate_max("a" * 32 + "é") == "a" * 32 + MAX
    assert truncate_max("a" * 32 + "\x7f") == "a" * 32 + MAX
    assert truncate_max("a" * 31 + "😀" + "b") == "a" * 31 + "😀" + "\x7f"
    # U+10FFFF runs are kept whole, then the tie-breaker follows.
    assert truncate_max("ab" + MAX + "c", 2) == "ab" + MAX + "\x7f"
    # Ending within 2L after U+10FFFF runs returns the whole string.
    assert truncate_max("ab" + MAX, 2) == "ab" + MAX
    # Beyond 2L units: no max at all.
    assert truncate_max("ab" + MAX * 2 + "c", 2) is None


@given(st.text(min_size=0, max_size=60), st.integers(1, 10))
def test_truncated_bounds_bound_the_value(text: str, length: int) -> None:
    lo = truncate_min(text, length)
    hi = truncate_max(text, length)
    assert text.startswith(lo) and lo.encode() <= text.encode()
    assert len(lo.encode("utf-16-le")) // 2 <= length + 1
    if hi is not None:
        assert hi.encode() >= text.encode()
        assert len(hi.encode("utf-16-le")) // 2 <= 2 * length + 2


def test_string_stats_are_truncated_in_files(root: str) -> None:
    schema = pa.schema([("s", pa.string())])
    state = make_state(root, schema, configuration={"delta.dataSkippingStringPrefixLength": "4"})
    [add] = write_data_files(pa.table({"s": ["abcdefgh", "zzzzzz", "b"]}), state)
    stats = json.loads(add["stats"])
    assert stats["minValues"] == {"s": "abcd"}
    assert stats["maxValues"] == {"s": "zzzz\x7f"}


# --- selection and kinds ------------------------------------------------------------------------


def test_column_selection_and_kinds(root: str) -> None:
    schema = pa.schema(
        [
            ("a", pa.int64()),
            ("b", pa.bool_()),
            ("c", pa.binary()),
            ("l", pa.list_(pa.int64())),
            ("m", pa.map_(pa.string(), pa.int64())),
            ("s", pa.struct([("x", pa.int32()), ("y", pa.string())])),
            ("z", pa.float64()),
        ]
    )
    data = pa.table(
        {
            "a": [1, None],
            "b": [True, None],
            "c": [b"x", None],
            "l": [[1, None], None],
            "m": pa.array([[("k", 1)], None], pa.map_(pa.string(), pa.int64())),
            "s": [{"x": 1, "y": "q"}, None],
            "z": [1.0, float("nan")],
        },
        schema=schema,
    )
    [add] = write_data_files(data, make_state(root, schema))
    stats = json.loads(add["stats"])
    assert stats["minValues"] == {"a": 1, "s": {"x": 1, "y": "q"}}
    assert stats["maxValues"] == {"a": 1, "s": {"x": 1, "y": "q"}}
    assert stats["nullCount"] == {
        "a": 1, "b": 1, "c": 1, "l": 1, "m": 1, "s": {"x": 1, "y": 1}, "z": 0,
    }  # fmt: skip

    state = make_state(root, schema, configuration={"delta.dataSkippingNumIndexedCols": "3"})
    [add] = write_data_files(data, state)
    assert set(json.loads(add["stats"])["nullCount"]) == {"a", "b", "c"}

    explicit = {"delta.dataSkippingStatsColumns": "S.y,z"}
    [add] = write_data_files(data, make_state(root, schema, configuration=explicit))
    assert json.loads(add["stats"])["nullCount"] == {"s": {"y": 1}, "z": 0}


def test_partition_columns_never_get_stats(root: str) -> None:
    schema = pa.schema([("p", pa.int64()), ("v", pa.int64())])
    state = make_state(root, schema, partition_by=["p"])
    [add] = write_data_files(pa.table({"p": [1, 1], "v": [5, 6]}), state)
    assert json.loads(add["stats"])["nullCount"] == {"v": 0}


def test_special_values(root: str) -> None:
    schema = pa.schema(
        [
            ("f", pa.float32()),
            ("inf", pa.float64()),
            ("ts", pa.timestamp("us", "UTC")),
            ("ntz", pa.timestamp("us")),
            ("d", pa.date32()),
            ("dec", pa.decimal128(38, 18)),
            ("allnull", pa.int64()),
        ]
    )
    t0 = dt.datetime(2024, 1, 1, 10, 0, 0, 123999)
    data = pa.table(
        {
            "f": [0.5, -1.25],
            "inf": [float("-inf"), float("inf")],
            "ts": [t0, t0 + dt.timedelta(days=1)],
            "ntz": [t0, t0],
            "d": [dt.date(2024, 2, 1), dt.date(1969, 12, 31)],
            "dec": [Decimal("12345678901234567890.123456789012345678"), Decimal("-0.5")],
            "allnull": [None, None],
        },
        schema=schema,
    )
    [add] = write_data_files(data, make_state(root, schema))
    assert '"dec":12345678901234567890.123456789012345678' in add["stats"]
    assert '"dec":-0.500000000000000000' in add["stats"]
    stats = json.loads(add["stats"], parse_float=Decimal)
    assert stats["minValues"] == {
        "f": Decimal("-1.25"),
        "inf": "-Infinity",
        "ts": "2024-01-01T10:00:00.123Z",
        "ntz": "2024-01-01T10:00:00.123",
        "d": "1969-12-31",
        "dec": Decimal("-0.5"),
    }
    assert stats["maxValues"]["ts"] == "2024-01-02T10:00:00.123Z"
    assert stats["maxValues"]["inf"] == "Infinity"
    assert stats["nullCount"]["allnull"] == 2


def test_physical_names_under_column_mapping(root: str) -> None:
    schema = pa.schema([("a", pa.int64()), ("s", pa.struct([("x", pa.int64())]))])
    state = make_state(root, schema, mode="name")
    [add] = write_data_files(pa.table({"a": [1], "s": [{"x": 2}]}, schema=schema), state)
    stats = json.loads(add["stats"])
    assert stats["minValues"] == {"col-1-a": 1, "col-2-s": {"col-3-x": 2}}


def test_collector_merges_batches() -> None:
    schema = from_arrow_schema(pa.schema([("s", pa.string()), ("f", pa.float64())]))
    c = StatsCollector(stats_columns(schema))
    c.update(pa.table({"s": ["m", None], "f": [1.0, 2.0]}))
    c.update(pa.table({"s": ["a", "z"], "f": [float("nan"), 0.0]}))
    c.update(pa.table({"s": [None, None], "f": [5.0, 6.0]}))
    assert json.loads(c.to_json()) == {
        "numRecords": 6,
        "minValues": {"s": "a"},
        "maxValues": {"s": "z"},
        "nullCount": {"s": 3, "f": 0},
    }


# --- property test ----------------------------------------------------------------------------

SCHEMA = pa.schema(
    [
        ("i", pa.int64()),
        ("b", pa.int8()),
        ("f", pa.float64()),
        ("s", pa.string()),
        ("ts", pa.timestamp("us", "UTC")),
        ("ntz", pa.timestamp("us")),
        ("d", pa.date32()),
        ("dec", pa.decimal128(12, 3)),
        ("st", pa.struct([("x", pa.int32()), ("y", pa.string())])),
    ]
)
LEAVES = ["i", "b", "f", "s", "ts", "ntz", "d", "dec", "st.x", "st.y"]

_dates = st.dates(dt.date(1900, 1, 1), dt.date(2200, 1, 1))
_times = st.datetimes(dt.datetime(1900, 1, 1), dt.datetime(2200, 1, 1))
_text = st.text(st.characters(codec="utf-8"), max_size=45)


def _row() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {
            "i": st.none() | st.integers(-(2**63), 2**63 - 1),
            "b": st.none() | st.integers(-128, 127),
            "f": st.none() | st.floats(allow_nan=True, allow_infinity=True),
            "s": st.none() | _text,
            "ts": st.none() | _times,
            "ntz": st.none() | _times,
            "d": st.none() | _dates,
            "dec": st.none()
            | st.decimals(-(10**9) + 1, 10**9 - 1, places=3, allow_nan=False, allow_infinity=False),
            "st": st.none()
            | st.fixed_dictionaries(
                {"x": st.none() | st.integers(-(2**31), 2**31 - 1), "y": st.none() | _text}
            ),
        }
    )


def _sql_col(leaf: str) -> str:
    return ".".join(f'"{p}"' for p in leaf.split("."))


def _get(doc: dict[str, Any], leaf: str) -> Any:
    for part in leaf.split("."):
        if not isinstance(doc, dict) or part not in doc:
            return None
        doc = doc[part]
    return doc


def _ms(value: dt.datetime) -> str:
    return value.replace(microsecond=value.microsecond // 1000 * 1000).isoformat(
        timespec="milliseconds"
    )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_row(), min_size=1, max_size=30), st.integers(1, 4))
def test_stats_match_independent_recomputation(rows: list[dict[str, Any]], parts: int) -> None:
    table = pa.Table.from_pylist(rows, schema=SCHEMA)
    size = max(1, len(rows) // parts)
    batches = [b for k in range(0, len(rows), size) for b in table.slice(k, size).to_batches()]
    with tempfile.TemporaryDirectory() as tmp:
        [add] = write_data_files(iter(batches), make_state(tmp, SCHEMA))
        data = pq.read_table(Path(tmp) / unquote(add["path"]))
    stats = json.loads(add["stats"], parse_float=Decimal)
    assert stats["numRecords"] == len(rows)
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    rel = con.from_arrow(data)
    for leaf in LEAVES:
        col = _sql_col(leaf)
        nan = "count(*) FILTER (WHERE isnan(" + col + "))" if leaf == "f" else "0"
        nulls, lo, hi, nans = rel.query(
            "t", f"SELECT count(*) - count({col}), min({col}), max({col}), {nan} FROM t"
        ).fetchall()[0]
        assert _get(stats["nullCount"], leaf) == nulls, leaf
        smin, smax = _get(stats["minValues"], leaf), _get(stats["maxValues"], leaf)
        if lo is None or nans:
            assert smin is None and smax is None, leaf
            continue
        if leaf == "f":
            as_num = {"Infinity": float("inf"), "-Infinity": float("-inf")}
            assert float(as_num.get(smin, smin)) == lo and float(as_num.get(smax, smax)) == hi
        elif leaf in ("s", "st.y"):
            assert lo.startswith(smin) and len(smin.encode("utf-16-le")) <= 2 * 33
            if len(lo.encode("utf-16-le")) <= 64:
                assert smin == lo
            if smax is not None:
                assert smax.encode() >= hi.encode()
                if len(hi.encode("utf-16-le")) <= 64:
                    assert smax == hi
        elif leaf == "ts":
            assert (smin, smax) == (
                _ms(lo.replace(tzinfo=None)) + "Z",
                _ms(hi.replace(tzinfo=None)) + "Z",
            )
        elif leaf == "ntz":
            assert (smin, smax) == (_ms(lo), _ms(hi))
        elif leaf == "d":
            assert (smin, smax) == (lo.isoformat(), hi.isoformat())
        else:
            assert (Decimal(smin), Decimal(smax)) == (lo, hi), leaf
    con.close()


def test_stats_columns_doc_order() -> None:
    schema = from_arrow_schema(SCHEMA)
    assert [".".join(c.path) for c in stats_columns(schema)] == LEAVES
    assert [".".join(c.path) for c in stats_columns(schema, num_indexed_cols=-1)] == LEAVES
    assert len(stats_columns(schema, num_indexed_cols=0)) == 0


@pytest.mark.parametrize("value", ["a" * 31 + "😀", "😀" * 20])
def test_surrogate_pairs_never_split(value: str) -> None:
    lo = truncate_min(value)
    lo.encode("utf-8")  # a split pair would not encode
    hi = truncate_max(value)
    assert hi is None or hi.encode("utf-8")


def test_dates_beyond_year_9999_have_no_bound(tmp_path: Path) -> None:
    """A date Python cannot print (year 10000) leaves that side of the column's bounds
    out, as timestamps do; it was an OverflowError and nothing was written."""
    import lakequery as lq

    uri = str(tmp_path / "t")
    lq.write(uri, pa.table({"d": pa.array([0, 2_932_897], pa.date32()), "i": [1, 2]}))
    (raw,) = lq.DeltaTable(uri).snapshot().files().column("stats").to_pylist()
    stats = json.loads(raw)
    assert stats["minValues"] == {"d": "1970-01-01", "i": 1}
    assert stats["maxValues"] == {"i": 2}
    scan = lq.DeltaTable(uri).snapshot().scan(columns=["i"], filter="d > DATE '2000-01-01'")
    assert scan.to_duckdb().fetchall() == [(2,)]
