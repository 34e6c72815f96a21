"""Snapshot reconstruction through the public API: log replay (digest §6), paths (§9.3),
checkpoints and ``_last_checkpoint`` (§2.5, §3, §7), on tables written by ``tablekit``."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from tablekit import (
    TableKit,
    commit_info,
    domain_action,
    dv_protocol,
    last_checkpoint_checksum,
    metadata_action,
    now_ms,
    protocol_action,
    remove_action,
    replay,
    txn_action,
    with_dv,
)

import lakequery as lq

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])
HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS


def rows(n0: int, n: int) -> pa.Table:
    ids = list(range(n0, n0 + n))
    return pa.table({"id": pa.array(ids, pa.int64()), "v": [f"v{i}" for i in ids]})


def live_paths(snap: lq.Snapshot) -> list[str]:
    return sorted(snap.files().column("path").to_pylist())


def live_keys(snap: lq.Snapshot) -> set[tuple[str, str | None]]:
    out = set()
    for row in snap.files().select(["path", "deletion_vector"]).to_pylist():
        dv = row["deletion_vector"]
        out.add((row["path"], dv["pathOrInlineDv"] if dv else None))
    return out


def tombstone_keys(snap: lq.Snapshot) -> set[tuple[str, str | None]]:
    out = set()
    for row in snap.tombstones().to_pylist():
        dv = row["remove"]["deletionVector"]
        out.add((row["path"], dv["pathOrInlineDv"] if dv else None))
    return out


def ids(snap: lq.Snapshot) -> list[int]:
    return sorted(snap.scan(columns=["id"]).to_arrow().column("id").to_pylist())


def rel(add: dict[str, Any]) -> str:
    return add["add"]["path"]


# ---------------------------------------------------------------------------------------------
# replay of file actions
# ---------------------------------------------------------------------------------------------


def test_add_remove_readd(tmp_path: Path) -> None:
    kit = TableKit(tmp_path / "t")
    kit.create(SCHEMA)
    a = kit.write_parquet(rows(0, 3), name="a.parquet")
    b = kit.write_parquet(rows(10, 2), name="b.parquet")
    kit.commit([a, b])  # v1
    kit.commit([remove_action(a)])  # v2
    kit.commit([a])  # v3: the same path again
    dt_ = lq.DeltaTable(kit.uri)
    assert live_paths(dt_.snapshot(version=1)) == ["a.parquet", "b.parquet"]
    v2 = dt_.snapshot(version=2)
    assert live_paths(v2) == ["b.parquet"]
    assert ids(v2) == [10, 11]
    assert tombstone_keys(v2) == {("a.parquet", None)}
    v3 = dt_.snapshot()
    assert v3.version == 3
    assert live_paths(v3) == ["a.parquet", "b.parquet"]
    assert ids(v3) == [0, 1, 2, 10, 11]
    # the re-add cancels the tombstone of the same key
    assert tombstone_keys(v3) == set()


def test_readd_of_live_path_replaces_the_older_add(tmp_path: Path) -> None:
    kit = TableKit(tmp_path / "t")
    kit.create(SCHEMA)
    a = kit.write_parquet(rows(0, 3), name="a.parquet")
    kit.commit([a])
    newer = json.loads(json.dumps(a))
    newer["add"]["tags"] = {"k": "v2"}
    newer["add"]["dataChange"] = False
    kit.commit([newer])
    snap = lq.DeltaTable(kit.uri).snapshot()
    files = snap.files()
    assert files.num_rows == 1
    assert dict(files.column("tags").to_pylist()[0]) == {"k": "v2"}
    assert ids(snap) == [0, 1, 2]


def test_remove_in_one_commit_and_add_again_in_later_commit_with_other_content(
    tmp_path: Path,
) -> None:
    kit = TableKit(tmp_path / "t")
    kit.create(SCHEMA)
    a = kit.write_parquet(rows(0, 3), name="a.parquet")
    kit.commit([a])
    kit.commit([remove_action(a)])
    # the path is rewritten with different content (e.g. a restore of a recreated file)
    a2 = kit.write_parquet(rows(100, 2), name="a.parquet")
    kit.commit([a2])
    dt_ = lq.DeltaTable(kit.uri)
    assert ids(dt_.snapshot()) == [100, 101]
    assert dt_.snapshot().files().column("size").to_pylist() == [a2["add"]["size"]]
    assert ids(dt_.snapshot(version=2)) == []


def test_deletion_vector_attach_and_replace_keyed_by_path_and_dv_id(tmp_path: Path) -> None:
    kit = TableKit(tmp_path / "t")
    kit.create(SCHEMA, protocol=dv_protocol())
    a = kit.write_parquet(rows(0, 6), name="a.parquet")
    kit.commit([a])  # v1
    dv1 = kit.write_dv([1, 3])
    kit.commit([remove_action(a), with_dv(a, dv1)])  # v2: attach
    dv2 = kit.write_dv([1, 3, 4])
    kit.commit([remove_action(with_dv(a, dv1)), with_dv(a, dv2)])  # v3: replace
    dt_ = lq.DeltaTable(kit.uri)

    v2 = dt_.snapshot(version=2)
    assert live_keys(v2) == {("a.parquet", dv1["pathOrInlineDv"])}
    assert ids(v2) == [0, 2, 4, 5]
    assert tombstone_keys(v2) == {("a.parquet", None)}

    v3 = dt_.snapshot()
    assert live_keys(v3) == {("a.parquet", dv2["pathOrInlineDv"])}
    assert ids(v3) == [0, 2, 5]
    # the tombstone set may hold one path several times with different DV ids
    assert tombstone_keys(v3) == {("a.parquet", None), ("a.parquet", dv1["pathOrInlineDv"])}
    dv = v3.files().column("deletion_vector").to_pylist()[0]
    assert dv["cardinality"] == 3
    assert dv["offset"] == 1


@pytest.mark.parametrize(
    "spelling", ["plain", "file-triple-slash", "file-single-slash", "file-localhost"]
)
def test_absolute_path_inside_root_is_the_same_file_as_relative(
    tmp_path: Path, spelling: str
) -> None:
    root = tmp_path / "t"
    kit = TableKit(root)
    kit.create(SCHEMA)
    a = kit.write_parquet(rows(0, 3), name="a.parquet")
    absolute = {
        "plain": f"{root}/a.parquet",
        "file-triple-slash": f"file://{root}/a.parquet",
        "file-single-slash": f"file:{root}/a.parquet",
        # an absolute spelling of a file of the root must never pass for a foreign file
        # (VACUUM would delete it as unreferenced)
        "file-localhost": f"file://localhost{root}/a.parquet",
    }[spelling]
    a_abs = json.loads(json.dumps(a))
    a_abs["add"]["path"] = absolute
    kit.commit([a_abs])  # v1: absolute
    kit.commit([a])  # v2: relative re-add of the same file (replaces, not duplicates)
    kit.commit([remove_action(a_abs)])  # v3: absolute remove
    dt_ = lq.DeltaTable(kit.uri)
    v1 = dt_.snapshot(version=1)
    assert live_paths(v1) == ["a.parquet"]
    assert ids(v1) == [0, 1, 2]
    v2 = dt_.snapshot(version=2)
    assert live_paths(v2) == ["a.parquet"]
    assert ids(v2) == [0, 1, 2]
    assert live_paths(dt_.snapshot()) == []
    assert ids(dt_.snapshot()) == []


def test_absolute_encoded_path_under_root_with_space(tmp_path: Path) -> None:
    root = tmp_path / "my table"
    kit = TableKit(root)
    kit.create(SCHEMA)
    a = kit.write_parquet(rows(0, 2), name="a b.parquet")
    assert rel(a) == "a%20b.parquet"
    a_abs = json.loads(json.dumps(a))
    a_abs["add"]["path"] = "file://" + str(root).replace(" ", "%20") + "/a%20b.parquet"
    kit.commit([a_abs])
    snap = lq.DeltaTable(str(root)).snapshot()
    assert live_paths(snap) == ["a b.parquet"]
    assert ids(snap) == [0, 1]
    kit.commit([remove_action(a)])  # relative, encoded
    assert live_paths(lq.DeltaTable(str(root)).snapshot()) == []


def test_percent_encoded_paths_are_decoded_exactly_once(tmp_path: Path) -> None:
    schema = pa.schema([("id", pa.int64()), ("v", pa.string()), ("p", pa.string())])
    kit = TableKit(tmp_path / "t")
    kit.create(schema, partition_by=["p"])
    a = kit.write_parquet(rows(0, 2), partition_values={"p": "a:b"}, name="f.parquet")
    b = kit.write_parquet(rows(10, 2), partition_values={"p": "x y"}, name="g h.parquet")
    assert rel(a) == "p=a%253Ab/f.parquet"  # ':' hive-escaped to %3A, then % URI-encoded
    assert rel(b) == "p=x%20y/g%20h.parquet"
    # decoys: where a reader that decodes twice (or not at all) would look
    for decoy in ("p=a:b", "p=a%253Ab"):
        (kit.root / decoy).mkdir()
        pq.write_table(rows(900, 1).select(["id", "v"]), kit.root / decoy / "f.parquet")
    kit.commit([a, b])
    snap = lq.DeltaTable(kit.uri).snapshot()
    assert live_paths(snap) == ["p=a%3Ab/f.parquet", "p=x y/g h.parquet"]
    got = sorted((r["id"], r["p"]) for r in snap.scan().to_arrow().to_pylist())
    assert got == [(0, "a:b"), (1, "a:b"), (10, "x y"), (11, "x y")]
    # the same through a checkpoint (which keeps add.path encoded) without the commits
    kit.checkpoint(1)
    kit.commit_path(0).unlink()
    cp_snap = lq.DeltaTable(kit.uri).snapshot()
    assert live_paths(cp_snap) == ["p=a%3Ab/f.parquet", "p=x y/g h.parquet"]
    got = sorted((r["id"], r["p"]) for r in cp_snap.scan().to_arrow().to_pylist())
    assert got == [(0, "a:b"), (1, "a:b"), (10, "x y"), (11, "x y")]
    # a remove spelled with the raw (decoded) path names the same file
    raw_remove = remove_action(b, path="p=x y/g h.parquet")
    kit.commit([raw_remove])
    assert live_paths(lq.DeltaTable(kit.uri).snapshot()) == ["p=a%3Ab/f.parquet"]


# ---------------------------------------------------------------------------------------------
# non-file actions
# ---------------------------------------------------------------------------------------------


def test_latest_protocol_and_metadata_win(tmp_path: Path) -> None:
    kit = TableKit(tmp_path / "t")
    kit.create(SCHEMA, configuration={"user.k": "1"})
    old = kit.write_parquet(rows(0, 2), name="old.parquet")
    kit.commit([old])  # v1
    wider = pa.schema([("id", pa.int64()), ("v", pa.string()), ("extra", pa.float64())])
    kit.commit(
        [
            protocol_action(1, 4),
            metadata_action(wider, configuration={"user.k": "2", "user.new": "x"}),
        ]
    )  # v2
    new = kit.write_parquet(
        pa.table({"id": pa.array([5], pa.int64()), "v": ["v5"], "extra": [1.5]}),
        name="new.parquet",
    )
    kit.commit([new])  # v3
    dt_ = lq.DeltaTable(kit.uri)
    v1 = dt_.snapshot(version=1)
    assert v1.protocol.min_writer_version == 2
    assert dict(v1.metadata.configuration) == {"user.k": "1"}
    assert v1.schema.names == ["id", "v"]
    snap = dt_.snapshot()
    assert snap.protocol.min_reader_version == 1
    assert snap.protocol.min_writer_version == 4
    assert dict(snap.metadata.configuration) == {"user.k": "2", "user.new": "x"}
    assert snap.schema.names == ["id", "v", "extra"]
    assert snap.schema.field("extra").type == pa.float64()
    got = sorted(snap.scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    # the old file lacks the new column: it reads as null
    assert got == [
        {"id": 0, "v": "v0", "extra": None},
        {"id": 1, "v": "v1", "extra": None},
        {"id": 5, "v": "v5", "extra": 1.5},
    ]


def test_txn_latest_per_app_id(tmp_path: Path) -> None:
    kit = TableKit(tmp_path / "t")
    kit.create(SCHEMA)
    kit.commit([txn_action("app1", 5), txn_action("app2", 1)])  # v1
    kit.commit([txn_action("app1", 7)])  # v2
    kit.commit([txn_action("app1", 3)])  # v3: not required to be monotonic
    dt_ = lq.DeltaTable(kit.uri)
    assert dt_.snapshot(version=0).txns == {}
    assert dt_.snapshot(version=1).txns == {"app1": 5, "app2": 1}
    assert dt_.snapshot(version=2).txns == {"app1": 7, "app2": 1}
    assert dt_.snapshot().txns == {"app1": 3, "app2": 1}


def test_txn_expiry_with_set_transaction_retention(tmp_path: Path) -> None:
    kit = TableKit(tmp_path / "t")
    kit.create(SCHEMA, configuration={"delta.setTransactionRetentionDuration": "interval 1 day"})
    kit.commit(
        [
            txn_action("old", 1, last_updated=now_ms() - 2 * DAY_MS),
            txn_action("fresh", 2, last_updated=now_ms() - HOUR_MS),
        ]
    )
    assert lq.DeltaTable(kit.uri).snapshot().txns == {"fresh": 2}


def test_domain_metadata_latest_and_tombstone(tmp_path: Path) -> None:
    kit = TableKit(tmp_path / "t")
    kit.create(SCHEMA, protocol=protocol_action(1, 7, None, ["domainMetadata"]))
    kit.commit([domain_action("com.x.a", '{"k":1}'), domain_action("com.x.b", "b1")])  # v1
    kit.commit([domain_action("com.x.a", '{"k":2}')])  # v2
    kit.commit([domain_action("com.x.b", "b1", removed=True)])  # v3
    dt_ = lq.DeltaTable(kit.uri)
    assert dt_.snapshot(version=1).domains == {"com.x.a": '{"k":1}', "com.x.b": "b1"}
    assert dt_.snapshot(version=2).domains == {"com.x.a": '{"k":2}', "com.x.b": "b1"}
    assert dt_.snapshot().domains == {"com.x.a": '{"k":2}'}
    kit.commit([domain_action("com.x.b", "b2")])  # v4: re-created after the tombstone
    assert lq.DeltaTable(kit.uri).snapshot().domains == {"com.x.a": '{"k":2}', "com.x.b": "b2"}


@pytest.mark.parametrize(
    ("retention", "ages_ms", "kept"),
    [
        ("interval 1 hour", {"x": 2 * HOUR_MS, "y": 10 * 60_000}, {"y"}),
        (None, {"x": 8 * DAY_MS, "y": 6 * DAY_MS}, {"y"}),  # default: 1 week
        ("interval 10 days", {"x": 8 * DAY_MS, "y": 6 * DAY_MS}, {"x", "y"}),
    ],
)
def test_tombstones_and_their_expiry(
    tmp_path: Path, retention: str | None, ages_ms: dict[str, int], kept: set[str]
) -> None:
    kit = TableKit(tmp_path / "t")
    config = {"delta.deletedFileRetentionDuration": retention} if retention else {}
    kit.create(SCHEMA, configuration=config)
    adds = {k: kit.write_parquet(rows(0, 1), name=f"{k}.parquet") for k in ages_ms}
    kit.commit(list(adds.values()))
    kit.commit(
        [remove_action(adds[k], deletion_timestamp=now_ms() - age) for k, age in ages_ms.items()]
    )
    snap = lq.DeltaTable(kit.uri).snapshot()
    assert live_paths(snap) == []
    tomb = snap.tombstones()
    assert sorted(tomb.column("path").to_pylist()) == sorted(f"{k}.parquet" for k in kept)
    assert set(tomb.column("version").to_pylist()) <= {2}


def test_blank_lines_unknown_actions_and_fields_are_tolerated(tmp_path: Path) -> None:
    kit = TableKit(tmp_path / "t")
    kit.create(SCHEMA)
    a = kit.write_parquet(rows(0, 2), name="a.parquet")
    a["add"]["someFutureField"] = {"nested": [1, 2]}
    lines = [
        json.dumps(commit_info()),
        "",
        json.dumps({"someFutureAction": {"x": 1}}),
        json.dumps(a),
        "   ",
    ]
    kit.write_commit_text(1, "\n".join(lines))  # no trailing newline
    snap = lq.DeltaTable(kit.uri).snapshot()
    assert snap.version == 1
    assert ids(snap) == [0, 1]


def test_partition_values_in_files_are_typed(tmp_path: Path) -> None:
    schema = pa.schema(
        [("id", pa.int64()), ("s", pa.string()), ("i", pa.int32()), ("d", pa.date32())]
    )
    kit = TableKit(tmp_path / "t")
    kit.create(schema, partition_by=["s", "i", "d"])
    a = kit.write_parquet(
        pa.table({"id": pa.array([1], pa.int64())}),
        partition_values={"s": "x", "i": 7, "d": dt.date(2024, 2, 29)},
    )
    b = kit.write_parquet(
        pa.table({"id": pa.array([2], pa.int64())}),
        partition_values={"s": None, "i": None, "d": None},
    )
    c = kit.write_parquet(  # an empty string also means null (digest §9.1)
        pa.table({"id": pa.array([3], pa.int64())}),
        partition_values={"s": "", "i": "", "d": ""},
    )
    kit.commit([a, b, c])
    snap = lq.DeltaTable(kit.uri).snapshot()
    assert snap.partition_columns == ["s", "i", "d"]
    assert snap.schema.names == ["id", "s", "i", "d"]
    pv = sorted(
        snap.files().column("partition_values").to_pylist(), key=lambda r: r["s"] is not None
    )
    assert pv == [
        {"s": None, "i": None, "d": None},
        {"s": None, "i": None, "d": None},
        {"s": "x", "i": 7, "d": dt.date(2024, 2, 29)},
    ]
    assert snap.files().column("num_records").to_pylist() == [1, 1, 1]
    got = sorted(snap.scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    assert got == [
        {"id": 1, "s": "x", "i": 7, "d": dt.date(2024, 2, 29)},
        {"id": 2, "s": None, "i": None, "d": None},
        {"id": 3, "s": None, "i": None, "d": None},
    ]


# ---------------------------------------------------------------------------------------------
# checkpoints and _last_checkpoint
# ---------------------------------------------------------------------------------------------


def _history_table(root: Path) -> tuple[TableKit, list[set[str]]]:
    """v0 create; v1..v6 alternating adds and removes; returns live paths per version."""
    kit = TableKit(root)
    kit.create(SCHEMA, protocol=protocol_action(1, 7, None, ["domainMetadata"]))
    live: list[set[str]] = [set()]
    adds: dict[str, dict[str, Any]] = {}
    for v in range(1, 7):
        current = set(live[-1])
        actions: list[dict[str, Any]] = []
        name = f"f{v}.parquet"
        adds[name] = kit.write_parquet(rows(10 * v, 2), name=name)
        actions.append(adds[name])
        current.add(name)
        if v % 2 == 0:
            victim = f"f{v - 1}.parquet"
            actions.append(remove_action(adds[victim]))
            current.discard(victim)
        actions.append(txn_action("app", v))
        if v == 2:
            actions.append(domain_action("com.x", "c2"))
        if v == 5:
            actions.append(domain_action("com.x", "c2", removed=True))
        kit.commit(actions)
        live.append(current)
    return kit, live


def _expected_ids(paths: set[str]) -> list[int]:
    out = []
    for p in paths:
        v = int(p[1:].split(".")[0])
        out += [10 * v, 10 * v + 1]
    return sorted(out)


@pytest.mark.parametrize("parts", [1, 3])
@pytest.mark.parametrize("drop_old_commits", [False, True])
def test_checkpoint_plus_tail(tmp_path: Path, parts: int, drop_old_commits: bool) -> None:
    kit, live = _history_table(tmp_path / "t")
    written = kit.checkpoint(4, parts=parts)
    assert len(written) == parts
    if drop_old_commits:  # log cleanup: the checkpoint is the only way to know v0..v4
        for v in range(4):
            kit.commit_path(v).unlink()
    dt_ = lq.DeltaTable(kit.uri)
    for v in range(4, 7):
        snap = dt_.snapshot(version=v)
        assert snap.version == v
        assert set(live_paths(snap)) == live[v]
        assert ids(snap) == _expected_ids(live[v])
        assert snap.txns == {"app": v}
        assert snap.domains == ({"com.x": "c2"} if v < 5 else {})
    if drop_old_commits:
        with pytest.raises(lq.VersionNotFoundError):
            dt_.snapshot(version=3)
    else:
        assert set(live_paths(dt_.snapshot(version=3))) == live[3]


def test_checkpoint_at_latest_version_only(tmp_path: Path) -> None:
    kit, live = _history_table(tmp_path / "t")
    kit.checkpoint(6)
    for v in range(6):
        kit.commit_path(v).unlink()
    snap = lq.DeltaTable(kit.uri).snapshot()
    assert snap.version == 6
    assert set(live_paths(snap)) == live[6]
    assert ids(snap) == _expected_ids(live[6])


def test_incomplete_multipart_and_empty_checkpoints_are_ignored(tmp_path: Path) -> None:
    kit, live = _history_table(tmp_path / "t")
    written = kit.checkpoint(4, parts=3)
    written[1].unlink()  # part 2 of 3 missing
    kit.checkpoint_path(5).write_bytes(b"")  # zero-byte checkpoint
    kit.write_last_checkpoint(5)
    dt_ = lq.DeltaTable(kit.uri)
    snap = dt_.snapshot()
    assert set(live_paths(snap)) == live[6]
    assert ids(snap) == _expected_ids(live[6])
    assert dt_.snapshot(version=5).domains == {}


def _garble_hint(kit: TableKit, how: str) -> None:
    path = kit.log / "_last_checkpoint"
    if how == "points-at-deleted":
        kit.write_last_checkpoint(5)  # no checkpoint 5 exists (deleted)
    elif how == "truncated":
        path.write_text('{"version": 4, "si')
    elif how == "empty":
        path.write_text("")
    elif how == "checksum-mismatch":
        kit.write_last_checkpoint(5, checksum="0123456789abcdef0123456789abcdef")
    elif how == "beyond-latest":
        kit.write_last_checkpoint(40)
    elif how == "not-an-object":
        path.write_text("[4]")
    elif how == "missing":
        path.unlink()
    elif how == "valid-but-stale":
        kit.write_last_checkpoint(2)  # a newer checkpoint (4) exists
    else:  # pragma: no cover
        raise AssertionError(how)


@pytest.mark.parametrize(
    "how",
    [
        "points-at-deleted",
        "truncated",
        "empty",
        "checksum-mismatch",
        "beyond-latest",
        "not-an-object",
        "valid-but-stale",
        "missing",
    ],
)
def test_bad_last_checkpoint_still_reads_correctly(tmp_path: Path, how: str) -> None:
    kit, live = _history_table(tmp_path / "t")
    kit.checkpoint(2)
    kit.checkpoint(4)
    for v in range(2):  # versions 0 and 1 are only in checkpoint 2
        kit.commit_path(v).unlink()
    _garble_hint(kit, how)
    dt_ = lq.DeltaTable(kit.uri)
    snap = dt_.snapshot()
    assert snap.version == 6
    assert set(live_paths(snap)) == live[6]
    assert ids(snap) == _expected_ids(live[6])
    # time travel below the hint's version
    assert set(live_paths(dt_.snapshot(version=3))) == live[3]
    assert set(live_paths(dt_.snapshot(version=2))) == live[2]


def test_tablekit_last_checkpoint_checksum_matches_digest_vector() -> None:
    """The builder's ``_last_checkpoint`` checksum follows digest §2.5 (its test vector), so
    the "valid checksum" hints written by these tests really are valid."""
    doc = {
        "k0": "'v 0'",
        "checksum": "adsaskfljadfkjadfkj",
        "k1": {"k2": 2, "k3": ["v3", [1, 2], {"k4": "v4", "k5": ["v5", "v6", "v7"]}]},
    }
    assert last_checkpoint_checksum(doc) == "6a92d155a59bf2eecbd4b4ec7fd1f875"


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def test_corrupt_checkpoint_falls_back_to_older_checkpoint(tmp_path: Path) -> None:
    kit, live = _history_table(tmp_path / "t")
    kit.checkpoint(2)
    kit.checkpoint(4)
    for v in range(2):
        kit.commit_path(v).unlink()
    _truncate(kit.checkpoint_path(4))
    dt_ = lq.DeltaTable(kit.uri)
    snap = dt_.snapshot()
    assert set(live_paths(snap)) == live[6]
    assert ids(snap) == _expected_ids(live[6])
    assert snap.txns == {"app": 6}
    assert set(live_paths(dt_.snapshot(version=4))) == live[4]


def test_corrupt_checkpoint_falls_back_to_full_commits(tmp_path: Path) -> None:
    kit, live = _history_table(tmp_path / "t")
    kit.checkpoint(4)
    _truncate(kit.checkpoint_path(4))
    snap = lq.DeltaTable(kit.uri).snapshot()
    assert set(live_paths(snap)) == live[6]
    assert ids(snap) == _expected_ids(live[6])


def test_corrupt_multipart_checkpoint_part_falls_back(tmp_path: Path) -> None:
    kit, live = _history_table(tmp_path / "t")
    parts = kit.checkpoint(4, parts=2)
    _truncate(parts[1])
    snap = lq.DeltaTable(kit.uri).snapshot()
    assert set(live_paths(snap)) == live[6]
    assert ids(snap) == _expected_ids(live[6])


def test_corrupt_checkpoint_without_fallback_names_the_file(tmp_path: Path) -> None:
    kit, _ = _history_table(tmp_path / "t")
    kit.checkpoint(4)
    for v in range(4):
        kit.commit_path(v).unlink()
    _truncate(kit.checkpoint_path(4))
    with pytest.raises(lq.CorruptLogError) as info:
        lq.DeltaTable(kit.uri).snapshot()
    assert "00000000000000000004.checkpoint.parquet" in str(info.value)
    assert info.value.path.endswith("00000000000000000004.checkpoint.parquet")


# ---------------------------------------------------------------------------------------------
# property: checkpoint + tail replay == full replay == a Python model
# ---------------------------------------------------------------------------------------------


@dataclass
class _File:
    add: dict[str, Any]  # the add action without a DV
    ids: list[int]


@dataclass
class _Model:
    files: dict[str, _File] = field(default_factory=dict)
    live: dict[str, tuple[dict[str, Any] | None, frozenset[int]]] = field(default_factory=dict)
    txns: dict[str, int] = field(default_factory=dict)
    domains: dict[str, str] = field(default_factory=dict)

    def copy(self) -> _Model:
        return _Model(dict(self.files), dict(self.live), dict(self.txns), dict(self.domains))

    def keys(self) -> set[tuple[str, str | None]]:
        return {(p, dv["pathOrInlineDv"] if dv else None) for p, (dv, _) in self.live.items()}

    def ids(self) -> list[int]:
        out = []
        for p, (_, deleted) in self.live.items():
            out += [x for i, x in enumerate(self.files[p].ids) if i not in deleted]
        return sorted(out)


_OP = st.tuples(
    st.sampled_from(["add", "add", "remove", "readd", "dv", "txn", "domain"]),
    st.integers(0, 10_000),
    st.integers(1, 4),
)


def _apply(kit: TableKit, model: _Model, op: tuple[str, int, int], next_id: int) -> int:
    kind, pick, n = op
    live = sorted(model.live)
    dead = sorted(set(model.files) - set(model.live))
    if kind == "remove" and live:
        p = live[pick % len(live)]
        dv, _ = model.live.pop(p)
        kit.commit([remove_action(with_dv(model.files[p].add, dv))])
    elif kind == "readd" and dead:
        p = dead[pick % len(dead)]
        kit.commit([model.files[p].add])
        model.live[p] = (None, frozenset())
    elif kind == "dv" and live:
        p = live[pick % len(live)]
        old_dv, deleted = model.live[p]
        size = len(model.files[p].ids)
        new = frozenset(deleted | {pick % size, (pick // 7) % size})
        if new == deleted:
            new = frozenset(range(size))
        if new == deleted:  # everything already deleted: remove the file instead
            kit.commit([remove_action(with_dv(model.files[p].add, old_dv))])
            del model.live[p]
            return next_id
        dv = kit.write_dv(new)
        base = model.files[p].add
        kit.commit([remove_action(with_dv(base, old_dv)), with_dv(base, dv)])
        model.live[p] = (dv, new)
    elif kind == "txn":
        app = f"app{pick % 2}"
        kit.commit([txn_action(app, pick)])
        model.txns[app] = pick
    elif kind == "domain":
        name = f"com.x.d{pick % 2}"
        if name in model.domains and pick % 3 == 0:
            kit.commit([domain_action(name, model.domains[name], removed=True)])
            del model.domains[name]
        else:
            kit.commit([domain_action(name, f"cfg{pick}")])
            model.domains[name] = f"cfg{pick}"
    else:  # add (also the fallback when nothing else applies)
        name = f"f{next_id}.parquet"
        add = kit.write_parquet(rows(next_id, n), name=name)
        kit.commit([add])
        model.files[name] = _File(add, list(range(next_id, next_id + n)))
        model.live[name] = (None, frozenset())
        next_id += n
    return next_id


def _check(snap: lq.Snapshot, model: _Model) -> None:
    assert live_keys(snap) == model.keys()
    assert ids(snap) == model.ids()
    assert snap.txns == model.txns
    assert snap.domains == model.domains


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=st.lists(_OP, min_size=1, max_size=8),
    cp_pick=st.integers(0, 1000),
    parts=st.sampled_from([1, 1, 2, 3]),
)
def test_property_checkpoint_plus_tail_equals_full_replay(
    ops: list[tuple[str, int, int]], cp_pick: int, parts: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        kit = TableKit(base / "full")
        kit.create(
            SCHEMA,
            protocol=protocol_action(
                3, 7, ["deletionVectors"], ["deletionVectors", "domainMetadata"]
            ),
        )
        model = _Model()
        models = [model.copy()]
        next_id = 0
        for op in ops:
            next_id = _apply(kit, model, op, next_id)
            models.append(model.copy())
        latest = len(models) - 1
        cp = cp_pick % (latest + 1)

        full = lq.DeltaTable(kit.uri)
        full_latest = full.snapshot()
        _check(full_latest, models[latest])

        with_cp = base / "with_cp"
        shutil.copytree(kit.root, with_cp)
        kit_cp = TableKit(with_cp)
        kit_cp.checkpoint(cp, parts=parts)
        truncated = base / "truncated"
        shutil.copytree(with_cp, truncated)
        for v in range(cp):
            (truncated / "_delta_log" / f"{v:020d}.json").unlink()

        expected_tomb = {
            (path, None if d is None else d[1:].rsplit("@", 1)[0])
            for path, d in replay(kit.root, cp).tombstones
        }
        assert tombstone_keys(full.snapshot(version=cp)) == expected_tomb
        full_tomb = tombstone_keys(full_latest)
        for root in (with_cp, truncated):
            table = lq.DeltaTable(str(root))
            snap = table.snapshot()
            assert snap.version == latest
            _check(snap, models[latest])
            assert tombstone_keys(snap) == full_tomb
            at_cp = table.snapshot(version=cp)
            _check(at_cp, models[cp])
            # unexpired tombstones survive the checkpoint
            assert tombstone_keys(at_cp) == expected_tomb
