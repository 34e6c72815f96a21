"""Concurrent writers of an identity table never produce duplicate ids.

Two transactions interleaved by hand (deterministic), a writer that changes no metadata
racing an identity writer, and several processes appending at the same time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import deltalake
import pyarrow as pa
import pytest

import lakequery as lq
from lakequery.protocol.conflicts import Footprint, WinningCommit, check_winner
from lakequery.writer import commit_write, plan_write, write_data_files
from lakequery.writer.identity import Identity, rebase_identity

WORKER = str(Path(__file__).with_name("identity_worker.py"))
REPO = str(Path(__file__).resolve().parents[2])


def lq_ids(uri: str) -> list[int]:
    return sorted(lq.DeltaTable(uri).snapshot().scan().to_arrow().column("id").to_pylist())


def mark(uri: str) -> int:
    schema = json.loads(lq.DeltaTable(uri).snapshot().metadata.schema_string)
    return int(schema["fields"][0]["metadata"]["delta.identity.highWaterMark"])


def make_table(uri: str, *, always: bool = True) -> None:
    lq.write(
        uri,
        pa.table({"v": ["seed"]}),
        identity={"id": Identity(start=1, step=2, always=always)},
        configuration={"delta.enableDeletionVectors": "false"},
    )


def test_interleaved_identity_writers_conflict_then_rebase(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    make_table(uri)
    a_rows, b_rows = pa.table({"v": ["a1", "a2"]}), pa.table({"v": ["b1", "b2", "b3"]})
    # both plan from version 0 (mark 1) and write their files before either commits
    plan_a = plan_write(uri, a_rows.schema, mode="append")
    plan_b = plan_write(uri, b_rows.schema, mode="append")
    assert plan_a.state is not None and plan_b.state is not None
    adds_a = write_data_files(a_rows, plan_a.state)
    adds_b = write_data_files(b_rows, plan_b.state)
    assert commit_write(plan_a, adds_a).version == 1
    with pytest.raises(lq.IdentityConflictError) as err:
        commit_write(plan_b, adds_b)
    assert isinstance(err.value, lq.MetadataChangedError)
    assert err.value.winning_version == 1
    assert lq.DeltaTable(uri).snapshot().version == 1
    # B's values collide with A's: rebase moves them above A's mark and commits
    plan_b, adds_b = rebase_identity(plan_b, adds_b, err.value)
    assert commit_write(plan_b, adds_b).version == 2
    assert lq_ids(uri) == [1, 3, 5, 7, 9, 11]
    assert mark(uri) == 11
    rows = lq.DeltaTable(uri).snapshot().scan().to_arrow().to_pylist()
    assert {r["v"]: r["id"] for r in rows} == {
        "seed": 1,
        "a1": 3,
        "a2": 5,
        "b1": 7,
        "b2": 9,
        "b3": 11,
    }
    # the rebased files replace the first ones: the table lists only live files
    theirs = deltalake.DeltaTable(uri)
    assert sorted(theirs.to_pyarrow_table().column("id").to_pylist()) == [1, 3, 5, 7, 9, 11]
    assert len(theirs.file_uris()) == 3
    parquet = sorted(p.name for p in Path(uri).glob("*.parquet"))
    assert len(parquet) == 3  # B's first files were deleted


def test_lq_write_rebases_by_itself(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    make_table(uri)
    rows = pa.table({"v": ["x", "y"]})
    stale = plan_write(uri, rows.schema, mode="append")
    assert stale.state is not None
    stale_adds = write_data_files(rows, stale.state)
    lq.write(uri, pa.table({"v": ["w"]}), mode="append")  # wins version 1 with id 3
    # a transaction retried through the public loop: same conflict, then rebase
    for _ in range(3):
        try:
            commit_write(stale, stale_adds)
            break
        except lq.IdentityConflictError as conflict:
            stale, stale_adds = rebase_identity(stale, stale_adds, conflict)
    assert lq_ids(uri) == [1, 3, 5, 7]


def test_writer_without_metadata_change_passes_identity_winner(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    make_table(uri, always=False)
    explicit = pa.table({"id": [1000], "v": ["explicit"]})
    plan = plan_write(uri, explicit.schema, mode="append")
    assert plan.state is not None and plan.state.identity == ()
    adds = write_data_files(explicit, plan.state)
    lq.write(uri, pa.table({"v": ["generated"]}), mode="append")  # mark moves to 3
    # the identity-only metadata change of the winner is no conflict for a plain append
    result = commit_write(plan, adds)
    assert result.version == 2 and result.attempts == 2
    assert lq_ids(uri) == [1, 3, 1000]
    assert mark(uri) == 3  # the winner's mark stays


def test_schema_change_is_still_a_metadata_conflict(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    make_table(uri)
    rows = pa.table({"v": ["x"]})
    plan = plan_write(uri, rows.schema, mode="append")
    assert plan.state is not None
    adds = write_data_files(rows, plan.state)
    lq.write(uri, pa.table({"v": ["y"], "w": [1]}), mode="append", schema_mode="merge")
    with pytest.raises(lq.MetadataChangedError) as err:
        commit_write(plan, adds)
    assert not isinstance(err.value, lq.IdentityConflictError)


def test_processes_append_concurrently_with_unique_ids(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    make_table(uri)
    writers, appends, rows = 4, 3, 7
    go = tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": REPO + os.pathsep + os.environ.get("PYTHONPATH", "")}
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                WORKER,
                json.dumps(
                    {"uri": uri, "writer": w, "appends": appends, "rows": rows, "go": str(go)}
                ),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for w in range(writers)
    ]
    for p in procs:  # every writer imported lakequery and waits
        assert p.stdout is not None
        assert json.loads(p.stdout.readline()) == {"ready": True}
    go.touch()
    reports = []
    for p in procs:
        out, errors = p.communicate(timeout=300)
        assert p.returncode == 0, errors
        reports += [json.loads(line) for line in out.splitlines() if line.strip()]
    assert len(reports) == writers * appends
    assert any(r["attempts"] > 1 for r in reports)  # the writers really collided
    total = 1 + writers * appends * rows
    got = lq_ids(uri)
    assert len(got) == total and len(set(got)) == total
    assert got == [1 + 2 * k for k in range(total)]  # no gaps either: one range per write
    assert mark(uri) == got[-1]
    theirs = deltalake.DeltaTable(uri).to_pyarrow_table().column("id").to_pylist()
    assert sorted(theirs) == got
    assert lq.DeltaTable(uri).snapshot().version == writers * appends
    # each write's rows got one consecutive range, in its input order
    table = lq.DeltaTable(uri).snapshot().scan().to_arrow()
    by_v = dict(zip(table.column("v").to_pylist(), table.column("id").to_pylist(), strict=True))
    for w in range(writers):
        for seq in range(appends):
            got_ids = [by_v[f"{w}-{seq}-{i}"] for i in range(rows)]
            assert got_ids == list(range(got_ids[0], got_ids[0] + 2 * rows, 2))


def test_rebase_with_column_mapping_partitions_and_two_columns(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    lq.write(
        uri,
        pa.table({"p": ["x"], "v": ["seed"]}),
        identity={"id": Identity(), "down": Identity(start=0, step=-1, always=False)},
        partition_by=["p"],
        configuration={"delta.columnMapping.mode": "name"},
    )
    rows = pa.table({"p": ["x", "y"], "v": ["a", "b"]})
    first = plan_write(uri, rows.schema, mode="append")
    second = plan_write(uri, rows.schema, mode="append")
    assert first.state is not None and second.state is not None
    adds_first = write_data_files(rows, first.state)
    adds_second = write_data_files(rows, second.state)
    commit_write(first, adds_first)
    with pytest.raises(lq.IdentityConflictError) as err:
        commit_write(second, adds_second)
    second, adds_second = rebase_identity(second, adds_second, err.value)
    commit_write(second, adds_second)
    snap = lq.DeltaTable(uri).snapshot()
    got = sorted(snap.scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    assert [(r["id"], r["down"], r["p"]) for r in got] == [
        (1, 0, "x"),
        (2, -1, "x"),
        (3, -2, "y"),
        (4, -3, "x"),
        (5, -4, "y"),
    ]
    # statistics of the rewritten files moved with the values (keyed by physical name)
    physical = snap.metadata.schema["id"].metadata["delta.columnMapping.physicalName"]
    for add in adds_second:
        stats = json.loads(add["stats"])
        assert stats["minValues"][physical] in (4, 5)
        assert stats["minValues"][physical] == stats["maxValues"][physical]
    assert snap.scan(filter="id > 3").to_arrow().num_rows == 2
    query = deltalake.QueryBuilder().register("t", deltalake.DeltaTable(uri))
    theirs = pa.table(query.execute("SELECT id, down FROM t ORDER BY id")).to_pylist()
    assert theirs == [{"id": r["id"], "down": r["down"]} for r in got]


def _winner(tagged: bool) -> WinningCommit:
    info: dict[str, object] = {"isBlindAppend": True}
    if tagged:
        info["tags"] = {"delta.identity.schemaUpdate": "true"}
    lines = [{"commitInfo": info}, {"metaData": {"id": "x", "schemaString": "{}"}}]
    return WinningCommit.from_bytes(1, "\n".join(json.dumps(a) for a in lines).encode())


@pytest.mark.parametrize(
    ("own", "tagged", "expected"),
    [
        # both only moved identity marks: the identity conflict (rebase and retry)
        (Footprint(0, changes_metadata=True, identity_only_metadata=True), True, "identity"),
        # a transaction without metadata passes a marks-only winner (as Spark)
        (Footprint(0, blind_append=True), True, None),
        (Footprint(0, read_whole_table=True, removed_files=frozenset({"f"})), True, None),
        # a metadata change would take the winner's mark back: plan again, as after an
        # append (ALTER does)
        (Footprint(0, changes_metadata=True), True, "append"),
        # any other metadata change of the winner stays a metadata conflict
        (Footprint(0, changes_metadata=True, identity_only_metadata=True), False, "metadata"),
        (Footprint(0, blind_append=True), False, "metadata"),
    ],
)
def test_check_winner_identity_rules(own: Footprint, tagged: bool, expected: str | None) -> None:
    winner = _winner(tagged)
    assert winner.identity_only_metadata is tagged
    if expected is None:
        check_winner(own, winner, uri="memory://t")
        return
    if expected == "append":
        with pytest.raises(lq.ConcurrentAppendError, match="identity"):
            check_winner(own, winner, uri="memory://t")
        return
    with pytest.raises(lq.MetadataChangedError) as err:
        check_winner(own, winner, uri="memory://t")
    assert isinstance(err.value, lq.IdentityConflictError) is (expected == "identity")
