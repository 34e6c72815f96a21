"""Soundness of data skipping: a file holding a matching row is never pruned.

Random rows are split into files; each file gets statistics the way Delta writers write
them (truncated string bounds with tie-breakers, millisecond-truncated timestamps with
arbitrary offsets, NaN maxima, missing statistics, typed ``stats_parsed`` from a
checkpoint, ``tightBounds=false`` statistics of a file whose rows were partly deleted,
with widened bounds) and physical column names as under column mapping.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import random
import re
from decimal import Decimal
from typing import Any

import duckdb
import hypothesis.strategies as st
import pyarrow as pa
from hypothesis import HealthCheck, given, settings

from lakequery.protocol.predicates import bind, parse_predicate, to_duckdb_sql
from lakequery.protocol.skipping import SkipColumn, prune_mask

UTC = dt.timezone.utc
PREFIX = 3  # delta.dataSkippingStringPrefixLength, small so that truncation happens

# logical name -> (type, physical stats path); partition columns separately
DATA = {
    "i": (pa.int64(), ("col-i",)),
    "f": (pa.float64(), ("col-f",)),
    "g": (pa.float32(), ("g",)),
    "s": (pa.string(), ("col-s",)),
    "d": (pa.date32(), ("d",)),
    "t": (pa.timestamp("us", tz="UTC"), ("col-t",)),
    "n": (pa.timestamp("us"), ("n",)),
    "dec": (pa.decimal128(9, 2), ("col-dec",)),
    "b": (pa.bool_(), ("b",)),
    "st.x": (pa.int32(), ("col-st", "col-x")),
}
PARTITIONS = {"p": pa.int32(), "q": pa.string()}
SCHEMA = pa.schema(
    [
        *((name, t) for name, (t, _) in DATA.items() if "." not in name),
        ("st", pa.struct([("x", pa.int32())])),
        *PARTITIONS.items(),
    ]
)
COLUMNS = {
    tuple(name.split(".")): SkipColumn(tuple(name.split(".")), t, False, physical)
    for name, (t, physical) in DATA.items()
} | {(name,): SkipColumn((name,), t, True, (name,)) for name, t in PARTITIONS.items()}

INTS = list(range(-4, 5))
FLOATS = [float("nan"), float("inf"), float("-inf"), -0.0, 0.0, 1.5, -2.25, 0.1, 3.0]
STRINGS = ["", "a", "ab", "abc", "abcd", "abd", "b", "é", "éa", "a\x7f", "a\x7fz", "😀", "a😀b"]
STRINGS += ["\U0010ffff", "a\U0010ffffb", "aaaa\U0010ffff\U0010ffffz", "zzzzzz", "日本語テキスト"]
DATES = [dt.date(2026, 1, 1) + dt.timedelta(days=k) for k in (-400, -1, 0, 1, 2, 30)]
BASE = dt.datetime(2026, 11, 1, 10, 0, 0)
MICROS = [0, 1, 999, 1000, 1001, 1999, 60_000_000, 3_600_000_123]
TIMES = [BASE + dt.timedelta(microseconds=k) for k in MICROS]
DECIMALS = [Decimal(x) for x in ("-3.50", "0.00", "0.01", "1.50", "2.00", "1234567.89")]
OFFSETS = [dt.timedelta(0), dt.timedelta(hours=-8), dt.timedelta(hours=5, minutes=30)]


def utf16_len(s: str) -> int:
    return sum(2 if ord(c) > 0xFFFF else 1 for c in s)


def prefix_chars(s: str, units: int) -> int:
    """Number of characters covering ``units`` UTF-16 units without splitting a pair."""
    count = used = 0
    for c in s:
        if used >= units:
            break
        used += 2 if ord(c) > 0xFFFF else 1
        count += 1
    return count


def truncate_min(s: str) -> str:
    return s if utf16_len(s) <= PREFIX else s[: prefix_chars(s, PREFIX)]


def truncate_max(s: str) -> str | None:
    if utf16_len(s) <= PREFIX:
        return s
    n = prefix_chars(s, PREFIX)
    while utf16_len(s[:n]) <= 2 * PREFIX:
        if n == len(s):
            return s
        c = s[n]
        if c == "\U0010ffff":
            n += 1
            continue
        return s[:n] + ("\x7f" if ord(c) < 0x7F else "\U0010ffff")
    return None


def utf8_key(s: str) -> bytes:
    return s.encode("utf-8")


def ts_text(value: dt.datetime, offset: dt.timedelta | None, zero_fraction: bool) -> str:
    value = value.replace(microsecond=value.microsecond // 1000 * 1000, tzinfo=None)
    if offset is None:
        text = value.isoformat(timespec="milliseconds")
        return text[:-4] if zero_fraction and text.endswith(".000") else text
    local = (value + offset).isoformat(timespec="milliseconds")
    if offset == dt.timedelta(0):
        return local + "Z"
    sign = "-" if offset < dt.timedelta(0) else "+"
    minutes = abs(int(offset.total_seconds())) // 60
    return f"{local}{sign}{minutes // 60:02d}:{minutes % 60:02d}"


def float_json(value: float, spelling: int) -> object:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        positive = ["Infinity", "+Infinity", "+INF"][spelling % 3]
        negative = ["-Infinity", "-INF"][spelling % 2]
        return positive if value > 0 else negative
    return value


def bounds(name: str, values: list[Any], rnd: random.Random) -> tuple[Any, Any] | None:
    """Min/max as a writer records them (``None``: the writer omits them)."""
    present = [v for v in values if v is not None]
    if not present:
        return None
    if name in ("f", "g"):
        finite = [v for v in present if not math.isnan(v)]
        if len(finite) < len(present) and rnd.random() < 0.5:
            return None  # policy: omit float bounds when the column contains NaN
        lo = min(finite) if finite else math.nan
        hi = math.nan if len(finite) < len(present) else max(finite)  # Spark: NaN is largest
        return lo, hi
    if name == "s":
        return min(present, key=utf8_key), max(present, key=utf8_key)
    return min(present), max(present)


def widen(name: str, lo: Any, hi: Any, rnd: random.Random) -> tuple[Any, Any]:
    """Loosen bounds the way stale (tightBounds=false) statistics can be."""
    if name in ("i", "st.x"):
        return lo - rnd.randint(0, 3), hi + rnd.randint(0, 3)
    if name == "dec":
        return lo - Decimal("0.5"), hi + Decimal("0.25")
    if name in ("d",):
        return lo - dt.timedelta(days=1), hi + dt.timedelta(days=2)
    if name in ("t", "n"):
        return lo - dt.timedelta(seconds=1), hi + dt.timedelta(milliseconds=3)
    if name == "s" and rnd.random() < 0.5:
        return lo[:1], hi + "~"
    return lo, hi


def set_path(target: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for key in path[:-1]:
        target = target.setdefault(key, {})
    target[path[-1]] = value


POOLS: dict[str, list[Any]] = {
    "i": INTS,
    "st.x": INTS,
    "f": FLOATS,
    "g": FLOATS,
    "s": STRINGS,
    "d": DATES,
    "t": [t.replace(tzinfo=UTC) for t in TIMES],
    "n": TIMES,
    "dec": DECIMALS,
    "b": [True, False],
}


def file_rows(rnd: random.Random, size: int) -> dict[str, list[Any]]:
    null_rate = rnd.choice([0.0, 0.2, 0.6, 1.0])
    return {
        name: [None if rnd.random() < null_rate else rnd.choice(POOLS[name]) for _ in range(size)]
        for name in DATA
    }


@st.composite
def files_and_rows(draw: st.DrawFn) -> tuple[pa.Table, pa.Table]:
    """The files table and all visible rows (with their file number)."""
    file_count = draw(st.integers(1, 6))
    rnd = draw(st.randoms(use_true_random=False))
    stats_json: list[str | None] = []
    stats_parsed: list[dict[str, Any] | None] = []
    partitions: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    for number in range(file_count):
        visible = rnd.randint(0, 6)
        mode = rnd.choice(["json", "json", "json", "none", "parsed", "loose"])
        deleted = rnd.randint(1, 3) if mode == "loose" else 0
        data = file_rows(rnd, visible + deleted)
        part = {
            "p": rnd.choice([None, -1, 0, 1, 2]),
            "q": rnd.choice([None, "x", "y", "é"]),
        }
        partitions.append(part)
        for k in range(visible):
            row = {name: data[name][k] for name in DATA if name != "st.x"}
            x = data["st.x"][k]
            row["st"] = None if x is None and rnd.random() < 0.5 else {"x": x}
            rows.append(row | part | {"__file": number})
        stats: dict[str, Any] = {"numRecords": visible + deleted}
        typed: dict[str, Any] = {"numRecords": visible + deleted}
        for name, (_, physical) in DATA.items():
            if rnd.randint(0, 7) == 0:
                continue  # no statistics for this column in this file
            values = data[name]
            set_path(stats, ("nullCount", *physical), sum(v is None for v in values))
            set_path(typed, ("nullCount", *physical), sum(v is None for v in values))
            found = bounds(name, values, rnd) if name != "b" else None
            if found is None:
                continue
            lo, hi = widen(name, *found, rnd) if mode == "loose" else found
            offset = rnd.choice(OFFSETS)
            json_lo, json_hi, typed_lo, typed_hi = lo, hi, lo, hi
            if name == "s":
                json_lo, json_hi = truncate_min(lo), truncate_max(hi)
                typed_lo, typed_hi = json_lo, json_hi
            elif name in ("f", "g"):
                spelling = rnd.randint(0, 5)
                json_lo, json_hi = float_json(lo, spelling), float_json(hi, spelling)
            elif name in ("t", "n"):
                zero = rnd.random() < 0.5
                off = offset if name == "t" else None
                json_lo, json_hi = ts_text(lo, off, zero), ts_text(hi, off, zero)
                typed_lo = lo.replace(microsecond=lo.microsecond // 1000 * 1000)
                typed_hi = hi.replace(microsecond=hi.microsecond // 1000 * 1000)
            elif name == "d":
                json_lo, json_hi = lo.isoformat(), hi.isoformat()
            elif name == "dec":  # exact JSON numbers, spliced in after json.dumps
                json_lo, json_hi = f"__DEC__{lo}__", f"__DEC__{hi}__"
            set_path(stats, ("minValues", *physical), json_lo)
            set_path(typed, ("minValues", *physical), typed_lo)
            if json_hi is not None:
                set_path(stats, ("maxValues", *physical), json_hi)
                set_path(typed, ("maxValues", *physical), typed_hi)
        if mode == "loose":
            stats["tightBounds"] = False
            typed["tightBounds"] = False
        text = re.sub(
            r'"__DEC__(.*?)__"', r"\1", json.dumps(stats, ensure_ascii=rnd.random() < 0.5)
        )
        stats_json.append(text if mode in ("json", "loose") else None)
        stats_parsed.append(typed if mode in ("parsed", "loose") else None)
    files = pa.table(
        {
            "stats": pa.array(stats_json, pa.string()),
            "stats_parsed": pa.array(stats_parsed, STATS_PARSED),
            "partition_values": pa.array(partitions, pa.struct(list(PARTITIONS.items()))),
        }
    )
    fields = [*SCHEMA, pa.field("__file", pa.int64())]
    return files, pa.Table.from_pylist(rows, schema=pa.schema(fields))


def _stats_struct(types: dict[str, pa.DataType]) -> pa.StructType:
    tree: dict[str, Any] = {}
    for name, t in types.items():
        set_path(tree, DATA[name][1], t)
    return _to_struct(tree)


def _to_struct(tree: dict[str, Any]) -> pa.StructType:
    return pa.struct([(k, _to_struct(v) if isinstance(v, dict) else v) for k, v in tree.items()])


BOUND_TYPES = {name: t for name, (t, _) in DATA.items() if name != "b"}
COUNT_TYPES = {name: pa.int64() for name in DATA}
STATS_PARSED = pa.struct(
    [
        ("numRecords", pa.int64()),
        ("minValues", _stats_struct(BOUND_TYPES)),
        ("maxValues", _stats_struct(BOUND_TYPES)),
        ("nullCount", _stats_struct(COUNT_TYPES)),
        ("tightBounds", pa.bool_()),
    ]
)


def literal(name: str, draw: st.DrawFn) -> str:
    value = draw(st.sampled_from(POOLS[name]))
    if name == "b":
        return "TRUE" if value else "FALSE"
    if isinstance(value, float):
        return f"'{value!r}'" if not math.isfinite(value) else repr(value)
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, dt.datetime):
        shift = draw(st.sampled_from([0, 1, -1, 1000]))
        return f"'{(value + dt.timedelta(microseconds=shift)).isoformat()}'"
    if isinstance(value, dt.date):
        return f"DATE '{value.isoformat()}'"
    return str(value)


@st.composite
def atom(draw: st.DrawFn) -> str:
    name = draw(st.sampled_from([*DATA, *PARTITIONS]))
    if name in PARTITIONS:
        values = {"p": ["-1", "0", "1", "2"], "q": ["'x'", "'y'", "'é'", "'z'"]}[name]
        lit = draw(st.sampled_from(values))
    else:
        lit = literal(name, draw)
    kind = draw(st.sampled_from(["cmp"] * 4 + ["null", "in", "between", "like", "arith"]))
    if kind == "cmp":
        op = draw(st.sampled_from(["=", "!=", "<", "<=", ">", ">="]))
        return f"{lit} {op} {name}" if draw(st.booleans()) else f"{name} {op} {lit}"
    if kind == "null":
        return f"{name} IS {draw(st.sampled_from(['', 'NOT ']))}NULL"
    if kind == "in":
        others = [lit, draw(st.sampled_from([lit, "NULL"]))]
        neg = draw(st.sampled_from(["", "NOT "]))
        return f"{name} {neg}IN ({', '.join(others)})"
    if kind == "between":
        neg = draw(st.sampled_from(["", "NOT "]))
        other = lit if name in PARTITIONS else literal(name, draw)
        return f"{name} {neg}BETWEEN {lit} AND {other}"
    if kind == "like" and name in ("s", "q"):
        pattern = draw(
            st.sampled_from(["a%", "ab%", "é%", "%b", "a_", "abc", "😀%", "\x7f%", "zz%"])
        )
        return f"{name} {draw(st.sampled_from(['', 'NOT ']))}LIKE '{pattern}'"
    if kind == "arith" and name in ("i", "st.x", "p"):
        return f"{name} + 1 > {lit}"
    return f"{name} = {lit}"


def predicates() -> st.SearchStrategy[str]:
    return st.recursive(
        atom(),
        lambda inner: st.one_of(
            st.tuples(inner, inner).map(lambda p: f"({p[0]} AND {p[1]})"),
            st.tuples(inner, inner).map(lambda p: f"({p[0]} OR {p[1]})"),
            inner.map(lambda p: f"NOT ({p})"),
        ),
        max_leaves=4,
    )


DATABASE = duckdb.connect()


def files_with_matches(rows: pa.Table, sql: str, con: duckdb.DuckDBPyConnection) -> set[int]:
    query = f"SELECT DISTINCT __file FROM rows WHERE {sql}"
    return {r[0] for r in con.from_arrow(rows).query("rows", query).fetchall()}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=files_and_rows(), text=predicates())
def test_a_file_with_a_matching_row_is_kept(data: tuple[pa.Table, pa.Table], text: str) -> None:
    files, rows = data
    expr = bind(parse_predicate(text), SCHEMA)
    con = DATABASE.cursor()
    try:
        matching = files_with_matches(rows, to_duckdb_sql(expr), con)
        keep = prune_mask(files, expr, COLUMNS, con).to_pylist()
    finally:
        con.close()
    assert len(keep) == files.num_rows
    assert None not in keep
    pruned_but_matching = [k for k in sorted(matching) if not keep[k]]
    assert not pruned_but_matching, (
        text,
        [files.slice(k, 1).to_pylist() for k in pruned_but_matching],
    )
