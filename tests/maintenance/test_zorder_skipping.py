"""Clustering end to end: the Delta paper's Figure 5 experiment at small scale (Z-order
and Hilbert skip far more files than no clustering for point queries on every column),
tight statistics, and clustering with partitions, nulls and deletion vectors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from maint_tables import DV_CONFIG, assert_readers_agree, delete_rows, lakequery_rows, sample_batch

import lakequery as lq

COLUMNS = ["sourceIP", "destIP", "sourcePort", "destPort"]


def network_rows(n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table(
        {
            "sourceIP": rng.integers(0, 2**32, n, dtype=np.int64),
            "destIP": rng.integers(0, 2**32, n, dtype=np.int64),
            "sourcePort": rng.integers(0, 2**16, n, dtype=np.int64),
            "destPort": rng.integers(0, 2**16, n, dtype=np.int64),
        }
    )


def skipped_share(uri: str, probes: pa.Table) -> dict[str, float]:
    """Per column: the average share of files a point query on an existing value skips."""
    snap = lq.DeltaTable(uri).snapshot()
    out = {}
    for col in COLUMNS:
        shares = []
        for v in probes.column(col).to_pylist():
            plan = snap.scan(filter=f"{col} = {v}").plan()
            shares.append(plan.skipped_files / plan.total_files)
        out[col] = float(np.mean(shares))
    return out


@pytest.mark.parametrize("curve", ["zorder", "hilbert"])
def test_figure5_point_queries_skip_files_on_every_column(tmp_path: Path, curve: str) -> None:
    files, per_file = 32, 1500
    uri = str(tmp_path / "net")
    rows = network_rows(files * per_file, 0)
    # unclustered: each file is a random sample of the space
    lq.write(uri, rows.to_batches(max_chunksize=per_file), target_file_size=per_file * 16)
    total = sum(lq.DeltaTable(uri).snapshot().files().column("size").to_pylist())
    assert lq.DeltaTable(uri).snapshot().num_files >= 16
    probes = rows.slice(0, 12)  # values present in the table
    baseline = skipped_share(uri, probes)
    assert max(baseline.values()) < 0.1
    m = lq.DeltaTable(uri).optimize(z_order_by=COLUMNS, curve=curve, target_file_size=total // 32)
    assert m.committed and m.curve == curve and m.z_order_by == tuple(COLUMNS)
    n_files = lq.DeltaTable(uri).snapshot().num_files
    assert 12 <= n_files <= 80
    clustered = skipped_share(uri, probes)
    assert min(clustered.values()) >= 0.43, clustered
    assert float(np.mean(list(clustered.values()))) >= 0.5, clustered
    assert all(clustered[c] > baseline[c] + 0.25 for c in COLUMNS)


def test_clustering_keeps_rows_and_writes_tight_stats(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    for k in range(5):
        lq.write(
            uri,
            sample_batch(k * 80, 80),
            mode="append",
            partition_by=["p"],
            configuration=DV_CONFIG,
        )
    delete_rows(uri, lambda path, n: range(1, n, 5))
    expected = lakequery_rows(uri)["to_arrow"]
    m = lq.DeltaTable(uri).optimize(z_order_by=["x", "flag", "s"], target_file_size=3000)
    assert m.committed and m.partitions_optimized == 2 and m.dvs_purged == 10
    assert_readers_agree(uri, expected)
    files = lq.DeltaTable(uri).snapshot().files()
    assert files.num_rows > 2  # cut into several files per partition
    for stats in files.column("stats").to_pylist():
        doc = json.loads(stats)
        assert doc.get("tightBounds", True) is True
        assert set(doc["minValues"]) >= {"x", "s", "id"}
    # a point query on a clustering column skips files
    plan = lq.DeltaTable(uri).snapshot().scan(filter="x = 10.0").plan()
    assert plan.skipped_files > 0


def test_clustering_a_single_clean_file_is_skipped(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    lq.write(uri, sample_batch(0, 100))
    m = lq.DeltaTable(uri).optimize(z_order_by="id")
    assert not m.committed and m.files_considered == 1


def test_clustering_cuts_a_single_file_larger_than_the_target(tmp_path: Path) -> None:
    """One large file (a table written at once, or just compacted) is clustered into
    several files, as Spark's ZORDER does, so that point queries skip files."""
    uri = str(tmp_path / "t")
    lq.write(uri, sample_batch(0, 4000))
    dt = lq.DeltaTable(uri)
    before = dt.snapshot()
    assert before.num_files == 1
    target = int(before.files().column("size")[0].as_py()) // 4
    m = dt.optimize(z_order_by=["x", "id"], target_file_size=target)
    assert m.committed and m.files_removed == 1 and m.files_added > 1
    after = dt.snapshot()
    assert after.num_records() == 4000
    assert after.scan(filter="x = 10.0").plan().skipped_files > 0


def test_spilling_sort_path_gives_the_same_layout_quality(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lakequery.commands import optimize as opt

    monkeypatch.setattr(opt, "SORT_MEMORY_BYTES", 1)  # nothing fits: DuckDB sorts, spilling
    uri = str(tmp_path / "net")
    rows = network_rows(32 * 500, 3)
    lq.write(uri, rows.to_batches(max_chunksize=500), target_file_size=500 * 16)
    total = sum(lq.DeltaTable(uri).snapshot().files().column("size").to_pylist())
    m = lq.DeltaTable(uri).optimize(z_order_by=COLUMNS, target_file_size=total // 16)
    assert m.committed
    got = lq.DeltaTable(uri).snapshot().scan().to_arrow()
    assert sorted(got.column("sourceIP").to_pylist()) == sorted(rows.column("sourceIP").to_pylist())
    assert got.num_rows == rows.num_rows
    clustered = skipped_share(uri, rows.slice(0, 8))
    assert float(np.mean(list(clustered.values()))) >= 0.4, clustered
