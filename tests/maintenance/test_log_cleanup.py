"""Expired log cleanup (digest §7.8): old commits and checkpoints go, every version inside
the retention window stays readable (lakequery and deltalake); automatic after checkpoints
unless disabled; in-commit timestamps decide when present."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pyarrow as pa
import pytest
from maint_tables import deltalake_rows, lakequery_rows

import lakequery as lq
from lakequery.errors import VersionNotFoundError

DAY_S = 86400


def _log(uri: str) -> Path:
    return Path(uri) / "_delta_log"


def _make(uri: str, commits: int, config: dict[str, str] | None = None) -> None:
    conf = {"delta.checkpointInterval": "3", **(config or {})}
    lq.write(uri, pa.table({"x": [0]}), configuration=conf)
    for i in range(1, commits):
        lq.write(uri, pa.table({"x": [i]}), mode="append")


def _age(uri: str, versions: range, days: float) -> None:
    """Backdates the commit (and checkpoint) files of some versions."""
    when = time.time() - days * DAY_S
    for v in versions:
        for p in _log(uri).glob(f"{v:020d}.*"):
            os.utime(p, (when, when))


def _versions(uri: str, suffix: str) -> list[int]:
    return sorted(int(p.name[:20]) for p in _log(uri).glob(f"*{suffix}"))


def test_cleanup_keeps_every_retained_version_readable(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    _make(uri, 10)
    assert _versions(uri, ".checkpoint.parquet") == [3, 6, 9]
    _age(uri, range(0, 8), days=40)  # versions 0..7 are older than 30 days (+ midnight)
    expected = {v: lakequery_rows(uri, version=v)["to_arrow"] for v in range(6, 10)}
    r = lq.DeltaTable(uri).cleanup_log()
    assert r.cutoff_version == 6
    assert _versions(uri, ".json") == list(range(6, 10))
    assert _versions(uri, ".checkpoint.parquet") == [6, 9]
    for v, rows in expected.items():
        assert lakequery_rows(uri, version=v)["to_arrow"] == rows
        assert deltalake_rows(uri, version=v) == rows
    with pytest.raises(VersionNotFoundError):
        lq.DeltaTable(uri).snapshot(version=5)
    assert [e.version for e in lq.DeltaTable(uri).history()][-1] == 6
    # a second run finds nothing more to delete
    assert lq.DeltaTable(uri).cleanup_log().files_deleted == ()


def test_nothing_without_an_old_enough_checkpoint(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    _make(uri, 5)
    _age(uri, range(0, 2), days=40)  # the only checkpoint (3) is young
    assert lq.DeltaTable(uri).cleanup_log().files_deleted == ()
    assert _versions(uri, ".json") == list(range(5))


def test_runs_after_automatic_checkpoints_unless_disabled(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    _make(uri, 5)
    _age(uri, range(0, 5), days=40)
    lq.write(uri, pa.table({"x": [5]}), mode="append")  # v5, then v6 checkpoints
    lq.write(uri, pa.table({"x": [6]}), mode="append")
    assert _versions(uri, ".json")[0] == 3  # cleaned up to the checkpoint at 3
    assert lakequery_rows(uri)["to_arrow"] == [(i,) for i in range(7)]

    other = str(tmp_path / "u")
    _make(other, 5, {"delta.enableExpiredLogCleanup": "false"})
    _age(other, range(0, 5), days=40)
    lq.write(other, pa.table({"x": [5]}), mode="append")
    lq.write(other, pa.table({"x": [6]}), mode="append")
    assert _versions(other, ".json")[0] == 0


def test_in_commit_timestamps_decide(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    _make(uri, 8, {"delta.enableInCommitTimestamps": "true"})
    _age(uri, range(0, 8), days=40)  # file times lie; the in-commit timestamps are recent
    assert lq.DeltaTable(uri).cleanup_log().files_deleted == ()
    assert _versions(uri, ".json") == list(range(8))
    # with a zero retention, the midnight cutoff still keeps today's commits
    assert lq.DeltaTable(uri).cleanup_log(retention_hours=0).files_deleted == ()


def test_sidecars_go_with_the_checkpoints_that_referenced_them(tmp_path: Path) -> None:
    # A Spark table with a V2 checkpoint (v2, file actions in two sidecars). lakequery
    # appends v3, v4 and checkpoints at 4 (checkpointInterval 2) without sidecars.
    import shutil

    from tablekit import conformance_table

    root = tmp_path / "t"
    shutil.copytree(conformance_table("golden_v2_checkpoint_parquet"), root)
    for p in [root, *root.rglob("*")]:
        p.chmod(p.stat().st_mode | 0o200)
    uri = str(root)
    lq.write(uri, pa.table({"id": pa.array([100], pa.int64())}), mode="append")
    lq.write(uri, pa.table({"id": pa.array([101], pa.int64())}), mode="append")
    assert 4 in _versions(uri, ".checkpoint.parquet")
    sidecar_dir = _log(uri) / "_sidecars"
    spark_sidecars = sorted(p.name for p in sidecar_dir.glob("*.parquet"))
    assert len(spark_sidecars) == 2
    # orphans, as a failed checkpoint writer leaves them: one old, one written just now
    old_orphan = sidecar_dir / "00000000000000000003.checkpoint.0000000001.0000000001.old.parquet"
    young_orphan = sidecar_dir / "00000000000000000003.checkpoint.0000000001.0000000001.new.parquet"
    shutil.copy(sidecar_dir / spark_sidecars[0], old_orphan)
    shutil.copy(sidecar_dir / spark_sidecars[0], young_orphan)
    two_days_ago = time.time() - 2 * DAY_S
    os.utime(old_orphan, (two_days_ago, two_days_ago))
    expected = lakequery_rows(uri)["to_arrow"]
    at_2 = lakequery_rows(uri, version=2)["to_arrow"]

    # 1. the cutoff checkpoint is Spark's at 2: its sidecars stay, the old orphan goes
    _age(uri, range(0, 3), days=40)
    for p in sidecar_dir.glob("0*.parquet"):
        if p != young_orphan and p != old_orphan:
            os.utime(p, (time.time() - 40 * DAY_S,) * 2)
    r = lq.DeltaTable(uri).cleanup_log()
    assert r.cutoff_version == 2
    assert str(old_orphan) in r.files_deleted
    assert sorted(p.name for p in sidecar_dir.glob("*.parquet")) == sorted(
        [*spark_sidecars, young_orphan.name]
    )
    assert lakequery_rows(uri, version=2)["to_arrow"] == at_2  # read through its sidecars
    assert lakequery_rows(uri)["to_arrow"] == expected

    # 2. lakequery's checkpoint at 4 becomes the cutoff: Spark's checkpoint and its
    # sidecars go; the young orphan stays (a checkpoint may be about to reference it)
    _age(uri, range(3, 5), days=35)
    r = lq.DeltaTable(uri).cleanup_log()
    assert r.cutoff_version == 4
    assert sorted(p.name for p in sidecar_dir.glob("*.parquet")) == [young_orphan.name]
    assert _versions(uri, ".json")[0] == 4
    assert lakequery_rows(uri)["to_arrow"] == expected
    assert deltalake_rows(uri) == expected
    assert lq.DeltaTable(uri).cleanup_log().files_deleted == ()


def test_a_negative_retention_is_refused(tmp_path: Path) -> None:
    """A negative retention put the cutoff in the future: every commit before the newest
    checkpoint went, with no error (VACUUM refuses the same)."""
    uri = str(tmp_path / "t")
    _make(uri, 5)
    with pytest.raises(ValueError, match="must not be negative"):
        lq.DeltaTable(uri).cleanup_log(retention_hours=-48)
    assert _versions(uri, ".json") == list(range(5))


def test_temporary_files_of_killed_writers_go_once_old(tmp_path: Path) -> None:
    """A writer killed mid-write leaves its temporary file in ``_delta_log``; log cleanup
    deletes lakequery's own ones once older than the retention, and nothing else."""
    uri = str(tmp_path / "t")
    _make(uri, 2)  # no checkpoint: nothing else is deleted
    names = [
        f".{5:020d}.json.{'a' * 32}.tmp",
        f"._last_checkpoint.{'b' * 32}.tmp",
        f".tmp-{'c' * 32}.checkpoint.parquet",
    ]
    old = time.time() - 40 * DAY_S
    for name in names:
        (_log(uri) / name).write_bytes(b"partial")
        os.utime(_log(uri) / name, (old, old))
    young = _log(uri) / f".{6:020d}.json.{'d' * 32}.tmp"
    young.write_bytes(b"a writer at work")
    foreign = _log(uri) / ".someone-elses.tmp"
    foreign.write_bytes(b"")
    os.utime(foreign, (old, old))
    deleted = lq.DeltaTable(uri).cleanup_log().files_deleted
    assert sorted(Path(p).name for p in deleted) == sorted(names)
    assert young.exists() and foreign.exists()
    assert _versions(uri, ".json") == [0, 1]
