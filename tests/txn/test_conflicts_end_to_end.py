"""Conflict detection end to end (digest §17.4): two writes plan from the same read
version; the first commits, then the second either commits at a later version or fails
with the specific conflict, leaving nothing of itself visible."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lakequery as lq
from lakequery.errors import (
    CommitConflictError,
    ConcurrentAppendError,
    ConcurrentDeleteDeleteError,
    ConcurrentDeleteReadError,
    ConcurrentTransactionError,
    MetadataChangedError,
)
from lakequery.txn import Transaction
from lakequery.writer import WritePlan, write_data_files

SERIALIZABLE = {"delta.isolationLevel": "Serializable"}


def _rows(ids: list[int], day: str = "a") -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "day": [day] * len(ids)})


def _table(
    tmp_path: Path, configuration: dict[str, str] | None = None, partitioned: bool = False
) -> str:
    uri = str(tmp_path / "t")
    data = pa.concat_tables([_rows([1, 2], "a"), _rows([3], "b")])
    lq.write(
        uri,
        data,
        configuration=configuration,
        partition_by=["day"] if partitioned else None,
    )
    return uri


def _stage(uri: str, data: pa.Table, **kwargs: Any) -> tuple[WritePlan, list[dict[str, Any]]]:
    """Plan a write from the current version and write its files; no commit yet."""
    plan = lq.plan_write(uri, data.schema, **kwargs)
    assert plan.state is not None
    return plan, write_data_files(data, plan.state)


def _ids(uri: str) -> list[int]:
    ids: list[int] = (
        lq.DeltaTable(uri).snapshot().scan(columns=["id"]).to_arrow().column("id").to_pylist()
    )
    return sorted(ids)


def _version(uri: str) -> int:
    return lq.DeltaTable(uri).snapshot().version


def _assert_fails_cleanly(
    uri: str,
    second: tuple[WritePlan, list[dict[str, Any]]],
    error: type[CommitConflictError],
) -> None:
    """The second write fails with ``error`` and leaves the table as it was."""
    version, ids = _version(uri), _ids(uri)
    with pytest.raises(error) as info:
        lq.commit_write(*second)
    assert type(info.value) is error
    assert _version(uri) == version
    assert _ids(uri) == ids
    live = set(lq.DeltaTable(uri).snapshot().files().column("path").to_pylist())
    assert not live & {a["path"] for a in second[1]}


def test_append_vs_append_both_commit(tmp_path: Path) -> None:
    uri = _table(tmp_path, SERIALIZABLE)
    first = _stage(uri, _rows([10]), mode="append")
    second = _stage(uri, _rows([20]), mode="append")
    assert lq.commit_write(*first).version == 1
    result = lq.commit_write(*second)
    assert (result.version, result.attempts) == (2, 2)
    assert _ids(uri) == [1, 2, 3, 10, 20]


def test_overwrite_vs_append_serializable_conflicts(tmp_path: Path) -> None:
    uri = _table(tmp_path, SERIALIZABLE)
    overwrite = _stage(uri, _rows([7]), mode="overwrite")
    lq.commit_write(*_stage(uri, _rows([10]), mode="append"))
    _assert_fails_cleanly(uri, overwrite, ConcurrentAppendError)
    assert _ids(uri) == [1, 2, 3, 10]


def test_overwrite_vs_blind_append_write_serializable_commits(tmp_path: Path) -> None:
    # §17.4 step 6: under WriteSerializable a blind append's files are no candidates, the
    # append removed nothing (steps 7, 8): the overwrite commits, ordered before the append.
    uri = _table(tmp_path)
    overwrite = _stage(uri, _rows([7]), mode="overwrite")
    lq.commit_write(*_stage(uri, _rows([10]), mode="append"))
    result = lq.commit_write(*overwrite)
    assert (result.version, result.attempts) == (2, 2)
    assert _ids(uri) == [7, 10]


def test_overwrite_vs_non_blind_append_write_serializable_conflicts(tmp_path: Path) -> None:
    uri = _table(tmp_path)
    overwrite = _stage(uri, _rows([7]), mode="overwrite")
    # an "append" that read the table first is not blind (an overwrite matching nothing)
    lq.commit_write(*_stage(uri, _rows([10], "c"), mode="overwrite", predicate="day = 'c'"))
    _assert_fails_cleanly(uri, overwrite, ConcurrentAppendError)


def test_two_overwrites_conflict(tmp_path: Path) -> None:
    uri = _table(tmp_path)
    first = _stage(uri, _rows([7]), mode="overwrite")
    second = _stage(uri, _rows([8]), mode="overwrite")
    lq.commit_write(*first)
    # the winner added files (not blind) the whole-table read covers: step 6 comes first
    _assert_fails_cleanly(uri, second, ConcurrentAppendError)
    assert _ids(uri) == [7]


def test_two_deletes_of_the_whole_table_conflict(tmp_path: Path) -> None:
    uri = _table(tmp_path)
    txns = []
    for _ in range(2):
        dt = lq.DeltaTable(uri)
        snap = dt.snapshot()
        txn = Transaction(dt.storage, snap, operation="DELETE")
        txn.read_whole_table()
        txn.remove_files(_removes(snap))
        txns.append(txn)
    assert txns[0].commit().version == 1
    with pytest.raises(ConcurrentDeleteReadError):
        txns[1].commit()
    assert _version(uri) == 1 and _ids(uri) == []


def test_two_removes_of_one_file_conflict(tmp_path: Path) -> None:
    uri = _table(tmp_path)
    txns = []
    for _ in range(2):
        dt = lq.DeltaTable(uri)
        snap = dt.snapshot()
        txn = Transaction(dt.storage, snap, operation="DELETE")
        txn.remove_files(_removes(snap)[:1])  # recorded no read: only step 8 applies
        txns.append(txn)
    txns[0].commit()
    with pytest.raises(ConcurrentDeleteDeleteError):
        txns[1].commit()
    assert _version(uri) == 1


def _removes(snap: lq.Snapshot) -> list[dict[str, Any]]:
    return [
        {"path": p, "deletionTimestamp": 1, "dataChange": True}
        for p in snap.files().column("path").to_pylist()
    ]


@pytest.mark.parametrize(("append_day", "conflict"), [("b", None), ("a", ConcurrentAppendError)])
def test_partition_overwrite_vs_append(
    tmp_path: Path, append_day: str, conflict: type[CommitConflictError] | None
) -> None:
    uri = _table(tmp_path, SERIALIZABLE, partitioned=True)
    overwrite = _stage(uri, _rows([7], "a"), mode="overwrite", predicate="day = 'a'")
    lq.commit_write(*_stage(uri, _rows([10], append_day), mode="append"))
    if conflict is None:
        assert lq.commit_write(*overwrite).version == 2
        assert _ids(uri) == [3, 7, 10]
    else:
        _assert_fails_cleanly(uri, overwrite, conflict)
        assert _ids(uri) == [1, 2, 3, 10]


def test_disjoint_partition_overwrites_both_commit(tmp_path: Path) -> None:
    uri = _table(tmp_path, SERIALIZABLE, partitioned=True)
    first = _stage(uri, _rows([7], "a"), mode="overwrite", predicate="day = 'a'")
    second = _stage(uri, _rows([8], "b"), mode="overwrite", predicate="day = 'b'")
    lq.commit_write(*first)
    assert lq.commit_write(*second).version == 2
    assert _ids(uri) == [7, 8]


@pytest.mark.parametrize("loser", ["append", "overwrite", "metadata"])
def test_metadata_change_conflicts_with_anything(tmp_path: Path, loser: str) -> None:
    uri = _table(tmp_path)
    if loser == "metadata":
        second = _stage(uri, _rows([20]), mode="append", configuration={"owner": "b"})
    else:
        second = _stage(uri, _rows([20]), mode=loser)  # type: ignore[arg-type]
    wide = _rows([30]).append_column("extra", pa.array(["x"]))
    lq.commit_write(*_stage(uri, wide, mode="append", schema_mode="merge"))
    _assert_fails_cleanly(uri, second, MetadataChangedError)


def test_set_table_properties_vs_append(tmp_path: Path) -> None:
    uri = _table(tmp_path)
    dt = lq.DeltaTable(uri)
    snap = dt.snapshot()
    txn = Transaction(dt.storage, snap, operation="SET TBLPROPERTIES")
    config = {**snap.metadata.configuration, "owner": "me"}
    txn.set_metadata(dataclasses.replace(snap.metadata, configuration=config))
    append = _stage(uri, _rows([20]), mode="append")
    txn.commit()
    _assert_fails_cleanly(uri, append, MetadataChangedError)


def test_same_app_id_conflicts(tmp_path: Path) -> None:
    uri = _table(tmp_path)
    first = _stage(uri, _rows([10]), mode="append", app_id="stream", app_version=1)
    second = _stage(uri, _rows([20]), mode="append", app_id="stream", app_version=2)
    other = _stage(uri, _rows([30]), mode="append", app_id="other", app_version=1)
    lq.commit_write(*first)
    _assert_fails_cleanly(uri, second, ConcurrentTransactionError)
    assert lq.commit_write(*other).version == 2  # another app id does not conflict
    assert lq.DeltaTable(uri).snapshot().txns == {"stream": 1, "other": 1}


# -- found by a concurrency hunt: each interleaving is A planned, B committed, A commits -----


def _after_other_commit(monkeypatch: pytest.MonkeyPatch, other: Any) -> None:
    """Runs ``other()`` once, just before the next transaction's first commit attempt."""
    pending = [other]
    original = Transaction.commit

    def commit(self: Transaction, *args: Any, **kwargs: Any) -> Any:
        if pending:
            pending.pop()()
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Transaction, "commit", commit)


