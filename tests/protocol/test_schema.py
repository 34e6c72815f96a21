"""Tests for lakequery.protocol.schema: schemaString parsing, Arrow mapping, type widening."""

from __future__ import annotations

import doctest
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tablekit import conformance_dir

from lakequery.errors import SchemaError, UnsupportedFeatureError
from lakequery.protocol import schema as schema_mod
from lakequery.protocol.schema import (
    ARROW_METADATA_KEY,
    VARIANT_ARROW_TYPE,
    ArrayType,
    DecimalType,
    DeltaType,
    MapType,
    PrimitiveType,
    StructField,
    StructType,
    TypeChange,
    from_arrow_schema,
    from_arrow_type,
    is_allowed_widening,
    iter_fields,
    leaf_paths,
    parse_schema,
    schema_to_json,
    to_arrow_schema,
    to_arrow_type,
    type_changes,
    validate_type_changes,
)

REPO = Path(__file__).resolve().parents[2]
CONFORMANCE = conformance_dir()


def _manifest() -> dict[str, Any]:
    path = CONFORMANCE / "manifest.json"
    assert path.is_file(), f"conformance data missing at {CONFORMANCE}"
    return dict(json.loads(path.read_text()))


def _schema_strings() -> list[tuple[str, str]]:
    """(id, schemaString) for every distinct schema in the conformance logs."""
    if not (CONFORMANCE / "tables").is_dir():
        return [("conformance-data-missing", "")]
    out: list[tuple[str, str]] = []
    for table in sorted((CONFORMANCE / "tables").iterdir()):
        seen: list[str] = []
        log = table / "_delta_log"
        for commit in sorted(log.glob("*.json")):
            for line in commit.read_text().splitlines():
                if '"metaData"' in line:
                    s = json.loads(line)["metaData"]["schemaString"]
                    if s not in seen:
                        seen.append(s)
        for cp in sorted(log.glob("*.checkpoint*.parquet")):
            md = pq.read_table(cp, columns=["metaData"]).column("metaData").to_pylist()
            for row in md:
                if row and row.get("schemaString") and row["schemaString"] not in seen:
                    seen.append(row["schemaString"])
        out += [(f"{table.name}-{i}", s) for i, s in enumerate(seen)]
    return out


SCHEMAS = _schema_strings()


def _latest_cases() -> list[tuple[str, str, str]]:
    """(table, latest schemaString, expected parquet of the latest version)."""
    if not (CONFORMANCE / "manifest.json").is_file():
        return [("conformance-data-missing", "", "")]
    by_table: dict[str, str] = {}
    for case_id, s in SCHEMAS:
        by_table[case_id.rsplit("-", 1)[0]] = s
    out = []
    for t in _manifest()["tables"]:
        files = [v for v in t["versions"] if v.get("expected_file")]
        if files and t["name"] in by_table:
            expected = files[-1]
            assert expected["version"] == t["latest_version"]
            out.append((t["name"], by_table[t["name"]], expected["expected_file"]))
    return out


@pytest.mark.parametrize(("case_id", "text"), SCHEMAS, ids=[c for c, _ in SCHEMAS])
def test_conformance_schema_round_trips(case_id: str, text: str) -> None:
    assert text, f"no schema for {case_id}: conformance data missing at {CONFORMANCE}"
    parsed = parse_schema(text)
    assert schema_to_json(parsed) == text
    assert parse_schema(schema_to_json(parsed)) == parsed
    assert from_arrow_schema(to_arrow_schema(parsed)) == parsed
    validate_type_changes(parsed)


def test_conformance_schemas_cover_the_interesting_features() -> None:
    texts = " ".join(s for _, s in SCHEMAS)
    for needle in (
        "delta.columnMapping.physicalName",
        "delta.typeChanges",
        '"variant"',
        '"void"',
        "geography(",
        "timestamp_ntz",
        "decimal(38,36)",
        '"type":"map"',
        "delta.identity.start",
    ):
        assert needle in texts
    # dat_no_replay has its schema only in checkpoints.
    assert any(c.startswith("dat_no_replay-") for c, _ in SCHEMAS)


