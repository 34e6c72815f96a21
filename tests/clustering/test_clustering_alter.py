"""Changing the clustering columns (``set_clustering_columns``, the future
``DeltaTable.alter.cluster_by``): one commit, the next OPTIMIZE reclusters by the new
columns, ``[]`` stops clustering, a plain table becomes clustered with its protocol
upgraded in the same commit, and a concurrent change conflicts."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from clusterkit import adds_of, commit_actions, dl_ids, table_of

import lakequery as lq
from lakequery.clustering.alter import set_clustering_columns
from lakequery.clustering.domain import clustering_columns
from lakequery.errors import ClusteringError, CommitConflictError
from lakequery.txn import Transaction
from lakequery.writer import commit_write, plan_write
from lakequery.writer.data_files import write_data_files

TARGET = 16 * 1024


def clustered_and_optimized(tmp_path: Path) -> str:
    uri = str(tmp_path / "t")
    lq.write(uri, table_of(2000), cluster_by=["id"])
    lq.write(uri, table_of(2000, start=2000), mode="append")
    lq.DeltaTable(uri).optimize(target_file_size=TARGET)
    return uri


def test_change_is_one_commit_and_the_next_optimize_reclusters(tmp_path: Path) -> None:
    uri = clustered_and_optimized(tmp_path)
    before = lq.DeltaTable(uri).snapshot()
    r = set_clustering_columns(uri, ["K", "name"])
    actions = commit_actions(uri, r.version)
    assert [list(a) for a in actions] == [["commitInfo"], ["domainMetadata"]]
    assert actions[1]["domainMetadata"] == {
        "domain": "delta.clustering",
        "configuration": '{"clusteringColumns":[["k"],["name"]]}',
        "removed": False,
    }
    params = actions[0]["commitInfo"]["operationParameters"]
    assert json.loads(params["oldClusteringColumns"]) == ["id"]
    assert json.loads(params["newClusteringColumns"]) == ["k", "name"]
    after = lq.DeltaTable(uri).snapshot()
    assert clustering_columns(after) == ["k", "name"]
    assert after.protocol == before.protocol
    # no data rewritten by the change; the next OPTIMIZE takes every file (clustered by id)
    assert after.files().num_rows == before.files().num_rows
    m = lq.DeltaTable(uri).optimize(target_file_size=TARGET)
    assert m.files_removed == before.files().num_rows
    assert m.z_order_by == ("k", "name")
    assert {a["tags"]["ZCUBE_ZORDER_BY"] for a in adds_of(uri, m.version)} == {'["k","name"]'}
    assert not lq.DeltaTable(uri).optimize(target_file_size=TARGET).committed
    assert dl_ids(uri) == list(range(4000))


def test_cluster_by_none_compacts_without_clustering(tmp_path: Path) -> None:
    uri = clustered_and_optimized(tmp_path)
    set_clustering_columns(uri, [])
    snap = lq.DeltaTable(uri).snapshot()
    assert clustering_columns(snap) == []
    assert snap.domains["delta.clustering"] == '{"clusteringColumns":[]}'
    assert "clustering" in snap.protocol.writer_features
    for i in range(3):
        lq.write(uri, table_of(10, start=4000 + 10 * i), mode="append")
    m = lq.DeltaTable(uri).optimize()  # plain compaction of the small files
    assert m.committed and m.z_order_by == () and m.curve is None
    assert all("clusteringProvider" not in a for a in adds_of(uri, m.version))
    assert dl_ids(uri) == list(range(4030))


@pytest.mark.parametrize(
    ("config", "legacy_writer", "features"),
    [
        ({}, 1, {"clustering", "domainMetadata"}),
        # a legacy writer version's implied features become explicit table features
        (
            {"delta.constraints.pos": "id >= 0"},
            3,
            {"appendOnly", "invariants", "checkConstraints", "clustering", "domainMetadata"},
        ),
    ],
)
def test_clustering_a_plain_table_upgrades_its_protocol(
    tmp_path: Path, config: dict[str, str], legacy_writer: int, features: set[str]
) -> None:
    uri = str(tmp_path / "t")
    config = {"delta.enableDeletionVectors": "false", **config}
    lq.write(uri, table_of(50), configuration=config)
    assert lq.DeltaTable(uri).snapshot().protocol.min_writer_version == legacy_writer
    r = set_clustering_columns(uri, ["id"])
    actions = commit_actions(uri, r.version)
    proto = next(a["protocol"] for a in actions if "protocol" in a)
    assert (proto["minReaderVersion"], proto["minWriterVersion"]) == (1, 7)
    assert set(proto["writerFeatures"]) == features
    assert clustering_columns(lq.DeltaTable(uri).snapshot()) == ["id"]
    m = lq.DeltaTable(uri).optimize()
    assert m.curve == "hilbert" and m.files_removed == 1
    assert dl_ids(uri) == list(range(50))


def test_refusals(tmp_path: Path) -> None:
    part = str(tmp_path / "p")
    lq.write(part, table_of(6), partition_by=["k"])
    with pytest.raises(ClusteringError, match="partitioned"):
        set_clustering_columns(part, ["id"])
    uri = str(tmp_path / "t")
    lq.write(uri, table_of(6), cluster_by=["id"])
    with pytest.raises(ClusteringError, match="no column 'zz'"):
        set_clustering_columns(uri, ["zz"])
    with pytest.raises(TypeError):
        set_clustering_columns(uri, "id")
    assert clustering_columns(lq.DeltaTable(uri).snapshot()) == ["id"]


def test_concurrent_clustering_changes_conflict(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    lq.write(uri, table_of(6), cluster_by=["id"])
    dt = lq.DeltaTable(uri)
    stale = dt.snapshot()
    set_clustering_columns(uri, ["k"])
    txn = Transaction(dt.storage, stale, operation="CLUSTER BY")
    txn.set_domain("delta.clustering", '{"clusteringColumns":[["name"]]}')
    with pytest.raises(CommitConflictError):
        txn.commit()
    assert clustering_columns(lq.DeltaTable(uri).snapshot()) == ["k"]
    # an append planned before a change commits after it, without conflict
    data = table_of(2, start=6)
    plan = plan_write(uri, data.schema, mode="append")
    set_clustering_columns(uri, ["name"])
    result = commit_write(plan, write_data_files(data, plan.state))
    assert result.attempts == 2
    assert clustering_columns(lq.DeltaTable(uri).snapshot()) == ["name"]
    assert dl_ids(uri) == list(range(8))


def test_alter_cluster_by_and_create_cluster_by(tmp_path: Path) -> None:
    import deltalake

    uri = str(tmp_path / "created")
    schema = pa.schema([("k", pa.int64()), ("v", pa.string())])
    dt = lq.DeltaTable.create(uri, schema, cluster_by=["k"])
    assert dt.detail().clustering_columns == ("k",)
    assert {"clustering", "domainMetadata"} <= set(dt.snapshot().protocol.writer_features or ())
    lq.write(uri, pa.table({"k": [3, 1, 2], "v": ["c", "a", "b"]}), mode="append")
    result = dt.alter.cluster_by(["v"])
    assert result.operation == "CLUSTER BY" and result.version == 2
    assert dt.detail().clustering_columns == ("v",)
    none = dt.alter.cluster_by([])
    assert none.version == 3 and dt.detail().clustering_columns == ()
    query = deltalake.QueryBuilder().register("t", deltalake.DeltaTable(uri))
    got = sorted(pa.table(query.execute("SELECT * FROM t")).to_pylist(), key=lambda r: r["k"])
    assert got == [{"k": 1, "v": "a"}, {"k": 2, "v": "b"}, {"k": 3, "v": "c"}]
    plain = str(tmp_path / "plain")
    lq.write(plain, pa.table({"k": [1]}), configuration={"delta.enableDeletionVectors": "false"})
    added = lq.DeltaTable(plain).alter.cluster_by(["k"])
    assert set(added.features_added) >= {"clustering", "domainMetadata"}


# -- the clustering columns kept true by other table changes (found by a bug hunt) ----------


def _clustered(tmp_path: Path) -> tuple[str, lq.DeltaTable]:
    uri = str(tmp_path / "t")
    lq.write(uri, pa.table({"a": [1, 2], "b": ["x", "y"], "c": [5.0, 6.0]}), cluster_by=["a", "b"])
    return uri, lq.DeltaTable(uri)


def _versions(uri: str) -> int:
    return len(list((Path(uri) / "_delta_log").glob("*.json")))


def test_a_clustering_column_cannot_be_dropped(tmp_path: Path) -> None:
    """The DROP left the domain naming a missing column: every OPTIMIZE failed after."""
    uri, dt = _clustered(tmp_path)
    with pytest.raises(lq.AlterTableError, match="clustering column"):
        dt.alter.drop_column("b")
    assert _versions(uri) == 1
    dt.alter.drop_column("c")
    assert clustering_columns(dt.snapshot()) == ["a", "b"]


@pytest.mark.parametrize(
    "props",
    [{"delta.dataSkippingStatsColumns": "c"}, {"delta.dataSkippingNumIndexedCols": "0"}],
)
def test_statistics_settings_keep_clustering_columns_indexed(
    tmp_path: Path, props: dict[str, str]
) -> None:
    """Files written after such a setting had no statistics for the clustering columns,
    which writers must collect (digest §14); alter.cluster_by refused the same."""
    uri, dt = _clustered(tmp_path)
    with pytest.raises(lq.AlterTableError, match="get no statistics"):
        dt.alter.set_properties(props)
    assert _versions(uri) == 1
    dt.alter.set_properties({"delta.dataSkippingStatsColumns": "b,a"})  # still both


def test_the_clustering_feature_brings_domain_metadata(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    lq.write(uri, pa.table({"x": [1, 2]}))
    lq.DeltaTable(uri).alter.enable_feature("clustering")
    features = lq.DeltaTable(uri).snapshot().protocol.writer_features or ()
    assert {"clustering", "domainMetadata"} <= set(features)


def test_create_or_replace_of_a_clustered_table(tmp_path: Path) -> None:
    """Without cluster_by the new table has no clustering columns (the old ones named a
    column the new schema lacks, and OPTIMIZE failed); partitioned, it is refused."""
    uri, _ = _clustered(tmp_path)
    with pytest.raises(ClusteringError, match="partitioned"):
        lq.DeltaTable.create(
            uri,
            pa.schema([("a", pa.int64()), ("b", pa.string())]),
            partition_by=["b"],
            mode="overwrite",
        )
    dt = lq.DeltaTable.create(uri, pa.schema([("d", pa.int64())]), mode="overwrite")
    assert clustering_columns(dt.snapshot()) == []
    lq.write(uri, pa.table({"d": [1]}), mode="append")
    dt.optimize()
    again = lq.DeltaTable.create(
        uri, pa.schema([("d", pa.int64())]), mode="overwrite", cluster_by=["d"]
    )
    assert clustering_columns(again.snapshot()) == ["d"]


def test_restore_brings_back_the_clustering_columns(tmp_path: Path) -> None:
    _, dt = _clustered(tmp_path)
    dt.alter.cluster_by(["c"])
    dt.restore(version=0)
    assert clustering_columns(dt.snapshot()) == ["a", "b"]
    plain = str(tmp_path / "plain")
    lq.write(plain, pa.table({"a": [1, 2]}))
    lq.DeltaTable(plain).alter.cluster_by(["a"])
    lq.DeltaTable(plain).restore(version=0)
    assert clustering_columns(lq.DeltaTable(plain).snapshot()) == []


def test_an_alter_decided_before_a_concurrent_cluster_by_conflicts(tmp_path: Path) -> None:
    # the DROP planned on version 0 committed after CLUSTER BY (b): the table was then
    # clustered by a column that no longer existed
    from lakequery.errors import DomainMetadataConflictError
    from lakequery.management.alter import TableAlterer

    uri = str(tmp_path / "t")
    config = {"delta.columnMapping.mode": "name"}
    lq.write(uri, pa.table({"a": [1], "b": [2], "c": [3]}), cluster_by=["a"], configuration=config)
    dt = lq.DeltaTable(uri)
    before = dt.snapshot()
    dt.alter.cluster_by(["b"])
    with pytest.raises(DomainMetadataConflictError, match=r"delta\.clustering"):
        TableAlterer(dt, before).drop_column("b")
    with pytest.raises(DomainMetadataConflictError):
        TableAlterer(dt, before).set_properties({"delta.dataSkippingNumIndexedCols": "1"})
    assert dt.snapshot().schema.names == ["a", "b", "c"]
    assert clustering_columns(dt.snapshot()) == ["b"]


def test_a_partitioned_table_cannot_get_the_clustering_feature(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    lq.write(uri, pa.table({"p": [1], "x": [2]}), partition_by="p")
    with pytest.raises(lq.AlterTableError, match="partitioned table cannot be clustered"):
        lq.DeltaTable(uri).alter.enable_feature("clustering")
    # nor by CREATE OR REPLACE of a clustered table (whose protocol keeps the feature)
    other = str(tmp_path / "o")
    lq.write(other, pa.table({"x": [1], "y": [2]}), cluster_by=["x"])
    lq.DeltaTable(other).alter.cluster_by([])
    schema = pa.schema([("x", pa.int64()), ("y", pa.int64())])
    with pytest.raises(ClusteringError, match="partitioned"):
        lq.DeltaTable.create(other, schema, partition_by=["x"], mode="overwrite")
    assert lq.DeltaTable(other).snapshot().partition_columns == []


def _nested_clustering(tmp_path: Path) -> lq.DeltaTable:
    # Spark's CLUSTER BY (s.a): the domain names a nested column (written by hand here)
    uri = str(tmp_path / "t")
    config = {"delta.columnMapping.mode": "name"}
    lq.write(
        uri,
        pa.table({"id": [1, 2], "s": [{"a": 3, "b": 1}, {"a": 1, "b": 2}]}),
        cluster_by=["id"],
        configuration=config,
    )
    dt = lq.DeltaTable(uri)
    s = dt.snapshot().metadata.schema["s"]
    path = [s.metadata["delta.columnMapping.physicalName"]]
    assert isinstance(s.type, lq.protocol.schema.StructType)
    path.append(s.type["a"].metadata["delta.columnMapping.physicalName"])
    domain = {
        "domain": "delta.clustering",
        "removed": False,
        "configuration": json.dumps({"clusteringColumns": [path]}),
    }
    info = {"timestamp": 1, "operation": "CLUSTER BY", "operationParameters": {}}
    text = json.dumps({"commitInfo": info}) + "\n" + json.dumps({"domainMetadata": domain}) + "\n"
    (Path(uri) / "_delta_log" / f"{1:020d}.json").write_text(text)
    assert clustering_columns(dt.snapshot()) == ["s.a"]
    return dt


def test_nested_clustering_column_keeps_alter_working(tmp_path: Path) -> None:
    # every SET TBLPROPERTIES failed ('no column s.a to cluster by'), and the nested
    # clustering column could be dropped
    dt = _nested_clustering(tmp_path)
    dt.alter.set_properties({"my.owner": "team-a"})
    with pytest.raises(lq.AlterTableError, match="get no statistics"):
        dt.alter.set_properties({"delta.dataSkippingStatsColumns": "id"})
    with pytest.raises(lq.AlterTableError, match=r"'s\.a' is a clustering column"):
        dt.alter.drop_column("s.a")
    with pytest.raises(lq.AlterTableError, match=r"'s\.a' is a clustering column"):
        dt.alter.drop_column("s")
    dt.alter.drop_column("s.b")
    assert clustering_columns(dt.snapshot()) == ["s.a"]
