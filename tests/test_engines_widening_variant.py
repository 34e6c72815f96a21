"""Two kinds of real table every engine must read alike (issue 14, item 6).

* Type widening inside maps: keys and values widened (``map<int,int>`` -> ``map<long,long>``,
  ``map<string,float>`` -> ``map<string,double>``) and widening inside arrays, structs and
  maps nested in maps, with old files written by pyarrow and by DuckDB beside new ones.
* Variant columns stored with Parquet's VARIANT logical type: DuckDB's own files
  (``COPY ... ::VARIANT``), and pyarrow files whose variant groups -- top level and nested in
  structs, arrays and maps -- carry the annotation (``parquet_footer.annotate_variant``),
  beside Spark's unannotated layout. Every engine returns the bytes stored in the files.

Tables are written by hand (Parquet by pyarrow or DuckDB, the ``_delta_log`` by
``tablekit``), and the expected rows come from the data written, never from lakequery.
"""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Callable, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from parquet_footer import annotate_variant
from tablekit import TableKit, commit_info, protocol_action, remove_action

import lakequery as lq
from lakequery.errors import UnsupportedFeatureError

# --------------------------------------------------------------------------------------------
# writing tables
# --------------------------------------------------------------------------------------------


def arr(element: Any) -> dict[str, Any]:
    return {"type": "array", "elementType": element, "containsNull": True}


def mp(key: Any, value: Any) -> dict[str, Any]:
    return {"type": "map", "keyType": key, "valueType": value, "valueContainsNull": True}


def st(*fields: dict[str, Any]) -> dict[str, Any]:
    return {"type": "struct", "fields": list(fields)}


def fld(name: str, t: Any, *changes: dict[str, Any]) -> dict[str, Any]:
    metadata = {"delta.typeChanges": list(changes)} if changes else {}
    return {"name": name, "type": t, "nullable": True, "metadata": metadata}


def change(from_type: str, to_type: str, field_path: str | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"fromType": from_type, "toType": to_type, "tableVersion": 1}
    if field_path is not None:
        entry["fieldPath"] = field_path
    return entry


def write_pyarrow(root: Path, table: pa.Table) -> str:
    name = f"part-{uuid.uuid4()}.parquet"
    pq.write_table(table, root / name)
    return name


def write_duckdb(root: Path, sql: str, options: str = "", **tables: pa.Table) -> str:
    """A data file written by DuckDB's own Parquet writer from ``sql``."""
    name = f"part-{uuid.uuid4()}.parquet"
    con = duckdb.connect()
    for view, table in tables.items():
        con.register(view, table)
    con.execute(f"COPY ({sql}) TO '{root / name}' (FORMAT parquet{options})")
    con.close()
    return name


def create_table(
    root: Path,
    fields: Sequence[dict[str, Any]],
    features: Sequence[str],
    configuration: dict[str, str] | None = None,
) -> TableKit:
    """Commit 0: protocol (reader 3 / writer 7 with ``features``) and metaData."""
    kit = TableKit(root)
    metadata = {
        "metaData": {
            "id": str(uuid.uuid4()),
            "format": {"provider": "parquet", "options": {}},
            "schemaString": json.dumps(st(*fields)),
            "partitionColumns": [],
            "configuration": configuration or {},
            "createdTime": 1_700_000_000_000,
        }
    }
    kit.commit(
        [protocol_action(3, 7, features, features), metadata], info=commit_info("CREATE TABLE")
    )
    return kit


def add_files(kit: TableKit, names: Sequence[str], remove: Sequence[str] = ()) -> None:
    adds = [
        remove_action({"path": name, "size": (kit.root / name).stat().st_size}) for name in remove
    ]
    for name in names:
        stat = (kit.root / name).stat()
        rows = pq.ParquetFile(kit.root / name).metadata.num_rows
        adds.append(
            {
                "add": {
                    "path": name,
                    "partitionValues": {},
                    "size": stat.st_size,
                    "modificationTime": int(stat.st_mtime * 1000),
                    "dataChange": True,
                    "stats": json.dumps({"numRecords": rows}),
                }
            }
        )
    kit.commit(adds, info=commit_info("WRITE"))