LATEST = _latest_cases()


@pytest.mark.parametrize(("table", "text", "expected"), LATEST, ids=[c[0] for c in LATEST])
def test_arrow_schema_matches_expected_file(table: str, text: str, expected: str) -> None:
    assert text, f"conformance data missing at {CONFORMANCE}"
    got = to_arrow_schema(parse_schema(text))
    want = pq.read_schema(CONFORMANCE / expected)
    assert got.names == want.names
    for g, w in zip(got, want, strict=True):
        assert g.type.equals(w.type), (table, g.name, g.type, w.type)


def test_latest_cases_found() -> None:
    assert len(LATEST) >= 30


PRIMITIVE_ARROW = [
    ("string", pa.string()),
    ("binary", pa.binary()),
    ("long", pa.int64()),
    ("integer", pa.int32()),
    ("short", pa.int16()),
    ("byte", pa.int8()),
    ("float", pa.float32()),
    ("double", pa.float64()),
    ("boolean", pa.bool_()),
    ("decimal(38,18)", pa.decimal128(38, 18)),
    ("decimal(1, 0)", pa.decimal128(1, 0)),
    ("date", pa.date32()),
    ("timestamp", pa.timestamp("us", tz="UTC")),
    ("timestamp_ntz", pa.timestamp("us")),
    ("variant", VARIANT_ARROW_TYPE),
    ("void", pa.null()),
    ("geometry(OGC:CRS84)", pa.binary()),
    ("geography(OGC:CRS84, spherical)", pa.binary()),
    ("geometry", pa.binary()),
]


def _one(type_json: Any, metadata: dict[str, Any] | None = None) -> str:
    field = {"name": "c", "type": type_json, "nullable": True, "metadata": metadata or {}}
    return json.dumps({"type": "struct", "fields": [field]}, separators=(",", ":"))


@pytest.mark.parametrize(("name", "arrow"), PRIMITIVE_ARROW, ids=[n for n, _ in PRIMITIVE_ARROW])
def test_primitive_arrow_types(name: str, arrow: pa.DataType) -> None:
    text = _one(name)
    s = parse_schema(text)
    assert to_arrow_type(s.fields[0].type) == arrow
    assert to_arrow_schema(s).field("c").type == arrow
    assert schema_to_json(s) == text


def test_variant_is_struct_of_metadata_and_value() -> None:
    assert VARIANT_ARROW_TYPE.names == ["metadata", "value"]
    assert all(f.type == pa.binary() for f in VARIANT_ARROW_TYPE)


def test_variant_object_form_round_trips() -> None:
    text = _one({"type": "variant"})
    s = parse_schema(text)
    assert s.fields[0].type == PrimitiveType("variant")
    assert to_arrow_type(s.fields[0].type) == VARIANT_ARROW_TYPE
    assert schema_to_json(s) == text
    assert schema_to_json(parse_schema(_one("variant"))) == _one("variant")


def test_decimal_spaces_parse_and_round_trip() -> None:
    text = _one("decimal(10, 2)")
    s = parse_schema(text)
    assert s.fields[0].type == DecimalType(10, 2)
    assert s.fields[0].type.name == "decimal(10,2)"
    assert schema_to_json(s) == text
    assert schema_to_json(StructType((StructField("c", DecimalType(10, 2)),))) == _one(
        "decimal(10,2)"
    )


def test_nested_arrow_types() -> None:
    arr = ArrayType(PrimitiveType("integer"), contains_null=False)
    m = MapType(PrimitiveType("string"), ArrayType(PrimitiveType("long")), False)
    st_ = StructType((StructField("a", arr), StructField("m", m, nullable=False)))
    t = to_arrow_type(st_)
    assert t.field("a").type.value_field.name == "element"
    assert t.field("a").type.value_field.nullable is False
    mt = t.field("m").type
    assert mt.key_field.name == "key" and mt.key_field.nullable is False
    assert mt.item_field.name == "value" and mt.item_field.nullable is False
    assert mt.item_type == pa.list_(pa.field("element", pa.int64()))
    assert t.field("m").nullable is False


