"""Tests for lakequery.protocol.partitions: typed partition values (digest §9.1)."""

from __future__ import annotations

import doctest
import json
import math
from datetime import date, datetime, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tablekit import conformance_dir

from lakequery.errors import SchemaError
from lakequery.protocol import partitions as partitions_mod
from lakequery.protocol.partitions import parse_partition_values, partition_struct
from lakequery.protocol.schema import (
    ArrayType,
    DecimalType,
    DeltaType,
    PrimitiveType,
    StructType,
    parse_schema,
    to_arrow_type,
)

REPO = Path(__file__).resolve().parents[2]
CONFORMANCE = conformance_dir()
P = PrimitiveType
UTC = timezone.utc


def parse(values: list[str | None], t: DeltaType, **kw: Any) -> list[Any]:
    out = parse_partition_values(pa.array(values, pa.string()), t, column="p", **kw)
    assert out.type == to_arrow_type(t)
    assert len(out) == len(values)
    return list(out.to_pylist())


@pytest.mark.parametrize("t", ["byte", "short", "integer", "long"])
def test_integers(t: str) -> None:
    assert parse(["0", "-1", "+5", "-0", "", None, "42"], P(t)) == [0, -1, 5, 0, None, None, 42]


def test_long_extremes() -> None:
    assert parse(["9223372036854775807", "-9223372036854775808"], P("long")) == [
        2**63 - 1,
        -(2**63),
    ]
    assert parse(["-128", "127"], P("byte")) == [-128, 127]
    assert parse(["-32768", "32767"], P("short")) == [-32768, 32767]


@pytest.mark.parametrize(
    ("value", "t"),
    [
        ("128", "byte"),
        ("-32769", "short"),
        ("2147483648", "integer"),
        ("9223372036854775808", "long"),
        ("1.0", "integer"),
        ("0x1", "integer"),
        (" 1", "long"),
        ("1e3", "long"),
        ("abc", "long"),
    ],
)
def test_integer_errors_name_column_and_value(value: str, t: str) -> None:
    with pytest.raises(SchemaError) as info:
        parse_partition_values(pa.array(["1", value]), P(t), column="my_col")
    assert "my_col" in str(info.value)
    assert repr(value) in str(info.value)


def test_doubles_java_and_python_forms() -> None:
    got = parse(
        ["1.0E20", "1e+20", "NaN", "nan", "Infinity", "-Infinity", "inf", "-0.0", "0.0", "1.5"],
        P("double"),
    )
    assert got[0] == got[1] == 1e20
    assert math.isnan(got[2]) and math.isnan(got[3])
    assert got[4] == got[6] == math.inf and got[5] == -math.inf
    assert got[7] == 0.0 and math.copysign(1.0, got[7]) == -1.0
    assert math.copysign(1.0, got[8]) == 1.0
    assert got[9] == 1.5
    assert parse(["1.7976931348623157E308", "4.9E-324"], P("double")) == [
        1.7976931348623157e308,
        5e-324,
    ]


def test_floats_are_float32() -> None:
    got = parse(["3.4028235E38", "1.4E-45", "0.1", "NaN"], P("float"))
    assert got[0] == pytest.approx(3.4028234663852886e38)
    assert got[1] == pytest.approx(1.401298464324817e-45)
    assert got[2] == pytest.approx(0.1, rel=1e-7) and got[2] != 0.1
    assert math.isnan(got[3])


def test_float_error() -> None:
    with pytest.raises(SchemaError, match="'1,5'"):
        parse(["1,5"], P("double"))


def test_decimals() -> None:
    t = DecimalType(38, 18)
    got = parse(
        ["0E-18", "1.230000000000000000", "-1.5E+2", "12345678901234567890.123456789012345678"],
        t,
    )
    assert got == [
        Decimal("0"),
        Decimal("1.23"),
        Decimal("-150"),
        Decimal("12345678901234567890.123456789012345678"),
    ]
    assert parse(["0", "1", None, ""], DecimalType(1, 0)) == [
        Decimal(0),
        Decimal(1),
        None,
        None,
    ]
    assert parse(["99999999999999999999999999999999999999"], DecimalType(38, 0)) == [
        Decimal("99999999999999999999999999999999999999")
    ]