def test_app_id_write_is_not_applied_twice_on_an_identity_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both writes moved the identity high-water mark, so the identity rebase planned A
    again on B's version, which holds B's txn for the same app id, and committed it: the
    rows twice."""
    uri = str(tmp_path / "t")
    lq.write(uri, pa.table({"name": ["a"]}), identity={"id": lq.Identity(start=1, step=1)})
    batch = pa.table({"name": ["x", "y"]})
    _after_other_commit(
        monkeypatch, lambda: lq.write(uri, batch, mode="append", app_id="job", app_version=1)
    )
    with pytest.raises(ConcurrentTransactionError):
        lq.write(uri, batch, mode="append", app_id="job", app_version=1)
    names = lq.DeltaTable(uri).snapshot().scan().to_arrow().column("name").to_pylist()
    assert sorted(names) == ["a", "x", "y"]


def test_app_id_write_racing_the_table_s_creation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri = str(tmp_path / "t")
    batch = pa.table({"id": [1, 2]})
    _after_other_commit(
        monkeypatch, lambda: lq.write(uri, batch, mode="append", app_id="job", app_version=1)
    )
    with pytest.raises(ConcurrentTransactionError):
        lq.write(uri, batch, mode="append", app_id="job", app_version=1)
    assert _ids(uri) == [1, 2]


def test_creation_race_against_a_table_with_constraints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loser of a creation race appended when the schemas matched, though its rows
    were never checked against the winner's CHECK constraint (-5 with ``id > 0``)."""
    uri = str(tmp_path / "t")
    config = {"delta.constraints.id_pos": "id > 0"}
    _after_other_commit(
        monkeypatch, lambda: lq.write(uri, _rows([1]), mode="append", configuration=config)
    )
    with pytest.raises(lq.TableAlreadyExistsError, match="properties"):
        lq.write(uri, _rows([-5]), mode="append")
    assert _ids(uri) == [1]


