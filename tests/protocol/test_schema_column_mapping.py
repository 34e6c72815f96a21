"""Tests for lakequery.protocol.column_mapping: physical schemas, relabelling, file -> logical."""

from __future__ import annotations

import doctest
import json
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tablekit import conformance_dir

from lakequery.errors import SchemaError, UnsupportedFeatureError
from lakequery.protocol import column_mapping as cm_mod
from lakequery.protocol.column_mapping import (
    FIELD_ID_KEY,
    VARIANT_FILE_TYPE,
    column_mapping_mode,
    physical_name_map,
    physical_schema,
    rename_to_logical,
    to_logical,
)
from lakequery.protocol.partitions import partition_struct
from lakequery.protocol.schema import (
    ArrayType,
    DecimalType,
    MapType,
    PrimitiveType,
    StructField,
    StructType,
    parse_schema,
    to_arrow_schema,
    to_arrow_type,
)

REPO = Path(__file__).resolve().parents[2]
CONFORMANCE = conformance_dir()
TABLES = CONFORMANCE / "tables"
P = PrimitiveType


def cm(ident: int, name: str) -> dict[str, Any]:
    return {"delta.columnMapping.id": ident, "delta.columnMapping.physicalName": name}


# --- a small JSON-only log replay, enough to find the live files ---------------------------------


def _replay(table: str) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    metadata: dict[str, Any] = {}
    protocol: dict[str, Any] = {}
    adds: dict[str, dict[str, Any]] = {}
    commits = sorted((TABLES / table / "_delta_log").glob("*.json"))
    assert commits and commits[0].name == f"{0:020d}.json", f"{table}: log starts after 0"
    for commit in commits:
        for line in commit.read_text().splitlines():
            if not line.strip():
                continue
            action = json.loads(line)
            metadata = action.get("metaData", metadata)
            protocol = action.get("protocol", protocol)
            if "add" in action:
                path = unquote(action["add"]["path"])
                adds[path] = {**action["add"], "path": path}
            if "remove" in action:
                adds.pop(unquote(action["remove"]["path"]), None)
    return metadata, protocol, list(adds.values())


def _supports_cm(protocol: dict[str, Any]) -> bool:
    # dat_iceberg_compat_v1 ends at reader 3 with readerFeatures [] and columnMapping only in
    # writerFeatures, yet its files use physical names: honour the mode from reader 2 on.
    return int(protocol.get("minReaderVersion", 1)) >= 2


def _replayable() -> list[str]:
    """Tables whose latest version is reproducible from JSON commits without DVs."""
    manifest = json.loads((CONFORMANCE / "manifest.json").read_text())
    out = []
    for t in manifest["tables"]:
        log = TABLES / t["name"] / "_delta_log"
        versions = sorted(int(p.name[:20]) for p in log.glob("*.json"))
        latest = [v for v in t["versions"] if v.get("expected_file")]
        if versions != list(range(t["latest_version"] + 1)) or not latest:
            continue
        if latest[-1]["version"] != t["latest_version"]:
            continue
        # The replay above keys files by path only, which is wrong for DV (re-)adds.
        if any('"deletionVector":{' in p.read_text() for p in log.glob("*.json")):
            continue
        out.append(t["name"])
    return out


REPLAYABLE = _replayable() if (CONFORMANCE / "manifest.json").is_file() else ["missing"]


def _read_latest(table: str) -> pa.Table:
    metadata, protocol, adds = _replay(table)
    schema = parse_schema(metadata["schemaString"])
    mode = column_mapping_mode(metadata.get("configuration", {}), _supports_cm(protocol))
    parts = metadata.get("partitionColumns", [])
    names = physical_name_map(schema, mode)
    specs = [(c, names[(c,)][0], schema[c].type) for c in parts]
    pv_type = pa.map_(pa.string(), pa.string())
    raw = pa.array([list(a["partitionValues"].items()) for a in adds], pv_type)
    pstruct = partition_struct(raw, specs)
    data_cols = [n for n in schema.names if n not in parts]
    pieces = []
    for i, add in enumerate(adds):
        data = to_logical(
            pq.read_table(TABLES / table / add["path"]), schema, mode, columns=data_cols
        )
        n = data.num_rows
        for c in parts:
            column = pstruct.field(c).take(pa.array([i] * n, pa.int64()))
            data = data.append_column(to_arrow_schema(schema).field(c), column)
        pieces.append(data.select(schema.names))
    if not pieces:
        return to_arrow_schema(schema).empty_table()
    return pa.concat_tables(pieces)


