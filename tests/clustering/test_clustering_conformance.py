"""Clustered tables lakequery did not write: the Databricks-written conformance table
``deltars_table_with_liquid_clustering`` (preview layout: writer feature ``liquid``,
domain ``delta.liquid``, with row tracking) and a table in the Delta Spark 3.x layout
(features ``clustering`` + ``domainMetadata``, domain ``delta.clustering``, files marked by
a Spark OPTIMIZE) over the conformance table's Spark-written Parquet files. lakequery
appends, runs DML and optimizes; ``deltalake`` and lakequery's engines read the result.
Copies in ``tmp_path`` only; ``../shared`` is never modified."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from clusterkit import adds_of, commit_actions, copy_conformance_table, dl_ids, engine_ids
from tablekit import TableKit, commit_info, conformance_table, domain_action, protocol_action

import lakequery as lq
from lakequery.clustering.domain import clustering_columns

NAME = "deltars_table_with_liquid_clustering"
PREVIEW_DOMAIN = '{"clusteringColumns":[{"physicalName":["id"]}],"domainName":"delta.liquid"}'


def ids(n: list[int]) -> pa.Table:
    return pa.table({"id": pa.array(n, pa.int64())})


def preview_copy(tmp_path: Path) -> str:
    uri = copy_conformance_table(NAME, tmp_path)
    snap = lq.DeltaTable(uri).snapshot()
    assert clustering_columns(snap) == ["id"]
    assert snap.domains["delta.liquid"] == PREVIEW_DOMAIN
    return uri


def assert_preview_kept(uri: str, version: int) -> None:
    actions = commit_actions(uri, version)
    assert not [a for a in actions if "protocol" in a or "metaData" in a]
    assert not [a for a in actions if a.get("domainMetadata", {}).get("domain") == "delta.liquid"]
    snap = lq.DeltaTable(uri).snapshot()
    assert snap.domains["delta.liquid"] == PREVIEW_DOMAIN
    assert "liquid" in snap.protocol.writer_features


def test_preview_table_append_and_delete(tmp_path: Path) -> None:
    uri = preview_copy(tmp_path)
    v = lq.write(uri, ids([100, 101]), mode="append").version
    assert_preview_kept(uri, v)
    v = lq.DeltaTable(uri).delete("id = 3 OR id = 100").version
    assert v is not None
    assert_preview_kept(uri, v)
    expected = [0, 1, 2, 4, 5, 6, 7, 8, 9, 101]
    assert dl_ids(uri) == expected
    assert all(got == expected for got in engine_ids(uri).values())


def test_preview_table_merge_insert(tmp_path: Path) -> None:
    uri = preview_copy(tmp_path)
    dt = lq.DeltaTable(uri)
    m = (
        dt.merge(ids([3, 50]), on="t.id = s.id", source_alias="s", target_alias="t")
        .when_not_matched_insert_all()
        .execute()
    )
    assert_preview_kept(uri, m.version)
    assert dl_ids(uri) == [*range(10), 50]


def test_preview_table_update(tmp_path: Path) -> None:
    uri = preview_copy(tmp_path)
    v = lq.DeltaTable(uri).update("id = 4", set={"id": "id + 1000"}).version
    assert_preview_kept(uri, v)
    assert dl_ids(uri) == [0, 1, 2, 3, 5, 6, 7, 8, 9, 1004]


def test_preview_table_merge_update(tmp_path: Path) -> None:
    uri = preview_copy(tmp_path)
    dt = lq.DeltaTable(uri)
    m = (
        dt.merge(ids([3, 50]), on="t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update(set={"id": "s.id + 1000"})
        .when_not_matched_insert_all()
        .execute()
    )
    assert_preview_kept(uri, m.version)
    assert dl_ids(uri) == [0, 1, 2, 4, 5, 6, 7, 8, 9, 50, 1003]


def test_preview_table_optimize(tmp_path: Path) -> None:
    uri = preview_copy(tmp_path)
    lq.write(uri, ids([20, 11, 15]), mode="append")

    def row_ids() -> dict[int, int]:
        rows = lq.DeltaTable(uri).snapshot().scan(row_tracking=True).to_arrow().to_pylist()
        return {r["id"]: r["_row_id"] for r in rows}

    before = row_ids()
    m = lq.DeltaTable(uri).optimize()
    assert_preview_kept(uri, m.version)
    assert row_ids() == before  # the table has row tracking: clustering keeps row ids
    assert m.curve == "hilbert" and m.files_removed == 11
    assert all(a["clusteringProvider"] == "liquid" for a in adds_of(uri, m.version))
    assert dl_ids(uri) == [*range(10), 11, 15, 20]


# -- the Delta Spark 3.x layout -------------------------------------------------------------


def spark_layout(tmp_path: Path) -> tuple[str, list[str]]:
    """A clustered table as Delta Spark 3.x writes it (CREATE ... CLUSTER BY (id), then
    OPTIMIZE), over the conformance table's data files: returns (uri, file names)."""
    source = conformance_table(NAME)
    assert source.exists(), f"conformance table {NAME} missing at {source}"
    kit = TableKit(tmp_path / "spark")
    files = sorted(p.name for p in source.glob("part-*.parquet"))
    for name in files:
        shutil.copy(source / name, kit.root / name)
    schema = pa.schema([("id", pa.int64())])
    adds: list[dict[str, Any]] = []
    for i, name in enumerate(files):
        rows = pq.read_table(kit.root / name).column("id").to_pylist()
        stats = {
            "numRecords": len(rows),
            "minValues": {"id": min(rows)},
            "maxValues": {"id": max(rows)},
            "nullCount": {"id": 0},
        }
        add: dict[str, Any] = {
            "path": name,
            "partitionValues": {},
            "size": (kit.root / name).stat().st_size,
            "modificationTime": 1_700_000_000_000,
            "dataChange": False,
            "stats": json.dumps(stats),
        }
        if i < 6:  # the first six were clustered by a Spark OPTIMIZE; the rest appended
            add["clusteringProvider"] = "liquid"
            add["tags"] = {
                "ZCUBE_ID": "0c6d4c0e-1b1c-4b7f-9df6-6a0e8b0f4f0a",
                "ZCUBE_ZORDER_BY": '["id"]',
                "ZCUBE_ZORDER_CURVE": "hilbert",
            }
        adds.append({"add": add})
    kit.create(
        schema,
        protocol=protocol_action(
            1, 7, None, ["appendOnly", "clustering", "domainMetadata", "invariants"]
        ),
        actions=[domain_action("delta.clustering", '{"clusteringColumns":[["id"]]}'), *adds],
        info=commit_info("CREATE TABLE AS SELECT"),
    )
    return kit.uri, files