def test_row_tracking_enablement_sees_a_concurrent_append(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The enablement re-adds files with dataChange=false, so it ran as SnapshotIsolation
    and missed the append: that file kept no row ids on a table that promises them."""
    uri = _table(tmp_path)
    _after_other_commit(monkeypatch, lambda: lq.write(uri, _rows([9]), mode="append"))
    lq.DeltaTable(uri).alter.set_properties({"delta.enableRowTracking": "true"})
    files = lq.DeltaTable(uri).snapshot().files()
    assert files.column("base_row_id").null_count == 0
    got = lq.DeltaTable(uri).snapshot().scan(row_tracking=True).to_arrow()
    assert sorted(got.column("id").to_pylist()) == [1, 2, 3, 9]


@pytest.mark.parametrize("partitioned", [False, True])
def test_schema_merging_append_beside_an_append(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, partitioned: bool
) -> None:
    """An append that adds a column reads nothing: a concurrent append covers none of its
    reads (digest §17.4 step 6). Unpartitioned, every concurrent add counted as read."""
    uri = _table(tmp_path, partitioned=partitioned)
    _after_other_commit(monkeypatch, lambda: lq.write(uri, _rows([7]), mode="append"))
    wider = _rows([8], "c").append_column("note", pa.array(["x"]))
    lq.write(uri, wider, mode="append", schema_mode="merge")
    assert _ids(uri) == [1, 2, 3, 7, 8]


def _others_commit_and_clean_up(uri: str, commits: int = 4) -> None:
    """Other writers commit and checkpoint; then a log cleanup with a short retention
    removes every commit below the checkpoint (they are made to look a day old)."""
    import os
    import time

    for i in range(commits):
        lq.write(uri, _rows([100 + i]), mode="append")
    lq.DeltaTable(uri).checkpoint()
    log = Path(uri) / "_delta_log"
    day_ago = time.time() - 26 * 3600
    for f in log.glob("*.json"):
        os.utime(f, (day_ago, day_ago))
    assert lq.DeltaTable(uri).cleanup_log(retention_hours=1).files_deleted


def test_a_commit_never_lands_in_a_gap_log_cleanup_left(tmp_path: Path) -> None:
    """A transaction open while others commit and log cleanup removes their commits would
    otherwise create the commit of its read version + 1 below the checkpoint, where no
    reader sees it: it fails as a conflict instead, and nothing of it is visible."""
    uri = _table(tmp_path)
    second = _stage(uri, _rows([7]), mode="append")
    _others_commit_and_clean_up(uri)
    version, ids = _version(uri), _ids(uri)
    with pytest.raises(CommitConflictError, match="removed by log cleanup"):
        lq.commit_write(*second)
    assert (_version(uri), _ids(uri)) == (version, ids)
    assert not (Path(uri) / "_delta_log" / f"{1:020d}.json").exists()


def test_a_winner_removed_by_log_cleanup_after_a_lost_race(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race for read version + 1 is lost, and log cleanup removes the winner before
    it is read: the next attempt would succeed in the gap; it is a conflict instead."""
    from lakequery import txn as txn_module

    uri = _table(tmp_path)
    second = _stage(uri, _rows([7]), mode="append")
    lq.write(uri, _rows([100]), mode="append")  # wins version 1
    listing = txn_module.list_log
    cleaned: list[bool] = []

    def clean_first(storage: Any, version: int) -> Any:
        if not cleaned:
            cleaned.append(True)
            _others_commit_and_clean_up(uri, commits=2)
        return listing(storage, version)

    monkeypatch.setattr(txn_module, "list_log", clean_first)
    with pytest.raises(CommitConflictError, match="removed by log cleanup"):
        lq.commit_write(*second)
    assert cleaned and 7 not in _ids(uri)
    assert not (Path(uri) / "_delta_log" / f"{1:020d}.json").exists()


ENABLING = {
    "deletion vectors": {"delta.enableDeletionVectors": "true"},
    "in-commit timestamps": {"delta.enableInCommitTimestamps": "true"},
    "v2 checkpoints": {"delta.checkpointPolicy": "v2"},
    "column mapping": {"delta.columnMapping.mode": "name"},
}


@pytest.mark.parametrize("feature", sorted(ENABLING))
def test_a_winner_that_only_turns_a_feature_on(tmp_path: Path, feature: str) -> None:
    """Digest 17.4 2(c): a transaction that changes no metadata adopts the winner's
    metadata when it only turns an allow-listed feature on, and commits under it."""
    uri = _table(tmp_path)
    second = _stage(uri, _rows([7]), mode="append")
    lq.DeltaTable(uri).alter.set_properties(ENABLING[feature])
    result = lq.commit_write(*second)
    assert result.version == 2
    snap = lq.DeltaTable(uri).snapshot()
    config = snap.metadata.configuration
    assert all(config.get(k) == v for k, v in ENABLING[feature].items())
    assert _ids(uri) == [1, 2, 3, 7]
    import deltalake

    query = deltalake.QueryBuilder().register("t", deltalake.DeltaTable(uri))
    theirs = pa.table(query.execute("SELECT id FROM t").read_all()).column("id").to_pylist()
    assert sorted(theirs) == [1, 2, 3, 7]
    if feature == "in-commit timestamps":
        log = Path(uri) / "_delta_log"
        ict = [
            json.loads((log / f"{v:020d}.json").read_text().splitlines()[0])["commitInfo"].get(
                "inCommitTimestamp"
            )
            for v in (1, 2)
        ]
        assert ict[0] is not None and ict[1] is not None and ict[1] > ict[0]


@pytest.mark.parametrize(
    "winner",
    [
        {"delta.enableRowTracking": "true"},
        {"owner": "x"},
        {"delta.enableDeletionVectors": "false"},
        {"delta.appendOnly": "true", "delta.enableDeletionVectors": "true"},
    ],
)
def test_other_metadata_winners_stay_conflicts(tmp_path: Path, winner: dict[str, str]) -> None:
    uri = _table(tmp_path)
    second = _stage(uri, _rows([7]), mode="append")
    lq.DeltaTable(uri).alter.set_properties(winner)
    _assert_fails_cleanly(uri, second, MetadataChangedError)


def test_a_feature_turned_on_does_not_excuse_a_metadata_change(tmp_path: Path) -> None:
    uri = _table(tmp_path)
    second = _stage(
        uri, _rows([7]).append_column("n", pa.array([1])), mode="append", schema_mode="merge"
    )
    lq.DeltaTable(uri).alter.set_properties({"delta.enableDeletionVectors": "true"})
    _assert_fails_cleanly(uri, second, MetadataChangedError)


def test_only_properties_that_turn_features_on_are_adopted() -> None:
    from lakequery.metadata import Metadata
    from lakequery.protocol.conflicts import only_enables_features

    def meta(**config: str) -> Metadata:
        return Metadata("id", '{"type":"struct","fields":[]}', (), config)

    ict = {"delta.enableInCommitTimestamps": "true"}
    added = {"delta.inCommitTimestampEnablementVersion": "5"}
    assert only_enables_features(meta(), meta(**ict, **added))
    assert only_enables_features(meta(), meta(**{"delta.enableDeletionVectors": "TRUE"}))
    # a companion key moved on a table that has the feature, or added alone
    moved = {"delta.inCommitTimestampEnablementVersion": "9"}
    assert not only_enables_features(meta(**ict, **added), meta(**ict, **moved))
    assert not only_enables_features(meta(), meta(**added))
    assert not only_enables_features(
        meta(**{"delta.columnMapping.maxColumnId": "3"}),
        meta(**{"delta.columnMapping.maxColumnId": "1"}),
    )
    assert not only_enables_features(meta(owner="a"), meta())  # a property removed
    assert not only_enables_features(meta(), meta(**{"delta.checkpointPolicy": "classic"}))