def _rows(t: pa.Table) -> list[str]:
    return sorted(repr(r) for r in t.to_pylist())


@pytest.mark.parametrize("table", REPLAYABLE)
def test_conformance_tables_read_through_physical_schema(table: str) -> None:
    manifest = json.loads((CONFORMANCE / "manifest.json").read_text())
    entry = next(t for t in manifest["tables"] if t["name"] == table)
    expected = pq.read_table(CONFORMANCE / entry["versions"][-1]["expected_file"])
    got = _read_latest(table)
    assert got.schema.names == expected.schema.names
    for g, w in zip(got.schema, expected.schema, strict=True):
        assert g.type.equals(w.type), (g.name, g.type, w.type)
    assert got.num_rows == expected.num_rows
    assert _rows(got) == _rows(expected)


def test_replayable_tables_cover_the_special_cases() -> None:
    for name in (
        "dat_column_mapping",
        "golden_table_with_columnmapping_mode_id",
        "deltars_table_with_column_mapping",
        "dat_iceberg_compat_v1",
        "kernelrs_type_widening",
        "kernelrs_unshredded_variant",
        "kernelrs_void_column",
        "golden_kernel_timestamp_int96",
        "dat_multi_partitioned",
        "golden_data_reader_partition_values",
        "golden_parquet_all_types",
    ):
        assert name in REPLAYABLE


# --- physical schema against the real data files -------------------------------------------------

CM_TABLES = [
    ("dat_column_mapping", "name"),
    ("golden_table_with_columnmapping_mode_id", "id"),
    ("deltars_table_with_column_mapping", "name"),
    ("dat_iceberg_compat_v1", "name"),
]


def _fields_by_path(t: pa.DataType | pa.Schema, prefix: str = "") -> dict[str, pa.Field]:
    out: dict[str, pa.Field] = {}
    fields: list[pa.Field] = []
    if isinstance(t, pa.Schema):
        fields = list(t)
    elif pa.types.is_struct(t):
        fields = [t.field(i) for i in range(t.num_fields)]
    elif pa.types.is_list(t):
        fields = [t.value_field]
    elif pa.types.is_map(t):
        fields = [t.key_field, t.item_field]
    for f in fields:
        path = f"{prefix}/{f.name}"
        out[path] = f
        out.update(_fields_by_path(f.type, path))
    return out


@pytest.mark.parametrize(("table", "mode"), CM_TABLES, ids=[t for t, _ in CM_TABLES])
def test_physical_schema_matches_data_files(table: str, mode: str) -> None:
    metadata, protocol, adds = _replay(table)
    assert column_mapping_mode(metadata["configuration"], _supports_cm(protocol)) == mode
    schema = parse_schema(metadata["schemaString"])
    phys = physical_schema(schema, mode, exclude=metadata["partitionColumns"])
    want = _fields_by_path(phys)
    assert adds
    for add in adds:
        file_schema = pq.read_schema(TABLES / table / add["path"])
        assert file_schema.names == [n for n in phys.names if n in file_schema.names]
        got = _fields_by_path(file_schema)
        # Every field of the file, nested ones too, is named as in the physical schema ...
        assert set(got) <= set(want), set(got) - set(want)
        for path, field in got.items():
            # ... and carries the same Parquet field id.
            assert (field.metadata or {}).get(FIELD_ID_KEY) == (want[path].metadata or {}).get(
                FIELD_ID_KEY
            ), path
    if mode == "id":
        assert sum(FIELD_ID_KEY in (f.metadata or {}) for f in want.values()) == 24


