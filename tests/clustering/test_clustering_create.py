"""Creating clustered tables with ``lq.write(..., cluster_by=[...])``: the protocol, the
``delta.clustering`` domain and the commit exactly as Delta Spark writes them, read back
by ``deltalake``; and every refusal with a clear error and nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from clusterkit import commit_actions, dl_ids, engine_ids, table_of

import lakequery as lq
from lakequery.clustering.create import clustering_for_new_table
from lakequery.clustering.domain import clustering_columns, parse_clustering_columns
from lakequery.errors import ClusteringError, CorruptLogError
from lakequery.protocol.column_mapping import PHYSICAL_NAME_KEY


def test_create_commits_features_domain_and_no_property(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    lq.write(uri, table_of(50), cluster_by=["id", "k"])
    actions = commit_actions(uri, 0)
    proto = next(a["protocol"] for a in actions if "protocol" in a)
    # deletion vectors are lakequery's default for new tables; clustering adds exactly two
    assert proto == {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": ["deletionVectors"],
        "writerFeatures": ["clustering", "deletionVectors", "domainMetadata"],
    }
    domains = [a["domainMetadata"] for a in actions if "domainMetadata" in a]
    assert domains == [
        {
            "domain": "delta.clustering",
            "configuration": '{"clusteringColumns":[["id"],["k"]]}',
            "removed": False,
        }
    ]
    meta = next(a["metaData"] for a in actions if "metaData" in a)
    assert meta["partitionColumns"] == []
    assert meta["configuration"] == {"delta.enableDeletionVectors": "true"}
    info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
    assert info["operationParameters"]["clusterBy"] == '["id","k"]'
    assert clustering_columns(lq.DeltaTable(uri).snapshot()) == ["id", "k"]
    assert dl_ids(uri) == list(range(50))
    assert all(v == list(range(50)) for v in engine_ids(uri).values())


def test_create_without_deletion_vectors_needs_only_writer_features(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    config = {"delta.enableDeletionVectors": "false"}
    lq.write(uri, table_of(5), cluster_by=["name"], configuration=config)
    proto = lq.DeltaTable(uri).snapshot().protocol
    assert (proto.min_reader_version, proto.min_writer_version) == (1, 7)
    assert proto.reader_features is None
    assert proto.writer_features == ("clustering", "domainMetadata")
    # deltalake reads it with its plain pyarrow reader
    import deltalake

    assert sorted(deltalake.DeltaTable(uri).to_pyarrow_table().column("id").to_pylist()) == list(
        range(5)
    )


def test_create_with_column_mapping_records_physical_names(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    config = {"delta.columnMapping.mode": "name"}
    lq.write(uri, table_of(20), cluster_by=["K", "id"], configuration=config)
    snap = lq.DeltaTable(uri).snapshot()
    fields = {f.name: f for f in snap.metadata.schema.fields}
    phys_k = fields["k"].metadata[PHYSICAL_NAME_KEY]
    phys_id = fields["id"].metadata[PHYSICAL_NAME_KEY]
    assert phys_k != "k" and phys_id != "id"
    expected = json.dumps({"clusteringColumns": [[phys_k], [phys_id]]}, separators=(",", ":"))
    assert snap.domains["delta.clustering"] == expected
    # logical names as the schema spells them, in the requested order
    assert clustering_columns(snap) == ["k", "id"]
    assert "columnMapping" in snap.protocol.writer_features
    assert dl_ids(uri) == list(range(20))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"cluster_by": ["id"], "partition_by": ["k"]}, "mutually exclusive"),
        ({"cluster_by": ["nope"]}, "no column 'nope'"),
        ({"cluster_by": ["a.b"]}, "nested clustering columns"),
        ({"cluster_by": ["flag"]}, "need min/max statistics"),
        ({"cluster_by": ["s"]}, "need min/max statistics"),
        ({"cluster_by": ["id", "ID"]}, "listed twice"),
        ({"cluster_by": ["id", "k", "name", "d", "x"]}, "at most 4"),
        (
            {"cluster_by": ["name"], "configuration": {"delta.dataSkippingNumIndexedCols": "2"}},
            "gets no statistics",
        ),
    ],
)
def test_create_refusals_write_nothing(tmp_path: Path, kwargs: dict, message: str) -> None:
    uri = tmp_path / "t"
    data = table_of(4).append_column("flag", pa.array([True, False, True, None]))
    data = data.append_column("s", pa.array([{"x": 1}] * 4))
    data = data.append_column("d", pa.array([1.0, 2.0, 3.0, 4.0]))
    data = data.append_column("x", pa.array([1, 2, 3, 4]))
    with pytest.raises(ClusteringError, match=message) as err:
        lq.write(str(uri), data, **kwargs)
    assert isinstance(err.value, lq.SchemaError)
    assert not (uri / "_delta_log").exists() or not any((uri / "_delta_log").iterdir())


def test_clustering_for_new_table_is_the_create_hook(tmp_path: Path) -> None:
    """The function DeltaTable.create uses: checks, features and the domain."""
    uri = str(tmp_path / "t")
    lq.write(uri, table_of(3))
    meta = lq.DeltaTable(uri).snapshot().metadata
    setup = clustering_for_new_table(meta, ["NAME"])
    assert setup.columns == ("name",)
    assert setup.features == frozenset({"clustering", "domainMetadata"})
    assert (setup.domain, setup.configuration) == (
        "delta.clustering",
        '{"clusteringColumns":[["name"]]}',
    )
    assert setup.operation_parameter == '["name"]'
    from dataclasses import replace

    with pytest.raises(ClusteringError, match="both partitioned and clustered"):
        clustering_for_new_table(replace(meta, partition_columns=("k",)), ["id"])


def test_domain_shapes_are_all_read() -> None:
    assert parse_clustering_columns('{"clusteringColumns":["a","b"]}') == (("a",), ("b",))
    assert parse_clustering_columns('{"clusteringColumns":[["a","b"]]}') == (("a", "b"),)
    assert parse_clustering_columns(
        '{"clusteringColumns":[{"physicalName":["id"]}],"domainName":"delta.liquid"}'
    ) == (("id",),)
    assert parse_clustering_columns('{"clusteringColumns":[]}') == ()
    with pytest.raises(CorruptLogError, match=r"delta\.clustering"):
        parse_clustering_columns('{"clusteringColumns":[[1]]}')
    with pytest.raises(CorruptLogError):
        parse_clustering_columns("not json")