def test_metadata_key_only_when_non_empty() -> None:
    md = {"delta.columnMapping.id": 5, "comment": "é", "x": [1, {"y": None}]}
    s = parse_schema(
        json.dumps(
            {
                "type": "struct",
                "fields": [
                    {"name": "a", "type": "long", "nullable": True, "metadata": md},
                    {"name": "b", "type": "long", "nullable": False, "metadata": {}},
                ],
            }
        )
    )
    schema = to_arrow_schema(s)
    assert json.loads(schema.field("a").metadata[ARROW_METADATA_KEY]) == md
    assert schema.field("b").metadata is None
    assert schema.field("b").nullable is False
    assert from_arrow_schema(schema) == s


def test_unknown_metadata_kept_in_order() -> None:
    md = '{"z":1,"a":{"nested":[true,null,"x"]},"delta.invariants":"{\\"expression\\":1}"}'
    text = (
        '{"type":"struct","fields":[{"name":"a","type":"long","nullable":true,"metadata":'
        + md
        + "}]}"
    )
    s = parse_schema(text)
    assert list(s["a"].metadata) == ["z", "a", "delta.invariants"]
    assert schema_to_json(s) == text


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "",
        '"long"',
        '{"type":"array","elementType":"long","containsNull":true}',
        _one("int"),
        _one("decimal(39,0)"),
        _one("decimal(5,6)"),
        _one("decimal(0,0)"),
        _one("interval"),
        _one({"type": "array", "containsNull": True}),
        _one({"type": "map", "keyType": "string", "valueContainsNull": True}),
        _one({"type": "whatever"}),
        _one(5),
        '{"type":"struct","fields":[{"type":"long","nullable":true,"metadata":{}}]}',
        '{"type":"struct","fields":[{"name":"a","type":"long","nullable":"yes","metadata":{}}]}',
        '{"type":"struct","fields":[{"name":"a","type":"long","nullable":true,"metadata":[]}]}',
        '{"type":"struct","fields":{}}',
        '{"type":"struct","fields":[{"name":"a","type":"long","nullable":true,"metadata":{}},'
        '{"name":"A","type":"long","nullable":true,"metadata":{}}]}',
    ],
)
def test_parse_errors(text: str) -> None:
    with pytest.raises(SchemaError):
        parse_schema(text)


def test_schema_error_is_value_error_and_names_location() -> None:
    with pytest.raises(ValueError, match=r"outer\.inner"):
        parse_schema(
            '{"type":"struct","fields":[{"name":"outer","type":{"type":"struct","fields":['
            '{"name":"inner","type":"uuid","nullable":true,"metadata":{}}]},'
            '"nullable":true,"metadata":{}}]}'
        )


def test_direct_construction_validates() -> None:
    with pytest.raises(SchemaError):
        PrimitiveType("decimal(10,2)")
    with pytest.raises(SchemaError):
        PrimitiveType("int")
    with pytest.raises(SchemaError):
        DecimalType(40, 2)
    s = StructType([StructField("a", PrimitiveType("long"))])  # type: ignore[arg-type]
    assert isinstance(s.fields, tuple)
    assert s.names == ["a"] and len(s) == 1 and s.get("b") is None
    with pytest.raises(KeyError):
        s["b"]
    assert hash(s) == hash(StructType((StructField("a", PrimitiveType("long"), True, {"k": 1}),)))