@pytest.mark.parametrize(
    "table", ["kernelrs_unshredded_variant", "kernelrs_type_widening", "kernelrs_void_column"]
)
def test_physical_schema_mode_none_matches_files(table: str) -> None:
    metadata, _, adds = _replay(table)
    schema = parse_schema(metadata["schemaString"])
    phys = physical_schema(schema, "none")
    for add in adds:
        file_schema = pq.read_schema(TABLES / table / add["path"])
        assert file_schema.names == phys.names
    if table == "kernelrs_unshredded_variant":
        assert file_schema.field("v").type == VARIANT_FILE_TYPE
        assert phys.equals(file_schema)
    if table == "kernelrs_void_column":
        assert phys.names == ["id"]
        assert "void_col" in schema.names


def test_physical_name_map_nested() -> None:
    metadata, _, _ = _replay("golden_table_with_columnmapping_mode_id")
    names = physical_name_map(parse_schema(metadata["schemaString"]), "id")
    assert names[("nested_struct", "ac", "aca")] == (
        "col-ab01c262-302d-4162-be9c-98d905966527",
        "col-6551e960-1c32-4bf2-bd5b-1f57180d25f7",
        "col-c091fdeb-7cca-4849-912d-5f77fa400933",
    )
    assert names[("array_of_structs", "element", "ab")] == (
        "col-b89fd303-7352-4044-842e-87f428ee80be",
        "element",
        "col-e983d1fc-d588-46a7-a0ad-2f63a6834ea6",
    )
    assert names[("map_of_rows", "value", "ab")][1:] == (
        "value",
        "col-43f9ca1b-82fe-4ad7-9e5a-1af143d2abf4",
    )
    assert len(names) == 24
    none = physical_name_map(parse_schema(metadata["schemaString"]), "none")
    assert none[("nested_struct", "ac", "aca")] == ("nested_struct", "ac", "aca")


def test_nested_ids_for_iceberg_compat_v2() -> None:
    md = {**cm(1, "col-a"), "delta.columnMapping.nested.ids": {"col-a.element": 10}}
    md_m = {
        **cm(2, "col-m"),
        "delta.columnMapping.nested.ids": {"col-m.key": 11, "col-m.value": 12},
    }
    schema = StructType(
        (
            StructField("a", ArrayType(P("long")), True, md),
            StructField("m", MapType(P("string"), P("long")), True, md_m),
        )
    )
    phys = physical_schema(schema, "id")
    assert phys.names == ["col-a", "col-m"]
    assert phys.field("col-a").metadata == {FIELD_ID_KEY: b"1"}
    assert phys.field("col-a").type.value_field.metadata == {FIELD_ID_KEY: b"10"}
    assert phys.field("col-m").type.key_field.metadata == {FIELD_ID_KEY: b"11"}
    assert phys.field("col-m").type.item_field.metadata == {FIELD_ID_KEY: b"12"}
    plain = physical_schema(schema, "none")
    assert plain.names == ["a", "m"] and plain.field("a").metadata is None


def test_physical_name_required_under_column_mapping() -> None:
    schema = StructType((StructField("a", P("long")),))
    with pytest.raises(SchemaError, match="physicalName"):
        physical_schema(schema, "name")
    with pytest.raises(SchemaError):
        physical_schema(schema, "sideways")
    assert physical_schema(schema, "none").names == ["a"]


@pytest.mark.parametrize(
    ("config", "supported", "expected"),
    [
        ({}, True, "none"),
        ({"delta.columnMapping.mode": "name"}, True, "name"),
        ({"delta.columnMapping.mode": "ID"}, True, "id"),
        ({"delta.columnMapping.mode": "none"}, True, "none"),
        ({"delta.columnMapping.mode": "name"}, False, "none"),
    ],
)
def test_column_mapping_mode(config: dict[str, str], supported: bool, expected: str) -> None:
    assert column_mapping_mode(config, supported) == expected


