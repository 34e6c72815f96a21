"""``lakequery.spark.write(..., cluster_by=[...])``: a DataFrame written by Spark tasks
makes a clustered table (features, domain), appends keep it, and lakequery's OPTIMIZE
clusters the tasks' files; ``deltalake`` reads the same rows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa

import lakequery as lq
import lakequery.spark as lqs
from lakequery.clustering.domain import clustering_columns


def test_spark_write_creates_and_appends_to_a_clustered_table(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    df = spark.range(0, 400, 1, 2).selectExpr("id", "CAST(id % 7 AS INT) AS g")
    lqs.write(df, uri, cluster_by=["g", "id"])
    first = json.loads(Path(uri, "_delta_log", f"{0:020d}.json").read_text().splitlines()[0])
    assert first["commitInfo"]["operationParameters"]["clusterBy"] == '["g","id"]'
    snap = lq.DeltaTable(uri).snapshot()
    assert clustering_columns(snap) == ["g", "id"]
    assert {"clustering", "domainMetadata"} <= set(snap.protocol.writer_features)
    lqs.write(
        spark.range(400, 500, 1, 2).selectExpr("id", "CAST(id % 7 AS INT) AS g"), uri, mode="append"
    )
    m = lq.DeltaTable(uri).optimize()
    assert (
        m.curve == "hilbert"
        and m.files_removed == lq.DeltaTable(uri).snapshot(version=m.version - 1).num_files
    )
    query = deltalake.QueryBuilder().register("t", deltalake.DeltaTable(uri))
    table = pa.table(query.execute("SELECT id FROM t"))
    got = sorted(table.column("id").to_pylist())
    assert got == list(range(500))
    assert clustering_columns(lq.DeltaTable(uri).snapshot()) == ["g", "id"]