FROM_ARROW = [
    (pa.int8(), "byte"),
    (pa.uint8(), "short"),
    (pa.int16(), "short"),
    (pa.uint16(), "integer"),
    (pa.int32(), "integer"),
    (pa.uint32(), "long"),
    (pa.int64(), "long"),
    (pa.uint64(), "decimal(20,0)"),
    (pa.float16(), "float"),
    (pa.float32(), "float"),
    (pa.float64(), "double"),
    (pa.bool_(), "boolean"),
    (pa.string(), "string"),
    (pa.large_string(), "string"),
    (pa.string_view(), "string"),
    (pa.binary(), "binary"),
    (pa.large_binary(), "binary"),
    (pa.binary(16), "binary"),
    (pa.date32(), "date"),
    (pa.date64(), "date"),
    (pa.timestamp("ns", tz="UTC"), "timestamp"),
    (pa.timestamp("ms", tz="Europe/Paris"), "timestamp"),
    (pa.timestamp("s"), "timestamp_ntz"),
    (pa.timestamp("ns"), "timestamp_ntz"),
    (pa.decimal128(7, 3), "decimal(7,3)"),
    (pa.decimal256(38, 2), "decimal(38,2)"),
    (pa.null(), "void"),
    (pa.dictionary(pa.int32(), pa.large_string()), "string"),
]


@pytest.mark.parametrize(("arrow", "delta"), FROM_ARROW, ids=[str(a) for a, _ in FROM_ARROW])
def test_from_arrow_primitives(arrow: pa.DataType, delta: str) -> None:
    got = from_arrow_type(arrow)
    assert isinstance(got, PrimitiveType)
    assert got.name == delta


def test_from_arrow_nested() -> None:
    schema = pa.schema(
        [
            pa.field("l", pa.large_list(pa.field("x", pa.int8(), nullable=False))),
            pa.field("f", pa.list_(pa.int16(), 3)),
            pa.field("m", pa.map_(pa.string(), pa.large_string())),
            pa.field("s", pa.struct([pa.field("ts", pa.timestamp("ms"), nullable=False)])),
        ]
    )
    got = from_arrow_schema(schema)
    assert got["l"].type == ArrayType(PrimitiveType("byte"), contains_null=False)
    assert got["f"].type == ArrayType(PrimitiveType("short"), contains_null=True)
    assert got["m"].type == MapType(PrimitiveType("string"), PrimitiveType("string"), True)
    inner = got["s"].type
    assert isinstance(inner, StructType)
    assert inner["ts"] == StructField("ts", PrimitiveType("timestamp_ntz"), False, {})


@pytest.mark.parametrize(
    "arrow",
    [pa.time32("s"), pa.duration("us"), pa.decimal256(50, 2), pa.month_day_nano_interval()],
)
def test_from_arrow_rejects(arrow: pa.DataType) -> None:
    with pytest.raises(SchemaError):
        from_arrow_schema(pa.schema([pa.field("x", arrow)]))


def test_void_field_is_nullable_in_arrow() -> None:
    s = StructType((StructField("v", VOID, nullable=False),))
    field = to_arrow_schema(s).field("v")
    assert field.type == pa.null() and field.nullable is True


def test_from_arrow_plain_variant_struct_stays_struct() -> None:
    got = from_arrow_type(VARIANT_ARROW_TYPE)
    assert isinstance(got, StructType) and got.names == ["metadata", "value"]


# --- hypothesis round trips ---------------------------------------------------------------------

_names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=8)
_json_leaf = st.none() | st.booleans() | st.integers() | st.text(max_size=5)
_json = st.recursive(
    _json_leaf,
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c, max_size=3),
    max_leaves=5,
)
_metadata = st.dictionaries(st.text(max_size=10), _json, max_size=3)
_key_types = st.sampled_from(["string", "long", "integer", "date", "binary"]).map(PrimitiveType)
_primitives = st.sampled_from(
    [
        "string",
        "long",
        "integer",
        "short",
        "byte",
        "float",
        "double",
        "boolean",
        "binary",
        "date",
        "timestamp",
        "timestamp_ntz",
        "void",
        "variant",
        "geometry(OGC:CRS84)",
        "geography(OGC:CRS84, spherical)",
    ]
).map(PrimitiveType) | st.integers(1, 38).flatmap(
    lambda p: st.integers(0, p).map(lambda s: DecimalType(p, s))
)