# --------------------------------------------------------------------------------------------
# reading through every engine
# --------------------------------------------------------------------------------------------


def engine_rows(scan: lq.Scan) -> dict[str, list[dict[str, Any]]]:
    reader = scan.to_arrow_reader()
    tables = {
        "arrow": scan.to_arrow(),
        "arrow_reader": pa.Table.from_batches(list(reader), schema=reader.schema),
        "duckdb": scan.to_duckdb().to_arrow_table(),
        "polars": scan.to_polars().collect().to_arrow(),
    }
    out = {}
    for engine, table in tables.items():
        assert table.column_names == scan.columns, engine
        out[engine] = sorted(table.to_pylist(), key=lambda r: r["id"])
    return out


def assert_engines(scan: lq.Scan, want: list[dict[str, Any]]) -> None:
    wrong = {e: rows for e, rows in engine_rows(scan).items() if rows != want}
    assert not wrong, f"want {want}\n" + "\n".join(f"{e}: {r}" for e, r in wrong.items())


def scanned_natively_by_polars(lf: pl.LazyFrame) -> bool:
    """A Parquet scan in the plan (the Arrow fallback shows an in-memory frame instead)."""
    return "Parquet SCAN" in lf.explain()


# --------------------------------------------------------------------------------------------
# (a) type widening inside maps
# --------------------------------------------------------------------------------------------


def _map(key: pa.DataType, value: pa.DataType) -> pa.DataType:
    return pa.map_(key, value)


OLD_TYPES = {
    "mk": _map(pa.int32(), pa.int32()),
    "mf": _map(pa.string(), pa.float32()),
    "fk": _map(pa.float32(), pa.string()),
    "ma": _map(pa.string(), pa.list_(pa.int16())),
    "ms": _map(pa.string(), pa.struct([("a", pa.int8()), ("b", pa.string())])),
    "mks": _map(pa.struct([("k", pa.int32())]), pa.string()),
    "am": pa.list_(_map(pa.int32(), pa.int16())),
    "sm": pa.struct([("inner", _map(pa.int8(), pa.float32()))]),
    "mm": _map(pa.string(), _map(pa.int32(), pa.string())),
    "md": _map(pa.string(), pa.decimal128(10, 2)),
}
NEW_TYPES = {
    "mk": _map(pa.int64(), pa.int64()),
    "mf": _map(pa.string(), pa.float64()),
    "fk": _map(pa.float64(), pa.string()),
    "ma": _map(pa.string(), pa.list_(pa.int64())),
    "ms": _map(pa.string(), pa.struct([("a", pa.int64()), ("b", pa.string())])),
    "mks": _map(pa.struct([("k", pa.int64())]), pa.string()),
    "am": pa.list_(_map(pa.int64(), pa.int32())),
    "sm": pa.struct([("inner", _map(pa.int64(), pa.float64()))]),
    "mm": _map(pa.string(), _map(pa.int64(), pa.string())),
    "md": _map(pa.string(), pa.decimal128(12, 2)),
}
WIDENED_FIELDS = [
    fld("id", "long"),
    fld(
        "mk",
        mp("long", "long"),
        change("integer", "long", "key"),
        change("integer", "long", "value"),
    ),
    fld("mf", mp("string", "double"), change("float", "double", "value")),
    fld("fk", mp("double", "string"), change("float", "double", "key")),
    fld(
        "ma",
        mp("string", arr("long")),
        change("short", "integer", "value.element"),
        change("integer", "long", "value.element"),
    ),
    fld(
        "ms",
        mp("string", st(fld("a", "long", change("byte", "long")), fld("b", "string"))),
    ),
    fld("mks", mp(st(fld("k", "long", change("integer", "long"))), "string")),
    fld(
        "am",
        arr(mp("long", "integer")),
        change("integer", "long", "element.key"),
        change("short", "integer", "element.value"),
    ),
    fld(
        "sm",
        st(
            fld(
                "inner",
                mp("long", "double"),
                change("byte", "long", "key"),
                change("float", "double", "value"),
            )
        ),
    ),
    fld("mm", mp("string", mp("long", "string")), change("integer", "long", "value.key")),
    fld("md", mp("string", "decimal(12,2)"), change("decimal(10,2)", "decimal(12,2)", "value")),
]
MAP_COLUMNS = list(OLD_TYPES)