@pytest.mark.parametrize(
    ("value", "t"),
    [("1.255", DecimalType(3, 2)), ("1000", DecimalType(3, 0)), ("x", DecimalType(5, 2))],
)
def test_decimal_must_fit_exactly(value: str, t: DecimalType) -> None:
    with pytest.raises(SchemaError, match=repr(value)):
        parse([value], t)


def test_booleans() -> None:
    assert parse(["true", "false", "TRUE", "False", None, ""], P("boolean")) == [
        True,
        False,
        True,
        False,
        None,
        None,
    ]
    for bad in ("1", "yes", "t"):
        with pytest.raises(SchemaError, match=repr(bad)):
            parse([bad], P("boolean"))


def test_dates() -> None:
    assert parse(["1970-01-01", "2021-09-08", "1969-12-31", "0001-01-01"], P("date")) == [
        date(1970, 1, 1),
        date(2021, 9, 8),
        date(1969, 12, 31),
        date(1, 1, 1),
    ]
    with pytest.raises(SchemaError, match="2021-9-8"):
        parse(["2021-9-8"], P("date"))


def test_timestamps_both_forms() -> None:
    got = parse(
        [
            "2021-09-08 11:11:11",  # zone-less legacy form: read as UTC
            "2020-01-01 08:09:10.001",
            "1969-01-01 00:00:00",
            "2024-06-15T19:30:45.000000Z",
            "2024-06-15T19:30:45.123456+05:30",
            "2024-06-15 12:30:45-0700",
            "2024-06-15 21:30:45 +02:00",
            "2024-06-15T19:30:45",
            None,
            "",
        ],
        P("timestamp"),
    )
    assert got == [
        datetime(2021, 9, 8, 11, 11, 11, tzinfo=UTC),
        datetime(2020, 1, 1, 8, 9, 10, 1000, tzinfo=UTC),
        datetime(1969, 1, 1, tzinfo=UTC),
        datetime(2024, 6, 15, 19, 30, 45, tzinfo=UTC),
        datetime(2024, 6, 15, 14, 0, 45, 123456, tzinfo=UTC),
        datetime(2024, 6, 15, 19, 30, 45, tzinfo=UTC),
        datetime(2024, 6, 15, 19, 30, 45, tzinfo=UTC),
        datetime(2024, 6, 15, 19, 30, 45, tzinfo=UTC),
        None,
        None,
    ]
    with pytest.raises(SchemaError, match="'not a time'"):
        parse(["2021-09-08 11:11:11", "not a time"], P("timestamp"))


def test_timestamp_ntz() -> None:
    assert parse(
        ["2021-09-08 11:11:11.123456", "2021-09-08T00:00:00", None], P("timestamp_ntz")
    ) == [
        datetime(2021, 9, 8, 11, 11, 11, 123456),
        datetime(2021, 9, 8),
        None,
    ]
    with pytest.raises(SchemaError, match="Z"):
        parse(["2021-09-08 11:11:11Z"], P("timestamp_ntz"))


def test_strings_null_and_empty() -> None:
    assert parse(["a", "", None, "null", " "], P("string")) == ["a", None, None, "null", " "]


def test_binary_utf8_by_default() -> None:
    values = ["hello", "😈", "\x01\x02\x03", "é", "", None, "\\u0001\\u00ff", "\\u0041x"]
    assert parse(values, P("binary")) == [
        b"hello",
        "😈".encode(),
        b"\x01\x02\x03",
        "é".encode(),
        None,
        None,
        b"\x01\xff",  # delta-rs escape form
        b"\\u0041x",  # not purely escapes: taken literally
    ]


def test_binary_latin1_option() -> None:
    values = ["é\x01", "é😈", "plain", "\\u00e9", None]
    assert parse(values, P("binary"), binary_encoding="latin-1") == [
        b"\xe9\x01",
        "é😈".encode(),
        b"plain",
        b"\xe9",
        None,
    ]
    with pytest.raises(ValueError):
        parse(["x"], P("binary"), binary_encoding="cp1252")  # type: ignore[arg-type]


