"""VACUUM: the retention window, readers of retained versions, DV and change-data files,
hidden paths, the retention check, the protocol check and the single listing."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from maint_tables import (
    DV_CONFIG,
    assert_readers_agree,
    delete_rows,
    deltalake_rows,
    lakequery_rows,
)

import lakequery as lq
from lakequery.commands.vacuum import vacuum
from lakequery.errors import ObjectNotFoundError, RetentionError, UnsupportedFeatureError
from lakequery.protocol.properties import PropertyError

HOUR_S = 3600


def _log(uri: str, version: int) -> Path:
    return Path(uri) / "_delta_log" / f"{version:020d}.json"


def _age_removes(uri: str, version: int, hours: float) -> None:
    """Makes the removes of one commit ``hours`` old (deletionTimestamp), as if it had been
    committed then."""
    path = _log(uri, version)
    lines = []
    old_ms = int((time.time() - hours * HOUR_S) * 1000)
    for line in path.read_text().splitlines():
        action = json.loads(line)
        if "remove" in action:
            action["remove"]["deletionTimestamp"] = old_ms
        lines.append(json.dumps(action))
    path.write_text("\n".join(lines) + "\n")


def _age_files(uri: str, hours: float) -> None:
    """Makes every data / DV / change-data file ``hours`` old (mtime)."""
    old = time.time() - hours * HOUR_S
    for p in Path(uri).rglob("*"):
        if p.is_file() and "_delta_log" not in p.parts:
            os.utime(p, (old, old))


def _three_versions(uri: str) -> None:
    lq.write(uri, pa.table({"x": [1, 2]}))  # v0: file A
    lq.write(uri, pa.table({"x": [3]}), mode="overwrite")  # v1: A removed, B added
    lq.write(uri, pa.table({"x": [4]}), mode="overwrite")  # v2: B removed, C added


def test_retained_versions_stay_readable(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    _three_versions(uri)
    _age_removes(uri, 1, hours=10)  # A was removed 10 hours ago, B just now
    _age_files(uri, hours=10)
    dt = lq.DeltaTable(uri)
    with pytest.raises(RetentionError) as err:
        dt.vacuum(retention_hours=1)
    assert err.value.table_retention_hours == 168
    # 7 days: nothing is old enough yet
    assert dt.vacuum(dry_run=False).files_deleted == 0
    # a 5-hour window (enforce_retention=False): A's removal is older, B's is inside
    dry = dt.vacuum(retention_hours=5, enforce_retention=False)
    assert len(dry.files) == 1 and dry.files_deleted == 0 and dry.dry_run
    a_file = dry.files[0]
    assert Path(a_file).exists()
    done = dt.vacuum(retention_hours=5, enforce_retention=False, dry_run=False)
    assert done.files == dry.files and done.files_deleted == 1 and not Path(a_file).exists()
    # version 1 (inside the window) and the latest still read, through every reader
    assert [r for r in lakequery_rows(uri, version=1)["to_arrow"]] == [(3,)]
    assert deltalake_rows(uri, version=1) == [(3,)]
    assert_readers_agree(uri, [(4,)])
    with pytest.raises(ObjectNotFoundError):
        dt.snapshot(version=0).scan().to_arrow()
    # the log was not touched
    assert sorted(p.name for p in (Path(uri) / "_delta_log").glob("*.json")) == [
        f"{v:020d}.json" for v in range(3)
    ]


def test_dv_files_and_hidden_paths(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    lq.write(
        uri,
        pa.table({"id": range(2000), "p": ["a"] * 1000 + ["b"] * 1000}),
        partition_by=["p"],
        configuration=DV_CONFIG,
    )
    delete_rows(uri, lambda path, n: range(0, n, 3))  # big bitmaps: a DV file
    dv_files = list(Path(uri).glob("deletion_vector_*.bin"))
    assert dv_files
    expected = lakequery_rows(uri)["to_arrow"]
    lq.DeltaTable(uri).optimize(min_file_size=1)  # purges the DVs: old files and DVs unused
    root = Path(uri)
    (root / "_tmp").mkdir()
    (root / "_tmp" / "keep.parquet").write_bytes(b"x")
    (root / ".hidden").write_bytes(b"x")
    (root / "p=a" / ".part.crc").write_bytes(b"x")
    (root / "p=a" / "orphan.parquet").write_bytes(b"x")
    (root / "_change_data").mkdir()
    (root / "_change_data" / "cdc-old.parquet").write_bytes(b"x")
    _age_files(uri, hours=1)
    young = root / "p=a" / "young-orphan.parquet"
    young.write_bytes(b"x")  # a write in flight
    # Its time stamp must lie after vacuum's "now" (the zero-retention cutoff). Written a
    # moment before the call, it did only by chance (the two lie within a few ms, and
    # the file system's clock is coarser than time.time()); it failed once in a clean run.
    ahead = time.time() + 60
    os.utime(young, (ahead, ahead))
    result = lq.DeltaTable(uri).vacuum(retention_hours=0, enforce_retention=False, dry_run=False)
    names = sorted(Path(p).relative_to(root).as_posix() for p in result.files)
    assert "p=a/orphan.parquet" in names and "_change_data/cdc-old.parquet" in names
    assert {d.name for d in dv_files} <= set(names)
    assert not any(
        n.startswith(("_tmp", ".hidden", "_delta_log")) or n.endswith(".crc") for n in names
    )
    assert "p=a/young-orphan.parquet" not in names
    assert (root / "_tmp" / "keep.parquet").exists() and (root / ".hidden").exists()
    assert_readers_agree(uri, expected)


def test_change_data_referenced_by_a_retained_commit_is_kept(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    lq.write(uri, pa.table({"x": [1]}))
    root = Path(uri)
    (root / "_change_data").mkdir()
    (root / "_change_data" / "cdc-1.parquet").write_bytes(b"x")
    (root / "_change_data" / "cdc-2.parquet").write_bytes(b"x")
    commit = {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "UPDATE"}}
    cdc = {
        "cdc": {
            "path": "_change_data/cdc-1.parquet",
            "partitionValues": {},
            "size": 1,
            "dataChange": False,
        }
    }
    _log(uri, 1).write_text(json.dumps(commit) + "\n" + json.dumps(cdc) + "\n")
    _age_files(uri, hours=5)
    result = lq.DeltaTable(uri).vacuum(retention_hours=1, enforce_retention=False)
    assert [Path(p).name for p in result.files] == ["cdc-2.parquet"]


def test_protocol_check_refuses_unknown_writer_features(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    lq.write(uri, pa.table({"x": [1]}))
    protocol = {
        "protocol": {
            "minReaderVersion": 3,
            "minWriterVersion": 7,
            "readerFeatures": ["vacuumProtocolCheck"],
            "writerFeatures": ["vacuumProtocolCheck", "someFutureWriterFeature"],
        }
    }
    info = {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "UPGRADE"}}
    _log(uri, 1).write_text(json.dumps(info) + "\n" + json.dumps(protocol) + "\n")
    assert lq.DeltaTable(uri).snapshot().scan().to_arrow().num_rows == 1  # still readable
    with pytest.raises(UnsupportedFeatureError, match="someFutureWriterFeature"):
        lq.DeltaTable(uri).vacuum()


def test_negative_table_retention_is_refused(tmp_path: Path) -> None:
    # another writer's negative retention would put the cutoff in the future: files
    # written a moment ago (a concurrent writer's, not committed yet) would be deleted
    uri = str(tmp_path / "t")
    with pytest.raises(PropertyError, match="must not be negative"):
        lq.write(uri, pa.table({"x": [1]}), configuration={"delta.logRetentionDuration": "-1 days"})
    lq.write(uri, pa.table({"x": [1]}))
    first = json.loads(
        next(line for line in _log(uri, 0).read_text().splitlines() if "metaData" in line)
    )
    first["metaData"]["configuration"] = {
        "delta.deletedFileRetentionDuration": "interval -1 days",
        "delta.logRetentionDuration": "interval -1 days",
    }
    _log(uri, 1).write_text(json.dumps(first) + "\n")
    inflight = Path(uri) / "part-00000-inflight.parquet"
    inflight.write_bytes(b"PAR1")
    with pytest.raises(PropertyError, match="deletedFileRetentionDuration must not be negative"):
        lq.DeltaTable(uri).vacuum(dry_run=False)
    assert inflight.exists()
    lq.DeltaTable(uri).checkpoint()  # checkpoints are still written
    with pytest.raises(PropertyError, match="logRetentionDuration must not be negative"):
        lq.DeltaTable(uri).cleanup_log()
    assert _log(uri, 0).exists()
    assert lq.DeltaTable(uri).snapshot().scan().to_arrow().num_rows == 1  # still readable


def test_lists_the_table_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    uri = str(tmp_path / "t")
    for i in range(5):
        lq.write(uri, pa.table({"x": [i], "p": [str(i % 2)]}), mode="append", partition_by=["p"])
    lq.write(uri, pa.table({"x": [9], "p": ["0"]}), mode="overwrite")
    _age_files(uri, 1)
    dt = lq.DeltaTable(uri)
    calls: dict[str, int] = {"find": 0, "info": 0, "exists": 0, "ls": 0}
    inside = [False]  # calls the one listing makes internally are part of it
    fs: Any = dt.storage.fs
    for name in calls:
        real = getattr(fs, name)

        def counting(*a: Any, _real: Any = real, _name: str = name, **k: Any) -> Any:
            if inside[0]:
                return _real(*a, **k)
            calls[_name] += 1
            inside[0] = _name == "find"
            try:
                return _real(*a, **k)
            finally:
                inside[0] = False

        monkeypatch.setattr(fs, name, counting)
    result = vacuum(dt.storage, retention_hours=0, enforce_retention=False)
    assert len(result.files) == 5
    assert calls == {"find": 1, "info": 0, "exists": 0, "ls": 0}


def test_loads_the_log_once(tmp_path: Path, log_loads: list[int]) -> None:
    """The live files and the tombstones come from one load of the log (before: the
    tombstones loaded the segment a second time whenever some file was old enough)."""
    uri = str(tmp_path / "t")
    _three_versions(uri)
    _age_removes(uri, 1, 2)  # A's remove is past a 1-hour retention, B's is not
    _age_files(uri, 2)
    storage = lq.DeltaTable(uri).storage
    log_loads.clear()
    result = vacuum(storage, retention_hours=1, enforce_retention=False)
    assert log_loads == [3], log_loads
    # B is still named by a retained tombstone, C is live: only A goes
    assert [Path(p).name for p in result.files] == [
        a["add"]["path"]
        for a in map(json.loads, _log(uri, 0).read_text().splitlines())
        if "add" in a
    ]
