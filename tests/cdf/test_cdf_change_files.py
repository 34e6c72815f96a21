"""Commits with change files in the layout lakequery's own DML writes: files under
``_change_data/<hive dirs>/cdc-00000-<uuid>.c000.zstd.parquet`` holding the table's
non-partition columns under their physical names plus ``_change_type``, referenced by
``cdc`` actions whose ``partitionValues`` give the partition columns. The commit's
add/remove actions must then be ignored."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cdfkit import CDF, rows, simple

import lakequery as lq
from lakequery.protocol.column_mapping import physical_schema


def _write_cdc_commit(root: str, version: int, region: str, data: pa.Table) -> None:
    """A DELETE-like commit: removes the region's data files and records ``data`` (logical
    columns + ``_change_type``) in one change file of that partition."""
    snap = lq.DeltaTable(root).snapshot()
    mode = snap.column_mapping_mode
    key = {name: k for name, k, _ in snap.partition_column_specs()}["region"]
    phys = physical_schema(snap.metadata.schema, mode, exclude=["region"])
    columns = [data.column(f.name) for f in snap.metadata.schema if f.name != "region"]
    cdc = pa.Table.from_arrays(
        [*columns, data.column("_change_type")],
        schema=phys.append(pa.field("_change_type", pa.string())),
    )
    rel = f"_change_data/region={region}/cdc-00000-{uuid.uuid4()}.c000.zstd.parquet"
    (Path(root) / rel).parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(cdc, Path(root) / rel, compression="zstd")
    actions: list[dict[str, Any]] = [{"commitInfo": {"operation": "DELETE", "timestamp": 0}}]
    for f in snap.files().to_pylist():
        if f["partition_values"]["region"] == region:
            actions.append(
                {
                    "remove": {
                        "path": f["path"],
                        "dataChange": True,
                        "deletionTimestamp": 0,
                        "extendedFileMetadata": True,
                        "partitionValues": {key: region},
                        "size": f["size"],
                    }
                }
            )
    size = (Path(root) / rel).stat().st_size
    actions.append(
        {"cdc": {"path": rel, "partitionValues": {key: region}, "size": size, "dataChange": False}}
    )
    log = Path(root) / "_delta_log" / f"{version:020d}.json"
    log.write_text("".join(json.dumps(a) + "\n" for a in actions))


@pytest.mark.parametrize("mode", ["none", "name", "id"])
def test_lakequery_layout_change_files(tmp_path: Path, mode: str) -> None:
    root = str(tmp_path / "t")
    conf = {**CDF, "delta.columnMapping.mode": mode}
    table = pa.table(
        {
            "id": pa.array([1, 2, 3], pa.int64()),
            "name": ["a", "b", "c"],
            "region": ["eu", "us", "us"],
        }
    )
    lq.write(root, table, partition_by=["region"], configuration=conf)
    changed = pa.table(
        {
            "id": pa.array([2, 3], pa.int64()),
            "name": ["b", "c"],
            "region": ["us", "us"],
            "_change_type": ["delete", "delete"],
        }
    )
    _write_cdc_commit(root, 1, "us", changed)
    feed = lq.DeltaTable(root).changes(starting_version=1)
    expected = [(2, "b", "us", "delete", 1), (3, "c", "us", "delete", 1)]
    cols = ("id", "name", "region", "_change_type", "_commit_version")
    assert simple(feed.to_arrow(), *cols) == expected
    assert rows(feed.to_duckdb()) == rows(feed.to_arrow())
    assert rows(feed.to_polars()) == rows(feed.to_arrow())
    everything = lq.DeltaTable(root).changes(starting_version=0).to_arrow()
    assert everything.num_rows == 5
    only = lq.DeltaTable(root).changes(starting_version=0, filter="region = 'us' AND id = 3")
    assert simple(only.to_arrow(), "_commit_version", "_change_type") == [
        (0, "insert"),
        (1, "delete"),
    ]
