"""The change feed of lakequery's own DELETE / UPDATE / MERGE (which write change files)
and of partition deletes (plain removes), with and without deletion vectors and column
mapping: the replay invariant at every version, the engines agreeing, and deltalake's
``load_cdf`` where it follows the digest (it diverges on a plain remove of a file that
has a DV, reporting the DV's rows instead of the live ones; see
``test_cdf_deletion_vectors``)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from cdfkit import CDF, check_every_version, oracle, rows, simple

import lakequery as lq


def _actions(root: str, version: int) -> set[str]:
    path = Path(root) / "_delta_log" / f"{version:020d}.json"
    return {next(iter(json.loads(line))) for line in path.read_text().splitlines()}


@pytest.mark.parametrize("partitioned", [False, True])
@pytest.mark.parametrize("dvs", ["true", "false"])
@pytest.mark.parametrize("mapping", ["none", "name"])
def test_dml_change_feed(tmp_path: Path, partitioned: bool, dvs: str, mapping: str) -> None:
    root = str(tmp_path / "t")
    conf = {
        **CDF,
        "delta.enableDeletionVectors": dvs,
        "delta.columnMapping.mode": mapping,
    }
    table = pa.table(
        {
            "id": pa.array(range(10), pa.int64()),
            "v": [f"v{i}" for i in range(10)],
            "p": ["a", "b"] * 5,
        }
    )
    lq.write(root, table, partition_by=["p"] if partitioned else None, configuration=conf)
    dt = lq.DeltaTable(root)
    dt.delete("id = 1")  # v1
    dt.update("id >= 4 AND id < 7", set={"v": "'upd'"})  # v2
    source = pa.table({"id": pa.array([2, 20], pa.int64()), "v": ["m2", "m20"], "p": ["a", "b"]})
    merge = dt.merge(source, on="target.id = source.id")
    merge.when_matched_update_all().when_not_matched_insert_all().execute()  # v3
    dt.delete("p = 'b'" if partitioned else "id > 8")  # v4
    for version in (1, 2, 3):
        assert "cdc" in _actions(root, version)
    check_every_version(root)
    feed = dt.changes(starting_version=1, ending_version=3)
    assert simple(feed.to_arrow(), "_commit_version", "id", "v", "_change_type") == sorted(
        [
            (1, 1, "v1", "delete"),
            (2, 4, "v4", "update_preimage"),
            (2, 4, "upd", "update_postimage"),
            (2, 5, "v5", "update_preimage"),
            (2, 5, "upd", "update_postimage"),
            (2, 6, "v6", "update_preimage"),
            (2, 6, "upd", "update_postimage"),
            (3, 2, "v2", "update_preimage"),
            (3, 2, "m2", "update_postimage"),
            (3, 20, "m20", "insert"),
        ],
        key=repr,
    )
    everything = dt.changes(starting_version=0)
    expected = rows(everything.to_arrow())
    assert rows(everything.to_duckdb()) == expected
    assert rows(everything.to_polars()) == expected
    if mapping == "none":
        last = 4 if not (partitioned and dvs == "true") else 3
        for start in range(last + 1):
            ours = dt.changes(starting_version=start, ending_version=last).to_arrow()
            assert rows(ours) == rows(oracle(root, start, last)), start