def _old_row(i: int) -> dict[str, Any]:
    """Values that fit the old types (floats exact in float32)."""
    if i % 4 == 3:  # a row of null and empty collections
        return {
            "id": i,
            **dict.fromkeys(MAP_COLUMNS),
            "am": [None, []],
            "sm": {"inner": None},
            "mk": [],
        }
    return {
        "id": i,
        "mk": [(-(2**31), i), (2**31 - 1, None)],
        "mf": [("a", 1.5 * i), ("b", None), ("c", -0.25)],
        "fk": [(0.5 * i, "half"), (-2.0, None)],
        "ma": [("x", [i, -(2**15), None]), ("y", None), ("z", [])],
        "ms": [("p", {"a": -128, "b": f"r{i}"}), ("q", {"a": None, "b": None}), ("n", None)],
        "mks": [({"k": 2**31 - 1}, "max"), ({"k": i}, None)],
        "am": [[(i, 2**15 - 1), (-1, None)], None, []],
        "sm": {"inner": [(127, 0.75), (-128, None)]},
        "mm": [("o", [(i, "y"), (-(2**31), None)]), ("e", []), ("n", None)],
        "md": [("a", Decimal("12345678.91")), ("b", None)],
    }


def _new_row(i: int) -> dict[str, Any]:
    """Values only the widened types hold."""
    return {
        "id": i,
        "mk": [(2**40 + i, -(2**50))],
        "mf": [("a", 1e300), ("b", 0.1)],
        "fk": [(1e-300, "tiny")],
        "ma": [("x", [2**62, None])],
        "ms": [("p", {"a": 2**60, "b": "new"})],
        "mks": [({"k": -(2**40)}, "neg")],
        "am": [[(2**33, 2**20)]],
        "sm": {"inner": [(2**45, 1e200)]},
        "mm": [("o", [(2**35, "z")])],
        "md": [("a", Decimal("9999999999.99"))],
    }


def _table(rows: list[dict[str, Any]], types: dict[str, pa.DataType]) -> pa.Table:
    schema = pa.schema([("id", pa.int64()), *types.items()])
    return pa.Table.from_pylist(rows, schema=schema)


@pytest.fixture(scope="module")
def widened(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[dict[str, Any]]]:
    """Old files (pyarrow, DuckDB) in the narrow types, a new file in the widened ones."""
    root = tmp_path_factory.mktemp("widening") / "t"
    kit = create_table(root, WIDENED_FIELDS, ["typeWidening"])
    old_a = [_old_row(i) for i in range(0, 8)]
    old_b = [_old_row(i) for i in range(8, 16)]
    new = [_new_row(i) for i in range(16, 20)]
    files = [
        write_pyarrow(root, _table(old_a, OLD_TYPES)),
        write_duckdb(root, "SELECT * FROM old", old=_table(old_b, OLD_TYPES)),
        write_pyarrow(root, _table(new, NEW_TYPES)),
    ]
    add_files(kit, files)
    return kit.uri, old_a + old_b + new


def test_fixture_files_hold_the_old_types(widened: tuple[str, list[dict[str, Any]]]) -> None:
    uri, _ = widened
    types = [pq.read_schema(p).field("mk").type for p in Path(uri).glob("*.parquet")]
    assert sorted(str(t.key_type) for t in types) == ["int32", "int32", "int64"]


@pytest.mark.parametrize("column", MAP_COLUMNS)
def test_widened_map_column_in_every_engine(
    widened: tuple[str, list[dict[str, Any]]], column: str
) -> None:
    uri, rows = widened
    scan = lq.DeltaTable(uri).snapshot().scan(columns=["id", column])
    assert_engines(scan, [{"id": r["id"], column: r[column]} for r in rows])


def test_widened_maps_whole_table(widened: tuple[str, list[dict[str, Any]]]) -> None:
    uri, rows = widened
    assert_engines(lq.DeltaTable(uri).snapshot().scan(), rows)