VOID = PrimitiveType("void")


def _structs(children: st.SearchStrategy[DeltaType]) -> st.SearchStrategy[StructType]:
    fields = st.lists(
        st.tuples(_names, children, st.booleans(), _metadata),
        max_size=4,
        unique_by=lambda f: f[0].lower(),
    )
    # Arrow's null type is always nullable, so a void field is generated nullable.
    return fields.map(
        lambda fs: StructType(tuple(StructField(n, t, b or t == VOID, m) for n, t, b, m in fs))
    )


_types: st.SearchStrategy[DeltaType] = st.recursive(
    _primitives,
    lambda c: (
        st.builds(lambda e, b: ArrayType(e, b or e == VOID), c, st.booleans())
        | st.builds(lambda k, v, b: MapType(k, v, b or v == VOID), _key_types, c, st.booleans())
        | _structs(c)
    ),
    max_leaves=8,
)
_schemas = _structs(_types)


@settings(max_examples=100, deadline=None)
@given(_schemas)
def test_hypothesis_arrow_round_trip(schema: StructType) -> None:
    assert from_arrow_schema(to_arrow_schema(schema)) == schema


@settings(max_examples=100, deadline=None)
@given(_schemas)
def test_hypothesis_json_round_trip(schema: StructType) -> None:
    text = schema_to_json(schema)
    assert parse_schema(text) == schema
    assert schema_to_json(parse_schema(text)) == text


# --- traversal ------------------------------------------------------------------------------------

NESTED = (
    '{"type":"struct","fields":['
    '{"name":"a","type":"long","nullable":true,"metadata":{}},'
    '{"name":"s","type":{"type":"struct","fields":['
    '{"name":"x","type":"string","nullable":true,"metadata":{}},'
    '{"name":"t","type":{"type":"struct","fields":['
    '{"name":"y","type":"date","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}}]},'
    '"nullable":true,"metadata":{}},'
    '{"name":"l","type":{"type":"array","elementType":{"type":"struct","fields":['
    '{"name":"z","type":"long","nullable":true,"metadata":{}}]},"containsNull":true},'
    '"nullable":true,"metadata":{}},'
    '{"name":"m","type":{"type":"map","keyType":"string","valueType":"long",'
    '"valueContainsNull":true},"nullable":true,"metadata":{}}]}'
)


def test_leaf_paths_depth_first() -> None:
    got = leaf_paths(parse_schema(NESTED))
    assert [p for p, _ in got] == [("a",), ("s", "x"), ("s", "t", "y"), ("l",), ("m",)]
    assert got[2][1] == PrimitiveType("date")
    assert isinstance(got[3][1], ArrayType)


def test_iter_fields_walks_into_arrays_and_maps() -> None:
    paths = [p for p, _ in iter_fields(parse_schema(NESTED))]
    assert ("l", "element", "z") in paths
    assert ("s", "t", "y") in paths
    assert len(paths) == 8


# --- type widening --------------------------------------------------------------------------------

