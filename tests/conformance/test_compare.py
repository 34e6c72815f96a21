"""Unit tests of the comparison helper (no conformance data, no lakequery needed)."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal

import duckdb
import polars as pl
import pyarrow as pa
import pytest

from ._compare import (
    SchemaMismatch,
    TableMismatch,
    assert_tables_match,
    canonical_sort,
    normalise_array,
    normalise_to_schema,
    row_keys,
)

UTC = dt.timezone.utc

POINT = pa.struct([("x", pa.int32()), ("tags", pa.list_(pa.field("element", pa.string())))])
ATTRS = pa.map_(pa.string(), pa.int64())


def rich_table() -> pa.Table:
    """A table with most Delta types, in the expected-file representation."""
    schema = pa.schema(
        [
            ("s", pa.string()),
            ("i8", pa.int8()),
            ("i64", pa.int64()),
            ("f", pa.float64()),
            ("dec", pa.decimal128(10, 2)),
            ("b", pa.binary()),
            ("flag", pa.bool_()),
            ("d", pa.date32()),
            ("ts", pa.timestamp("us", tz="UTC")),
            ("ntz", pa.timestamp("us")),
            ("point", POINT),
            ("nums", pa.list_(pa.field("element", pa.int64()))),
            ("attrs", ATTRS),
        ]
    )
    rows = {
        "s": ["a", "b", None, "d"],
        "i8": [1, -2, None, 4],
        "i64": [10, 20, 30, None],
        "f": [1.5, math.nan, None, -0.25],
        "dec": [Decimal("1.25"), None, Decimal("-3.00"), Decimal("99999999.99")],
        "b": [b"\x00\x01", None, b"", b"zz"],
        "flag": [True, False, None, True],
        "d": [dt.date(2020, 1, 1), None, dt.date(1900, 12, 31), dt.date(2038, 1, 19)],
        "ts": [
            dt.datetime(2021, 9, 8, 11, 11, 11, tzinfo=UTC),
            None,
            dt.datetime(1970, 1, 1, tzinfo=UTC),
            dt.datetime(2000, 2, 29, 23, 59, 59, 999999, tzinfo=UTC),
        ],
        "ntz": [dt.datetime(2021, 9, 8, 11, 11, 11), None, None, dt.datetime(1999, 1, 1)],
        "point": [
            {"x": 1, "tags": ["p", "q"]},
            None,
            {"x": None, "tags": None},
            {"x": 3, "tags": []},
        ],
        "nums": [[1, 2, 3], [], None, [None, 5]],
        "attrs": [[("k1", 1), ("k2", None)], None, [], [("z", 26)]],
    }
    return pa.table(rows, schema=schema)


def replace_column(table: pa.Table, name: str, values: list, type_: pa.DataType | None = None):
    i = table.column_names.index(name)
    return table.set_column(i, name, pa.array(values, type_ or table.schema.field(name).type))


# ---------------------------------------------------------------------------------------------
# Equal tables
# ---------------------------------------------------------------------------------------------


def test_identical_tables_match() -> None:
    t = rich_table()
    assert_tables_match(t, t)


def test_row_order_is_irrelevant() -> None:
    t = rich_table()
    assert_tables_match(t.take([3, 1, 0, 2]), t)


def test_chunked_and_sliced_input() -> None:
    t = rich_table()
    chunked = pa.concat_tables([t.slice(0, 1), t.slice(1, 0), t.slice(1, 3)])
    assert chunked.column(0).num_chunks > 1
    assert_tables_match(chunked, t)
    assert_tables_match(t.slice(1, 2), t.slice(1, 2).take([1, 0]))


def test_empty_tables_match() -> None:
    t = rich_table().slice(0, 0)
    assert_tables_match(t, t)
    with pytest.raises(TableMismatch, match="expected 0, actual 4"):
        assert_tables_match(rich_table(), t)


def test_polars_round_trip_is_accepted() -> None:
    """polars hands back large_string/binary views, large_list, its own map handling."""
    t = rich_table()
    via_polars = pl.from_arrow(t).to_arrow()
    assert via_polars.schema != t.schema
    assert_tables_match(via_polars, t)
    assert_tables_match(pl.from_arrow(t).lazy().collect().to_arrow(), t)


def test_duckdb_round_trip_is_accepted() -> None:
    t = rich_table()
    con = duckdb.connect()
    try:
        con.execute("SET TimeZone = 'America/Los_Angeles'")
        out = con.from_arrow(t).to_arrow_table()
    finally:
        con.close()
    assert_tables_match(out, t)


def test_nullability_flags_are_ignored() -> None:
    t = pa.table({"a": pa.array([1, 2], pa.int64())})
    strict = t.cast(pa.schema([pa.field("a", pa.int64(), nullable=False)]))
    assert_tables_match(strict, t)
    assert_tables_match(t, strict)


# ---------------------------------------------------------------------------------------------
# Representation-only type differences
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "actual_type", "expected_type"),
    [
        (["x", None], pa.large_string(), pa.string()),
        (["x", None], pa.string_view(), pa.string()),
        ([b"x", None], pa.large_binary(), pa.binary()),
        ([b"x", None], pa.binary_view(), pa.binary()),
        ([[1, 2], None, []], pa.large_list(pa.int64()), pa.list_(pa.int64())),
        ([[1, 2], None, []], pa.list_view(pa.int64()), pa.list_(pa.int64())),
        ([[1, 2], None], pa.list_(pa.int64(), 2), pa.list_(pa.int64())),
        ([[1]], pa.list_(pa.field("item", pa.int64())), pa.list_(pa.field("element", pa.int64()))),
        ([1, None], pa.timestamp("ns", "UTC"), pa.timestamp("us", "UTC")),
        ([1, None], pa.timestamp("ms"), pa.timestamp("us")),
        ([1, None], pa.date64(), pa.date32()),
        ([Decimal("1.50"), None], pa.decimal128(38, 2), pa.decimal128(10, 2)),
        ([Decimal("1.50"), None], pa.decimal256(12, 2), pa.decimal128(10, 2)),
        ([None, None], pa.int32(), pa.null()),
        ([None, None], pa.null(), pa.int64()),
    ],
)
def test_equal_valued_representations_are_accepted(values, actual_type, expected_type) -> None:
    if pa.types.is_timestamp(actual_type) and actual_type.unit == "ns":
        values = [v * 1000 if v is not None else None for v in values]
    elif pa.types.is_timestamp(actual_type) and actual_type.unit == "ms":
        pass
    elif pa.types.is_date64(actual_type):
        values = [v * 86_400_000 if v is not None else None for v in values]
    actual = pa.array(values, actual_type)
    out = normalise_array(actual, expected_type, "c")
    assert out.type.equals(expected_type)
    assert len(out) == len(actual)


def test_dictionary_columns_are_decoded() -> None:
    expected = pa.table({"s": pa.array(["a", "b", "a", None])})
    actual = pa.table({"s": pa.array(["a", "b", "a", None]).dictionary_encode()})
    assert_tables_match(actual, expected)
    changed = pa.table({"s": pa.array(["a", "b", "b", None]).dictionary_encode()})
    with pytest.raises(TableMismatch):
        assert_tables_match(changed, expected)


def test_timestamp_zone_label_is_irrelevant_for_the_same_instant() -> None:
    instant = dt.datetime(2021, 9, 8, 11, 11, 11, tzinfo=UTC)
    expected = pa.table({"ts": pa.array([instant], pa.timestamp("us", "UTC"))})
    for tz in ("Etc/UTC", "+00:00", "America/Los_Angeles", "Asia/Kolkata"):
        actual = pa.table(
            {"ts": pa.array([instant], pa.timestamp("us", "UTC")).cast(pa.timestamp("us", tz))}
        )
        assert actual.schema.field("ts").type.tz == tz
        assert_tables_match(actual, expected)


def test_timestamp_different_instant_is_detected() -> None:
    expected = pa.table({"ts": pa.array([dt.datetime(2021, 9, 8, 11, 11, 11, tzinfo=UTC)])})
    # Same wall-clock reading in Los Angeles is a different instant.
    la = pa.array(
        [1631099471000000 + 7 * 3600 * 1_000_000], pa.timestamp("us", "America/Los_Angeles")
    )
    with pytest.raises(TableMismatch, match="ts"):
        assert_tables_match(pa.table({"ts": la}), expected)


def test_lossy_timestamp_unit_is_rejected() -> None:
    with pytest.raises(SchemaMismatch, match="without changing values"):
        normalise_array(
            pa.array([1_500], pa.timestamp("ns", "UTC")), pa.timestamp("us", "UTC"), "ts"
        )


def test_list_of_key_value_structs_becomes_a_map() -> None:
    entries = pa.list_(pa.struct([("key", pa.large_string()), ("value", pa.int64())]))
    actual = pa.array([[{"key": "k1", "value": 1}], None, []], entries)
    expected_type = pa.map_(pa.string(), pa.int64())
    out = normalise_array(actual, expected_type, "m")
    assert out.type.equals(expected_type)
    assert out.to_pylist() == [[("k1", 1)], None, []]


def test_sliced_nested_arrays_are_normalised() -> None:
    t = rich_table()
    sliced = pa.table({n: t.column(n).combine_chunks().slice(1, 3) for n in t.column_names})
    polars_like = pl.from_arrow(sliced).to_arrow()
    assert_tables_match(polars_like, t.slice(1, 3))


# ---------------------------------------------------------------------------------------------
# Type differences that change meaning
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "actual_type", "expected_type", "message"),
    [
        ([1], pa.int64(), pa.int32(), "expected int32, got int64"),
        ([1], pa.int32(), pa.int64(), "expected int64, got int32"),
        ([1.0], pa.float32(), pa.float64(), "expected double, got float"),
        (["1"], pa.string(), pa.int64(), "expected int64, got string"),
        ([b"a"], pa.binary(), pa.string(), "expected string, got binary"),
        ([1], pa.timestamp("us"), pa.timestamp("us", "UTC"), "zone-aware"),
        ([1], pa.timestamp("us", "UTC"), pa.timestamp("us"), "zone-less"),
        ([1], pa.int64(), pa.timestamp("us", "UTC"), "expected timestamp"),
        ([Decimal("1.5")], pa.decimal128(10, 1), pa.decimal128(10, 2), "decimal scale"),
        ([Decimal("123456.78")], pa.decimal128(20, 2), pa.decimal128(5, 2), "without changing"),
        ([1], pa.int32(), pa.null(), "all-null"),
        ([[1]], pa.list_(pa.int32()), pa.list_(pa.int64()), r"c\[\]: expected int64"),
        (
            [{"a": 1}],
            pa.struct([("b", pa.int32())]),
            pa.struct([("a", pa.int32())]),
            "struct fields",
        ),
        ([1], pa.date32(), pa.timestamp("us"), "expected timestamp"),
    ],
)
def test_wrong_types_are_rejected(values, actual_type, expected_type, message) -> None:
    with pytest.raises(SchemaMismatch, match=message):
        normalise_array(pa.array(values, actual_type), expected_type, "c")


def test_wrong_type_in_a_table_names_the_column() -> None:
    expected = rich_table()
    actual = replace_column(expected, "i8", [1, -2, None, 4], pa.int64())
    with pytest.raises(SchemaMismatch, match=r"i8: expected int8, got int64"):
        assert_tables_match(actual, expected)


def test_nested_wrong_type_names_the_path() -> None:
    expected = pa.table({"m": pa.array([[("a", 1)]], pa.map_(pa.string(), pa.int64()))})
    actual = pa.table({"m": pa.array([[("a", 1.0)]], pa.map_(pa.string(), pa.float64()))})
    with pytest.raises(SchemaMismatch, match=r"m\.<value>: expected int64, got double"):
        assert_tables_match(actual, expected)


def test_column_names_and_order_matter() -> None:
    expected = pa.table({"a": [1], "b": [2]})
    with pytest.raises(SchemaMismatch, match="different order"):
        assert_tables_match(pa.table({"b": [2], "a": [1]}), expected)
    with pytest.raises(SchemaMismatch, match=r"missing: \['b'\]"):
        assert_tables_match(pa.table({"a": [1]}), expected)
    with pytest.raises(SchemaMismatch, match=r"unexpected: \['B'\]"):
        assert_tables_match(pa.table({"a": [1], "B": [2]}), expected)


# ---------------------------------------------------------------------------------------------
# Value differences
# ---------------------------------------------------------------------------------------------


def test_changed_value_is_detected_and_reported() -> None:
    expected = rich_table()
    actual = replace_column(expected, "i64", [10, 20, 31, None])
    with pytest.raises(TableMismatch) as info:
        assert_tables_match(actual, expected, context="tbl-v0-arrow")
    text = str(info.value)
    assert text.startswith("tbl-v0-arrow: table content differs")
    assert "rows: expected 4, actual 4" in text
    assert "rows missing from actual (expected only): 1" in text
    assert "unexpected rows in actual (actual only): 1" in text
    assert "i64=30" in text and "i64=31" in text
    assert "differing columns: ['i64']" in text


def test_missing_row_is_detected() -> None:
    expected = rich_table()
    with pytest.raises(TableMismatch) as info:
        assert_tables_match(expected.take([0, 1, 3]), expected)
    text = str(info.value)
    assert "rows: expected 4, actual 3" in text
    assert "rows missing from actual (expected only): 1" in text
    assert "s=None" in text  # the missing row (index 2) is rendered
    assert "unexpected rows in actual (actual only): 0" in text


def test_extra_row_is_detected() -> None:
    expected = rich_table()
    with pytest.raises(TableMismatch) as info:
        assert_tables_match(expected.take([0, 1, 2, 3, 3]), expected)
    text = str(info.value)
    assert "rows: expected 4, actual 5" in text
    assert "unexpected rows in actual (actual only): 1" in text
    assert "s='d'" in text


def test_duplicate_rows_count_as_a_multiset() -> None:
    expected = pa.table({"a": [1, 1, 2]})
    with pytest.raises(TableMismatch):
        assert_tables_match(pa.table({"a": [1, 2, 2]}), expected)
    assert_tables_match(pa.table({"a": [2, 1, 1]}), expected)


def test_null_versus_value_is_detected() -> None:
    expected = pa.table({"a": pa.array([None, 1], pa.int64())})
    with pytest.raises(TableMismatch):
        assert_tables_match(pa.table({"a": pa.array([0, 1], pa.int64())}), expected)


def test_report_is_truncated() -> None:
    expected = pa.table({"a": list(range(100))})
    with pytest.raises(TableMismatch) as info:
        assert_tables_match(pa.table({"a": list(range(100, 200))}), expected)
    assert "... 92 more" in str(info.value)


# ---------------------------------------------------------------------------------------------
# NaN
# ---------------------------------------------------------------------------------------------


def test_nan_equals_nan() -> None:
    t = pa.table({"f": pa.array([math.nan, 1.0, None])})
    assert_tables_match(t.take([2, 0, 1]), t)


@pytest.mark.parametrize("other", [None, 0.0, math.inf])
def test_nan_differs_from_null_and_numbers(other) -> None:
    expected = pa.table({"f": pa.array([math.nan], pa.float64())})
    with pytest.raises(TableMismatch):
        assert_tables_match(pa.table({"f": pa.array([other], pa.float64())}), expected)
    with pytest.raises(TableMismatch):
        assert_tables_match(expected, pa.table({"f": pa.array([other], pa.float64())}))


def test_nan_sorts_after_all_numbers_and_nulls_first() -> None:
    t = pa.table({"f": pa.array([math.nan, math.inf, None, -math.inf, 0.5], pa.float32())})
    out = canonical_sort(t).column("f").to_pylist()
    assert out[0] is None
    assert out[1:4] == [-math.inf, 0.5, math.inf]
    assert math.isnan(out[4])


def test_nan_inside_nested_values() -> None:
    typ = pa.struct([("v", pa.list_(pa.float64()))])
    expected = pa.table({"s": pa.array([{"v": [1.0, math.nan]}], typ)})
    assert_tables_match(pa.table({"s": pa.array([{"v": [1.0, math.nan]}], typ)}), expected)
    with pytest.raises(TableMismatch):
        assert_tables_match(pa.table({"s": pa.array([{"v": [1.0, 2.0]}], typ)}), expected)


# ---------------------------------------------------------------------------------------------
# Nested values
# ---------------------------------------------------------------------------------------------


def test_struct_field_change_is_detected() -> None:
    expected = rich_table()
    point = expected.column("point").to_pylist()
    point[0] = {"x": 1, "tags": ["p", "Q"]}
    with pytest.raises(TableMismatch, match=r"differing columns: \['point'\]"):
        assert_tables_match(replace_column(expected, "point", point), expected)


def test_null_struct_differs_from_struct_of_nulls() -> None:
    typ = pa.struct([("x", pa.int32())])
    expected = pa.table({"s": pa.array([None], typ)})
    with pytest.raises(TableMismatch):
        assert_tables_match(pa.table({"s": pa.array([{"x": None}], typ)}), expected)


def test_list_element_order_and_values_matter() -> None:
    expected = pa.table({"l": pa.array([[1, 2]], pa.list_(pa.int64()))})
    for other in ([2, 1], [1], [1, 2, 3], [], None, [1, None]):
        with pytest.raises(TableMismatch):
            assert_tables_match(pa.table({"l": pa.array([other], pa.list_(pa.int64()))}), expected)


def test_map_entry_order_is_irrelevant_but_values_matter() -> None:
    typ = pa.map_(pa.string(), pa.int64())
    expected = pa.table({"m": pa.array([[("a", 1), ("b", 2)]], typ)})
    assert_tables_match(pa.table({"m": pa.array([[("b", 2), ("a", 1)]], typ)}), expected)
    for other in ([("a", 1), ("b", 3)], [("a", 1)], [("a", 1), ("c", 2)], [], None):
        with pytest.raises(TableMismatch):
            assert_tables_match(pa.table({"m": pa.array([other], typ)}), expected)


def test_variant_like_struct_of_binaries() -> None:
    typ = pa.struct([("metadata", pa.binary()), ("value", pa.binary())])
    expected = pa.table({"v": pa.array([{"metadata": b"\x01\x00", "value": b"\x0c\x01"}], typ)})
    large = pa.struct([("metadata", pa.large_binary()), ("value", pa.large_binary())])
    same = pa.table({"v": pa.array([{"metadata": b"\x01\x00", "value": b"\x0c\x01"}], large)})
    assert_tables_match(same, expected)
    changed = pa.table({"v": pa.array([{"metadata": b"\x01\x00", "value": b"\x0c\x02"}], large)})
    with pytest.raises(TableMismatch):
        assert_tables_match(changed, expected)


# ---------------------------------------------------------------------------------------------
# Sort order and keys
# ---------------------------------------------------------------------------------------------


def test_sort_is_by_all_columns_in_schema_order_nulls_first() -> None:
    t = pa.table({"a": pa.array([2, None, 1, 1]), "b": pa.array(["x", "y", None, "a"])})
    out = canonical_sort(t)
    assert out.to_pylist() == [
        {"a": None, "b": "y"},
        {"a": 1, "b": None},
        {"a": 1, "b": "a"},
        {"a": 2, "b": "x"},
    ]


def test_nested_values_sort_element_wise() -> None:
    t = pa.table({"l": pa.array([[2], [1, 5], None, [1], []], pa.list_(pa.int64()))})
    assert canonical_sort(t).column("l").to_pylist() == [None, [], [1], [1, 5], [2]]


def test_temporal_values_compare_as_integers_even_outside_datetime_range() -> None:
    # 12000-01-01 and year -500 are beyond Python's datetime.
    far = pa.array([316_224_000_000_000_000, -77_914_137_600_000_000, 0], pa.timestamp("us", "UTC"))
    t = pa.table({"ts": far})
    assert [k[0] for k in row_keys(canonical_sort(t))] == [
        (1, -77_914_137_600_000_000),
        (1, 0),
        (1, 316_224_000_000_000_000),
    ]
    with pytest.raises(TableMismatch, match="timestamp"):
        assert_tables_match(t.slice(0, 2), t)


def test_normalise_to_schema_returns_the_expected_schema() -> None:
    t = rich_table()
    out = normalise_to_schema(pl.from_arrow(t).to_arrow(), t.schema)
    assert out.schema.equals(t.schema)


def test_maps_with_non_nullable_item_children_and_null_items() -> None:
    """delta-rs hands back variant maps whose item struct has non-nullable children."""
    item = pa.struct([pa.field("metadata", pa.binary(), nullable=False)])
    strict = pa.map_(pa.string(), pa.field("value", item))
    actual = pa.array([[("a", {"metadata": b"x"}), ("b", None)], None], strict)
    expected_type = pa.map_(pa.string(), pa.struct([("metadata", pa.binary())]))
    expected = pa.table(
        {"m": pa.array([[("b", None), ("a", {"metadata": b"x"})], None], expected_type)}
    )
    assert_tables_match(pa.table({"m": actual}), expected)
    assert_tables_match(pa.table({"m": actual.slice(1)}), expected.slice(1))


def test_null_map_slot_backed_by_entries_is_null() -> None:
    typ = pa.map_(pa.string(), pa.int64())
    offsets = pa.array([0, 1, 2], pa.int32())
    keys, items = pa.array(["a", "hidden"]), pa.array([1, 2], pa.int64())
    actual = pa.MapArray.from_arrays(offsets, keys, items, type=typ, mask=pa.array([False, True]))
    expected = pa.table({"m": pa.array([[("a", 1)], None], typ)})
    assert_tables_match(pa.table({"m": actual}), expected)
    assert normalise_array(actual, typ, "m").to_pylist() == [[("a", 1)], None]