def test_widened_maps_filtered(widened: tuple[str, list[dict[str, Any]]]) -> None:
    uri, rows = widened
    scan = lq.DeltaTable(uri).snapshot().scan(columns=["id", "mk", "am"], filter="id >= 6")
    want = [{"id": r["id"], "mk": r["mk"], "am": r["am"]} for r in rows if r["id"] >= 6]
    assert_engines(scan, want)


@pytest.mark.parametrize("column", ["mk", "mf", "fk", "ma", "ms", "mks", "am", "sm", "mm"])
def test_polars_reads_widened_maps_lazily(
    widened: tuple[str, list[dict[str, Any]]], column: str
) -> None:
    """Numeric widening anywhere in a map stays a lazy Parquet scan (map keys are read as
    lists of key/value structs, which Polars can upcast, and cast back to maps)."""
    uri, _ = widened
    lf = lq.DeltaTable(uri).snapshot().scan(columns=["id", column]).to_polars()
    assert scanned_natively_by_polars(lf), lf.explain()


def test_polars_schema_of_widened_maps(widened: tuple[str, list[dict[str, Any]]]) -> None:
    uri, _ = widened
    scan = lq.DeltaTable(uri).snapshot().scan(columns=["id", "mk", "am", "sm", "mm"])
    schema = scan.to_polars().collect_schema()
    assert schema["mk"] == pl.Map(pl.Int64, pl.Int64)
    assert schema["am"] == pl.List(pl.Map(pl.Int64, pl.Int32))
    assert schema["sm"] == pl.Struct({"inner": pl.Map(pl.Int64, pl.Float64)})
    assert schema["mm"] == pl.Map(pl.String, pl.Map(pl.Int64, pl.String))


# --------------------------------------------------------------------------------------------
# (b) variant columns in Parquet's VARIANT layout
# --------------------------------------------------------------------------------------------

EMPTY_METADATA = b"\x01\x00\x00"
#: Variant encodings as another writer (Spark) makes them: smallest integer width, short
#: strings, and a metadata dictionary in insertion order (not sorted).
INT8_5 = {"metadata": EMPTY_METADATA, "value": b"\x0c\x05"}
STRING_HI = {"metadata": EMPTY_METADATA, "value": b"\x09hi"}
VARIANT_NULL = {"metadata": EMPTY_METADATA, "value": b"\x00"}
TRUE = {"metadata": EMPTY_METADATA, "value": b"\x04"}
ARRAY_1_HI = {"metadata": EMPTY_METADATA, "value": b"\x03\x02\x00\x02\x05\x0c\x01\x09hi"}
OBJECT_B1_A2 = {  # {"b": 1, "a": 2}, dictionary ["b", "a"]; fields ordered by name
    "metadata": b"\x01\x02\x00\x01\x02ba",
    "value": b"\x02\x02\x01\x00\x00\x02\x04\x0c\x02\x0c\x01",
}
FOREIGN = [INT8_5, STRING_HI, VARIANT_NULL, TRUE, ARRAY_1_HI, OBJECT_B1_A2]
#: How DuckDB reads each of them back (checks the hand-made bytes are valid variants).
FOREIGN_TEXT = ["5", '"hi"', None, "true", '[1,"hi"]', '{"a":2,"b":1}']

#: Spark's unannotated group: value first, then metadata.
SPARK_VARIANT = pa.struct(
    [pa.field("value", pa.binary(), False), pa.field("metadata", pa.binary(), False)]
)
PARQUET_VARIANT = pa.struct(
    [pa.field("metadata", pa.binary(), False), pa.field("value", pa.binary(), False)]
)


def _duckdb_variant_text(path: Path, column: str = "v") -> list[str | None]:
    con = duckdb.connect()
    rows = con.sql(
        f"SELECT CAST({column} AS JSON)::VARCHAR FROM read_parquet('{path}') ORDER BY id"
    ).fetchall()
    con.close()
    return [None if r[0] in (None, "null") else r[0].replace(" ", "") for r in rows]


