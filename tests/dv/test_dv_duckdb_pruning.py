"""DuckDB prunes the files of a scan with filters the caller adds to the relation (Hive
partition values when binding, join filters on ``filename`` while running). Deletion
vectors and DML row positions must still meet the right file: a regression test for
``file_index`` numbering, which counts only the files DuckDB kept."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import lakequery as lq
from lakequery.engines import duckdb as duckdb_engine


@pytest.fixture
def table(tmp_path: Path) -> str:
    uri = str(tmp_path / "t")
    for region in ["us", "eu", "us", "ap"]:
        lq.write(
            uri,
            pa.table({"x": list(range(10)), "region": [region] * 10}),
            mode="append",
            partition_by=["region"],
            configuration={"delta.enableDeletionVectors": "true"},
        )
    dt = lq.DeltaTable(uri)
    dt.delete("x < 3 AND region = 'us'")  # DVs on both us files
    dt.delete("x > 7 AND region = 'eu'")
    return uri


def expected(region: str) -> int:
    return {"us": 14, "eu": 8, "ap": 10}[region]


@pytest.mark.parametrize("keys", ["numpy", "arrow"])
@pytest.mark.parametrize("layout", ["hive", "hive-many", "join", "literal"])
def test_filters_added_to_the_relation_keep_deletion_vectors_on_their_files(
    table: str, layout: str, keys: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if keys == "arrow":  # deleted-row keys registered as an Arrow table (many keys)
        monkeypatch.setattr(duckdb_engine, "_NUMPY_KEYS_MAX", 0)
    if layout == "hive-many":  # DV files in more partitions than literal branches allow
        monkeypatch.setattr(duckdb_engine, "MAX_UNION_GROUPS", 1)
    if layout == "join":
        monkeypatch.setattr(duckdb_engine, "MAX_UNION_GROUPS", 1)
        monkeypatch.setattr(duckdb_engine, "hive_layout", lambda scan: False)
    if layout == "literal":
        monkeypatch.setattr(duckdb_engine, "hive_layout", lambda scan: False)
    snap = lq.DeltaTable(table).snapshot()
    for region in ["us", "eu", "ap"]:
        where = f"region = '{region}'"
        rel = snap.scan().to_duckdb()
        assert len(rel.filter(where).fetchall()) == expected(region)
        ((count,),) = lq.sql(f"SELECT count(*) FROM t WHERE {where}", t=snap).fetchall()
        assert count == expected(region)
        n = len(snap.scan().to_duckdb().filter(f"x % 2 = 0 AND {where}").fetchall())
        arrow = snap.scan(filter=where).to_arrow().to_pylist()
        assert n == sum(1 for r in arrow if r["x"] % 2 == 0)


def test_dml_whose_predicate_the_planner_cannot_prune(table: str) -> None:
    # `%` is beyond lakequery's planner, so every file is planned and DuckDB prunes the
    # us and ap files itself; the positions must still be the eu file's
    dt = lq.DeltaTable(table)
    assert dt.delete("x % 3 = 0 AND region = 'eu'").num_deleted_rows == 3  # 0, 3, 6
    assert dt.update("x % 2 = 1 AND region = 'us'", set={"x": "x + 100"}).num_updated_rows == 8
    rows = dt.snapshot().scan().to_arrow().to_pylist()
    got = sorted((r["region"], r["x"]) for r in rows)
    us = sorted([x + 100 if x % 2 else x for x in range(3, 10)] * 2)
    assert got == sorted(
        [("ap", x) for x in range(10)]
        + [("eu", x) for x in (1, 2, 4, 5, 7)]
        + [("us", x) for x in us]
    )


def test_statistics_and_join_filters_keep_deletion_vectors_on_their_files(tmp_path: Path) -> None:
    uri = str(tmp_path / "flat")
    for i in range(3):  # disjoint id ranges: statistics can rule whole files out
        lq.write(
            uri,
            pa.table({"id": list(range(i * 100, i * 100 + 100))}),
            mode="append",
            configuration={"delta.enableDeletionVectors": "true"},
        )
    lq.DeltaTable(uri).delete("id % 100 < 10")
    snap = lq.DeltaTable(uri).snapshot()
    for low in (0, 150, 250):
        ((n,),) = lq.sql(f"SELECT count(*) FROM t WHERE id >= {low}", t=snap).fetchall()
        assert n == sum(1 for i in range(low, 300) if i % 100 >= 10)
    import duckdb

    con = duckdb.connect()
    con.register("k", pa.table({"id": [5, 150, 205, 299]}))
    ((joined,),) = lq.sql("SELECT count(*) FROM t JOIN k USING (id)", con=con, t=snap).fetchall()
    assert joined == 2  # 5 and 205 are deleted
