"""Row ids under a concurrent writer: a DML statement that read an older version commits
after a concurrent append (WriteSerializable lets it retry past it); the retried commit
re-assigns its new files' ``baseRowId`` above the winner's high-water mark, so ids stay
unique, the winner's rows keep theirs and the statement's rows keep their old ids."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from rtkit import COW, DVS, check_invariants, deltalake_rows, high_water_mark, rows, tracked, values

import lakequery as lq


def _pinned(uri: str, version: int) -> lq.DeltaTable:
    """A DeltaTable whose statements read ``version`` (as if they started before the
    commits after it)."""
    dt = lq.DeltaTable(uri)
    snap = dt.snapshot(version=version)
    dt.snapshot = lambda *a, **k: snap  # type: ignore[method-assign]
    return dt


@pytest.mark.parametrize("config", [DVS, COW], ids=["dv", "cow"])
@pytest.mark.parametrize("kind", ["update", "merge"])
def test_dml_after_a_concurrent_append(tmp_path: Path, config: dict[str, str], kind: str) -> None:
    uri = str(tmp_path / "t")
    lq.write(uri, rows([1, 2, 3]), configuration=config)
    lq.write(uri, rows([4, 5]), mode="append")
    start = tracked(uri)
    dml = _pinned(uri, 1)
    lq.write(uri, rows([6, 7]), mode="append")  # version 2: the concurrent winner
    winner = tracked(uri)
    mark = high_water_mark(uri)
    if kind == "update":
        m = dml.update("key IN (2, 5)", set={"v": "v + 1"})
        changed, inserted = [2, 5], []
    else:
        source = pa.table({"key": pa.array([2, 5, 9], pa.int64()), "v": pa.array([1, 1, 1])})
        m = (
            dml.merge(source, on="t.key = s.key", source_alias="s", target_alias="t")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        )
        changed, inserted = [2, 5], [9]
    assert m.committed and m.version == 3
    after = tracked(uri)
    for key, (row_id, version) in winner.items():
        if key in changed:
            assert after[key] == (start[key][0], 3)
        else:
            assert after[key] == (row_id, version)
    for key in inserted:
        assert after[key][0] > mark and after[key][1] == 3
    assert deltalake_rows(uri) == values(uri)
    check_invariants(uri)