@pytest.fixture(scope="module")
def variants(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[dict[str, Any]]]:
    """Top-level variants: a DuckDB file (annotated), Spark's unannotated layout, and a
    pyarrow file annotated afterwards that holds other writers' encodings."""
    root = tmp_path_factory.mktemp("variant") / "t"
    kit = create_table(root, [fld("id", "long"), fld("v", "variant")], ["variantType"])
    duck = write_duckdb(
        root,
        "SELECT * FROM (VALUES (1, 42::VARIANT), (2, {'b': 'x', 'a': [1, 2.5]}::VARIANT), "
        "(3, 'hello'::VARIANT), (4, NULL::VARIANT), (5, 'a long string of more than "
        "sixty-four bytes, stored as a long string primitive'::VARIANT)) t(id, v)",
        ", SHREDDING {'v': 'VARIANT'}",
    )
    spark_rows = [{"id": 10 + i, "v": v} for i, v in enumerate([*FOREIGN, None])]
    spark = write_pyarrow(
        root,
        pa.Table.from_pylist(spark_rows, pa.schema([("id", pa.int64()), ("v", SPARK_VARIANT)])),
    )
    foreign_rows = [{"id": 20 + i, "v": v} for i, v in enumerate([None, *FOREIGN])]
    foreign = write_pyarrow(
        root,
        pa.Table.from_pylist(foreign_rows, pa.schema([("id", pa.int64()), ("v", PARQUET_VARIANT)])),
    )
    annotate_variant(root / foreign, [("v",)])
    add_files(kit, [duck, spark, foreign])
    # expected: the bytes stored in each file, read back by pyarrow itself
    stored = pq.read_table(root / duck).to_pylist()
    assert "Variant" in str(pq.ParquetFile(root / duck).metadata.schema)
    assert _duckdb_variant_text(root / foreign) == [None, *FOREIGN_TEXT]
    rows = stored + spark_rows + foreign_rows
    norm = [{"id": r["id"], "v": _parquet_order(r["v"])} for r in rows]
    return kit.uri, sorted(norm, key=lambda r: r["id"])


def _parquet_order(v: dict[str, bytes] | None) -> dict[str, bytes] | None:
    return None if v is None else {"metadata": v["metadata"], "value": v["value"]}


def test_duckdb_file_is_annotated_and_unshredded(variants: tuple[str, list[Any]]) -> None:
    uri, _ = variants
    text = [str(pq.ParquetFile(p).metadata.schema) for p in Path(uri).glob("*.parquet")]
    assert sum("Variant(" in t for t in text) == 2
    assert not any("typed_value" in t for t in text)


def test_variant_column_in_every_engine(variants: tuple[str, list[dict[str, Any]]]) -> None:
    uri, rows = variants
    assert_engines(lq.DeltaTable(uri).snapshot().scan(), rows)


def test_variant_column_filtered(variants: tuple[str, list[dict[str, Any]]]) -> None:
    uri, rows = variants
    scan = lq.DeltaTable(uri).snapshot().scan(filter="id > 3 AND id < 22")
    assert_engines(scan, [r for r in rows if 3 < r["id"] < 22])


def test_variant_schema_in_every_engine(variants: tuple[str, list[dict[str, Any]]]) -> None:
    uri, _ = variants
    scan = lq.DeltaTable(uri).snapshot().scan()
    want = pa.struct([("metadata", pa.binary()), ("value", pa.binary())])
    assert scan.to_arrow().schema.field("v").type == want
    assert scan.to_duckdb().types[1] == duckdb.struct_type({"metadata": "BLOB", "value": "BLOB"})
    assert scan.to_polars().collect_schema()["v"] == pl.Struct(
        {"metadata": pl.Binary, "value": pl.Binary}
    )


