"""Edge cases: awkward column names, typed and NULL partition values, nested columns,
large files with many row groups, checkpoints after DML, schema evolution together with
column mapping and the change data feed."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from dmlkit import (
    Clause,
    Oracle,
    assert_same_rows,
    cdc_rows,
    check_all_engines,
    commit_actions,
    deltalake_table,
    run_merge,
)

import lakequery as lq

NO_DV = {"delta.enableDeletionVectors": "false"}
MODES = pytest.mark.parametrize(
    "config",
    [{}, NO_DV, {"delta.columnMapping.mode": "name"}, {"delta.enableChangeDataFeed": "true"}],
    ids=["dv", "cow", "colmap", "cdf"],
)


@MODES
def test_awkward_column_names(tmp_path: Path, config: dict[str, str]) -> None:
    uri = str(tmp_path / "t")
    t = pa.table(
        {
            "Id": pa.array(range(12), pa.int64()),
            "my col": pa.array([i % 4 for i in range(12)], pa.int64()),
            "select": pa.array([f"v{i}" for i in range(12)]),
            "Part Key": pa.array(["a b", "c/d", "e=f"] * 4),
        }
    )
    lq.write(uri, t.slice(0, 6), partition_by=["Part Key"], configuration=config)
    lq.write(uri, t.slice(6), mode="append")
    o = Oracle(t, 1)
    dt_ = lq.DeltaTable(uri)
    dt_.delete('"my col" = 1')
    o.delete('"my col" = 1')
    dt_.update(
        "\"Part Key\" = 'c/d'", set={'"select"': "\"select\" || '!'", "my col": '"my col" + 10'}
    )
    o.update("\"Part Key\" = 'c/d'", {"select": "\"select\" || '!'", "my col": '"my col" + 10'})
    dt_.delete("\"Part Key\" = 'e=f'")
    o.delete("\"Part Key\" = 'e=f'")
    src = pa.table(
        {
            "Id": pa.array([0, 3, 99], pa.int64()),
            "select": ["m0", "m3", "n99"],
            "Part Key": ["a b", "x y", "z%"],
        }
    )
    clauses = [Clause("matched", "update", None, None), Clause("not_matched", "insert", None, None)]
    b = dt_.merge(src, on='t."Id" = s."Id"', source_alias="s", target_alias="t")
    for c in clauses:
        b = c.apply(b)
    b.execute()
    o.merge(src, 't."Id" = s."Id"', clauses)
    check_all_engines(uri, o.table())
    assert_same_rows(deltalake_table(uri), o.table(), what="deltalake")


@pytest.mark.parametrize(
    ("ptype", "values", "predicate"),
    [
        (pa.int32(), [1, 2, None], "k = 2"),
        (pa.int32(), [1, 2, None], "k IS NULL"),
        (pa.int32(), [1, 2, None], "k > 1 OR k IS NULL"),
        (pa.date32(), [dt.date(2024, 1, 1), dt.date(2024, 2, 1), None], "k >= '2024-01-15'"),
        (
            pa.date32(),
            [dt.date(2024, 1, 1), dt.date(2024, 2, 1), None],
            "NOT (k = DATE '2024-01-01')",
        ),
        (pa.bool_(), [True, False, None], "k"),
        (pa.bool_(), [True, False, None], "NOT k"),
        (pa.string(), ["e", "a", None], "k = 'e'"),
        (pa.string(), ["e", "a", None], "k IS NOT NULL"),
        (
            pa.timestamp("us", tz="UTC"),
            [
                dt.datetime(2024, 1, 1, 12, tzinfo=dt.timezone.utc),
                dt.datetime(2024, 1, 2, tzinfo=dt.timezone.utc),
                None,
            ],
            "k < '2024-01-01 18:00:00+00'",
        ),
    ],
)
@pytest.mark.parametrize(
    "config", [{}, {"delta.enableChangeDataFeed": "true"}], ids=["plain", "cdf"]
)
def test_typed_partition_delete(
    tmp_path: Path, ptype: Any, values: list[Any], predicate: str, config: dict[str, str]
) -> None:
    uri = str(tmp_path / "t")
    n = 18
    t = pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "k": pa.array([values[i % 3] for i in range(n)], ptype),
        }
    )
    lq.write(uri, t.slice(0, 9), partition_by=["k"], configuration=config)
    lq.write(uri, t.slice(9), mode="append")
    o = Oracle(t, 1)
    m = lq.DeltaTable(uri).delete(predicate)
    o.delete(predicate)
    assert m.num_deleted_rows == n - o.table().num_rows
    assert m.num_deletion_vectors_added == 0
    check_all_engines(uri, o.table(), what=predicate)
    check_all_engines(uri, t, version=1)
    assert_same_rows(deltalake_table(uri), o.table(), what="deltalake")
    # a non-partition predicate touching these partitions
    m = lq.DeltaTable(uri).update(
        f"({predicate}) IS NOT TRUE AND id % 2 = 0", set={"id": "id + 1000"}
    )
    o.update(f"({predicate}) IS NOT TRUE AND id % 2 = 0", {"id": "id + 1000"})
    check_all_engines(uri, o.table(), what=predicate)


@MODES
def test_nested_columns(tmp_path: Path, config: dict[str, str]) -> None:
    uri = str(tmp_path / "t")
    n = 20
    t = pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "st": pa.array(
                [{"x": i, "y": f"y{i}"} if i % 5 else None for i in range(n)],
                pa.struct([("x", pa.int64()), ("y", pa.string())]),
            ),
            "li": pa.array(
                [list(range(i % 4)) if i % 6 else None for i in range(n)], pa.list_(pa.int32())
            ),
            "mp": pa.array([[("k", i)] for i in range(n)], pa.map_(pa.string(), pa.int64())),
        }
    )
    lq.write(uri, t.slice(0, 10), configuration=config)
    lq.write(uri, t.slice(10), mode="append")
    o = Oracle(t, 1)
    dt_ = lq.DeltaTable(uri)
    dt_.delete("st.x % 3 = 0")
    o.delete("st.x % 3 = 0")
    dt_.update("len(li) = 2", set={"st": "{'x': -1, 'y': 'upd'}", "li": "list_append(li, 9)"})
    o.update("len(li) = 2", {"st": "{'x': -1, 'y': 'upd'}", "li": "list_append(li, 9)"})
    src = pa.table(
        {"id": pa.array([1, 50], pa.int64()), "st": t.column("st").combine_chunks().take([2, 3])}
    )
    clauses = [Clause("matched", "update", None, None), Clause("not_matched", "insert", None, None)]
    run_merge(dt_, src, clauses)
    o.merge(src, "t.id = s.id", clauses)
    check_all_engines(uri, o.table())
    assert_same_rows(deltalake_table(uri), o.table(), what="deltalake")


@pytest.mark.parametrize("config", [{}, NO_DV], ids=["dv", "cow"])
def test_large_file_many_row_groups(tmp_path: Path, config: dict[str, str]) -> None:
    """Row positions in DVs / rewrites must be right across row groups."""
    import pyarrow.parquet as pq

    uri = str(tmp_path / "t")
    n = 3000
    t = pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "v": pa.array([i * 7 % 13 for i in range(n)], pa.int64()),
        }
    )
    # deltalake writes files with small row groups; then enable DVs through lakequery's
    # own table: write with lakequery and check row groups of its file
    lq.write(uri, t, configuration=config)
    files = lq.DeltaTable(uri).snapshot().files().column("path").to_pylist()
    md = pq.ParquetFile(Path(uri) / files[0]).metadata
    o = Oracle(t, 0)
    dt_ = lq.DeltaTable(uri)
    for pred in ("v = 3", "id % 97 = 5", "id > 2900 OR id < 3"):
        dt_.delete(pred)
        o.delete(pred)
    dt_.update("v = 4", set={"v": "-v"})
    o.update("v = 4", {"v": "-v"})
    check_all_engines(uri, o.table(), what=f"{md.num_row_groups} row groups")
    assert_same_rows(deltalake_table(uri), o.table(), what="deltalake")


def test_deltalake_table_small_row_groups(tmp_path: Path) -> None:
    import deltalake

    uri = str(tmp_path / "t")
    n = 2000
    t = pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "v": pa.array([i * 7 % 13 for i in range(n)], pa.int64()),
        }
    )
    try:
        deltalake.write_deltalake(
            uri, t, writer_properties=deltalake.WriterProperties(max_row_group_size=128)
        )
    except TypeError:
        deltalake.write_deltalake(uri, t)
    o = Oracle(t, 0)
    dt_ = lq.DeltaTable(uri)
    dt_.delete("v = 3 OR id % 250 = 0")
    o.delete("v = 3 OR id % 250 = 0")
    dt_.update("v = 5", set={"v": "v * 10"})
    o.update("v = 5", {"v": "v * 10"})
    check_all_engines(uri, o.table())
    assert_same_rows(deltalake.DeltaTable(uri).to_pyarrow_table(), o.table(), what="deltalake")


@pytest.mark.parametrize("config", [{}, NO_DV], ids=["dv", "cow"])
def test_checkpoint_after_dml(tmp_path: Path, config: dict[str, str]) -> None:
    uri = str(tmp_path / "t")
    t = pa.table(
        {
            "id": pa.array(range(30), pa.int64()),
            "v": pa.array([i % 3 for i in range(30)], pa.int64()),
        }
    )
    lq.write(uri, t.slice(0, 15), configuration=config)
    lq.write(uri, t.slice(15), mode="append")
    o = Oracle(t, 1)
    dt_ = lq.DeltaTable(uri)
    o.committed(dt_.delete("v = 0").version)
    o.delete("v = 0")
    o.states[o.version] = o.table()
    dt_.checkpoint()
    o.update("id = 4", {"v": "40"})
    o.committed(dt_.update("id = 4", set={"v": "40"}).version)
    o.delete("id = 5")
    o.committed(dt_.delete("id = 5").version)
    dt_.checkpoint()
    for v, expected in o.states.items():
        check_all_engines(uri, expected, v)
        assert_same_rows(deltalake_table(uri, v), expected, what=f"deltalake v{v}")


@pytest.mark.parametrize(
    "config",
    [{}, {"delta.columnMapping.mode": "name"}, {"delta.enableChangeDataFeed": "true"}, NO_DV],
    ids=["dv", "colmap", "cdf", "cow"],
)
def test_schema_merge_with_features(tmp_path: Path, config: dict[str, str]) -> None:
    uri = str(tmp_path / "t")
    t = pa.table({"id": pa.array(range(10), pa.int64()), "v": pa.array(range(10), pa.int64())})
    lq.write(uri, t, configuration=config)
    src = pa.table(
        {
            "id": pa.array([2, 20], pa.int64()),
            "v": pa.array([-2, -20], pa.int64()),
            "w": ["two", "twenty"],
        }
    )
    m = (
        lq.DeltaTable(uri)
        .merge(src, on="t.id = s.id", source_alias="s", target_alias="t", schema_mode="merge")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    assert (m.num_updated_rows, m.num_inserted_rows) == (1, 1)
    o = Oracle(t, 0)
    o.run("ALTER TABLE t ADD COLUMN w VARCHAR")
    clauses = [Clause("matched", "update", None, None), Clause("not_matched", "insert", None, None)]
    o.merge(src, "t.id = s.id", clauses)
    check_all_engines(uri, o.table())
    assert_same_rows(deltalake_table(uri), o.table(), what="deltalake")
    if "delta.enableChangeDataFeed" in config:
        cdc = cdc_rows(uri, m.version)
        assert cdc is not None
        got = sorted(((r["id"], r.get("w"), r["_change_type"]) for r in cdc.to_pylist()), key=repr)
        assert got == sorted(
            [
                (2, None, "update_preimage"),
                (2, "two", "update_postimage"),
                (20, "twenty", "insert"),
            ],
            key=repr,
        )
    meta = next(a["metaData"] for a in commit_actions(uri, m.version) if "metaData" in a)
    assert "w" in meta["schemaString"]
    # then an UPDATE of the new column and a DELETE by it
    lq.DeltaTable(uri).update("w IS NULL AND id < 3", set={"w": "'filled'"})
    o.update("w IS NULL AND id < 3", {"w": "'filled'"})
    lq.DeltaTable(uri).delete("w = 'twenty'")
    o.delete("w = 'twenty'")
    check_all_engines(uri, o.table())


def test_merge_source_case_and_type_differences(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    t = pa.table(
        {
            "id": pa.array(range(10), pa.int64()),
            "v": pa.array(range(10), pa.int64()),
            "s": [f"s{i}" for i in range(10)],
        }
    )
    lq.write(uri, t)
    src = pa.table(
        {
            "ID": pa.array([1, 30], pa.int32()),
            "V": pa.array([100, 300], pa.int16()),
            "S": pa.array(["x", "y"], pa.large_string()),
        }
    )
    m = (
        lq.DeltaTable(uri)
        .merge(src, on="t.id = s.ID", source_alias="s", target_alias="t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    assert (m.num_updated_rows, m.num_inserted_rows) == (1, 1)
    rows = {r["id"]: r for r in lq.DeltaTable(uri).snapshot().scan().to_arrow().to_pylist()}
    assert rows[1] == {"id": 1, "v": 100, "s": "x"}
    assert rows[30] == {"id": 30, "v": 300, "s": "y"}
    assert lq.DeltaTable(uri).snapshot().schema.field("id").type == pa.int64()


def test_merge_composite_key_and_reversed_on(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    t = pa.table(
        {
            "k1": pa.array([i // 5 for i in range(20)], pa.int64()),
            "k2": [f"x{i % 5}" for i in range(20)],
            "v": pa.array(range(20), pa.int64()),
        }
    )
    for i in range(4):
        lq.write(uri, t.slice(i * 5, 5), mode="error" if i == 0 else "append")
    src = pa.table(
        {
            "k1": pa.array([1, 2, 9], pa.int64()),
            "k2": ["x3", "x9", "x0"],
            "v": pa.array([-1, -2, -3], pa.int64()),
        }
    )
    on = "s.k1 = t.k1 AND s.k2 = t.k2"
    clauses = [Clause("matched", "update", None, None), Clause("not_matched", "insert", None, None)]
    b = lq.DeltaTable(uri).merge(src, on=on, source_alias="s", target_alias="t")
    for c in clauses:
        b = c.apply(b)
    m = b.execute()
    assert (m.num_updated_rows, m.num_inserted_rows) == (1, 2)
    assert m.num_files_scanned <= 3
    o = Oracle(t, 3)
    o.merge(src, on, clauses)
    check_all_engines(uri, o.table())


def _all_types(n: int) -> pa.Table:
    import decimal

    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "i8": pa.array([i % 100 - 50 for i in range(n)], pa.int8()),
            "i16": pa.array([i * 300 - 3000 for i in range(n)], pa.int16()),
            "i32": pa.array([None if i % 4 == 0 else i * 70000 for i in range(n)], pa.int32()),
            "f32": pa.array([i / 3 for i in range(n)], pa.float32()),
            "f64": pa.array([i / 7 for i in range(n)], pa.float64()),
            "dec": pa.array([decimal.Decimal(i) / 100 for i in range(n)], pa.decimal128(38, 10)),
            "dec2": pa.array([decimal.Decimal(i * 13) for i in range(n)], pa.decimal128(5, 0)),
            "bin": pa.array([bytes([i % 256, 0, 255]) for i in range(n)], pa.binary()),
            "b": pa.array([i % 2 == 0 for i in range(n)], pa.bool_()),
            "d": pa.array(
                [dt.date(1970, 1, 1) + dt.timedelta(days=i * 400 - 4000) for i in range(n)],
                pa.date32(),
            ),
            "ts": pa.array(
                [
                    dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc)
                    + dt.timedelta(seconds=i * 12345, microseconds=i)
                    for i in range(n)
                ],
                pa.timestamp("us", tz="UTC"),
            ),
            "ntz": pa.array(
                [
                    dt.datetime(1999, 12, 31, 23, 59) + dt.timedelta(minutes=i * 77)
                    for i in range(n)
                ],
                pa.timestamp("us"),
            ),
            "s": pa.array([("ü" * (i % 3)) + str(i) for i in range(n)], pa.string()),
        }
    )


@pytest.mark.parametrize(
    "config",
    [{}, NO_DV, {"delta.enableChangeDataFeed": "true", **NO_DV}],
    ids=["dv", "cow", "cow-cdf"],
)
def test_all_primitive_types_survive_dml(tmp_path: Path, config: dict[str, str]) -> None:
    uri = str(tmp_path / "t")
    t = _all_types(40)
    lq.write(uri, t.slice(0, 20), configuration=config)
    lq.write(uri, t.slice(20), mode="append")
    schema = lq.DeltaTable(uri).snapshot().schema
    o = Oracle(t, 1)
    dt_ = lq.DeltaTable(uri)
    dt_.delete("id % 5 = 0")
    o.delete("id % 5 = 0")
    sets = {
        "i8": "i8 + 1",
        "f32": "f32 * 2",
        "dec": "dec + 0.5",
        "ts": "ts + INTERVAL 1 HOUR",
        "ntz": "ntz - INTERVAL 1 DAY",
        "bin": "bin || '\\x01'::BLOB",
        "d": "d + 3",
    }
    dt_.update("id % 5 = 1", set=sets)
    o.update("id % 5 = 1", sets)
    src = t.slice(3, 4)
    clauses = [Clause("matched", "update", None, None), Clause("not_matched", "insert", None, None)]
    run_merge(dt_, src.set_column(0, "id", pa.array([3, 4, 900, 901], pa.int64())), clauses)
    o.merge(src.set_column(0, "id", pa.array([3, 4, 900, 901], pa.int64())), "t.id = s.id", clauses)
    snap = lq.DeltaTable(uri).snapshot()
    assert snap.schema == schema
    out = snap.scan().to_arrow()
    assert out.schema.types == t.schema.types, (out.schema, t.schema)
    check_all_engines(uri, o.table())
    assert_same_rows(deltalake_table(uri), o.table(), what="deltalake")


@pytest.mark.parametrize("writer", ["lakequery", "deltalake"])
def test_long_string_keys_truncated_stats(tmp_path: Path, writer: str) -> None:
    """String min/max statistics may be truncated; pruning must still find the rows."""
    import deltalake

    uri = str(tmp_path / "t")
    prefix = "k" * 80
    keys = [prefix + f"{i:03d}" + "z" * (i % 3) * 40 for i in range(60)]
    t = pa.table({"k": keys, "v": pa.array(range(60), pa.int64())})
    for i in range(3):
        part = t.slice(i * 20, 20)
        if writer == "lakequery":
            lq.write(uri, part, mode="error" if i == 0 else "append")
        else:
            deltalake.write_deltalake(uri, part, mode="overwrite" if i == 0 else "append")
    o = Oracle(t, 2)
    dt_ = lq.DeltaTable(uri)
    for pred in (
        f"k = '{keys[19]}'",
        f"k >= '{keys[39]}'",
        f"k < '{keys[1]}'",
        f"k IN ('{keys[20]}', '{keys[59]}')",
    ):
        dt_.delete(pred)
        o.delete(pred)
    src = pa.table(
        {"k": [keys[5], keys[38], prefix + "new"], "v": pa.array([-1, -2, -3], pa.int64())}
    )
    clauses = [Clause("matched", "update", None, None), Clause("not_matched", "insert", None, None)]
    b = dt_.merge(src, on="t.k = s.k", source_alias="s", target_alias="t")
    for c in clauses:
        b = c.apply(b)
    m = b.execute()
    o.merge(src, "t.k = s.k", clauses)
    assert (m.num_updated_rows, m.num_inserted_rows) == (2, 1)
    check_all_engines(uri, o.table())


def test_dv_positions_beyond_65535(tmp_path: Path) -> None:
    """Row positions past 2**16 land in another roaring container (and past one row group)."""
    uri = str(tmp_path / "t")
    n = 70_000
    t = pa.table({"id": pa.array(range(n), pa.int64())})
    lq.write(uri, t)
    assert lq.DeltaTable(uri).snapshot().files().num_rows == 1
    o = Oracle(t, 0)
    dt_ = lq.DeltaTable(uri)
    for pred in ("id % 1000 = 7 OR id > 69990", "id BETWEEN 65530 AND 65540", "id < 3"):
        m = dt_.delete(pred)
        o.delete(pred)
        assert m.num_deletion_vectors_added == 1
    check_all_engines(uri, o.table())
    assert_same_rows(deltalake_table(uri), o.table(), what="deltalake")


@pytest.mark.parametrize(
    "keys",
    [[2.0, float("inf")], [float("-inf"), 1.0], [float("nan"), 2.0]],
    ids=["inf", "-inf", "nan"],
)
def test_merge_float_keys_non_finite(tmp_path: Path, keys: list[float]) -> None:
    """Regression: MERGE key-range pruning once failed on non-finite float keys."""
    uri = str(tmp_path / "t")
    t = pa.table(
        {
            "k": pa.array([1.0, 2.0, float("inf"), float("nan")]),
            "v": pa.array([1, 2, 3, 4], pa.int64()),
        }
    )
    lq.write(uri, t.slice(0, 2))
    lq.write(uri, t.slice(2), mode="append")
    src = pa.table({"k": pa.array(keys), "v": pa.array([0] * len(keys), pa.int64())})
    clauses = [Clause("matched", "update", None, None), Clause("not_matched", "insert", None, None)]
    b = lq.DeltaTable(uri).merge(src, on="t.k = s.k", source_alias="s", target_alias="t")
    for c in clauses:
        b = c.apply(b)
    b.execute()
    o = Oracle(t, 1)
    o.merge(src, "t.k = s.k", clauses)
    check_all_engines(uri, o.table())


@pytest.mark.parametrize(
    ("target", "source"),
    [
        (pa.array([9, 10, 11], pa.int64()), pa.array(["9", "10"])),
        (pa.array([9, 10, 11], pa.decimal128(5, 0)), pa.array(["9", "10"])),
        (
            pa.array([dt.date(2024, 1, 5), dt.date(2024, 1, 10), dt.date(2024, 2, 1)]),
            pa.array(["2024-1-5", "2024-01-10"]),
        ),
    ],
    ids=["bigint-text", "decimal-text", "date-text"],
)
def test_merge_text_keys_against_typed_target_keys(
    tmp_path: Path, target: pa.Array, source: pa.Array
) -> None:
    """DuckDB casts text source keys to the target's type to join them; the key-range
    pruning took the min and max as text ('10' < '9'), an empty range that pruned every
    file: the upsert updated nothing and inserted the matched rows again."""
    uri = str(tmp_path / "t")
    lq.write(uri, pa.table({"k": target, "v": ["a", "b", "c"]}))
    src = pa.table({"k": source, "v": ["X", "Y"]})
    m = (
        lq.DeltaTable(uri)
        .merge(src, on="t.k = s.k", source_alias="s", target_alias="t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    assert (m.num_updated_rows, m.num_inserted_rows) == (2, 0)
    rows = lq.DeltaTable(uri).snapshot().scan().to_arrow().sort_by("k").to_pylist()
    assert [r["v"] for r in rows] == ["X", "Y", "c"]


def test_merge_binary_key(tmp_path: Path) -> None:
    """Regression: MERGE key-range pruning once failed on binary keys."""
    uri = str(tmp_path / "t")
    t = pa.table(
        {
            "k": pa.array([b"a", b"b\x00", b"\xff"], pa.binary()),
            "v": pa.array([1, 2, 3], pa.int64()),
        }
    )
    lq.write(uri, t)
    src = pa.table({"k": pa.array([b"a", b"zz"], pa.binary()), "v": pa.array([10, 20], pa.int64())})
    clauses = [Clause("matched", "update", None, None), Clause("not_matched", "insert", None, None)]
    b = lq.DeltaTable(uri).merge(src, on="t.k = s.k", source_alias="s", target_alias="t")
    for c in clauses:
        b = c.apply(b)
    b.execute()
    o = Oracle(t, 0)
    o.merge(src, "t.k = s.k", clauses)
    check_all_engines(uri, o.table())


@pytest.mark.parametrize("config", [{}, NO_DV], ids=["dv", "cow"])
def test_dml_with_automatic_checkpoints(tmp_path: Path, config: dict[str, str]) -> None:
    """``delta.checkpointInterval=1``: every DML commit is followed by a checkpoint, which
    must carry the DVs and removes of that commit."""
    uri = str(tmp_path / "t")
    t = pa.table({"id": pa.array(range(30), pa.int64()), "p": ["a", "b", "c"] * 10})
    lq.write(
        uri,
        t.slice(0, 15),
        partition_by=["p"],
        configuration={**config, "delta.checkpointInterval": "1"},
    )
    lq.write(uri, t.slice(15), mode="append")
    o = Oracle(t, 1)
    dt_ = lq.DeltaTable(uri)
    steps = [
        ("delete", "id % 4 = 0"),
        ("update", "id % 4 = 1"),
        ("delete", "p = 'b'"),
        ("delete", "id = 5"),
    ]
    for kind, pred in steps:
        if kind == "delete":
            m = dt_.delete(pred)
            o.delete(pred)
        else:
            m = dt_.update(pred, set={"id": "id + 100"})
            o.update(pred, {"id": "id + 100"})
        o.committed(m.version)
    assert list((Path(uri) / "_delta_log").glob("*.checkpoint*.parquet"))
    for v, expected in o.states.items():
        check_all_engines(uri, expected, v)
    assert_same_rows(deltalake_table(uri), o.table(), what="deltalake")


def test_nan_rows_are_not_pruned_by_parquet_statistics(tmp_path: Path) -> None:
    # Parquet writers leave NaN out of float min/max (the Parquet spec says so); DuckDB
    # orders NaN above every number, so a row group whose max is 2.0 can still hold rows
    # with x > 3. Delta statistics are off here (no file pruning), which leaves the
    # Parquet statistics as the only thing that could wrongly skip those rows.
    import deltalake

    uri = str(tmp_path / "t")
    n = 600
    t = pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "x": pa.array([[1.0, 2.0, float("nan")][i % 3] for i in range(n)], pa.float64()),
        }
    )
    deltalake.write_deltalake(uri, t, configuration={"delta.dataSkippingNumIndexedCols": "0"})
    con = duckdb.connect()
    rel = lq.DeltaTable(uri).snapshot().scan().to_duckdb(con)
    assert rel.filter("x > 3").aggregate("count(*)").fetchall() == [(n // 3,)]
    o = Oracle(t, 0)
    dt_ = lq.DeltaTable(uri)
    assert dt_.delete("x > 3").num_deleted_rows == n // 3
    o.delete("x > 3")
    dt_.update("isnan(x) OR x < 1.5", set={"x": "0.5"})
    o.update("isnan(x) OR x < 1.5", {"x": "0.5"})
    check_all_engines(uri, o.table())


def test_columns_named_like_lakequerys_own_are_refused(tmp_path: Path) -> None:
    # MERGE lost a source column called __lq_src (its own mark of matched rows) and DELETE
    # crashed on a column called __lq_file: such names are refused before anything runs
    uri = str(tmp_path / "t")
    with pytest.raises(lq.SchemaError, match=r"'__lq_src'.*lakequery's own"):
        lq.write(uri, pa.table({"id": [1, 2], "__lq_src": [5, 6]}))
    lq.write(uri, pa.table({"id": [1, 2], "v": [5, 6]}))
    table = lq.DeltaTable(uri)
    source = pa.table({"id": [1, 3], "v": [7, 9], "__LQ_file": ["a", "b"]})
    with pytest.raises(lq.SchemaError, match="MERGE source has a column '__LQ_file'"):
        table.merge(
            source, on="t.id = s.id", source_alias="s", target_alias="t"
        ).when_matched_update(set={"v": "s.v"}).execute()
    with pytest.raises(lq.SchemaError, match="__lq_row"):
        lq.write(uri, pa.table({"id": [3], "__lq_row": [1]}), mode="append", schema_mode="merge")
    assert table.snapshot().version == 0


def test_merge_sources_of_types_duckdb_does_not_read(tmp_path: Path) -> None:
    """float16 and decimal256 go to DuckDB as the writer stores them (float32,
    decimal128); a date64 holding part of a day is refused, as lq.write refuses it."""
    import datetime as dt
    import decimal

    uri = str(tmp_path / "t")
    lq.write(
        uri,
        pa.table(
            {
                "id": [1],
                "f": pa.array([0.5], pa.float32()),
                "d": pa.array([decimal.Decimal("1.5")], pa.decimal128(10, 1)),
                "day": pa.array([dt.date(2024, 1, 1)], pa.date32()),
            }
        ),
    )
    source = pa.table(
        {
            "id": [1, 2],
            "f": pa.array([1.5, 2.5], pa.float16()),
            "d": pa.array([decimal.Decimal("2.5"), decimal.Decimal("3.5")], pa.decimal256(10, 1)),
            "day": pa.array([86_400_000 * 3, 86_400_000 * 4], pa.date64()),
        }
    )
    table = lq.DeltaTable(uri)
    table.merge(
        source, on="target.id = source.id"
    ).when_matched_update_all().when_not_matched_insert_all().execute()
    rows = sorted(table.snapshot().scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    assert rows == [
        {"id": 1, "f": 1.5, "d": decimal.Decimal("2.5"), "day": dt.date(1970, 1, 4)},
        {"id": 2, "f": 2.5, "d": decimal.Decimal("3.5"), "day": dt.date(1970, 1, 5)},
    ]
    partial = source.set_column(3, "day", pa.array([5, 6], pa.date64()))
    with pytest.raises(lq.SchemaMismatchError, match="day"):
        table.merge(partial, on="target.id = source.id").when_matched_update_all().execute()
