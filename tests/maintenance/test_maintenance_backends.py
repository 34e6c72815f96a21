"""Maintenance on object storage (a moto S3 server on loopback) and in memory, plus edge
cases: empty tables and column mapping."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from maint_tables import lakequery_rows, normalise, sample_batch

import lakequery as lq
from lakequery.errors import RestoreError


def _cycle(uri: str, options: dict[str, Any] | None) -> None:
    for k in range(4):
        lq.write(
            uri,
            sample_batch(k * 30, 30),
            mode="append",
            partition_by=["p"],
            storage_options=options,
        )
    dt = lq.DeltaTable(uri, storage_options=options)
    expected = normalise(dt.snapshot().scan().to_arrow())
    m = dt.optimize(z_order_by=["id", "x"])
    assert m.committed and m.files_removed == 8
    assert normalise(dt.snapshot().scan().to_arrow()) == expected
    r = dt.restore(version=3)  # the 8 small files again; the clustered ones removed
    assert r.files_added == 8 and r.files_removed == m.files_added
    assert normalise(dt.snapshot().scan().to_arrow()) == expected
    time.sleep(0.01)
    dry = dt.vacuum(retention_hours=0, enforce_retention=False)
    assert len(dry.files) == m.files_added
    done = dt.vacuum(retention_hours=0, enforce_retention=False, dry_run=False)
    assert done.files_deleted == m.files_added
    assert normalise(dt.snapshot().scan().to_arrow()) == expected
    with pytest.raises(RestoreError):
        dt.restore(version=4)  # its files were just vacuumed
    manifests = dt.generate_symlink_manifest()
    assert len(manifests.manifests) == 2


def test_s3(s3_table_uri: str, s3_storage_options: dict[str, Any]) -> None:
    _cycle(s3_table_uri, s3_storage_options)


def test_memory(memory_table_uri: str) -> None:
    _cycle(memory_table_uri, None)


def test_empty_table_and_column_mapping(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    lq.write(uri, pa.table({"a": pa.array([], pa.int64())}))
    assert not lq.DeltaTable(uri).optimize(z_order_by="a").committed
    assert lq.DeltaTable(uri).vacuum().files == ()
    mapped = str(tmp_path / "m")
    for k in range(3):
        lq.write(
            mapped,
            sample_batch(k * 20, 20),
            mode="append",
            configuration={"delta.columnMapping.mode": "name"},
        )
    expected = lakequery_rows(mapped)["to_arrow"]
    m = lq.DeltaTable(mapped).optimize(z_order_by=["s", "dec"])
    assert m.committed
    assert lakequery_rows(mapped)["to_arrow"] == expected


def test_row_tracking_and_append_only_allowed(tmp_path: Path) -> None:
    tracked = str(tmp_path / "rt")
    for k in range(2):
        lq.write(
            tracked,
            sample_batch(k * 10, 10),
            mode="append",
            configuration={"delta.enableRowTracking": "true"},
        )
    ids = lq.DeltaTable(tracked).snapshot().scan(row_tracking=True).to_arrow().sort_by("_row_id")
    assert lq.DeltaTable(tracked).optimize().committed  # keeps the row ids
    again = lq.DeltaTable(tracked).snapshot().scan(row_tracking=True).to_arrow()
    assert again.sort_by("_row_id").equals(ids)
    append_only = str(tmp_path / "ao")
    for k in range(2):
        lq.write(
            append_only,
            sample_batch(k * 10, 10),
            mode="append",
            configuration={"delta.appendOnly": "true"},
        )
    assert lq.DeltaTable(append_only).optimize().committed  # dataChange=false removes