def test_duckdb_relation_over_variant_files_runs_again(
    variants: tuple[str, list[dict[str, Any]]],
) -> None:
    """The relation re-reads the files on every execution, in views and joins too."""
    uri, rows = variants
    con = duckdb.connect()
    snap = lq.DeltaTable(uri).snapshot()
    rel = snap.scan().to_duckdb(con)
    assert rel.count("*").fetchall() == [(len(rows),)]
    assert rel.count("*").fetchall() == [(len(rows),)]
    joined = lq.sql(
        "SELECT a.id, b.v FROM a JOIN b USING (id) WHERE a.v IS NOT NULL ORDER BY id",
        con=con,
        a=snap,
        b=snap.scan(columns=["id", "v"]),
    ).fetchall()
    assert joined == [(r["id"], r["v"]) for r in rows if r["v"] is not None]
    assert [r[0] for r in con.sql("SELECT id FROM a ORDER BY id").fetchall()] == [
        r["id"] for r in rows
    ]
    # without a connection: registered on a cursor of lakequery's engine database
    alone = lq.sql("SELECT count(*), count(v) FROM a", a=snap).fetchall()
    assert alone == [(len(rows), sum(r["v"] is not None for r in rows))]


def test_scan_without_variant_columns_in_every_engine(
    variants: tuple[str, list[dict[str, Any]]],
) -> None:
    uri, rows = variants
    scan = lq.DeltaTable(uri).snapshot().scan(columns=["id"])
    assert_engines(scan, [{"id": r["id"]} for r in rows])
    assert "READ_PARQUET" in scan.to_duckdb().explain().upper()


NESTED_FIELDS = [
    fld("id", "long"),
    fld("v", "variant"),
    fld("s", st(fld("v", "variant"), fld("x", "integer"))),
    fld("l", arr("variant")),
    fld("m", mp("string", "variant")),
    fld("sl", st(fld("items", arr(st(fld("v", "variant")))))),
]
NESTED_GROUPS = [
    ("v",),
    ("s", "v"),
    ("l", "list", "element"),
    ("m", "key_value", "value"),
    ("sl", "items", "list", "element", "v"),
]


def _nested_schema(variant: pa.DataType) -> pa.Schema:
    return pa.schema(
        [
            ("id", pa.int64()),
            ("v", variant),
            ("s", pa.struct([("v", variant), ("x", pa.int32())])),
            ("l", pa.list_(variant)),
            ("m", pa.map_(pa.string(), variant)),
            ("sl", pa.struct([("items", pa.list_(pa.struct([("v", variant)])))])),
        ]
    )


def _nested_row(i: int, a: dict[str, bytes], b: dict[str, bytes]) -> dict[str, Any]:
    if i % 5 == 4:
        return {"id": i, "v": None, "s": None, "l": None, "m": None, "sl": None}
    return {
        "id": i,
        "v": a,
        "s": {"v": b, "x": i},
        "l": [a, None, b],
        "m": [("k", b), ("n", None)],
        "sl": {"items": [{"v": a}, {"v": None}, None]},
    }


@pytest.fixture(scope="module")
def nested_variants(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[dict[str, Any]]]:
    """Variants nested in structs, arrays and maps: one file with every variant group
    annotated, one in Spark's unannotated layout."""
    root = tmp_path_factory.mktemp("nested-variant") / "t"
    kit = create_table(root, NESTED_FIELDS, ["variantType"])
    pairs = [(FOREIGN[i % 6], FOREIGN[(i + 1) % 6]) for i in range(10)]
    annotated_rows = [_nested_row(i, a, b) for i, (a, b) in enumerate(pairs)]
    plain_rows = [_nested_row(10 + i, b, a) for i, (a, b) in enumerate(pairs)]
    annotated = write_pyarrow(
        root, pa.Table.from_pylist(annotated_rows, _nested_schema(PARQUET_VARIANT))
    )
    annotate_variant(root / annotated, NESTED_GROUPS)
    plain = write_pyarrow(root, pa.Table.from_pylist(plain_rows, _nested_schema(SPARK_VARIANT)))
    add_files(kit, [annotated, plain])
    schema = str(pq.ParquetFile(root / annotated).metadata.schema)
    assert schema.count("(Variant(1))") == len(NESTED_GROUPS)
    return kit.uri, annotated_rows + plain_rows


