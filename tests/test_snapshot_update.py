"""``Snapshot.update()`` and the latest snapshot kept by ``DeltaTable``: one LIST for an
unchanged table, only the new commits replayed otherwise, and always equal to a fresh
replay of the same version."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from tablekit import (
    TableKit,
    commit_info,
    domain_action,
    metadata_action,
    now_ms,
    protocol_action,
    remove_action,
    txn_action,
    with_dv,
)

import lakequery as lq
from lakequery import log_update
from lakequery.log_segment import load_state
from lakequery.snapshot import Snapshot

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string()), ("p", pa.string())])
DAY_MS = 24 * 3_600_000
FEATURES = ["deletionVectors", "domainMetadata"]


def fresh(uri: str, version: int | None = None) -> Snapshot:
    """A replay from scratch, bypassing every cache."""
    storage = lq.DeltaTable(uri).storage
    return Snapshot(storage, load_state(storage, version))


def _files(snap: Snapshot) -> list[dict[str, Any]]:
    return sorted(snap.files().to_pylist(), key=lambda r: (r["path"], str(r["deletion_vector"])))


def _tombstones(snap: Snapshot) -> list[tuple[str, str]]:
    return sorted(
        (r["path"], json.dumps(r["remove"], sort_keys=True, default=str))
        for r in snap.tombstones().to_pylist()
    )


def assert_same(got: Snapshot, want: Snapshot) -> None:
    assert got.version == want.version
    assert got.protocol == want.protocol
    assert got.metadata == want.metadata
    assert got.schema == want.schema
    assert got.txns == want.txns
    assert got.domains == want.domains
    assert got.files().schema == want.files().schema
    assert _files(got) == _files(want)
    assert got.num_records() == want.num_records()
    assert got._state.segment.version == want._state.segment.version
    assert _tombstones(got) == _tombstones(want)
    assert got.timestamp == want.timestamp


def rows(n0: int, n: int, p: str) -> pa.Table:
    ids = list(range(n0, n0 + n))
    return pa.table({"id": pa.array(ids, pa.int64()), "v": [f"v{i}" for i in ids], "p": [p] * n})


class _Writer:
    """Random commits on a TableKit table; tracks just enough to make valid actions."""

    def __init__(self, kit: TableKit) -> None:
        self.kit = kit
        self.adds: dict[str, dict[str, Any]] = {}  # path -> add action without DV
        self.live: dict[str, dict[str, Any] | None] = {}  # path -> current DV
        self.deleted: dict[str, set[int]] = {}
        self.sizes: dict[str, int] = {}
        self.next_id = 0
        self.config: dict[str, str] = {}
        self.partition_by: tuple[str, ...] = ("p",)
        self.table_id = "0b0e2a5e-0000-4000-8000-000000000001"
        self.domains: set[str] = set()

    def create(self) -> None:
        self.kit.create(
            SCHEMA,
            partition_by=["p"],
            protocol=protocol_action(3, 7, ["deletionVectors"], FEATURES),
        )
        meta = json.loads(self.kit.commit_path(0).read_text().splitlines()[2])
        self.table_id = meta["metaData"]["id"]

    def apply(self, kind: str, pick: int, n: int) -> None:
        kit, live = self.kit, sorted(self.live)
        dead = sorted(set(self.adds) - set(self.live))
        if kind == "remove" and live:
            p = live[pick % len(live)]
            kit.commit([remove_action(with_dv(self.adds[p], self.live.pop(p)))])
        elif kind == "readd" and dead:
            p = dead[pick % len(dead)]
            kit.commit([self.adds[p]])
            self.live[p], self.deleted[p] = None, set()
        elif kind == "dv" and live:
            p = live[pick % len(live)]
            new = self.deleted[p] | {pick % self.sizes[p]}
            if len(new) >= self.sizes[p] or new == self.deleted[p]:
                kit.commit([remove_action(with_dv(self.adds[p], self.live.pop(p)))])
                return
            dv = kit.write_dv(new)
            kit.commit(
                [remove_action(with_dv(self.adds[p], self.live[p])), with_dv(self.adds[p], dv)]
            )
            self.live[p], self.deleted[p] = dv, new
        elif kind == "txn":
            last = now_ms() - (pick % 3) * 2 * DAY_MS if pick % 4 else None
            kit.commit([txn_action(f"app{pick % 3}", pick, last)])
        elif kind == "domain":
            name = "delta.rowTracking" if pick % 5 == 0 else f"com.x.d{pick % 2}"
            if name in self.domains and pick % 3 == 0:
                kit.commit([domain_action(name, "{}", removed=True)])
                self.domains.discard(name)
            else:
                cfg = (
                    json.dumps({"rowIdHighWaterMark": pick})
                    if name.startswith("delta.")
                    else f"c{pick}"
                )
                kit.commit([domain_action(name, cfg)])
                self.domains.add(name)
        elif kind == "metadata":
            if pick % 2:
                self.config["delta.setTransactionRetentionDuration"] = "interval 1 days"
            else:
                self.config.pop("delta.setTransactionRetentionDuration", None)
            self.config["lq.test.n"] = str(pick)
            if pick % 7 == 0:  # partition columns change: the base cannot be reused
                self.partition_by = () if self.partition_by else ("p",)
            kit.commit(
                [metadata_action(SCHEMA, self.partition_by, self.config, table_id=self.table_id)]
            )
        elif kind == "protocol":
            extra = ["appendOnly"] if pick % 2 else []
            kit.commit([protocol_action(3, 7, ["deletionVectors"], FEATURES + extra)])
        elif kind == "checkpoint":
            kit.checkpoint(parts=1 + pick % 2)
        else:  # add (also when nothing else applies)
            part = f"x{pick % 3}"
            name = f"f{self.next_id}.parquet"
            add = kit.write_parquet(
                rows(self.next_id, n, part), partition_values={"p": part}, name=name
            )
            kit.commit([add], info=commit_info("WRITE"))
            self.adds[name], self.live[name], self.deleted[name] = add, None, set()
            self.sizes[name] = n
            self.next_id += n


_KINDS = ["add", "add", "remove", "readd", "dv", "dv", "txn", "domain"]
_KINDS += ["metadata", "protocol", "checkpoint", "look"]
_OP = st.tuples(st.sampled_from(_KINDS), st.integers(0, 10_000), st.integers(1, 4))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(_OP, min_size=1, max_size=14))
def test_property_update_equals_fresh_replay(ops: list[tuple[str, int, int]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        kit = TableKit(Path(tmp) / "t")
        writer = _Writer(kit)
        writer.create()
        dt = lq.DeltaTable(kit.uri)
        snap = dt.snapshot()
        pinned = dt.snapshot(version=0)
        for kind, pick, n in ops:
            if kind == "look":  # several commits may land between two looks
                new = snap.update()
                assert_same(new, fresh(kit.uri))
                assert new.version >= snap.version
                snap = new
            else:
                writer.apply(kind, pick, n)
        new = snap.update()
        assert_same(new, fresh(kit.uri))
        assert new.update() is new  # nothing new: the same snapshot
        assert_same(dt.snapshot(), fresh(kit.uri))
        # a time-travel snapshot is never moved silently
        assert dt.snapshot(version=0).version == 0 and pinned.version == 0
        assert_same(pinned, fresh(kit.uri, 0))


def _table(tmp_path: Path, n: int = 3) -> str:
    uri = str(tmp_path / "t")
    for i in range(n):
        lq.write(uri, pa.table({"id": [i]}), mode="append")
    return uri


class _Counting:
    def __init__(self, storage: Any) -> None:
        self.calls: list[str] = []
        for name in ("list_from", "read", "read_range", "exists", "size"):
            orig = getattr(storage, name)

            def wrapped(*a: Any, _orig: Any = orig, _name: str = name, **k: Any) -> Any:
                self.calls.append(_name)
                return _orig(*a, **k)

            setattr(storage, name, wrapped)


def test_unchanged_table_costs_one_list_and_returns_the_same_snapshot(tmp_path: Path) -> None:
    uri = _table(tmp_path)
    dt = lq.DeltaTable(uri)
    first = dt.snapshot()
    counter = _Counting(dt.storage)
    assert dt.snapshot() is first
    assert first.update() is first
    assert counter.calls == ["list_from", "list_from"]


def test_new_commits_by_another_writer_are_seen(tmp_path: Path) -> None:
    uri = _table(tmp_path)
    dt = lq.DeltaTable(uri)
    before = dt.snapshot()
    lq.write(uri, pa.table({"id": [10]}), mode="append")  # another "process": a new object
    lq.DeltaTable(uri).delete("id = 0")
    after = dt.snapshot()
    assert after.version == before.version + 2
    assert before.version == 2 and before.num_files == 3  # unchanged
    assert sorted(after.scan().to_arrow().column("id").to_pylist()) == [1, 2, 10]
    assert_same(after, fresh(uri))


def test_process_cache_serves_new_table_objects(tmp_path: Path) -> None:
    uri = _table(tmp_path)
    lq.DeltaTable(uri).snapshot()
    dt = lq.DeltaTable(uri)
    counter = _Counting(dt.storage)
    snap = dt.snapshot()
    assert counter.calls == ["list_from"]
    assert_same(snap, fresh(uri))


def test_repeated_appends_replay_the_log_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer plans on the process's cached state brought up to date (one LIST, the new
    commits only), as reads do: five appends replay the log once, and a commit by another
    writer in between is seen."""
    import deltalake

    uri = str(tmp_path / "t")
    lq.write(uri, pa.table({"id": [0]}))
    loads: list[int | None] = []

    def counting(storage: Any, version: int | None, *args: Any, **kwargs: Any) -> Any:
        loads.append(version)
        return load_state(storage, version, *args, **kwargs)

    monkeypatch.setattr(log_update, "load_state", counting)
    for i in range(1, 4):
        lq.write(uri, pa.table({"id": [i]}), mode="append")
    deltalake.write_deltalake(uri, pa.table({"id": [99]}), mode="append")
    for i in range(4, 6):
        result = lq.write(uri, pa.table({"id": [i]}), mode="append")
    assert loads == [None]  # the first append's; the create found no table to cache
    assert result.version == 6
    snap = lq.DeltaTable(uri).snapshot()
    assert sorted(snap.scan().to_arrow().column("id").to_pylist()) == [0, 1, 2, 3, 4, 5, 99]
    assert_same(snap, fresh(uri))


