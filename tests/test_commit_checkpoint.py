"""Checkpoints after commits: written every delta.checkpointInterval versions, used by
readers, and never able to fail the commit that triggered them."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pyarrow as pa
import pytest

import lakequery as lq


def _append(uri: str, i: int) -> lq.WriteResult:
    return lq.write(uri, pa.table({"i": [i], "s": [f"row {i}"]}), mode="append")


def test_checkpoint_every_interval_and_readers_use_it(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    lq.write(
        uri, pa.table({"i": [0], "s": ["row 0"]}), configuration={"delta.checkpointInterval": "3"}
    )
    for i in range(1, 8):
        _append(uri, i)
    log = tmp_path / "t" / "_delta_log"
    assert sorted(p.name for p in log.glob("*.checkpoint.parquet")) == [
        f"{3:020d}.checkpoint.parquet",
        f"{6:020d}.checkpoint.parquet",
    ]
    hint = json.loads((log / "_last_checkpoint").read_text())
    assert hint["version"] == 6
    # Remove the commits the checkpoint covers: the table must still read completely.
    for v in range(6):
        (log / f"{v:020d}.json").unlink()
    rows = lq.DeltaTable(uri).snapshot().scan().to_arrow().column("i").to_pylist()
    assert sorted(rows) == list(range(8))


def test_failed_checkpoint_never_fails_the_commit(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    uri = str(tmp_path / "t")
    lq.write(uri, pa.table({"i": [0], "s": ["x"]}), configuration={"delta.checkpointInterval": "2"})
    _append(uri, 1)
    # A directory squatting on the checkpoint's final name makes its rename fail.
    blocker = tmp_path / "t" / "_delta_log" / f"{2:020d}.checkpoint.parquet"
    blocker.mkdir()
    with caplog.at_level(logging.WARNING, logger="lakequery.txn"):
        result = _append(uri, 2)
    assert result.version == 2
    assert any("checkpoint of version 2 failed" in r.getMessage() for r in caplog.records)
    assert blocker.is_dir()  # nothing was written over it
    snap = lq.DeltaTable(uri).snapshot()
    assert snap.version == 2
    assert sorted(snap.scan().to_arrow().column("i").to_pylist()) == [0, 1, 2]
    assert not list((tmp_path / "t" / "_delta_log").glob(".tmp-*"))
    blocker.rmdir()
    _append(uri, 3)
    assert _append(uri, 4).version == 4  # the next interval checkpoints again
    assert (tmp_path / "t" / "_delta_log" / f"{4:020d}.checkpoint.parquet").is_file()


def test_an_automatic_checkpoint_loads_the_log_once(tmp_path: Path, log_loads: list[int]) -> None:
    """The checkpoint takes the state and its adds and tombstones from one load of the
    segment, and the log cleanup after it takes the committed metadata and protocol: a
    commit that checkpoints loads its log once after committing (before: three times)."""
    uri = str(tmp_path / "t")
    lq.write(uri, pa.table({"i": [0], "s": ["x"]}), configuration={"delta.checkpointInterval": "3"})
    _append(uri, 1)
    _append(uri, 2)
    log_loads.clear()
    assert _append(uri, 3).version == 3
    assert (tmp_path / "t" / "_delta_log" / f"{3:020d}.checkpoint.parquet").exists()
    # the append replays the table once to write, the checkpoint once after it
    assert len(log_loads) == 2, log_loads
    rows = lq.DeltaTable(uri).snapshot().scan().to_arrow().column("i").to_pylist()
    assert sorted(rows) == [0, 1, 2, 3]