@pytest.mark.parametrize("column", ["v", "s", "l", "m", "sl", None])
def test_nested_variants_in_every_engine(
    nested_variants: tuple[str, list[dict[str, Any]]], column: str | None
) -> None:
    uri, rows = nested_variants
    columns = None if column is None else ["id", column]
    scan = lq.DeltaTable(uri).snapshot().scan(columns=columns)
    want = [{c: _deep_parquet_order(r[c]) for c in scan.columns} for r in rows]
    assert_engines(scan, want)


def _deep_parquet_order(value: Any) -> Any:
    """Variant dicts with the logical field order (metadata, value), at any depth."""
    if isinstance(value, dict):
        if set(value) == {"metadata", "value"}:
            return _parquet_order(value)
        return {k: _deep_parquet_order(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_parquet_order(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_deep_parquet_order(v) for v in value)
    return value


# --------------------------------------------------------------------------------------------
# shredded variants: not in a table without variantShredding, refused by every engine
# --------------------------------------------------------------------------------------------

READERS: dict[str, Callable[[lq.Scan], object]] = {
    "arrow": lambda s: s.to_arrow(),
    "arrow_reader": lambda s: s.to_arrow_reader(),
    "duckdb": lambda s: s.to_duckdb(),
    "polars": lambda s: s.to_polars(),
}


@pytest.fixture(scope="module")
def shredded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """DuckDB's default Parquet output shreds variants (``typed_value``); Spark's layout
    can be shredded without the annotation."""
    out = {}
    root = tmp_path_factory.mktemp("shredded") / "duckdb"
    kit = create_table(root, [fld("id", "long"), fld("v", "variant")], ["variantType"])
    name = write_duckdb(root, "SELECT range AS id, (range * 7)::VARIANT AS v FROM range(5)", "")
    assert "typed_value" in str(pq.ParquetFile(root / name).metadata.schema)
    add_files(kit, [name])
    out["duckdb"] = kit.uri
    root = tmp_path_factory.mktemp("shredded") / "spark"
    kit = create_table(
        root, [fld("id", "long"), fld("s", st(fld("v", "variant")))], ["variantType"]
    )
    group = pa.struct(
        [("metadata", pa.binary()), ("value", pa.binary()), ("typed_value", pa.int8())]
    )
    rows = [{"id": 1, "s": {"v": {"metadata": EMPTY_METADATA, "value": None, "typed_value": 5}}}]
    schema = pa.schema([("id", pa.int64()), ("s", pa.struct([("v", group)]))])
    add_files(kit, [write_pyarrow(root, pa.Table.from_pylist(rows, schema))])
    out["spark"] = kit.uri
    return out


@pytest.mark.parametrize("engine", sorted(READERS))
@pytest.mark.parametrize("writer", ["duckdb", "spark"])
def test_shredded_variants_are_refused(shredded: dict[str, str], engine: str, writer: str) -> None:
    scan = lq.DeltaTable(shredded[writer]).snapshot().scan()
    with pytest.raises(UnsupportedFeatureError, match="variantShredding"):
        READERS[engine](scan)


@pytest.mark.parametrize("engine", sorted(READERS))
def test_shredded_variant_not_read_is_no_obstacle(shredded: dict[str, str], engine: str) -> None:
    scan = lq.DeltaTable(shredded["spark"]).snapshot().scan(columns=["id"])
    result: Any = READERS[engine](scan)
    if isinstance(result, pl.LazyFrame):
        result = result.collect().to_arrow()
    elif isinstance(result, duckdb.DuckDBPyRelation):
        result = result.to_arrow_table()
    elif isinstance(result, pa.RecordBatchReader):
        result = result.read_all()
    assert result.to_pylist() == [{"id": 1}]


# --------------------------------------------------------------------------------------------
# both under column mapping (files hold physical names)
# --------------------------------------------------------------------------------------------


def _mapped(field: dict[str, Any], ident: int) -> dict[str, Any]:
    physical = f"col-{ident}-{field['name']}"
    metadata = {
        **field["metadata"],
        "delta.columnMapping.id": ident,
        "delta.columnMapping.physicalName": physical,
    }
    return {**field, "metadata": metadata}


def test_widened_maps_and_variants_under_column_mapping(tmp_path: Path) -> None:
    """Struct fields at every depth carry physical names; the relabelling and the list form
    of widened maps (Polars), and the variant footer check, work on physical names."""
    inner = _mapped(
        fld(
            "inner",
            mp("long", "double"),
            change("byte", "long", "key"),
            change("float", "double", "value"),
        ),
        4,
    )
    v = _mapped(fld("v", "variant"), 6)
    fields = [
        _mapped(fld("id", "long"), 1),
        _mapped(fld("mk", mp("long", "long"), change("integer", "long", "key")), 2),
        _mapped(fld("sm", st(inner)), 3),
        _mapped(fld("s", st(v)), 5),
    ]
    config = {"delta.columnMapping.mode": "name", "delta.columnMapping.maxColumnId": "6"}
    kit = create_table(
        tmp_path / "t", fields, ["columnMapping", "typeWidening", "variantType"], config
    )
    schema = pa.schema(
        [
            ("col-1-id", pa.int64()),
            ("col-2-mk", _map(pa.int32(), pa.int64())),
            ("col-3-sm", pa.struct([("col-4-inner", _map(pa.int8(), pa.float32()))])),
            ("col-5-s", pa.struct([("col-6-v", PARQUET_VARIANT)])),
        ]
    )
    rows: list[dict[str, Any]] = [
        {"id": 1, "mk": [(7, 2**40)], "sm": {"inner": [(-3, 0.5)]}, "s": {"v": INT8_5}},
        {"id": 2, "mk": None, "sm": {"inner": None}, "s": {"v": None}},
        {"id": 3, "mk": [], "sm": None, "s": {"v": OBJECT_B1_A2}},
    ]
    physical = [
        {
            "col-1-id": r["id"],
            "col-2-mk": r["mk"],
            "col-3-sm": None if r["sm"] is None else {"col-4-inner": r["sm"]["inner"]},
            "col-5-s": {"col-6-v": r["s"]["v"]},
        }
        for r in rows
    ]
    name = write_pyarrow(kit.root, pa.Table.from_pylist(physical, schema))
    add_files(kit, [name])
    scan = lq.DeltaTable(kit.uri).snapshot().scan(columns=["id", "mk", "sm"])
    assert_engines(scan, [{c: r[c] for c in ("id", "mk", "sm")} for r in rows])
    assert scanned_natively_by_polars(scan.to_polars())
    # the same rows again, now with the variant group annotated (a new file: data files
    # never change in place)
    annotated = f"part-{uuid.uuid4()}.parquet"
    shutil.copyfile(kit.root / name, kit.root / annotated)
    annotate_variant(kit.root / annotated, [("col-5-s", "col-6-v")])
    add_files(kit, [annotated], remove=[name])
    assert_engines(lq.DeltaTable(kit.uri).snapshot().scan(), rows)


# --------------------------------------------------------------------------------------------
# on object storage (the moto S3 server)
# --------------------------------------------------------------------------------------------


def _upload(local: str, uri: str, options: dict[str, Any]) -> None:
    import s3fs

    fs = s3fs.S3FileSystem(**options)
    for path in Path(local).rglob("*"):
        if path.is_file():
            fs.put_file(str(path), f"{uri}/{path.relative_to(local).as_posix()}")


def test_variants_on_s3(
    variants: tuple[str, list[dict[str, Any]]],
    shredded: dict[str, str],
    s3_table_uri: str,
    s3_storage_options: dict[str, Any],
) -> None:
    """The footer check reads through the table's storage (DuckDB's and Arrow's views)."""
    local, rows = variants
    _upload(local, s3_table_uri, s3_storage_options)
    table = lq.DeltaTable(s3_table_uri, storage_options=s3_storage_options)
    assert_engines(table.snapshot().scan(), rows)
    shredded_uri = s3_table_uri + "-shredded"
    _upload(shredded["spark"], shredded_uri, s3_storage_options)
    scan = lq.DeltaTable(shredded_uri, storage_options=s3_storage_options).snapshot().scan()
    for read in READERS.values():
        with pytest.raises(UnsupportedFeatureError, match="variantShredding"):
            read(scan)
