"""``DeltaTable.repair()`` (FSCK REPAIR TABLE) after data files were deleted behind the
log's back: the dry run commits nothing, the real run makes the table readable again, by
lakequery and by ``deltalake``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from readers_kit import deltalake_table, rows
from tablekit import read_actions

import lakequery as lq
from lakequery.errors import LakeQueryError


@pytest.fixture
def uri(tmp_path: Path) -> str:
    return str(tmp_path / "table")


def commit(uri: str, version: int) -> list[dict[str, Any]]:
    return read_actions(Path(uri) / "_delta_log" / f"{version:020d}.json")


def build(uri: str) -> list[str]:
    """A partitioned table of four files (one in a partition whose name needs escaping);
    returns the live paths."""
    for g, ids in (("a", [1, 2]), ("b c", [3]), ("d", [4, 5]), ("e%f", [6])):
        data = pa.table({"id": ids, "g": [g] * len(ids)})
        lq.write(uri, data, mode="append", partition_by=["g"])
    return sorted(lq.DeltaTable(uri).snapshot().files().column("path").to_pylist())


def test_dry_run_then_repair(uri: str) -> None:
    paths = build(uri)
    lost = [p for p in paths if p.startswith(("g=b", "g=e"))]
    assert len(lost) == 2
    for p in lost:
        os.remove(os.path.join(uri, p))
    dt = lq.DeltaTable(uri)
    with pytest.raises((LakeQueryError, OSError)):
        dt.snapshot().scan().to_arrow()  # the table is unreadable as it stands

    dry = dt.repair()
    assert (dry.dry_run, dry.files_removed, dry.version, dry.read_version) == (
        True,
        tuple(sorted(lost)),
        None,
        3,
    )
    assert not (Path(uri) / "_delta_log" / f"{4:020d}.json").exists()
    assert dt.snapshot().version == 3

    done = dt.repair(dry_run=False)
    assert (done.dry_run, done.files_removed, done.version) == (False, tuple(sorted(lost)), 4)
    actions = commit(uri, 4)
    info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
    assert info["operation"] == "FSCK"
    removes = [a["remove"] for a in actions if "remove" in a]
    assert len(removes) == 2 and all(r["dataChange"] for r in removes)
    assert all("partitionValues" in r and r["size"] > 0 for r in removes)
    assert not any("add" in a for a in actions)

    ours = dt.snapshot().scan().to_arrow()
    assert sorted(ours["id"].to_pylist()) == [1, 2, 4, 5]
    assert rows(deltalake_table(uri).select(ours.column_names)) == rows(ours)

    again = dt.repair(dry_run=False)  # nothing left to repair: no commit
    assert (again.files_removed, again.version) == ((), None)
    assert dt.snapshot().version == 4


def test_nothing_missing_commits_nothing(uri: str) -> None:
    build(uri)
    result = lq.DeltaTable(uri).repair(dry_run=False)
    assert (result.files_removed, result.version) == ((), None)
    assert lq.DeltaTable(uri).snapshot().version == 3


def test_missing_file_with_a_deletion_vector(uri: str) -> None:
    """The remove of a file with a DV names the DV (extended remove)."""
    lq.write(uri, pa.table({"id": [1, 2, 3]}))
    lq.write(uri, pa.table({"id": [4, 5]}), mode="append")
    dt = lq.DeltaTable(uri)
    dt.delete("id = 2")
    files = dt.snapshot().files().to_pylist()
    with_dv = next(f for f in files if f["deletion_vector"] is not None)
    os.remove(os.path.join(uri, with_dv["path"]))
    result = dt.repair(dry_run=False)
    assert result.files_removed == (with_dv["path"],)
    (remove,) = [a["remove"] for a in commit(uri, result.version or 0) if "remove" in a]
    assert remove["deletionVector"]["cardinality"] == 1
    assert sorted(dt.snapshot().scan().to_arrow()["id"].to_pylist()) == [4, 5]
    assert sorted(deltalake_table(uri)["id"].to_pylist()) == [4, 5]


def test_memory_storage() -> None:
    uri = "memory://repair-memory-test"
    lq.write(uri, pa.table({"id": [1]}))
    lq.write(uri, pa.table({"id": [2]}), mode="append")
    dt = lq.DeltaTable(uri)
    path = dt.snapshot().files().column("path")[0].as_py()
    dt.storage.delete(dt.storage.join(path))
    assert dt.repair().files_removed == (path,)
    assert dt.repair(dry_run=False).version == 2
    assert dt.snapshot().scan().to_arrow().num_rows == 1


def test_repair_against_concurrent_commits(uri: str) -> None:
    """FSCK from a stale snapshot: a concurrent append does not conflict (the appended
    file stays); a concurrent removal of the same missing file does."""
    from lakequery.errors import ConcurrentDeleteReadError
    from lakequery.management.repair import repair

    paths = build(uri)
    lost = next(p for p in paths if p.startswith("g=a"))
    os.remove(os.path.join(uri, lost))
    dt = lq.DeltaTable(uri)
    stale = dt.snapshot()
    lq.write(uri, pa.table({"id": [7], "g": ["z"]}), mode="append")  # version 4
    result = repair(dt.storage, stale, dry_run=False)
    assert (result.files_removed, result.version, result.read_version) == ((lost,), 5, 3)
    assert sorted(dt.snapshot().scan().to_arrow()["id"].to_pylist()) == [3, 4, 5, 6, 7]

    other = next(p for p in paths if p.startswith("g=d"))
    os.remove(os.path.join(uri, other))
    stale = dt.snapshot()
    dt.delete("g = 'd'")  # removes the same (missing) file first, without reading it
    with pytest.raises(ConcurrentDeleteReadError):  # FSCK read the file it removes
        repair(dt.storage, stale, dry_run=False)
    assert dt.repair().files_removed == ()