def test_column_mapping_mode_unknown() -> None:
    with pytest.raises(UnsupportedFeatureError):
        column_mapping_mode({"delta.columnMapping.mode": "position"}, True)


# --- rename_to_logical -----------------------------------------------------------------------------

LOGICAL = pa.struct(
    [
        pa.field("a", pa.int64()),
        pa.field("l", pa.list_(pa.field("element", pa.struct([pa.field("x", pa.string())])))),
        pa.field("m", pa.map_(pa.string(), pa.struct([pa.field("y", pa.int32())]))),
    ]
)
PHYSICAL = pa.struct(
    [
        pa.field("col-1", pa.int64()),
        pa.field(
            "col-2", pa.list_(pa.field("element", pa.struct([pa.field("col-3", pa.string())])))
        ),
        pa.field("col-4", pa.map_(pa.string(), pa.struct([pa.field("col-5", pa.int32())]))),
    ]
)
ROWS = [
    {"col-1": 1, "col-2": [{"col-3": "p"}, None], "col-4": [("k", {"col-5": 7})]},
    None,
    {"col-1": 3, "col-2": None, "col-4": None},
    {"col-1": None, "col-2": [], "col-4": [("z", None)]},
]


def test_rename_to_logical_nested_array() -> None:
    phys = pa.array(ROWS, PHYSICAL).slice(1)
    got = rename_to_logical(phys, LOGICAL)
    assert got.type == LOGICAL
    assert got.to_pylist() == [
        None,
        {"a": 3, "l": None, "m": None},
        {"a": None, "l": [], "m": [("z", None)]},
    ]
    # zero-copy: the leaf buffers are the very same memory
    assert got.field(0).buffers()[1].address == phys.field(0).buffers()[1].address


def test_rename_to_logical_batch_and_table() -> None:
    phys_schema = pa.schema([pa.field("s", PHYSICAL), pa.field("col-9", pa.int8())])
    logical_schema = pa.schema([pa.field("S", LOGICAL), pa.field("n", pa.int8())])
    batch = pa.record_batch(
        [pa.array(ROWS, PHYSICAL), pa.array([1, 2, 3, 4], pa.int8())], schema=phys_schema
    )
    out = rename_to_logical(batch, logical_schema)
    assert isinstance(out, pa.RecordBatch) and out.schema == logical_schema
    assert out.column("S")[0].as_py()["m"] == [("k", {"y": 7})]
    table = pa.Table.from_batches([batch, batch])
    out_t = rename_to_logical(table, logical_schema)
    assert isinstance(out_t, pa.Table) and out_t.schema == logical_schema
    assert out_t.column("n").num_chunks == 2
    chunked = rename_to_logical(table.column("s"), LOGICAL)
    assert chunked.type == LOGICAL and len(chunked) == 8


def test_rename_to_logical_reorders_same_names() -> None:
    phys = pa.array([{"value": b"v", "metadata": b"m"}, None], VARIANT_FILE_TYPE)
    target = to_arrow_type(P("variant"))
    got = rename_to_logical(phys, target)
    assert got.type == target
    assert got.to_pylist() == [{"metadata": b"m", "value": b"v"}, None]


def test_rename_to_logical_rejects_other_shapes() -> None:
    with pytest.raises(SchemaError):
        rename_to_logical(pa.array([1]), pa.string())
    with pytest.raises(SchemaError):
        rename_to_logical(pa.array([{"a": 1}]), pa.struct([("a", pa.int64()), ("b", pa.int64())]))
    with pytest.raises(SchemaError):
        rename_to_logical(pa.record_batch({"a": [1]}), pa.schema([]))


# --- to_logical ------------------------------------------------------------------------------------

