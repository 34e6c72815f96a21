"""OPTIMIZE compaction: bins, DV purge, idempotence, predicates, metrics, conflicts, and the
table's contents unchanged through every engine and through deltalake."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from maint_tables import (
    DV_CONFIG,
    assert_readers_agree,
    delete_rows,
    lakequery_rows,
    sample_batch,
)

import lakequery as lq
from lakequery.commands.optimize import plan_optimize
from lakequery.commands.progress import Progress
from lakequery.errors import (
    ConcurrentDeleteDeleteError,
    ConcurrentDeleteReadError,
    PredicateError,
    SchemaError,
)
from lakequery.txn import Transaction


def _small_files(root: Path, n: int = 6, *, partitioned: bool = True, dv: bool = False) -> str:
    uri = str(root)
    for k in range(n):
        lq.write(
            uri,
            sample_batch(k * 50, 50),
            mode="append",
            partition_by=["p"] if partitioned else None,
            configuration=DV_CONFIG if dv else None,
        )
    return uri


def _commit_info(uri: str, version: int) -> dict[str, Any]:
    path = Path(uri) / "_delta_log" / f"{version:020d}.json"
    return json.loads(path.read_text().splitlines()[0])["commitInfo"]


def test_compaction_packs_each_partition_and_is_idempotent(tmp_path: Path) -> None:
    uri = _small_files(tmp_path / "t")
    before = lakequery_rows(uri)["to_arrow"]
    assert lq.DeltaTable(uri).snapshot().num_files == 12
    seen: list[Progress] = []
    m = lq.DeltaTable(uri).optimize(progress=seen.append)
    assert m.committed and m.files_removed == 12 and m.files_added == 2
    assert m.partitions_optimized == 2 and m.num_bins == 2
    assert m.bytes_removed > 0 and m.bytes_added > 0
    assert seen[-1].files_done == 12 and seen[-1].bytes_done == m.bytes_removed
    assert_readers_agree(uri, before)
    info = _commit_info(uri, m.version or 0)
    assert info["operation"] == "OPTIMIZE"
    assert info["operationMetrics"]["numRemovedFiles"] == "12"
    assert info["isolationLevel"] == "SnapshotIsolation"
    log = (Path(uri) / "_delta_log" / f"{m.version:020d}.json").read_text().splitlines()
    flags = {
        body["dataChange"]
        for line in log[1:]
        for kind, body in json.loads(line).items()
        if kind in ("add", "remove")
    }
    assert flags == {False}
    again = lq.DeltaTable(uri).optimize()
    assert not again.committed and again.files_removed == 0
    assert lq.DeltaTable(uri).snapshot().version == m.version
    # deltalake sees the same history entry
    assert deltalake.DeltaTable(uri).history(1)[0]["operation"] == "OPTIMIZE"


def test_target_size_splits_bins(tmp_path: Path) -> None:
    uri = _small_files(tmp_path / "t", 8, partitioned=False)
    sizes = lq.DeltaTable(uri).snapshot().files().column("size").to_pylist()
    target = sum(sorted(sizes)[:3])  # about three files per bin
    m = lq.DeltaTable(uri).optimize(target_file_size=target)
    assert m.num_bins >= 2 and m.files_removed >= 6
    # files at or above min_file_size stay
    m2 = lq.DeltaTable(uri).optimize(target_file_size=target, min_file_size=1)
    assert not m2.committed


def test_predicate_limits_partitions_and_must_use_partition_columns(tmp_path: Path) -> None:
    uri = _small_files(tmp_path / "t")
    m = lq.DeltaTable(uri).optimize(predicate="p = 'a'")
    assert m.partitions_optimized == 1 and m.files_removed == 6
    with pytest.raises(PredicateError):
        lq.DeltaTable(uri).optimize(predicate="id > 3")
    with pytest.raises(SchemaError):
        lq.DeltaTable(uri).optimize(z_order_by=["nope"])
    with pytest.raises(SchemaError):
        lq.DeltaTable(uri).optimize(z_order_by=["p"])


def test_dv_purge_rewrites_files_without_deleted_rows(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    lq.write(uri, sample_batch(0, 400), configuration=DV_CONFIG)  # one big file
    delete_rows(uri, lambda path, n: range(0, n, 4))  # 25% deleted
    expected = lakequery_rows(uri)["to_arrow"]
    assert len(expected) == 300
    # the file is "large" (min_file_size=1) but past the deleted-rows threshold
    m = lq.DeltaTable(uri).optimize(min_file_size=1)
    assert m.committed and m.dvs_purged == 1 and m.rows_purged == 100
    files = lq.DeltaTable(uri).snapshot().files()
    assert files.column("deletion_vector").null_count == files.num_rows
    assert sum(files.column("num_records").to_pylist()) == 300
    assert_readers_agree(uri, expected)
    assert not lq.DeltaTable(uri).optimize(min_file_size=1).committed


def test_plan_is_pure_and_skips_lone_files(tmp_path: Path) -> None:
    uri = _small_files(tmp_path / "t", 1)
    snap = lq.DeltaTable(uri).snapshot()
    plan = plan_optimize(
        snap, snap.files(), target_file_size=1 << 30, min_file_size=1 << 30, cluster=False
    )
    assert plan.bins == ()  # one file per partition: nothing to gain


def test_concurrent_delete_of_a_rewritten_file_fails_cleanly(tmp_path: Path) -> None:
    uri = _small_files(tmp_path / "t", 4, partitioned=False)
    table = lq.DeltaTable(uri)
    snap = table.snapshot()
    from lakequery.commands import optimize as opt

    real_compact = opt._compact

    def racing(snapshot: Any, files: pa.Table, state: Any) -> list[dict[str, Any]]:
        adds = real_compact(snapshot, files, state)
        # a concurrent DELETE removes one of the files being rewritten
        victim = snap.files().slice(0, 1)
        from lakequery.commands.file_actions import remove_actions

        txn = Transaction(table.storage, snap, operation="DELETE")
        txn.remove_files(remove_actions(snap, victim, now_ms=0, data_change=True))
        txn.commit()
        return adds

    before = set(p.name for p in Path(uri).glob("*.parquet"))
    opt._compact = racing  # type: ignore[assignment]
    try:
        with pytest.raises((ConcurrentDeleteReadError, ConcurrentDeleteDeleteError)):
            table.optimize()
    finally:
        opt._compact = real_compact  # type: ignore[assignment]
    after = set(p.name for p in Path(uri).glob("*.parquet"))
    assert after == before  # the new files were deleted again
    assert lq.DeltaTable(uri).snapshot().num_files == 3


def test_concurrent_append_does_not_block_optimize(tmp_path: Path) -> None:
    uri = _small_files(tmp_path / "t", 4, partitioned=False)
    from lakequery.commands import optimize as opt

    real_compact = opt._compact

    def racing(snapshot: Any, files: pa.Table, state: Any) -> list[dict[str, Any]]:
        adds = real_compact(snapshot, files, state)
        lq.write(uri, sample_batch(1000, 5), mode="append")
        return adds

    opt._compact = racing  # type: ignore[assignment]
    try:
        m = lq.DeltaTable(uri).optimize()
    finally:
        opt._compact = real_compact  # type: ignore[assignment]
    assert m.committed and m.version == 5
    assert lq.DeltaTable(uri).snapshot().num_files == 2
    assert len(lakequery_rows(uri)["to_arrow"]) == 205


@st.composite
def table_recipes(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "writes": draw(st.lists(st.integers(1, 60), min_size=1, max_size=5)),
        "partitioned": draw(st.booleans()),
        "parts": draw(st.sampled_from([("a",), ("a", "b"), ("a", "b", "c")])),
        "delete_every": draw(st.sampled_from([0, 2, 3, 7])),
        "seed": draw(st.integers(0, 1000)),
        "z_order": draw(st.sampled_from([None, ["id"], ["x", "s"], ["d", "ts", "flag", "dec"]])),
        "curve": draw(st.sampled_from(["zorder", "hilbert"])),
        "target": draw(st.sampled_from([None, 2000, 20000])),
    }


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(recipe=table_recipes())
def test_optimize_keeps_contents_through_every_engine(
    tmp_path_factory: pytest.TempPathFactory, recipe: dict[str, Any]
) -> None:
    uri = str(tmp_path_factory.mktemp("prop") / "t")
    start = 0
    for n in recipe["writes"]:
        lq.write(
            uri,
            sample_batch(start, n, recipe["parts"]),
            mode="append",
            partition_by=["p"] if recipe["partitioned"] else None,
            configuration=DV_CONFIG,
        )
        start += n
    rng = random.Random(recipe["seed"])
    if recipe["delete_every"]:
        k = recipe["delete_every"]
        delete_rows(uri, lambda path, n: [i for i in range(n) if rng.random() < 1 / k])
    expected = lakequery_rows(uri)
    assert expected["to_duckdb"] == expected["to_arrow"] == expected["to_polars"]
    m = lq.DeltaTable(uri).optimize(
        z_order_by=recipe["z_order"],
        curve=recipe["curve"],
        target_file_size=recipe["target"],
    )
    assert m.files_removed + m.files_skipped == m.files_considered
    assert_readers_agree(uri, expected["to_arrow"])
    after = lq.DeltaTable(uri).snapshot().files()
    if m.committed:
        assert after.column("deletion_vector").null_count >= m.files_added
