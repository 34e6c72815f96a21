"""``scan(row_tracking=True)``: row ids and commit versions from the log (``baseRowId`` +
physical position, ``defaultRowCommitVersion``) or from materialized columns, in every
engine, with filters, projections, deletion vectors, partitions and column mapping."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from rtkit import DVS, TRACKED, rows, tracked
from tablekit import commit_info, file_stats, metadata_action, protocol_action

import lakequery as lq

ROW_ID = "_row-id-col-test"
ROW_VERSION = "_row-commit-version-col-test"


def _handmade(root: Path) -> None:
    """A table written the way Spark writes one after an UPDATE: file a.parquet stores
    materialized values for some rows (NULL for others), b.parquet stores none."""
    root.mkdir()
    (root / "_delta_log").mkdir()
    a = pa.table(
        {
            "key": pa.array([1, 2, 3], pa.int64()),
            ROW_ID: pa.array([100, None, 102], pa.int64()),
            ROW_VERSION: pa.array([None, 7, 5], pa.int64()),
        }
    )
    b = pa.table({"key": pa.array([4, 5, 6], pa.int64())})
    pq.write_table(a, root / "a.parquet")
    pq.write_table(b, root / "b.parquet")
    schema = pa.schema([pa.field("key", pa.int64())])
    config = {**DVS, "delta.rowTracking.materializedRowIdColumnName": ROW_ID}
    config["delta.rowTracking.materializedRowCommitVersionColumnName"] = ROW_VERSION
    actions = [
        commit_info("CREATE TABLE"),
        protocol_action(
            3, 7, ["deletionVectors"], ["deletionVectors", "domainMetadata", "rowTracking"]
        ),
        metadata_action(schema, configuration=config),
        {
            "domainMetadata": {
                "domain": "delta.rowTracking",
                "configuration": json.dumps({"rowIdHighWaterMark": 102}),
                "removed": False,
            }
        },
    ]
    for name, data, base, version in (("a.parquet", a, 10, 8), ("b.parquet", b, 20, 9)):
        stats = file_stats(data.select(["key"]))
        add = {
            "path": name,
            "partitionValues": {},
            "size": (root / name).stat().st_size,
            "modificationTime": 0,
            "dataChange": True,
            "stats": json.dumps(stats),
            "baseRowId": base,
            "defaultRowCommitVersion": version,
        }
        actions.append({"add": add})
    text = "\n".join(json.dumps(x) for x in actions) + "\n"
    (root / "_delta_log" / f"{0:020d}.json").write_text(text)


def test_materialized_values_win_over_base_row_id(tmp_path: Path) -> None:
    root = tmp_path / "t"
    _handmade(root)
    assert tracked(root) == {
        1: (100, 8),
        2: (11, 7),
        3: (102, 5),
        4: (20, 9),
        5: (21, 9),
        6: (22, 9),
    }
    # and the materialized columns are not table columns
    assert lq.DeltaTable(str(root)).snapshot().scan().to_arrow().column_names == ["key"]


def test_positions_count_rows_hidden_by_deletion_vectors(tmp_path: Path) -> None:
    root = tmp_path / "t"
    _handmade(root)
    lq.DeltaTable(str(root)).delete("key IN (1, 4)")  # DVs on both files
    assert tracked(root) == {2: (11, 7), 3: (102, 5), 5: (21, 9), 6: (22, 9)}


def test_filter_projection_and_engines(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    lq.write(uri, rows(list(range(10))), configuration=TRACKED)
    lq.write(uri, rows(list(range(10, 15))), mode="append")
    snap = lq.DeltaTable(uri).snapshot()
    scan = snap.scan(columns=["v"], filter="key >= 8 AND key < 12", row_tracking=True)
    assert scan.output_schema.names == ["v", "_row_id", "_row_commit_version"]
    assert scan.output_schema.field("_row_id").type == pa.int64()
    got = sorted(scan.to_arrow().select(["_row_id", "_row_commit_version"]).to_pylist(), key=str)
    want = [{"_row_id": i, "_row_commit_version": 0 if i < 10 else 1} for i in (8, 9, 10, 11)]
    assert got == sorted(want, key=str)
    duck = scan.to_duckdb().order("_row_id").fetchall()
    assert [r[1] for r in duck] == [8, 9, 10, 11]
    assert scan.to_polars().collect()["_row_id"].sort().to_list() == [8, 9, 10, 11]
    # only the row tracking columns
    only = snap.scan(columns=[], row_tracking=True).to_arrow()
    assert sorted(only.column("_row_id").to_pylist()) == list(range(15))
    # without the flag nothing changes
    assert snap.scan().to_arrow().column_names == ["key", "v"]


def test_partitioned_and_column_mapping(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    data = pa.table({"key": pa.array([1, 2, 3, 4], pa.int64()), "p": ["a", "b", "a", "b"]})
    config = {**TRACKED, "delta.columnMapping.mode": "name"}
    lq.write(uri, data, partition_by=["p"], configuration=config)
    before = lq.DeltaTable(uri).snapshot().scan(row_tracking=True).to_arrow()
    assert sorted(before.column("_row_id").to_pylist()) == [0, 1, 2, 3]
    lq.DeltaTable(uri).update("key = 3", set={"key": "30"})
    after = lq.DeltaTable(uri).snapshot().scan(row_tracking=True).to_arrow()
    old = dict(zip(before["key"].to_pylist(), before["_row_id"].to_pylist(), strict=True))
    new = dict(zip(after["key"].to_pylist(), after["_row_id"].to_pylist(), strict=True))
    assert new == {1: old[1], 2: old[2], 30: old[3], 4: old[4]}
    assert after.column_names == ["key", "p", "_row_id", "_row_commit_version"]


def test_empty_table(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    lq.write(uri, rows([]), configuration=TRACKED)
    t = lq.DeltaTable(uri).snapshot().scan(row_tracking=True).to_arrow()
    assert t.num_rows == 0 and t.column_names == ["key", "v", "_row_id", "_row_commit_version"]


def test_refused_without_row_tracking(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    lq.write(uri, rows([1]))
    with pytest.raises(lq.RowTrackingError, match="does not track row ids"):
        lq.DeltaTable(uri).snapshot().scan(row_tracking=True).to_arrow()


def test_refused_without_row_tracking_even_when_empty(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    lq.write(uri, rows([]))
    with pytest.raises(lq.RowTrackingError, match="does not track row ids"):
        lq.DeltaTable(uri).snapshot().scan(row_tracking=True).to_duckdb()


def test_refused_when_a_column_has_the_name(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    lq.write(uri, pa.table({"_row_id": [1, 2]}), configuration=TRACKED)
    # the commands still keep ids (they name the columns after the materialized ones)
    assert lq.DeltaTable(uri).update("_row_id = 1", set={"_row_id": "10"}).committed
    with pytest.raises(lq.RowTrackingError, match="_row_id"):
        lq.DeltaTable(uri).snapshot().scan(row_tracking=True).to_arrow()


def test_positions_across_batches_of_a_large_file(tmp_path: Path) -> None:
    # one file of 300,000 rows: the Arrow engine reads it in several batches, and the
    # positions (hence ids) must run on across them, DVs or not; tracked() checks that
    # DuckDB (file_row_number), Arrow (running counts) and Polars agree
    uri = str(tmp_path / "t")
    n = 300_000
    lq.write(uri, rows(list(range(n))), configuration=DVS)
    lq.DeltaTable(uri).delete("key % 1000 = 7")
    got = tracked(uri)
    assert len(got) == n - 300
    assert all(row_id == key and version == 0 for key, (row_id, version) in got.items())