def test_binary_of_sliced_and_chunked_input() -> None:
    arr = pa.array(["skip", "\\u0010\\u0020", None, "ab", "\\u00FF"]).slice(1)
    out = parse_partition_values(arr, P("binary"), column="b")
    assert out.to_pylist() == [b"\x10\x20", None, b"ab", b"\xff"]
    chunked = pa.chunked_array([["1", None], ["", "3"]], pa.large_string())
    assert parse_partition_values(chunked, P("long"), column="c").to_pylist() == [1, None, None, 3]
    dictionary = pa.array(["x", "y", "x"]).dictionary_encode()
    assert parse_partition_values(dictionary, P("string"), column="d").to_pylist() == [
        "x",
        "y",
        "x",
    ]
    assert (
        parse_partition_values(pa.array([], pa.string()), P("binary"), column="e").to_pylist() == []
    )


def test_void_and_unsupported_types() -> None:
    out = parse_partition_values(pa.array(["x", None]), P("void"), column="v")
    assert out.type == pa.null() and out.null_count == 2
    for t in (P("variant"), ArrayType(P("long")), StructType(()), P("geometry(OGC:CRS84)")):
        with pytest.raises(SchemaError, match="partition column"):
            parse_partition_values(pa.array(["1"]), t, column="bad")


def test_large_input_is_vectorised() -> None:
    n = 200_000
    values = pc.cast(pa.array(range(n)), pa.string())
    out = parse_partition_values(values, P("long"), column="c")
    assert out.to_pylist()[-1] == n - 1
    binary = parse_partition_values(
        pa.array(["\\u0001\\u0002", "ab"] * (n // 2)), P("binary"), column="b"
    )
    assert binary[0].as_py() == b"\x01\x02" and binary[n - 1].as_py() == b"ab"


@settings(max_examples=100, deadline=None)
@given(st.lists(st.none() | st.integers(-(2**63), 2**63 - 1), max_size=20))
def test_hypothesis_longs(values: list[int | None]) -> None:
    assert parse([None if v is None else str(v) for v in values], P("long")) == values


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(allow_nan=False), max_size=20))
def test_hypothesis_doubles_repr(values: list[float]) -> None:
    assert parse([repr(v) for v in values], P("double")) == values


@settings(max_examples=100, deadline=None)
@given(st.lists(st.binary(max_size=6), max_size=10))
def test_hypothesis_binary_delta_rs_escapes(values: list[bytes]) -> None:
    escaped = ["".join(f"\\u{b:04X}" for b in v) for v in values]
    assert parse(escaped, P("binary")) == [v or None for v in values]


# --- partition_struct ------------------------------------------------------------------------------


def test_partition_struct_from_map() -> None:
    pv = pa.array(
        [
            [("col-x", "1"), ("b", "2021-01-01")],
            None,
            [("b", "")],
            [("col-x", None), ("b", "1999-12-31"), ("extra", "?")],
        ],
        pa.map_(pa.string(), pa.string()),
    )
    out = partition_struct(pv, [("x", "col-x", P("integer")), ("b", "b", P("date"))])
    assert out.type == pa.struct([pa.field("x", pa.int32()), pa.field("b", pa.date32())])
    assert out.to_pylist() == [
        {"x": 1, "b": date(2021, 1, 1)},
        {"x": None, "b": None},
        {"x": None, "b": None},
        {"x": None, "b": date(1999, 12, 31)},
    ]


def test_partition_struct_other_inputs() -> None:
    entries = pa.struct(
        [pa.field("key", pa.string(), nullable=False), pa.field("value", pa.string())]
    )
    as_list = pa.array([[{"key": "a", "value": "x"}], []], pa.list_(entries))
    assert partition_struct(as_list, [("a", "a", P("string"))]).to_pylist() == [
        {"a": "x"},
        {"a": None},
    ]
    chunked = pa.chunked_array([pa.array([[("a", "5")]], pa.map_(pa.string(), pa.string()))] * 2)
    assert partition_struct(chunked, [("a", "a", P("short"))]).field("a").to_pylist() == [5, 5]
    empty = partition_struct(chunked, [])
    assert len(empty) == 2 and empty.type == pa.struct([])
    with pytest.raises(SchemaError):
        partition_struct(pa.array(["a"]), [("a", "a", P("string"))])
    with pytest.raises(SchemaError, match="'a'"):
        partition_struct(chunked, [("a", "a", P("boolean"))])