NESTED_SCHEMA = StructType(
    (
        StructField("a", P("long"), True, cm(1, "col-1")),
        StructField(
            "l",
            ArrayType(StructType((StructField("x", P("string"), True, cm(3, "col-3")),))),
            True,
            cm(2, "col-2"),
        ),
        StructField(
            "m",
            MapType(
                P("string"), StructType((StructField("y", P("integer"), True, cm(5, "col-5")),))
            ),
            True,
            cm(4, "col-4"),
        ),
        StructField("gone", P("double"), True, cm(6, "col-6")),
        StructField("v", P("void"), True, cm(7, "col-7")),
    )
)


def test_to_logical_name_mode_nested() -> None:
    batch = pa.record_batch(
        [pa.array(ROWS, PHYSICAL).flatten()[i] for i in range(3)], names=["col-1", "col-2", "col-4"]
    )
    out = to_logical(batch, NESTED_SCHEMA, "name")
    assert out.schema == to_arrow_schema(NESTED_SCHEMA)
    assert out.column("gone").null_count == 4
    assert out.column("v").type == pa.null()
    assert out.to_pylist()[0] == {
        "a": 1,
        "l": [{"x": "p"}, None],
        "m": [("k", {"y": 7})],
        "gone": None,
        "v": None,
    }
    sub = to_logical(batch, NESTED_SCHEMA, "name", columns=["m", "a"])
    assert sub.schema.names == ["m", "a"]


def test_to_logical_id_mode_matches_field_ids() -> None:
    schema = StructType(
        (
            StructField("a", P("long"), True, cm(1, "col-1")),
            StructField(
                "s",
                StructType((StructField("b", P("string"), True, cm(3, "col-3")),)),
                True,
                cm(2, "col-2"),
            ),
        )
    )
    fid = lambda i: {FIELD_ID_KEY: str(i).encode()}  # noqa: E731
    inner = pa.struct([pa.field("renamed-inner", pa.string(), metadata=fid(3))])
    file_schema = pa.schema(
        [
            pa.field("whatever", inner, metadata=fid(2)),
            pa.field("col-1", pa.int64(), metadata=fid(99)),
            pa.field("other", pa.int64(), metadata=fid(1)),
        ]
    )
    batch = pa.record_batch(
        [pa.array([{"renamed-inner": "q"}], inner), pa.array([5]), pa.array([6])],
        schema=file_schema,
    )
    out = to_logical(batch, schema, "id")
    assert out.to_pylist() == [{"a": 6, "s": {"b": "q"}}]
    # Without any field ids (an engine that dropped them) physical names are used.
    plain = pa.record_batch({"col-1": [8], "col-2": pa.array([{"col-3": "r"}])})
    assert to_logical(plain, schema, "id").to_pylist() == [{"a": 8, "s": {"b": "r"}}]


def test_to_logical_mode_none_case_insensitive_fallback() -> None:
    schema = StructType((StructField("Value", P("integer")),))
    out = to_logical(pa.record_batch({"value": pa.array([1], pa.int32())}), schema, "none")
    assert out.to_pydict() == {"Value": [1]}


WIDENING = [
    (pa.array([-128, 127], pa.int8()), P("long"), [-128, 127]),
    (pa.array([2**31 - 1], pa.int32()), P("long"), [2**31 - 1]),
    (pa.array([1.5], pa.float32()), P("double"), [1.5]),
    (pa.array([-3], pa.int16()), P("double"), [-3.0]),
    (pa.array([2**31 - 1], pa.int32()), P("double"), [2147483647.0]),
    (pa.array([Decimal("12.34")], pa.decimal128(10, 2)), DecimalType(20, 5), [Decimal("12.34000")]),
    (pa.array([127], pa.int8()), DecimalType(4, 1), [Decimal("127.0")]),
    (pa.array([-32768], pa.int16()), DecimalType(6, 1), [Decimal("-32768.0")]),
    (pa.array([2**63 - 1], pa.int64()), DecimalType(21, 1), [Decimal(2**63 - 1)]),
    (pa.array([0, 19975], pa.date32()), P("timestamp_ntz"), [0, 19975 * 86_400_000_000]),
    (pa.array([1_500], pa.timestamp("ns")), P("timestamp"), [1]),
    (pa.array([1_000_000_999], pa.timestamp("ns", tz="UTC")), P("timestamp"), [1_000_000]),
    (pa.array([5], pa.timestamp("ms", tz="Asia/Tokyo")), P("timestamp"), [5_000]),
    (pa.array(["a", "b", "a"]).dictionary_encode(), P("string"), ["a", "b", "a"]),
    (pa.array(["x"], pa.large_string()), P("string"), ["x"]),
    (pa.array([b"\x01"], pa.large_binary()), P("geometry(OGC:CRS84)"), [b"\x01"]),
]


