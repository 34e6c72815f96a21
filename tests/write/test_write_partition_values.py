"""Partition values on the write side: §9.1 strings, §9.2 directories, §9.3 add.path."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

from lakequery.protocol.partitions import parse_partition_values
from lakequery.protocol.schema import DecimalType, PrimitiveType
from lakequery.writer.partition_values import (
    directory_value,
    hive_escape,
    java_float_string,
    partition_directory,
    serialize_partition_values,
    split_by_partition,
    uri_encode_path,
)

P = PrimitiveType


@pytest.mark.parametrize(
    ("value", "single", "expected"),
    [
        (1e20, False, "1.0E20"),
        (0.0, False, "0.0"),
        (-0.0, False, "-0.0"),
        (1.5, False, "1.5"),
        (1.7976931348623157e308, False, "1.7976931348623157E308"),
        (float("nan"), False, "NaN"),
        (float("inf"), False, "Infinity"),
        (float("-inf"), False, "-Infinity"),
        (0.001, False, "0.001"),
        (0.0001, False, "1.0E-4"),
        (9999999.0, False, "9999999.0"),
        (10000000.0, False, "1.0E7"),
        (-123.25, False, "-123.25"),
        (0.1, True, "0.1"),
        (3.4028234663852886e38, True, "3.4028235E38"),
    ],
)
def test_java_float_strings(value: float, single: bool, expected: str) -> None:
    assert java_float_string(value, single=single) == expected


def test_serialize_every_type() -> None:
    cases = [
        (pa.array([-128, 0, None], pa.int8()), P("byte"), ["-128", "0", None]),
        (pa.array([2**63 - 1], pa.int64()), P("long"), ["9223372036854775807"]),
        (pa.array([True, False, None]), P("boolean"), ["true", "false", None]),
        (pa.array(["x", "", None]), P("string"), ["x", None, None]),
        (pa.array([b"\x01\x02\x03", b""]), P("binary"), ["\x01\x02\x03", None]),
        (pa.array([dt.date(1970, 1, 1)]), P("date"), ["1970-01-01"]),
        (
            pa.array([Decimal("1.23")], pa.decimal128(38, 18)),
            DecimalType(38, 18),
            ["1.230000000000000000"],
        ),
        (  # plain notation at the full scale (Arrow's cast gives 0E-18, 1.00000000E-10)
            pa.array([Decimal("0"), Decimal("1E-10"), None], pa.decimal128(38, 18)),
            DecimalType(38, 18),
            ["0.000000000000000000", "0.000000000100000000", None],
        ),
        (
            pa.array([dt.datetime(2024, 6, 15, 19, 30, 45)], pa.timestamp("us", "UTC")),
            P("timestamp"),
            ["2024-06-15T19:30:45.000000Z"],
        ),
        (
            pa.array(
                [dt.datetime(2024, 6, 15, 12, 30, 45), dt.datetime(2024, 1, 1, 0, 0, 0, 5)],
                pa.timestamp("us"),
            ),
            P("timestamp_ntz"),
            ["2024-06-15 12:30:45", "2024-01-01 00:00:00.000005"],
        ),
        (pa.array([1e20, None], pa.float64()), P("double"), ["1.0E20", None]),
        (pa.array([0.1], pa.float32()), P("float"), ["0.1"]),
    ]
    for values, t, expected in cases:
        assert serialize_partition_values(values, t, "c") == expected, t


def test_serialized_values_parse_back() -> None:
    """The reader side of lakequery parses what the writer side produces."""
    cases = [
        (pa.array([1.0e20, -0.5, float("inf")]), P("double")),
        (pa.array([Decimal("-1.50")], pa.decimal128(10, 2)), DecimalType(10, 2)),
        (
            pa.array([dt.datetime(2000, 1, 2, 3, 4, 5, 6)], pa.timestamp("us", "UTC")),
            P("timestamp"),
        ),
        (pa.array([dt.datetime(2000, 1, 2, 3, 4, 5, 6)], pa.timestamp("us")), P("timestamp_ntz")),
        (pa.array([dt.date(2020, 2, 29)]), P("date")),
    ]
    for values, t in cases:
        strings = pa.array(serialize_partition_values(values, t, "c"), pa.string())
        assert parse_partition_values(strings, t, column="p").equals(values)


#: UTF-8 text, bytes that are not UTF-8, a NUL, and text spelling the escapes themselves
AWKWARD_BYTES = [b"caf\xc3\xa9", b"\xff", b"\x00\x01", b"a\xfeb", b"\\u0041", b"x\x00"]


def test_binary_values_keep_every_byte() -> None:
    """Bytes that are not UTF-8 text (or hold a NUL, or spell ``\\u00XX`` escapes) are
    written one escape per byte, as delta-rs does; UTF-8 text stays text, as Spark
    writes it. Both parse back to the same bytes."""
    values = pa.array(AWKWARD_BYTES, pa.binary())
    strings = serialize_partition_values(values, P("binary"), "c")
    assert strings[0] == "café"
    assert strings[1] == "\\u00FF" and strings[4] == "\\u005C\\u0075\\u0030\\u0030\\u0034\\u0031"
    parsed = parse_partition_values(pa.array(strings, pa.string()), P("binary"), column="p")
    assert parsed.to_pylist() == AWKWARD_BYTES


def test_unpartitionable_type() -> None:
    with pytest.raises(ValueError, match="cannot partition"):
        serialize_partition_values(pa.array([[1]]), P("variant"), "c")


# The examples table of §9.3 (column p).
SECTION_9_3 = [
    ("US/East", "p=US%2FEast", "p=US%252FEast/", "US/East"),
    ("hello world", "p=hello world", "p=hello%20world/", "hello world"),
    ("a{b", "p=a%7Bb", "p=a%257Bb/", "a{b"),
    ("a}b", "p=a}b", "p=a%7Db/", "a}b"),
    ("100%25", "p=100%2525", "p=100%252525/", "100%25"),
    (None, "p=__HIVE_DEFAULT_PARTITION__", "p=__HIVE_DEFAULT_PARTITION__/", None),
    ("", "p=__HIVE_DEFAULT_PARTITION__", "p=__HIVE_DEFAULT_PARTITION__/", None),
]


@pytest.mark.parametrize(("value", "directory", "prefix", "json_value"), SECTION_9_3)
def test_section_9_3_examples(
    value: str | None, directory: str, prefix: str, json_value: str | None
) -> None:
    [serialized] = serialize_partition_values(pa.array([value], pa.string()), P("string"), "c")
    assert serialized == json_value
    assert partition_directory([("p", serialized)]) == directory
    assert uri_encode_path(directory + "/") == prefix


def test_section_9_3_timestamp_row() -> None:
    # The directory of the table's timestamp row holds the writer-zone text (UTC-7).
    assert partition_directory([("p", "2024-06-15 12:30:45")]) == "p=2024-06-15 12%3A30%3A45"
    assert uri_encode_path("p=2024-06-15 12%3A30%3A45/") == "p=2024-06-15%2012%253A30%253A45/"
    # lakequery writes UTC session form in directories, the ISO form in partitionValues.
    ts = pa.array([dt.datetime(2024, 6, 15, 19, 30, 45)], pa.timestamp("us", "UTC"))
    [value] = serialize_partition_values(ts, P("timestamp"), "c")
    assert value == "2024-06-15T19:30:45.000000Z"
    assert directory_value(value, P("timestamp")) == "2024-06-15 19:30:45"


def test_hive_escape_character_set() -> None:
    escaped = "\x00\x01\x1f\"#%'*/:=?\\\x7f{[]^"
    assert hive_escape(escaped) == "".join(f"%{ord(c):02X}" for c in escaped)
    kept = " }<>|München😀-_.,;~!@$&()+"
    assert hive_escape(kept) == kept
    assert uri_encode_path("München") == "München"
    assert uri_encode_path("a`b|c<d>e") == "a%60b%7Cc%3Cd%3Ee"


def test_split_by_partition_groups_rows() -> None:
    batch = pa.record_batch(
        {
            "a": pa.array(["x", "y", "x", None, "", "y"]),
            "b": pa.array([1, 1, 2, 1, 1, 1], pa.int32()),
            "v": pa.array(range(6), pa.int64()),
        }
    )
    groups = {
        k: g.column("v").to_pylist()
        for k, g in split_by_partition(batch, ["a", "b"], [P("string"), P("integer")])
    }
    assert groups == {
        ("x", "1"): [0],
        ("y", "1"): [1, 5],
        ("x", "2"): [2],
        (None, "1"): [3, 4],
    }


def test_split_single_group_is_zero_copy() -> None:
    batch = pa.record_batch({"p": pa.array([7] * 4, pa.int64()), "v": pa.array(range(4))})
    [(key, group)] = list(split_by_partition(batch, ["p"], [P("long")]))
    assert key == ("7",)
    assert group is batch
    assert list(split_by_partition(batch, [], [])) == [((), batch)]


def test_binary_partitions_round_trip_through_every_reader(tmp_path: Path) -> None:
    """A table partitioned by awkward binary values (a NUL made the write fail on the
    directory name; bytes that are not UTF-8 came back as U+FFFD) reads back byte for byte
    through each engine. ``deltalake`` reads the UTF-8 text values alike; it returns the
    escaped ones (which it writes itself for every binary value) as their literal text."""
    import deltalake
    import pyarrow.compute as pc

    import lakequery as lq

    uri = str(tmp_path / "t")
    keys = [*AWKWARD_BYTES, None]
    lq.write(
        uri,
        pa.table({"id": list(range(len(keys))), "b": pa.array(keys, pa.binary())}),
        partition_by=["b"],
    )
    want = sorted(zip(range(len(keys)), keys, strict=True))
    scan = lq.DeltaTable(uri).snapshot().scan()
    got_arrow = scan.to_arrow().to_pylist()
    assert sorted((r["id"], r["b"]) for r in got_arrow) == want
    assert sorted(scan.to_duckdb().fetchall()) == want
    assert sorted(scan.to_polars().select("id", "b").collect().rows()) == want
    query = deltalake.QueryBuilder().register("t", deltalake.DeltaTable(uri))
    other = query.execute("SELECT id, b FROM t").read_all()
    by_id = dict(zip(other["id"].to_pylist(), other["b"].to_pylist(), strict=True))
    assert by_id[0] == b"caf\xc3\xa9" and by_id[len(keys) - 1] is None
    # a filter on a value that is not UTF-8 finds its row through the partition values
    picked = lq.DeltaTable(uri).snapshot().scan(filter=pc.field("b") == pa.scalar(b"\xff"))
    assert picked.to_arrow()["id"].to_pylist() == [1]
    assert picked.plan().num_files == 1


@pytest.mark.parametrize(
    ("values", "good"),
    [
        (pa.array([0, 2_932_897], pa.date32()), False),  # 10000-01-01
        (pa.array([-719_163], pa.date32()), False),  # 0000-12-31
        (pa.array([-719_162, 2_932_896, None], pa.date32()), True),  # 0001-01-01, 9999-12-31
        (pa.array([253_402_300_800_000_000], pa.timestamp("us", "UTC")), False),
        (pa.array([-62_135_596_800_000_001], pa.timestamp("us")), False),
        (pa.array([253_402_300_799_999_999, -62_135_596_800_000_000], pa.timestamp("us")), True),
    ],
)
def test_dates_and_timestamps_outside_years_1_to_9999_are_refused(
    tmp_path: Path, values: pa.Array, good: bool
) -> None:
    """Such a value was committed as ``10000-01-01`` (or ``0000-12-31 ...``), which no
    reader parses: every later read of the table failed. Now nothing is committed, and
    the edges of the range read back."""
    import lakequery as lq
    from lakequery.errors import SchemaError

    data = pa.table({"id": list(range(len(values))), "c": values})
    uri = str(tmp_path / "t")
    if good:
        lq.write(uri, data, partition_by=["c"])
        back = lq.DeltaTable(uri).snapshot().scan().to_arrow().sort_by("id")
        assert back.column("c").cast(values.type).to_pylist() == values.to_pylist()
        return
    with pytest.raises(SchemaError, match=r"'c'.*outside the years 0001-9999"):
        lq.write(uri, data, partition_by=["c"])
    assert not (tmp_path / "t" / "_delta_log").exists()
