"""``DeltaTable.detail()`` (DESCRIBE DETAIL) after creates, writes, partitioning and
property changes, checked against the files on disk and ``deltalake``'s view."""

from __future__ import annotations

import dataclasses
import json
import os
from datetime import datetime, timezone
from pathlib import Path

import deltalake
import pyarrow as pa
import pytest
from tablekit import TableKit, domain_action, protocol_action

import lakequery as lq
from lakequery.management.detail import TableDetail

SPARK_COLUMNS = [
    "format",
    "id",
    "name",
    "description",
    "location",
    "createdAt",
    "lastModified",
    "partitionColumns",
    "clusteringColumns",
    "numFiles",
    "sizeInBytes",
    "properties",
    "minReaderVersion",
    "minWriterVersion",
    "tableFeatures",
]


@pytest.fixture
def uri(tmp_path: Path) -> str:
    return str(tmp_path / "table")


def disk_size(uri: str) -> int:
    """Bytes of the Parquet files on disk (outside the log), summed independently."""
    total = 0
    for folder, _, names in os.walk(uri):
        if "_delta_log" not in folder:
            total += sum(os.path.getsize(os.path.join(folder, n)) for n in names)
    return total


def test_detail_after_writes(uri: str) -> None:
    before = datetime.now(timezone.utc).replace(microsecond=0)
    data = pa.table({"id": [1, 2, 3], "g": ["a", "b", "a"]})
    lq.write(
        uri,
        data,
        partition_by=["g"],
        name="t1",
        description="three rows",
        configuration={"delta.enableDeletionVectors": "false", "owner": "me"},
    )
    dt = lq.DeltaTable(uri)
    first = dt.detail()
    assert isinstance(first, TableDetail)
    assert (first.format, first.name, first.description) == ("delta", "t1", "three rows")
    assert first.location == dt.uri
    assert first.partition_columns == ("g",) and first.clustering_columns == ()
    assert (first.num_files, first.size_in_bytes) == (2, disk_size(uri))
    assert first.properties == {"delta.enableDeletionVectors": "false", "owner": "me"}
    assert (first.min_reader_version, first.min_writer_version) == (1, 1)
    assert first.table_features == ()
    assert first.created_at is not None and first.created_at >= before
    assert first.last_modified is not None and first.last_modified >= before
    assert first.version == 0

    lq.write(uri, pa.table({"id": [4], "g": ["c"]}), mode="append")
    lq.write(
        uri,
        pa.table({"id": [5], "g": ["c"]}),
        mode="append",
        configuration={"delta.appendOnly": "true"},
    )
    later = dt.detail()
    assert later.id == first.id and later.created_at == first.created_at
    assert later.last_modified is not None and later.last_modified >= first.last_modified
    assert (later.num_files, later.size_in_bytes) == (4, disk_size(uri))
    assert later.properties["delta.appendOnly"] == "true"
    # writer 2 implies appendOnly and invariants; Spark lists implied features too
    assert (later.min_reader_version, later.min_writer_version) == (1, 2)
    assert later.table_features == ("appendOnly", "invariants")
    assert later.version == 2

    theirs = deltalake.DeltaTable(uri)
    assert later.id == theirs.metadata().id
    assert list(later.partition_columns) == theirs.metadata().partition_columns
    assert dict(later.properties) == theirs.metadata().configuration
    assert later.num_files == len(theirs.file_uris())
    proto = theirs.protocol()
    assert (later.min_reader_version, later.min_writer_version) == (
        proto.min_reader_version,
        proto.min_writer_version,
    )


def test_to_dict_has_spark_columns(uri: str) -> None:
    lq.DeltaTable.create(uri, pa.schema([("x", pa.int64())]))
    detail = lq.DeltaTable(uri).detail()
    row = detail.to_dict()
    assert list(row) == SPARK_COLUMNS
    assert row["numFiles"] == 0 and row["sizeInBytes"] == 0
    assert row["tableFeatures"] == ["deletionVectors"]
    assert (row["minReaderVersion"], row["minWriterVersion"]) == (3, 7)
    assert row["createdAt"] == detail.created_at
    with pytest.raises(dataclasses.FrozenInstanceError):
        detail.num_files = 3  # type: ignore[misc]


def test_clustering_columns_from_the_domain(tmp_path: Path) -> None:
    """The columns recorded in ``delta.clustering``, in its order."""
    kit = TableKit(tmp_path / "clustered")
    schema = pa.schema([("a", pa.int64()), ("b", pa.string())])
    kit.create(
        schema,
        protocol=protocol_action(1, 7, None, ["clustering", "domainMetadata"]),
        actions=[
            domain_action("delta.clustering", json.dumps({"clusteringColumns": [["b"], ["a"]]}))
        ],
    )
    detail = lq.DeltaTable(kit.uri).detail()
    assert detail.clustering_columns == ("b", "a")
    assert detail.table_features == ("clustering", "domainMetadata")


def test_clustering_columns_of_a_conformance_table() -> None:
    from tablekit import conformance_table

    root = conformance_table("deltars_table_with_liquid_clustering")
    assert root.exists(), f"conformance table missing at {root}"
    detail = lq.DeltaTable(str(root)).detail()
    assert detail.clustering_columns == ("id",)
    assert detail.num_files == len(deltalake.DeltaTable(str(root)).file_uris())