def test_many_updates_keep_the_files_in_few_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each update appends its winners (and the slices around superseded files) as new
    chunks; past ``MAX_CHUNKS`` the table is made one chunk again, so a long-running
    reader does not pay per chunk for every commit it has seen. Deletes split chunks too."""
    monkeypatch.setattr(log_update, "MAX_CHUNKS", 4)
    uri = str(tmp_path / "t")
    lq.write(
        uri, pa.table({"id": list(range(10))}), configuration={"delta.checkpointInterval": "1000"}
    )
    dt = lq.DeltaTable(uri)
    snap = dt.snapshot()
    counts = []
    for i in range(12):
        lq.write(uri, pa.table({"id": [100 + i]}), mode="append")
        if i % 3 == 2:
            dt.delete(f"id = {100 + i - 1}")
        snap = snap.update()
        counts.append(snap._state.files.column(0).num_chunks)
    assert max(counts) <= 4
    assert 1 in counts[3:]  # compacted on the way, not only one chunk from the start
    assert _files(snap) == _files(fresh(uri))
    ids = sorted(snap.scan().to_arrow().column("id").to_pylist())
    assert ids == sorted(set(range(10)) | {100 + i for i in range(12)} - {101, 104, 107, 110})


def test_regrouping_joins_short_chunks_and_keeps_long_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(log_update, "MAX_CHUNKS", 4)
    monkeypatch.setattr(log_update, "REGROUP_ROWS", 8)
    monkeypatch.setattr(log_update, "SHORT_CHUNK_ROWS", 4)
    long = pa.record_batch({"id": list(range(10))})
    short = [pa.record_batch({"id": [100 + i]}) for i in range(11)]
    table = pa.Table.from_batches([long, *short[:5], long.slice(2, 6), *short[5:]])
    out = log_update._few_chunks(table)
    assert out.column("id").to_pylist() == table.column("id").to_pylist()
    # in order: the long chunks alone, each run of short ones joined (at most 8 rows)
    assert [b.num_rows for b in out.to_batches()] == [10, 5, 6, 6]
    # the long chunks are the same memory, not copies
    for i, source in ((0, long), (2, long)):
        kept = out.column("id").chunk(i).buffers()[1]
        assert kept is not None and kept.address == source.column(0).buffers()[1].address
    few = pa.Table.from_batches(short[:4])
    assert log_update._few_chunks(few) is few  # at most MAX_CHUNKS: untouched


def test_newer_checkpoint_and_log_cleanup(tmp_path: Path) -> None:
    uri = _table(tmp_path, 2)
    dt = lq.DeltaTable(uri)
    old = dt.snapshot()
    for i in range(3):
        lq.write(uri, pa.table({"id": [100 + i]}), mode="append")
    lq.DeltaTable(uri).checkpoint()
    log = Path(uri) / "_delta_log"
    for v in range(4):  # a cleanup removed everything before the checkpoint's commit
        (log / f"{v:020d}.json").unlink()
    new = old.update()
    assert new.version == 4
    assert_same(new, fresh(uri))
    assert new._state.segment.checkpoint is not None


def test_many_commits_after_a_newer_checkpoint_replay_from_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(log_update, "INCREMENTAL_MAX_COMMITS", 2)
    uri = _table(tmp_path, 1)
    old = lq.DeltaTable(uri).snapshot()
    for i in range(4):
        lq.write(uri, pa.table({"id": [i]}), mode="append")
    lq.DeltaTable(uri).checkpoint()
    assert_same(old.update(), fresh(uri))


def test_replaced_table_is_replayed_afresh(tmp_path: Path) -> None:
    uri = _table(tmp_path, 2)
    old = lq.DeltaTable(uri).snapshot()
    shutil.rmtree(uri)
    lq.write(uri, pa.table({"id": [7, 8, 9], "x": ["a", "b", "c"]}))
    lq.write(uri, pa.table({"id": [1], "x": ["d"]}), mode="append")
    lq.write(uri, pa.table({"id": [2], "x": ["e"]}), mode="append")
    new = old.update()
    assert new.schema.names == ["id", "x"]
    assert_same(new, fresh(uri))
    assert_same(lq.DeltaTable(uri).snapshot(), fresh(uri))


def test_a_version_asked_of_a_replaced_table_is_the_new_tables(tmp_path: Path) -> None:
    uri = _table(tmp_path, 2)
    dt = lq.DeltaTable(uri)
    kept = dt.snapshot()  # the version the table object keeps
    shutil.rmtree(uri)
    lq.write(uri, pa.table({"id": [7, 8, 9], "x": ["a", "b", "c"]}))
    for i in range(kept.version):
        lq.write(uri, pa.table({"id": [i], "x": ["d"]}), mode="append")
    again = dt.snapshot(version=kept.version)
    assert again.metadata.id != kept.metadata.id
    assert_same(again, fresh(uri, kept.version))


def test_the_kept_version_is_served_while_its_log_stands(tmp_path: Path) -> None:
    """Asking for the kept snapshot's version after others committed replays nothing:
    its commit is still listed as it was."""
    uri = _table(tmp_path, 2)
    dt = lq.DeltaTable(uri)
    kept = dt.snapshot()
    lq.write(uri, pa.table({"id": [99]}), mode="append")  # another writer
    assert dt.snapshot(version=kept.version) is kept
    assert dt.snapshot(version=kept.version) is kept
    assert dt.snapshot().version == kept.version + 1


def test_time_travel_snapshots_are_not_cached_as_latest(tmp_path: Path) -> None:
    uri = _table(tmp_path)
    dt = lq.DeltaTable(uri)
    assert dt.snapshot(version=0).version == 0
    assert dt.snapshot().version == 2
    assert dt.snapshot(version=1).version == 1
    assert dt.snapshot(version=2) is dt.snapshot()


def test_a_log_file_rewritten_with_the_same_size_in_the_same_second_is_a_new_base(
    s3_table_uri: str, s3_storage_options: dict[str, Any]
) -> None:
    """S3's LastModified has whole seconds: a table replaced within the second its kept
    commit was written, by a commit of the same size, was taken for the kept one. The
    listing's entity tag tells them apart."""
    from lakequery.log_segment import LogSegment
    from lakequery.protocol.log_files import build_listing
    from lakequery.storage import open_storage

    lq.write(s3_table_uri, pa.table({"id": [1]}), storage_options=s3_storage_options)
    storage = open_storage(s3_table_uri, s3_storage_options)
    (info,) = [i for i in storage.list_from(storage.join("_delta_log"), "") if i.name[0] == "0"]
    assert info.etag  # S3 lists it
    kept = build_listing([(info.path, info.name, info.size, info.modified_ms, info.etag)])
    segment = LogSegment(0, None, kept.commits)
    assert log_update._same_base(kept, segment)
    rewritten = build_listing([(info.path, info.name, info.size, info.modified_ms, "other")])
    assert not log_update._same_base(rewritten, segment)
