"""Liquid clustering between Spark-Delta and lakequery: a table Spark creates with
``CLUSTER BY`` is appended to, DML'd, optimized and re-clustered by lakequery, and Spark
reads it back exactly with ``DESCRIBE DETAIL`` showing the clustering columns; a table
lakequery creates with ``cluster_by`` is one Spark recognises as clustered."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
from sparkkit import assert_same_rows, delta_sql, lq_engines, spark_read

import lakequery as lq
from lakequery.clustering.alter import set_clustering_columns
from lakequery.clustering.domain import clustering_columns


def detail(spark: Any, uri: str) -> dict[str, Any]:
    rows = delta_sql(spark, "DESCRIBE DETAIL {t}", uri).toArrow().to_pylist()
    assert len(rows) == 1
    out: dict[str, Any] = rows[0]
    return out


def same_everywhere(spark: Any, uri: str, what: str) -> None:
    theirs = spark_read(spark, uri)
    for engine, ours in lq_engines(uri).items():
        assert_same_rows(ours, theirs, f"{what} ({engine})")


def test_spark_clustered_table_written_by_lakequery(delta_spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "spark_clustered")
    for statement in (
        "CREATE TABLE {t} (k INT, v BIGINT, s STRING) USING delta CLUSTER BY (k, v)",
        "INSERT INTO {t} SELECT CAST(id % 17 AS INT), id, concat('s', id) FROM range(0, 300) AS r(id)",
        "INSERT INTO {t} SELECT CAST(id % 5 AS INT), id, NULL FROM range(300, 400) AS r(id)",
        "OPTIMIZE {t}",
    ):
        delta_sql(delta_spark, statement, uri)
    snap = lq.DeltaTable(uri).snapshot()
    assert clustering_columns(snap) == ["k", "v"]
    spark_files = snap.files()
    spark_clustered = set(spark_files.column("path").to_pylist())
    tags = spark_files.column("tags").to_pylist()
    providers = spark_files.column("clustering_provider").to_pylist()
    assert all(p == "liquid" for p in providers), (providers, tags)
    assert all(dict(t)["ZCUBE_ZORDER_BY"] == '["k","v"]' for t in tags), tags
    # lakequery writes: append, DML, incremental OPTIMIZE
    lq.write(
        uri,
        pa.table(
            {
                "k": pa.array([1, 2, 3], pa.int32()),
                "v": pa.array([1000, 1001, 1002], pa.int64()),
                "s": ["a", "b", None],
            }
        ),
        mode="append",
    )
    dt = lq.DeltaTable(uri)
    dt.delete("v = 1001 OR v = 1002")
    dt.update("v = 1000", set={"s": "'thousand'"})
    m = dt.optimize()
    assert m.committed and m.curve == "hilbert" and m.z_order_by == ("k", "v")
    live = set(lq.DeltaTable(uri).snapshot().files().column("path").to_pylist())
    untouched = spark_clustered & live
    assert untouched == spark_clustered, "Spark's clustered files stay as they are"
    same_everywhere(delta_spark, uri, "after lakequery append/DML/OPTIMIZE")
    d = detail(delta_spark, uri)
    assert list(d["clusteringColumns"]) == ["k", "v"]
    assert d["numFiles"] == lq.DeltaTable(uri).snapshot().num_files
    # lakequery changes the clustering columns; Spark sees the change and keeps writing
    set_clustering_columns(uri, ["s"])
    assert list(detail(delta_spark, uri)["clusteringColumns"]) == ["s"]
    assert lq.DeltaTable(uri).optimize().z_order_by == ("s",)
    delta_sql(delta_spark, "INSERT INTO {t} VALUES (99, 99, 'spark')", uri)
    delta_sql(delta_spark, "OPTIMIZE {t}", uri)
    same_everywhere(delta_spark, uri, "after the change of clustering columns")
    assert clustering_columns(lq.DeltaTable(uri).snapshot()) == ["s"]


def test_lakequery_clustered_table_read_and_optimized_by_spark(
    delta_spark: Any, tmp_path: Path
) -> None:
    uri = str(tmp_path / "lq_clustered")
    data = pa.table(
        {"id": pa.array(range(500), pa.int64()), "g": pa.array([i % 7 for i in range(500)])}
    )
    lq.write(uri, data.slice(0, 250), cluster_by=["g", "id"])
    lq.write(uri, data.slice(250), mode="append")
    lq.DeltaTable(uri).optimize()
    assert list(detail(delta_spark, uri)["clusteringColumns"]) == ["g", "id"]
    same_everywhere(delta_spark, uri, "lakequery-clustered table")
    # Spark writes and clusters it too
    delta_sql(delta_spark, "INSERT INTO {t} VALUES (1000, 3)", uri)
    delta_sql(delta_spark, "OPTIMIZE {t}", uri)
    same_everywhere(delta_spark, uri, "after Spark's OPTIMIZE")
    assert clustering_columns(lq.DeltaTable(uri).snapshot()) == ["g", "id"]
