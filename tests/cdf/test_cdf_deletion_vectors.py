"""DV refinement on a partitioned table whose deletion vectors lakequery's own
``DeletionVectorWriter`` wrote (the piece DML uses when change files are not written):
each commit's feed holds only the rows its DV change hides, and a later plain remove
deletes only the rows still live.

deltalake 1.6.6 agrees on the DV swaps but diverges on the plain remove of a file with a
DV: it reports the rows *in* the DV (already deleted earlier) instead of the live rows
the remove deletes. The digest (§13 rule 3) is followed here; ranges containing that
commit are checked by hand only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
from cdfkit import CDF, check_every_version, oracle, rows, simple

import lakequery as lq
from lakequery.dv.writer import DeletionVectorWriter
from lakequery.txn import Transaction


def _live_add(root: str, region: str) -> dict[str, Any]:
    """The newest add action of the region's file, as written in the log."""
    found: dict[str, Any] = {}
    for path in sorted((Path(root) / "_delta_log").glob("*.json")):
        for line in path.read_text().splitlines():
            action = json.loads(line)
            add = action.get("add")
            if add and add["partitionValues"].get("region") == region:
                found = add
    return found


def _commit(root: str, actions: list[dict[str, Any]], operation: str = "DELETE") -> None:
    dt = lq.DeltaTable(root)
    txn = Transaction(dt.storage, dt.snapshot(), operation=operation)
    txn.add_actions(actions)
    txn.commit()


def test_dv_rounds_then_remove(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    conf = {**CDF, "delta.enableDeletionVectors": "true"}
    table = pa.table(
        {
            "id": pa.array([0, 1, 2, 3, 4, 10, 11, 12], pa.int64()),
            "region": ["eu"] * 5 + ["us"] * 3,
        }
    )
    lq.write(root, table, partition_by=["region"], configuration=conf)  # v0
    storage = lq.DeltaTable(root).storage
    for rows_to_delete in ([0, 2], [3]):  # v1, v2
        writer = DeletionVectorWriter(storage)
        writer.delete_rows(_live_add(root, "eu"), rows_to_delete)
        _commit(root, writer.finish())
    live = _live_add(root, "eu")
    remove = {
        "path": live["path"],
        "dataChange": True,
        "deletionTimestamp": 0,
        "extendedFileMetadata": True,
        "partitionValues": live["partitionValues"],
        "size": live["size"],
        "deletionVector": live["deletionVector"],
    }
    _commit(root, [{"remove": remove}])  # v3: the eu file goes, its live rows 1 and 4
    dt = lq.DeltaTable(root)
    feed = dt.changes(starting_version=0).to_arrow()
    assert simple(feed, "_commit_version", "id", "_change_type") == sorted(
        [(0, i, "insert") for i in (0, 1, 2, 3, 4, 10, 11, 12)]
        + [(1, 0, "delete"), (1, 2, "delete"), (2, 3, "delete")]
        + [(3, 1, "delete"), (3, 4, "delete")],
        key=repr,
    )
    for start in range(4):
        for end in range(start, 4):
            ours = dt.changes(starting_version=start, ending_version=end)
            if end < 3:
                assert rows(ours.to_arrow()) == rows(oracle(root, start, end)), (start, end)
            assert rows(ours.to_duckdb()) == rows(ours.to_arrow())
            assert rows(ours.to_polars()) == rows(ours.to_arrow())
    at3 = simple(oracle(root, 3, 3), "id", "_change_type")
    assert at3 == [(0, "delete"), (2, "delete"), (3, "delete")]  # deltalake: the DV's rows
    check_every_version(root)
    # the table itself agrees: what is left is the us file
    assert sorted(dt.snapshot().scan().to_arrow().column("id").to_pylist()) == [10, 11, 12]
