"""Spark-Delta as the independent reader (and writer) of row ids: after lakequery's
UPDATE, MERGE, copy-on-write DELETE and OPTIMIZE, Spark's ``_metadata.row_id`` /
``_metadata.row_commit_version`` equal lakequery's ``_row_id`` / ``_row_commit_version``;
after Spark's own UPDATE, MERGE and OPTIMIZE (which write the materialized columns),
lakequery reads the ids Spark reads, and keeps them through its own commands."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

import lakequery as lq


def _rows(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array(ids, pa.int64())})


def _ours(uri: str) -> dict[int, tuple[int, int]]:
    scan = lq.DeltaTable(uri).snapshot().scan(columns=["id"], row_tracking=True)
    t = scan.to_arrow().to_pydict()
    return {
        k: (i, v) for k, i, v in zip(t["id"], t["_row_id"], t["_row_commit_version"], strict=True)
    }


def _theirs(spark: Any, uri: str) -> dict[int, tuple[int, int]]:
    t = (
        spark.read.format("delta")
        .load(uri)
        .select("id", "_metadata.row_id", "_metadata.row_commit_version")
        .toArrow()
        .to_pylist()
    )
    return {r["id"]: (r["row_id"], r["row_commit_version"]) for r in t}


def _agree(spark: Any, uri: str, what: str) -> dict[int, tuple[int, int]]:
    ours, theirs = _ours(uri), _theirs(spark, uri)
    assert ours == theirs, f"{what}: lakequery and Spark disagree on row ids"
    assert len({i for i, _ in ours.values()}) == len(ours), f"{what}: ids repeat"
    return ours


def test_spark_reads_the_ids_lakequery_keeps(delta_spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    lq.write(uri, _rows(0, 20), configuration={"delta.enableRowTracking": "true"})
    lq.write(uri, _rows(20, 10), mode="append")
    dt = lq.DeltaTable(uri)
    start = _agree(delta_spark, uri, "appends")
    dt.update("id % 4 = 1", set={"v": "v + 1"})  # deletion vectors
    after_update = _agree(delta_spark, uri, "UPDATE")
    assert all(after_update[k][0] == start[k][0] for k in start)
    (
        dt.merge(_rows(2, 2), on="t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update(set={"v": "s.v + 100"})
        .when_not_matched_insert_all()
        .execute()
    )
    (
        dt.merge(_rows(40, 2), on="t.id = s.id", source_alias="s", target_alias="t")
        .when_not_matched_insert_all()
        .execute()
    )
    _agree(delta_spark, uri, "MERGE")
    dt.delete("id % 5 = 0", copy_on_write=True)
    dt.update("id = 7", set={"v": "0"}, copy_on_write=True)
    before_optimize = _agree(delta_spark, uri, "copy-on-write")
    assert dt.optimize().committed
    assert _agree(delta_spark, uri, "OPTIMIZE") == before_optimize
    for k in before_optimize:
        if k in start:
            assert before_optimize[k][0] == start[k][0], f"row id of {k} changed"


def test_lakequery_reads_the_ids_spark_keeps(delta_spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    lq.write(uri, _rows(0, 12), configuration={"delta.enableRowTracking": "true"})
    lq.write(uri, _rows(12, 6), mode="append")
    start = _agree(delta_spark, uri, "appends")
    table = f"delta.`{uri}`"
    delta_spark.sql(f"UPDATE {table} SET v = v + 1 WHERE id % 3 = 0")
    delta_spark.sql(f"OPTIMIZE {table}")  # materialized columns written by Spark
    by_spark = _agree(delta_spark, uri, "Spark UPDATE + OPTIMIZE")
    assert all(by_spark[k][0] == start[k][0] for k in start)
    # lakequery's commands on top of Spark's materialized columns
    dt = lq.DeltaTable(uri)
    dt.update("id < 4", set={"v": "-1"}, copy_on_write=True)
    dt.delete("id = 5")
    assert dt.optimize().committed
    final = _agree(delta_spark, uri, "lakequery after Spark")
    assert all(final[k][0] == start[k][0] for k in final)