@pytest.mark.parametrize(
    ("data", "t", "expected"), WIDENING, ids=[f"{d.type}->{t.name}" for d, t, _ in WIDENING]
)
def test_to_logical_casts_file_types(data: pa.Array, t: PrimitiveType, expected: list[Any]) -> None:
    schema = StructType((StructField("c", t),))
    out = to_logical(pa.record_batch({"c": data}), schema)
    col = out.column("c")
    assert col.type == to_arrow_type(t)
    if pa.types.is_temporal(col.type):
        col = col.cast(pa.int64())
    assert col.to_pylist() == expected


def test_to_logical_nested_widening_in_lists_and_maps() -> None:
    schema = StructType(
        (
            StructField("l", ArrayType(P("long"))),
            StructField("m", MapType(P("string"), P("double"))),
        )
    )
    batch = pa.record_batch(
        {
            "l": pa.array([[1, None], None], pa.large_list(pa.int8())),
            "m": pa.array([[("k", 1.5)], None], pa.map_(pa.string(), pa.float32())),
        }
    )
    out = to_logical(batch, schema)
    assert out.schema == to_arrow_schema(schema)
    assert out.to_pylist() == [{"l": [1, None], "m": [("k", 1.5)]}, {"l": None, "m": None}]


def test_to_logical_lossy_cast_is_an_error() -> None:
    schema = StructType((StructField("c", P("byte")),))
    with pytest.raises(SchemaError, match="'c'"):
        to_logical(pa.record_batch({"c": pa.array([300], pa.int32())}), schema)
    with pytest.raises(SchemaError):
        to_logical(pa.record_batch({"c": pa.array([[1]])}), schema)
    struct_schema = StructType((StructField("c", StructType((StructField("x", P("long")),))),))
    with pytest.raises(SchemaError):
        to_logical(pa.record_batch({"c": pa.array([1])}), struct_schema)


def test_to_logical_variant() -> None:
    schema = StructType((StructField("v", P("variant")),))
    data = pa.array([{"value": b"\x0c\x01", "metadata": b"\x01\x00\x00"}, None], VARIANT_FILE_TYPE)
    out = to_logical(pa.record_batch({"v": data}), schema)
    assert out.column("v").type == to_arrow_type(P("variant"))
    assert out.column("v").to_pylist() == [
        {"metadata": b"\x01\x00\x00", "value": b"\x0c\x01"},
        None,
    ]
    shredded = pa.array([{"metadata": b"", "value": None, "typed_value": 1}])
    with pytest.raises(UnsupportedFeatureError, match="variantShredding"):
        to_logical(pa.record_batch({"v": shredded}), schema)


def test_to_logical_table_keeps_chunks() -> None:
    schema = StructType((StructField("c", P("long")), StructField("missing", P("date"))))
    table = pa.Table.from_batches([pa.record_batch({"c": pa.array([1], pa.int32())})] * 3)
    out = to_logical(table, schema)
    assert isinstance(out, pa.Table)
    assert out.column("c").num_chunks == 3
    assert out.to_pydict() == {"c": [1, 1, 1], "missing": [None, None, None]}


def test_to_logical_rejects_plain_arrays() -> None:
    with pytest.raises(SchemaError):
        to_logical(pa.array([1]), StructType((StructField("c", P("long")),)))


def test_module_doctests() -> None:
    result = doctest.testmod(cm_mod, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 3
    assert result.failed == 0
