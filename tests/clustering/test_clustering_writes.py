"""Every lakequery writer keeps a clustered table clustered: appends, overwrites, DELETE,
UPDATE and MERGE leave the protocol and the ``delta.clustering`` domain as they were, and
``deltalake`` reads the result."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from clusterkit import commit_actions, dl_ids, engine_ids, lq_ids, table_of

import lakequery as lq
from lakequery.clustering.domain import clustering_columns
from lakequery.errors import ClusteringError

DOMAIN = '{"clusteringColumns":[["id"]]}'


def clustered(tmp_path: Path, n: int = 10) -> str:
    uri = str(tmp_path / "t")
    lq.write(uri, table_of(n), cluster_by=["id"])
    return uri


def unchanged(uri: str, version: int) -> None:
    """The commit wrote no protocol, metadata or domain, and the table is as clustered."""
    actions = commit_actions(uri, version)
    assert not [a for a in actions if {"protocol", "metaData", "domainMetadata"} & set(a)]
    snap = lq.DeltaTable(uri).snapshot()
    assert snap.domains == {"delta.clustering": DOMAIN}
    assert "clustering" in snap.protocol.writer_features


def test_append_keeps_the_domain_and_accepts_the_same_cluster_by(tmp_path: Path) -> None:
    uri = clustered(tmp_path)
    v = lq.write(uri, table_of(5, start=10), mode="append").version
    unchanged(uri, v)
    v = lq.write(uri, table_of(5, start=15), mode="append", cluster_by=["ID"]).version
    unchanged(uri, v)
    assert dl_ids(uri) == list(range(20))
    assert all(ids == list(range(20)) for ids in engine_ids(uri).values())


def test_append_with_other_cluster_by_is_refused(tmp_path: Path) -> None:
    uri = clustered(tmp_path)
    with pytest.raises(ClusteringError, match="differs from the table's clustering columns"):
        lq.write(uri, table_of(2, start=10), mode="append", cluster_by=["k"])
    plain = str(tmp_path / "plain")
    lq.write(plain, table_of(2))
    with pytest.raises(ClusteringError, match="not clustered"):
        lq.write(plain, table_of(2, start=2), mode="append", cluster_by=["id"])
    assert lq_ids(uri) == list(range(10)) and lq_ids(plain) == [0, 1]


def test_overwrite_keeps_the_domain(tmp_path: Path) -> None:
    uri = clustered(tmp_path)
    v = lq.write(uri, table_of(3, start=100), mode="overwrite").version
    unchanged(uri, v)
    v = lq.write(uri, table_of(2, start=200), mode="overwrite", predicate="id >= 101").version
    unchanged(uri, v)
    assert dl_ids(uri) == [100, 200, 201]


def test_schema_overwrite_checks_and_moves_the_clustering(tmp_path: Path) -> None:
    uri = clustered(tmp_path)
    other = pa.table({"x": [1, 2], "y": ["a", "b"]})
    with pytest.raises(ClusteringError, match="no column 'id'"):
        lq.write(uri, other, mode="overwrite", schema_mode="overwrite")
    with pytest.raises(ClusteringError, match="mutually exclusive"):
        lq.write(uri, table_of(2), mode="overwrite", schema_mode="overwrite", partition_by=["k"])
    r = lq.write(uri, other, mode="overwrite", schema_mode="overwrite", cluster_by=["y"])
    snap = lq.DeltaTable(uri).snapshot()
    assert clustering_columns(snap) == ["y"]
    domains = [a["domainMetadata"] for a in commit_actions(uri, r.version) if "domainMetadata" in a]
    assert domains[0]["configuration"] == '{"clusteringColumns":[["y"]]}'
    assert dl_ids(uri, "x") == [1, 2]


def test_schema_overwrite_of_a_partitioned_table_into_a_clustered_one(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    lq.write(uri, table_of(6), partition_by=["k"])
    lq.write(uri, table_of(4), mode="overwrite", schema_mode="overwrite", cluster_by=["id"])
    snap = lq.DeltaTable(uri).snapshot()
    assert tuple(snap.partition_columns) == ()
    assert clustering_columns(snap) == ["id"]
    assert {"clustering", "domainMetadata"} <= set(snap.protocol.writer_features)
    assert dl_ids(uri) == [0, 1, 2, 3]


def test_delete_update_merge_keep_the_domain(tmp_path: Path) -> None:
    uri = clustered(tmp_path, 10)
    dt = lq.DeltaTable(uri)
    unchanged(uri, dt.delete("id < 2").version)
    unchanged(uri, dt.update("id = 5", set={"name": "'five'"}).version)
    unchanged(uri, dt.update("id = 6", set={"name": "'six'"}, copy_on_write=True).version)
    source = pa.table({"id": pa.array([7, 42], pa.int64()), "k": pa.array([0, 0], pa.int32())})
    source = source.append_column("name", pa.array(["seven", "forty-two"]))
    m = (
        dt.merge(source, on="t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    unchanged(uri, m.version)
    assert dl_ids(uri) == [*range(2, 10), 42]
    rows = lq.DeltaTable(uri).snapshot().scan().to_arrow().to_pylist()
    names = {r["id"]: r["name"] for r in rows}
    assert (names[5], names[6], names[7], names[42]) == ("five", "six", "seven", "forty-two")


def test_schema_overwrite_with_empty_cluster_by(tmp_path: Path) -> None:
    plain = str(tmp_path / "plain")
    lq.write(plain, table_of(3))
    r = lq.write(plain, table_of(2), mode="overwrite", schema_mode="overwrite", cluster_by=[])
    assert not [a for a in commit_actions(plain, r.version) if "domainMetadata" in a]
    snap = lq.DeltaTable(plain).snapshot()
    assert clustering_columns(snap) is None and not snap.protocol.supports("clustering")
    uri = clustered(tmp_path)
    lq.write(uri, table_of(2), mode="overwrite", schema_mode="overwrite", cluster_by=[])
    snap = lq.DeltaTable(uri).snapshot()
    assert clustering_columns(snap) == []  # CLUSTER BY NONE: still a clustered table
    assert snap.domains["delta.clustering"] == '{"clusteringColumns":[]}'
    assert dl_ids(uri) == [0, 1]


@pytest.mark.parametrize(
    ("data", "kwargs"),
    [
        (
            pa.table({"id": [9], "v": ["z"]}),
            {"configuration": {"delta.dataSkippingNumIndexedCols": "0"}},
        ),
        (pa.table({"s": [{"x": 1, "y": 2}], "a": [1]}), {"schema_mode": "merge"}),
    ],
)
def test_a_write_cannot_take_statistics_from_clustering_columns(
    tmp_path: Path, data: pa.Table, kwargs: dict[str, Any]
) -> None:
    # digest §14: every file has statistics for the clustering columns; an append's
    # configuration, or a merged field pushing the column past NumIndexedCols, took them
    uri = str(tmp_path / "t")
    if "s" in data.column_names:
        first = pa.table({"s": [{"x": 1}], "a": [1]})
        config = {"delta.dataSkippingNumIndexedCols": "2"}
        lq.write(uri, first, cluster_by=["a"], configuration=config)
    else:
        lq.write(uri, pa.table({"id": [1], "v": ["a"]}), cluster_by=["id"])
    with pytest.raises(lq.ClusteringError, match="would get no statistics"):
        lq.write(uri, data, mode="append", **kwargs)
    assert lq.DeltaTable(uri).snapshot().version == 0


def test_ignore_and_error_modes_come_before_cluster_by(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    lq.write(uri, pa.table({"id": [1], "v": ["a"]}), cluster_by=["id"])
    skipped = lq.write(uri, pa.table({"id": [2], "v": ["b"]}), mode="ignore", cluster_by=["v"])
    assert skipped.skipped
    with pytest.raises(lq.TableAlreadyExistsError):
        lq.write(uri, pa.table({"id": [2], "v": ["b"]}), cluster_by=["v"])