P = PrimitiveType
ALLOWED = [
    (P("byte"), P("short")),
    (P("byte"), P("long")),
    (P("short"), P("integer")),
    (P("integer"), P("long")),
    (P("float"), P("double")),
    (P("byte"), P("double")),
    (P("integer"), P("double")),
    (P("date"), P("timestamp_ntz")),
    (DecimalType(10, 2), DecimalType(20, 2)),
    (DecimalType(10, 2), DecimalType(20, 5)),
    (P("byte"), DecimalType(4, 1)),
    (P("short"), DecimalType(6, 1)),
    (P("integer"), DecimalType(10, 0)),
    (P("integer"), DecimalType(11, 1)),
    (P("long"), DecimalType(21, 1)),
    (P("void"), P("string")),
]
REFUSED = [
    (P("long"), P("integer")),
    (P("double"), P("float")),
    (P("long"), P("double")),
    (P("string"), P("long")),
    (P("timestamp_ntz"), P("date")),
    (P("date"), P("timestamp")),
    (DecimalType(10, 2), DecimalType(10, 3)),
    (DecimalType(10, 2), DecimalType(11, 1)),
    (P("integer"), DecimalType(10, 1)),
    (P("long"), DecimalType(20, 1)),
    (P("byte"), DecimalType(3, 1)),
    (P("float"), DecimalType(38, 2)),
]


@pytest.mark.parametrize(("f", "t"), ALLOWED, ids=[f"{f.name}->{t.name}" for f, t in ALLOWED])
def test_allowed_widening(f: DeltaType, t: DeltaType) -> None:
    assert is_allowed_widening(f, t)


@pytest.mark.parametrize(("f", "t"), REFUSED, ids=[f"{f.name}->{t.name}" for f, t in REFUSED])
def test_refused_widening(f: DeltaType, t: DeltaType) -> None:
    assert not is_allowed_widening(f, t)
    schema = StructType(
        (
            StructField(
                "c", t, True, {"delta.typeChanges": [{"fromType": f.name, "toType": t.name}]}
            ),
        )
    )
    with pytest.raises(UnsupportedFeatureError, match="typeWidening"):
        validate_type_changes(schema)


def test_type_changes_of_conformance_table() -> None:
    text = next(s for c, s in SCHEMAS if c == "kernelrs_type_widening-1")
    changes = type_changes(parse_schema(text))
    assert len(changes) == 13
    first = changes[0]
    assert first == TypeChange(("byte_long",), (), P("byte"), P("long"), 2)
    assert changes[8].to_type == DecimalType(4, 1)
    validate_type_changes(parse_schema(text))


def test_type_changes_nested_field_path() -> None:
    md = {
        "delta.typeChanges": [
            {"fromType": "integer", "toType": "long", "fieldPath": "value.element"},
        ]
    }
    m = MapType(P("string"), ArrayType(P("long")))
    inner = StructType((StructField("m", m, True, md),))
    schema = StructType((StructField("s", inner),))
    (change,) = type_changes(schema)
    assert change.path == ("s", "m")
    assert change.field_path == ("value", "element")
    assert change.table_version is None
    validate_type_changes(schema)


@pytest.mark.parametrize(
    "entries", ["nope", [{"fromType": "long"}], [5], [{"fromType": "int", "toType": "long"}]]
)
def test_malformed_type_changes(entries: Any) -> None:
    schema = StructType((StructField("c", P("long"), True, {"delta.typeChanges": entries}),))
    with pytest.raises(SchemaError):
        type_changes(schema)


def test_module_doctests() -> None:
    result = doctest.testmod(schema_mod, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 5
    assert result.failed == 0


def test_wide_struct_finds_fields_by_exact_name() -> None:
    """Past a few fields a struct keeps its fields by name (built on first lookup); the
    lookup stays exact and follows copies, pickles and replaced fields."""
    import dataclasses
    import pickle

    from lakequery.protocol.schema import PrimitiveType, StructField, StructType

    fields = tuple(StructField(f"c{i}", PrimitiveType("long")) for i in range(100))
    wide = StructType(fields)
    assert wide.get("c77") is fields[77]
    assert wide.get("C77") is None and wide.get("c100") is None
    assert wide["c0"] is fields[0]
    again = pickle.loads(pickle.dumps(wide))
    assert again == wide and again.get("c99") == fields[99]
    renamed = dataclasses.replace(
        wide, fields=(StructField("x", PrimitiveType("integer")), *fields[1:])
    )
    assert renamed.get("c0") is None and renamed.get("x") is not None
    assert wide.get("c0") is fields[0]
