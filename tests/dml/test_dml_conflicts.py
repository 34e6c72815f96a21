"""Concurrent DML and appends (digest §17).

Two transactions read the same version: the DML runs against a ``DeltaTable`` whose
``snapshot`` is pinned (on that one instance) to the version read before a concurrent
commit, so it loses the race for the next version and must either commit after the winner
(checked against it) or raise the right conflict, with nothing half-written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from dmlkit import Clause, Oracle, check_all_engines, commit_actions, run_merge

import lakequery as lq

NO_DV = {"delta.enableDeletionVectors": "false"}
MODES = pytest.mark.parametrize("mode", [{}, NO_DV], ids=["dv", "cow"])


def pinned(uri: str, version: int) -> lq.DeltaTable:
    """A DeltaTable whose statements read ``version`` (as if they started before the
    commits after it)."""
    dt = lq.DeltaTable(uri)
    snap = dt.snapshot(version=version)
    dt.snapshot = lambda *a, **k: snap  # type: ignore[method-assign]
    return dt


def _table(n: int = 40, offset: int = 0) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(offset, offset + n), pa.int64()),
            "p": pa.array([["x", "y"][i % 2] for i in range(offset, offset + n)], pa.string()),
            "v": pa.array([i % 5 for i in range(offset, offset + n)], pa.int64()),
        }
    )


def _make(uri: str, partitioned: bool, config: dict[str, str]) -> pa.Table:
    t = _table()
    lq.write(
        uri, t.slice(0, 20), partition_by=["p"] if partitioned else None, configuration={**config}
    )
    lq.write(uri, t.slice(20), mode="append")
    return t


def _versions(uri: str) -> list[int]:
    return sorted(int(p.name[:20]) for p in (Path(uri) / "_delta_log").glob("*.json"))


def _statement(kind: str) -> Any:
    """(run on a DeltaTable, run on the oracle)."""
    if kind == "delete":
        return (lambda dt: dt.delete("v = 1"), lambda o: o.delete("v = 1"))
    if kind == "update":
        return (
            lambda dt: dt.update("v = 2", set={"v": "v * 100"}),
            lambda o: o.update("v = 2", {"v": "v * 100"}),
        )
    src = pa.table(
        {"id": pa.array([3, 4, 500], pa.int64()), "v": pa.array([-3, -4, -5], pa.int64())}
    )
    clauses = [Clause("matched", "update", None, None), Clause("not_matched", "insert", None, None)]
    return (lambda dt: run_merge(dt, src, clauses), lambda o: o.merge(src, "t.id = s.id", clauses))


@MODES
@pytest.mark.parametrize("partitioned", [False, True])
@pytest.mark.parametrize("kind", ["delete", "update", "merge"])
def test_dml_vs_blind_append_write_serializable(
    tmp_path: Path, mode: dict[str, str], partitioned: bool, kind: str
) -> None:
    uri = str(tmp_path / "t")
    t = _make(uri, partitioned, mode)
    dml = pinned(uri, 1)
    extra = _table(10, offset=1000)
    assert lq.write(uri, extra, mode="append").version == 2  # the concurrent winner
    run, oracle_run = _statement(kind)
    m = run(dml)
    assert m.committed and m.version == 3
    info = next(a["commitInfo"] for a in commit_actions(uri, 3) if "commitInfo" in a)
    assert info["readVersion"] == 1
    # serial order: the DML, then the append (WriteSerializable)
    o = Oracle(t, 1)
    oracle_run(o)
    o.run("INSERT INTO t BY NAME SELECT * FROM src", extra)
    check_all_engines(uri, o.table())


@MODES
@pytest.mark.parametrize("kind", ["delete", "update", "merge"])
def test_dml_vs_append_serializable_unpartitioned(
    tmp_path: Path, mode: dict[str, str], kind: str
) -> None:
    uri = str(tmp_path / "t")
    t = _make(uri, False, {**mode, "delta.isolationLevel": "Serializable"})
    dml = pinned(uri, 1)
    extra = _table(10, offset=1000)
    lq.write(uri, extra, mode="append")
    run, oracle_run = _statement(kind)
    with pytest.raises(lq.ConcurrentAppendError):
        run(dml)
    assert _versions(uri) == [0, 1, 2]
    # retried from the latest version, the statement sees the appended rows
    m = run(lq.DeltaTable(uri))
    assert m.version == 3
    o = Oracle(t, 1)
    o.run("INSERT INTO t BY NAME SELECT * FROM src", extra)
    oracle_run(o)
    check_all_engines(uri, o.table())


@MODES
@pytest.mark.parametrize(
    ("predicate", "append_partition", "conflict"),
    [
        ("p = 'x'", "x", True),
        ("p = 'x'", "y", False),
        ("p = 'x' AND v = 1", "y", False),
        ("p = 'x' AND v = 1", "x", True),
        ("v = 1", "y", True),  # no partition part: reads every partition
    ],
)
def test_delete_vs_append_serializable_partitioned(
    tmp_path: Path, mode: dict[str, str], predicate: str, append_partition: str, conflict: bool
) -> None:
    uri = str(tmp_path / "t")
    t = _make(uri, True, {**mode, "delta.isolationLevel": "Serializable"})
    dml = pinned(uri, 1)
    extra = pa.table(
        {
            "id": pa.array([1000, 1001], pa.int64()),
            "p": [append_partition] * 2,
            "v": pa.array([1, 2], pa.int64()),
        }
    )
    lq.write(uri, extra, mode="append")
    o = Oracle(t, 1)
    if conflict:
        with pytest.raises(lq.ConcurrentAppendError):
            dml.delete(predicate)
        assert _versions(uri) == [0, 1, 2]
        lq.DeltaTable(uri).delete(predicate)
        o.run("INSERT INTO t BY NAME SELECT * FROM src", extra)
        o.delete(predicate)
    else:
        m = dml.delete(predicate)
        assert m.version == 3
        o.delete(predicate)
        o.run("INSERT INTO t BY NAME SELECT * FROM src", extra)
    check_all_engines(uri, o.table())


@MODES
@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("delete", "delete"),
        ("update", "delete"),
        ("delete", "update"),
        ("merge", "delete"),
        ("delete", "merge"),
    ],
)
def test_two_dml_same_file_conflict(
    tmp_path: Path, mode: dict[str, str], first: str, second: str
) -> None:
    uri = str(tmp_path / "t")
    t = _make(uri, False, mode)
    loser = pinned(uri, 1)
    stmts = {
        "delete": (lambda dt: dt.delete("id = 5"), lambda o: o.delete("id = 5")),
        "update": (
            lambda dt: dt.update("id = 6", set={"v": "99"}),
            lambda o: o.update("id = 6", {"v": "99"}),
        ),
    }
    src = pa.table({"id": pa.array([7], pa.int64()), "v": pa.array([77], pa.int64())})
    cl = [Clause("matched", "update", None, None)]
    stmts["merge"] = (lambda dt: run_merge(dt, src, cl), lambda o: o.merge(src, "t.id = s.id", cl))
    stmts["delete2"] = (lambda dt: dt.delete("id = 8"), lambda o: o.delete("id = 8"))
    run1, o1 = stmts[first]
    run2, o2 = stmts[second if second != first else "delete2"]
    assert run1(lq.DeltaTable(uri)).version == 2
    # the winner re-adds the file it changed (with a DV, or rewritten): on an unpartitioned
    # table that is a non-blind add the loser's read covers, so check 6 (concurrent append)
    # of digest §17.4 fires before check 7 (delete vs read) - as in Delta Spark
    with pytest.raises(
        (lq.ConcurrentAppendError, lq.ConcurrentDeleteReadError, lq.ConcurrentDeleteDeleteError)
    ):
        run2(loser)
    assert _versions(uri) == [0, 1, 2]
    assert run2(lq.DeltaTable(uri)).version == 3
    o = Oracle(t, 1)
    o1(o)
    o2(o)
    check_all_engines(uri, o.table())


@MODES
@pytest.mark.parametrize("loser_predicate", ["p = 'x' AND v = 1", "p = 'x'", "v = 1"])
def test_concurrent_delete_read(tmp_path: Path, mode: dict[str, str], loser_predicate: str) -> None:
    """The winner removes whole files (partition delete, no adds) that the loser read."""
    uri = str(tmp_path / "t")
    t = _make(uri, True, mode)
    loser = pinned(uri, 1)
    m = lq.DeltaTable(uri).delete("p = 'x'")
    assert m.num_removed_files == 2 and m.num_added_files == 0
    with pytest.raises((lq.ConcurrentDeleteReadError, lq.ConcurrentDeleteDeleteError)):
        loser.delete(loser_predicate)
    assert _versions(uri) == [0, 1, 2]
    assert lq.DeltaTable(uri).delete(loser_predicate).committed is (loser_predicate == "v = 1")
    o = Oracle(t, 1)
    o.delete("p = 'x'")
    o.delete(loser_predicate)
    check_all_engines(uri, o.table())


@MODES
def test_delete_whole_table_vs_dml(tmp_path: Path, mode: dict[str, str]) -> None:
    """DELETE without predicate reads the whole table: any concurrent remove conflicts."""
    uri = str(tmp_path / "t")
    _make(uri, False, mode)
    loser = pinned(uri, 1)
    lq.DeltaTable(uri).delete("id = 30")
    with pytest.raises(lq.errors.CommitConflictError):
        loser.delete()
    assert _versions(uri) == [0, 1, 2]


def test_partition_delete_vs_dml_in_other_partition(tmp_path: Path) -> None:
    """Statements on disjoint partitions do not conflict (WriteSerializable)."""
    uri = str(tmp_path / "t")
    t = _make(uri, True, {})
    loser = pinned(uri, 1)
    lq.DeltaTable(uri).delete("p = 'y' AND v = 1")
    m = loser.delete("p = 'x'")
    assert m.version == 3
    o = Oracle(t, 1)
    o.delete("p = 'y' AND v = 1")
    o.delete("p = 'x'")
    check_all_engines(uri, o.table())


def test_threaded_dml_and_appends_end_consistent(tmp_path: Path) -> None:
    """A real race: appends and deletes from threads; every statement either commits or
    raises a conflict, and the final table is one of the serial outcomes' row counts."""
    import threading

    uri = str(tmp_path / "t")
    lq.write(uri, _table(20))
    errors: list[BaseException] = []
    outcomes: list[Any] = []

    def appender(k: int) -> None:
        try:
            for j in range(3):
                lq.write(uri, _table(5, offset=1000 + 100 * k + 10 * j), mode="append")
        except BaseException as exc:
            errors.append(exc)

    def deleter() -> None:
        for pred in ("v = 1", "id >= 1000 AND v = 2", "v = 3"):
            try:
                outcomes.append(lq.DeltaTable(uri).delete(pred))
            except lq.errors.CommitConflictError as exc:
                outcomes.append(exc)
            except BaseException as exc:
                errors.append(exc)

    threads = [threading.Thread(target=appender, args=(k,)) for k in range(2)] + [
        threading.Thread(target=deleter)
    ]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    rows = lq.DeltaTable(uri).snapshot().scan().to_arrow()
    ids = rows.column("id").to_pylist()
    assert len(ids) == len(set(ids))
    # deletes never conflict with blind appends (WriteSerializable): "v = 1" and "v = 3"
    # match rows of the original table, so they committed and those rows are gone
    first, _, last = outcomes
    assert not isinstance(first, Exception) and first.committed
    assert not isinstance(last, Exception) and last.committed
    assert not [r for r in rows.to_pylist() if r["id"] < 20 and r["v"] in (1, 3)]
    assert set(range(1000, 1025)) | set(range(1100, 1125)) >= {i for i in ids if i >= 1000}
    for v in range(lq.DeltaTable(uri).snapshot().version + 1):
        lq.DeltaTable(uri).snapshot(version=v).scan().to_arrow()