def test_spark_layout_append_dml_and_incremental_optimize(tmp_path: Path) -> None:
    uri, files = spark_layout(tmp_path)
    assert clustering_columns(lq.DeltaTable(uri).snapshot()) == ["id"]
    assert dl_ids(uri) == list(range(10))
    lq.write(uri, ids([30, 10]), mode="append")
    dt = lq.DeltaTable(uri)
    dt.delete("id = 1")
    dt.update("id = 8", set={"id": "108"})
    (
        dt.merge(ids([2, 40]), on="t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_delete()
        .when_not_matched_insert_all()
        .execute()
    )
    snap = lq.DeltaTable(uri).snapshot()
    assert snap.domains == {"delta.clustering": '{"clusteringColumns":[["id"]]}'}
    expected = [0, 3, 4, 5, 6, 7, 9, 10, 30, 40, 108]
    assert dl_ids(uri) == expected
    # OPTIMIZE leaves the files Spark clustered (and still live) alone
    spark_clustered = set(files[:6]) & set(snap.files().column("path").to_pylist())
    m = dt.optimize()
    assert m.committed and m.curve == "hilbert"
    removed = {a["remove"]["path"] for a in commit_actions(uri, m.version) if "remove" in a}
    assert spark_clustered and not removed & spark_clustered
    assert spark_clustered <= set(lq.DeltaTable(uri).snapshot().files().column("path").to_pylist())
    assert dl_ids(uri) == expected
    assert all(got == expected for got in engine_ids(uri).values())
    full = dt.optimize(full=True)
    assert full.files_removed == lq.DeltaTable(uri).snapshot(version=m.version).num_files
    assert dl_ids(uri) == expected


def test_preview_table_replaced_keeps_its_preview_layout(tmp_path: Path) -> None:
    uri = preview_copy(tmp_path)
    before = lq.DeltaTable(uri).snapshot().protocol
    data = pa.table({"id": pa.array([7, 8], pa.int64()), "w": ["a", "b"]})
    r = lq.write(uri, data, mode="overwrite", schema_mode="overwrite", cluster_by=["w"])
    actions = commit_actions(uri, r.version)
    domains = [a["domainMetadata"] for a in actions if "domainMetadata" in a]
    domains = [d for d in domains if d["domain"] != "delta.rowTracking"]
    assert [d["domain"] for d in domains] == ["delta.liquid"]
    assert json.loads(domains[0]["configuration"]) == {"clusteringColumns": [["w"]]}
    snap = lq.DeltaTable(uri).snapshot()
    assert snap.protocol == before  # no 'clustering' next to the preview's 'liquid'
    assert clustering_columns(snap) == ["w"]
    assert dl_ids(uri) == [7, 8]


def test_preview_table_create_or_replace_keeps_its_domain(tmp_path: Path) -> None:
    # CREATE OR REPLACE ... CLUSTER BY added delta.clustering beside a stale delta.liquid
    uri = preview_copy(tmp_path)
    schema = pa.schema([("id", pa.int64()), ("y", pa.string())])
    lq.DeltaTable.create(uri, schema, cluster_by=["y"], mode="overwrite")
    snap = lq.DeltaTable(uri).snapshot()
    assert "delta.clustering" not in snap.domains
    assert clustering_columns(snap) == ["y"]