# --- agreement with the conformance tables ---------------------------------------------------------


def _file_key(action: dict[str, Any]) -> tuple[str, str]:
    """Files are identified by path and deletion vector (digest §6)."""
    dv = action.get("deletionVector") or {}
    dv_id = f"{dv.get('storageType')}{dv.get('pathOrInlineDv')}@{dv.get('offset')}" if dv else ""
    return action["path"], dv_id


def _partition_cases() -> list[str]:
    path = CONFORMANCE / "manifest.json"
    if not path.is_file():
        return ["conformance-data-missing"]
    tables = json.loads(path.read_text())["tables"]
    return [t["name"] for t in tables if t["partition_columns"]]


PARTITIONED = _partition_cases()


@pytest.mark.parametrize("table", PARTITIONED)
def test_conformance_partition_values(table: str) -> None:
    """Every partition tuple of the live files appears in the expected data and vice versa."""
    manifest = json.loads((CONFORMANCE / "manifest.json").read_text())
    entry = next(t for t in manifest["tables"] if t["name"] == table)
    log = CONFORMANCE / "tables" / table / "_delta_log"
    live: dict[tuple[str, str], dict[str, Any]] = {}
    metadata: dict[str, Any] = {}
    for commit in sorted(log.glob("*.json")):
        for line in commit.read_text().splitlines():
            action = json.loads(line) if line.strip() else {}
            metadata = action.get("metaData", metadata)
            if "add" in action:
                live[_file_key(action["add"])] = action["add"]
            if "remove" in action:
                live.pop(_file_key(action["remove"]), None)
    assert metadata, f"{table}: no metaData in JSON commits"
    schema = parse_schema(metadata["schemaString"])
    cols = metadata["partitionColumns"]
    assert cols == entry["partition_columns"]
    keys = {}
    for c in cols:
        field = schema[c]
        keys[c] = field.metadata.get("delta.columnMapping.physicalName", c)
    pv = pa.array(
        [list(a["partitionValues"].items()) for a in live.values()],
        pa.map_(pa.string(), pa.string()),
    )
    got = partition_struct(pv, [(c, keys[c], schema[c].type) for c in cols])
    expected = pq.read_table(CONFORMANCE / entry["versions"][-1]["expected_file"], columns=cols)
    assert got.type == pa.struct(list(expected.schema))
    got_set = {repr(r) for r in got.to_pylist()}
    want_set = {repr(r) for r in expected.to_pylist()}
    assert want_set <= got_set
    # A live file whose rows are all deleted by its DV adds a tuple the data lacks.
    if not any('"deletionVector":{' in p.read_text() for p in log.glob("*.json")):
        assert got_set == want_set


def test_conformance_partition_tables_present() -> None:
    for name in (
        "golden_data_reader_partition_values",
        "dat_multi_partitioned",
        "golden_kernel_timestamp_int96",
        "deltars_table_with_column_mapping",
    ):
        assert name in PARTITIONED


def test_zone_less_timestamp_matches_primary_expectation() -> None:
    expected = pq.read_table(
        CONFORMANCE / "expected/golden_data_reader_partition_values/v0.parquet"
    )
    alt = pq.read_table(
        CONFORMANCE / "expected/golden_data_reader_partition_values/v0.alt_source_expected.parquet"
    )
    got = parse(["2021-09-08 11:11:11"], P("timestamp"))[0]
    assert got in expected.column("as_timestamp").to_pylist()
    assert got not in alt.column("as_timestamp").to_pylist()


def test_module_doctests() -> None:
    result = doctest.testmod(partitions_mod, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 1
    assert result.failed == 0