@MODES
@pytest.mark.parametrize("kind", ["delete", "update", "merge"])
def test_dml_vs_concurrent_overwrite(tmp_path: Path, mode: dict[str, str], kind: str) -> None:
    """A concurrent overwrite removes every file the statement read."""
    uri = str(tmp_path / "t")
    _make(uri, False, mode)
    loser = pinned(uri, 1)
    lq.write(uri, _table(5, offset=2000), mode="overwrite")
    run, _ = _statement(kind)
    with pytest.raises(lq.errors.CommitConflictError):
        run(loser)
    assert _versions(uri) == [0, 1, 2]
    check_all_engines(uri, _table(5, offset=2000))


@MODES
def test_dml_vs_concurrent_schema_change(tmp_path: Path, mode: dict[str, str]) -> None:
    uri = str(tmp_path / "t")
    _make(uri, False, mode)
    loser = pinned(uri, 1)
    wider = _table(2, offset=3000).append_column("w", pa.array(["a", "b"]))
    lq.write(uri, wider, mode="append", schema_mode="merge")
    with pytest.raises(lq.errors.MetadataChangedError):
        loser.delete("v = 1")
    assert _versions(uri) == [0, 1, 2]


def test_merge_schema_evolution_vs_concurrent_append(tmp_path: Path) -> None:
    """A MERGE that changes the schema conflicts with any concurrent data change: under
    WriteSerializable a blind append is normally fine, but not when the statement changes
    metadata (digest §17.4 step 6)."""
    uri = str(tmp_path / "t")
    t = _make(uri, False, {})
    loser = pinned(uri, 1)
    lq.write(uri, _table(3, offset=4000), mode="append")
    src = pa.table({"id": pa.array([1, 5000], pa.int64()), "w": ["x", "y"]})
    b = loser.merge(src, on="t.id = s.id", source_alias="s", target_alias="t", schema_mode="merge")
    with pytest.raises(lq.errors.CommitConflictError):
        b.when_matched_update_all().when_not_matched_insert_all().execute()
    assert _versions(uri) == [0, 1, 2]
    assert lq.DeltaTable(uri).snapshot().schema.names == t.column_names
