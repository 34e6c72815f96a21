"""DeletionVectorWriter end to end: stage DVs, commit them by hand, read the table back
through lakequery's engines and through deltalake and polars.scan_delta."""

from __future__ import annotations

import hashlib
import json
import shutil
import struct
import tempfile
import types
import uuid
import zlib
from pathlib import Path
from typing import Any

import duckdb
import hypothesis.strategies as st
import numpy as np
import pyarrow as pa
import pytest
from dv_bytes import MAGIC
from dv_tables import (
    assert_all_readers,
    check_commit_rules,
    commit,
    enable_deletion_vectors,
    expected_table,
    live_adds,
    normalise,
    state,
    write_deltalake_table,
)
from hypothesis import given, settings

import lakequery as lq
from lakequery.demo import example_table
from lakequery.dv import writer as writer_module
from lakequery.dv.bitmap import deserialize
from lakequery.dv.descriptor import Descriptor
from lakequery.dv.files import load_deletion_vectors
from lakequery.dv.writer import DeletionVectorWriter
from lakequery.errors import DeletionVectorError, StorageError
from lakequery.storage import open_storage

ROWS_PER_FILE = 400
ROW_GROUP = 100  # several row groups per file: DV positions count across them (§11.8)
DEMO_PARTS = {"day": pa.date32()}


def _batch(start: int, n: int) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table(
        {
            "id": ids,
            "s": [f"v{i:05d}" for i in ids],
            "x": (ids * 0.25).astype(np.float64),
        }
    )


@pytest.fixture
def dl_table(tmp_path: Path) -> Path:
    """An unpartitioned deltalake-written table of 5 files x 400 rows, DVs enabled."""
    root = tmp_path / "dl"
    write_deltalake_table(
        root, [_batch(k * ROWS_PER_FILE, ROWS_PER_FILE) for k in range(5)], ROW_GROUP
    )
    enable_deletion_vectors(root)
    return root


@pytest.fixture
def demo_table(tmp_path: Path) -> Path:
    root = tmp_path / "demo"
    shutil.copytree(example_table(), root)
    enable_deletion_vectors(root)
    return root


def _files_by_first_id(root: Path) -> list[str]:
    """Live data file paths ordered by the smallest id they hold."""
    adds = live_adds(root)
    return sorted(adds, key=lambda p: json.loads(adds[p]["stats"])["minValues"]["id"])


def _dv_files(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in root.rglob("deletion_vector_*.bin")
    }


def _actions_by_kind(actions: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    adds = {a["add"]["path"]: a["add"] for a in actions if "add" in a}
    removes = {a["remove"]["path"]: a["remove"] for a in actions if "remove" in a}
    assert len(adds) + len(removes) == len(actions)
    return adds, removes


def _read_record_independently(root: Path, dv: dict[str, Any]) -> list[int]:
    """Digest §11.5 by hand: version byte, BE size, payload, BE CRC."""
    d = Descriptor.from_dict(dv)
    raw = Path(d.absolute_path(str(root))).read_bytes()
    assert raw[0] == 1
    off = dv["offset"]
    (size,) = struct.unpack_from(">I", raw, off)
    assert size == dv["sizeInBytes"]
    data = raw[off + 4 : off + 4 + size]
    assert struct.unpack_from("<I", data, 0)[0] == MAGIC
    assert struct.unpack_from(">I", raw, off + 4 + size)[0] == zlib.crc32(data)
    return list(deserialize(data))


def _check_state_agrees(root: Path) -> None:
    """lakequery's snapshot sees the same live files and DVs as an independent replay."""
    snap = lq.DeltaTable(str(root)).snapshot()
    ours = {
        (p, dv_id_of(d))
        for p, d in zip(
            snap.files().column("path").to_pylist(),
            snap.files().column("deletion_vector").to_pylist(),
            strict=True,
        )
    }
    theirs = set(state(root).adds)
    assert ours == theirs


def dv_id_of(d: dict[str, Any] | None) -> str | None:
    if not d or d.get("storageType") is None:
        return None
    return Descriptor.from_dict(d).unique_id


# --- the deltalake-written table -----------------------------------------------------------------


def test_protocol_upgrade_is_consistent(dl_table: Path) -> None:
    st_ = state(dl_table)
    assert st_.protocol == {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": ["deletionVectors"],
        "writerFeatures": ["appendOnly", "invariants", "deletionVectors"],
    }
    assert st_.metadata is not None
    assert st_.metadata["configuration"]["delta.enableDeletionVectors"] == "true"
    assert lq.DeltaTable(str(dl_table)).snapshot().scan().to_arrow().num_rows == 2000


def test_three_rounds_of_deletes_on_a_deltalake_table(dl_table: Path) -> None:
    root = dl_table
    f0, f1, f2, f3, f4 = _files_by_first_id(root)
    storage = open_storage(str(root))
    deleted: dict[str, set[int]] = {}

    # round 1: inline (f0), two DVs in one shared file (f1, f2), a whole file (f4)
    adds = live_adds(root)
    w = DeletionVectorWriter(storage, inline_threshold=64)
    w.delete_rows(adds[f0], [1, 2, 3])
    w.delete_rows(adds[f1], list(range(0, ROWS_PER_FILE, 2)))
    w.delete_rows(adds[f2], np.arange(90, 130))  # straddles row groups 0/1
    w.delete_rows(adds[f4], range(ROWS_PER_FILE))
    actions = w.finish(now_ms=1_234)
    new_adds, removes = _actions_by_kind(actions)
    assert set(removes) == {f0, f1, f2, f4}
    assert set(new_adds) == {f0, f1, f2}
    for path, rm in removes.items():
        assert rm["deletionTimestamp"] == 1_234
        assert rm["dataChange"] is True
        assert rm["extendedFileMetadata"] is True
        assert rm["size"] == adds[path]["size"]
        assert "deletionVector" not in rm
    inline = new_adds[f0]["deletionVector"]
    assert inline["storageType"] == "i"
    assert inline.get("offset") is None
    assert list(Descriptor.from_dict(inline).inline_bytes()[:4]) == list(struct.pack("<I", MAGIC))
    d1, d2 = new_adds[f1]["deletionVector"], new_adds[f2]["deletionVector"]
    assert d1["storageType"] == d2["storageType"] == "u"
    assert d1["pathOrInlineDv"] == d2["pathOrInlineDv"]  # one DV file for the commit
    assert sorted([d1["offset"], d2["offset"]]) == [
        1,
        1 + min(d1, d2, key=lambda d: d["offset"])["sizeInBytes"] + 8,
    ]
    assert _read_record_independently(root, d1) == list(range(0, ROWS_PER_FILE, 2))
    assert _read_record_independently(root, d2) == list(range(90, 130))
    (dv_file,) = _dv_files(root)
    assert (root / dv_file).stat().st_size == 1 + d1["sizeInBytes"] + d2["sizeInBytes"] + 16
    for path, add in new_adds.items():
        stats = json.loads(add["stats"])
        assert stats["tightBounds"] is False
        assert stats["numRecords"] == ROWS_PER_FILE  # physical count, unchanged
        assert stats["minValues"] == json.loads(adds[path]["stats"])["minValues"]
        assert add["dataChange"] is True
        assert add["size"] == adds[path]["size"]
    commit(root, actions)
    deleted[f0] = {1, 2, 3}
    deleted[f1] = set(range(0, ROWS_PER_FILE, 2))
    deleted[f2] = set(range(90, 130))
    _check_state_agrees(root)
    assert f4 not in live_adds(root)
    expected = expected_table(root, deleted)
    assert len(expected) == 2000 - 3 - 200 - 40 - 400
    assert_all_readers(root, expected)
    files_after_1 = _dv_files(root)

    # round 2: unions with inline and on-disk DVs, a no-op, and a fresh inline DV
    adds = live_adds(root)
    w = DeletionVectorWriter(storage, inline_threshold=36)
    w.delete_rows(adds[f0], [3, 4, 399])
    w.delete_rows(adds[f1], [0, 2])  # already deleted: nothing to do
    w.delete_rows(adds[f2], [0])
    w.delete_rows(adds[f2], [399])  # two calls for one file are merged
    w.delete_rows(adds[f3], [7])
    actions = w.finish()
    new_adds, removes = _actions_by_kind(actions)
    assert set(removes) == set(new_adds) == {f0, f2, f3}
    # the remove carries the DV being replaced, exactly as it was logged
    assert removes[f0]["deletionVector"] == adds[f0]["deletionVector"]
    assert removes[f2]["deletionVector"] == adds[f2]["deletionVector"]
    assert "deletionVector" not in removes[f3]
    assert new_adds[f0]["deletionVector"]["cardinality"] == 5
    assert new_adds[f2]["deletionVector"]["cardinality"] == 42
    assert new_adds[f3]["deletionVector"]["cardinality"] == 1
    for add in new_adds.values():  # inline iff the serialized bitmap fits the threshold
        dv = add["deletionVector"]
        assert (dv["storageType"] == "i") == (dv["sizeInBytes"] <= 36)
    # one row -> 34 bytes (array container); f2's three runs need at least 39 bytes
    assert new_adds[f3]["deletionVector"]["storageType"] == "i"
    assert new_adds[f2]["deletionVector"]["storageType"] == "u"
    assert _read_record_independently(root, new_adds[f2]["deletionVector"]) == sorted(
        {0, 399} | set(range(90, 130))
    )
    # the old DV file is untouched and a second one appeared
    files_after_2 = _dv_files(root)
    assert {k: files_after_2[k] for k in files_after_1} == files_after_1
    assert len(files_after_2) == 2
    assert new_adds[f2]["deletionVector"]["pathOrInlineDv"] != d2["pathOrInlineDv"]
    commit(root, actions)
    deleted[f0] |= {4, 399}
    deleted[f2] |= {0, 399}
    deleted[f3] = {7}
    _check_state_agrees(root)
    expected = expected_table(root, deleted)
    assert len(expected) == 2000 - 5 - 200 - 42 - 1 - 400
    assert_all_readers(root, expected)

    # round 3: delete everything left in files that carry inline / on-disk DVs -> remove only
    adds = live_adds(root)
    w = DeletionVectorWriter(storage)
    w.delete_rows(adds[f0], range(ROWS_PER_FILE))
    w.delete_rows(adds[f2], [r for r in range(ROWS_PER_FILE) if r not in deleted[f2]])
    before = _dv_files(root)
    actions = w.finish()
    assert _dv_files(root) == before  # nothing to write
    new_adds, removes = _actions_by_kind(actions)
    assert new_adds == {}
    assert set(removes) == {f0, f2}
    assert removes[f0]["deletionVector"] == adds[f0]["deletionVector"]
    assert removes[f2]["deletionVector"] == adds[f2]["deletionVector"]
    commit(root, actions)
    del deleted[f0], deleted[f2]
    _check_state_agrees(root)
    assert set(live_adds(root)) == {f1, f3}
    expected = expected_table(root, deleted)
    assert len(expected) == 2 * ROWS_PER_FILE - 200 - 1
    assert_all_readers(root, expected)


def test_inline_threshold_zero_puts_everything_on_disk(dl_table: Path) -> None:
    root = dl_table
    files = _files_by_first_id(root)
    adds = live_adds(root)
    w = DeletionVectorWriter(open_storage(str(root)), inline_threshold=0)
    for k, path in enumerate(files):
        w.delete_rows(adds[path], [k, 100 + k, 399])
    actions = w.finish()
    new_adds, _ = _actions_by_kind(actions)
    dvs = [new_adds[p]["deletionVector"] for p in files]
    assert {d["storageType"] for d in dvs} == {"u"}
    assert len({d["pathOrInlineDv"] for d in dvs}) == 1
    offsets = sorted(d["offset"] for d in dvs)
    assert offsets[0] == 1
    assert len(set(offsets)) == len(files)
    for k, d in enumerate(dvs):
        assert _read_record_independently(root, d) == [k, 100 + k, 399]
    commit(root, actions)
    deleted = {p: {k, 100 + k, 399} for k, p in enumerate(files)}
    assert_all_readers(root, expected_table(root, deleted))


def test_large_threshold_keeps_everything_inline(dl_table: Path) -> None:
    root = dl_table
    files = _files_by_first_id(root)
    adds = live_adds(root)
    w = DeletionVectorWriter(open_storage(str(root)), inline_threshold=10_000)
    w.delete_rows(adds[files[0]], range(0, 400, 3))
    w.delete_rows(adds[files[1]], [0, 399])
    actions = w.finish()
    assert _dv_files(root) == {}
    new_adds, _ = _actions_by_kind(actions)
    assert {a["deletionVector"]["storageType"] for a in new_adds.values()} == {"i"}
    commit(root, actions)
    deleted = {files[0]: set(range(0, 400, 3)), files[1]: {0, 399}}
    assert_all_readers(root, expected_table(root, deleted))


def test_deleting_every_row_of_a_file_without_dv_is_a_remove_only(dl_table: Path) -> None:
    root = dl_table
    f0 = _files_by_first_id(root)[0]
    adds = live_adds(root)
    w = DeletionVectorWriter(open_storage(str(root)))
    w.delete_rows(adds[f0], range(200))
    w.delete_rows(adds[f0], range(200, 400))
    actions = w.finish()
    assert [next(iter(a)) for a in actions] == ["remove"]
    assert actions[0]["remove"]["path"] == f0
    assert _dv_files(root) == {}
    commit(root, actions)
    assert_all_readers(root, expected_table(root, {}))
    assert len(expected_table(root, {})) == 1600


def test_deleting_no_rows_changes_nothing(dl_table: Path) -> None:
    """A file with no new deleted rows gets no actions (as for files that already have a DV)."""
    root = dl_table
    f0 = _files_by_first_id(root)[0]
    w = DeletionVectorWriter(open_storage(str(root)))
    w.delete_rows(live_adds(root)[f0], [])
    assert w.finish() == []


def test_second_commit_never_overwrites_a_dv_file(dl_table: Path) -> None:
    root = dl_table
    f0, f1 = _files_by_first_id(root)[:2]
    storage = open_storage(str(root))
    w = DeletionVectorWriter(storage, inline_threshold=0)
    w.delete_rows(live_adds(root)[f0], [5])
    commit(root, w.finish())
    first = _dv_files(root)
    w = DeletionVectorWriter(storage, inline_threshold=0)
    w.delete_rows(live_adds(root)[f1], [6])
    commit(root, w.finish())
    second = _dv_files(root)
    assert len(first) == 1
    assert len(second) == 2
    assert {k: second[k] for k in first} == first
    assert_all_readers(root, expected_table(root, {f0: {5}, f1: {6}}))


def test_existing_dv_file_name_is_refused_not_overwritten(
    dl_table: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = dl_table
    fixed = uuid.UUID("61d16c75-6994-46b7-a15b-8b538852e50e")
    squatter = root / f"deletion_vector_{fixed}.bin"
    squatter.write_bytes(b"\x01do not touch")
    monkeypatch.setattr(
        writer_module, "uuid", types.SimpleNamespace(uuid4=lambda: fixed, UUID=uuid.UUID)
    )
    w = DeletionVectorWriter(open_storage(str(root)), inline_threshold=0)
    w.delete_rows(live_adds(root)[_files_by_first_id(root)[0]], [1, 2])
    with pytest.raises(StorageError):
        w.finish()
    assert squatter.read_bytes() == b"\x01do not touch"


def test_rows_outside_the_file_are_refused(dl_table: Path) -> None:
    add = live_adds(dl_table)[_files_by_first_id(dl_table)[0]]
    w = DeletionVectorWriter(open_storage(str(dl_table)))
    with pytest.raises(DeletionVectorError):
        w.delete_rows(add, [ROWS_PER_FILE])
    with pytest.raises(DeletionVectorError):
        w.delete_rows(add, [-1, 3])


def test_a_file_without_num_records_cannot_carry_a_dv(tmp_path: Path) -> None:
    add = {
        "path": "a.parquet",
        "partitionValues": {},
        "size": 1,
        "modificationTime": 0,
        "dataChange": True,
    }
    w = DeletionVectorWriter(open_storage(str(tmp_path)))
    with pytest.raises(DeletionVectorError) as info:
        w.delete_rows(add, [0])
    assert info.value.data_file == "a.parquet"
    with pytest.raises(DeletionVectorError):
        w.delete_rows({**add, "stats": json.dumps({"minValues": {}})}, [0])


def test_writer_on_memory_storage(memory_table_uri: str) -> None:
    storage = open_storage(memory_table_uri)
    add = {
        "path": "p.parquet",
        "partitionValues": {},
        "size": 10,
        "modificationTime": 0,
        "dataChange": True,
        "stats": json.dumps({"numRecords": 2**33}),
    }
    rows = [0, 5, 2**32 + 1, 2**33 - 1]
    w = DeletionVectorWriter(storage, inline_threshold=0, prefix_length=3)
    w.delete_rows(add, rows)
    actions = w.finish()
    new_adds, _ = _actions_by_kind(actions)
    d = Descriptor.from_dict(new_adds["p.parquet"]["deletionVector"])
    assert len(d.path_or_inline_dv) == 23
    location = d.absolute_path(storage.root)
    assert location.startswith(f"{storage.root}/{d.path_or_inline_dv[:3]}/deletion_vector_")
    assert storage.exists(location)
    (bm,) = load_deletion_vectors(storage, storage.root, [("p.parquet", d)])
    assert list(bm) == rows


# --- the demo table (partitioned, hand-written log) ----------------------------------------------


def test_deletes_on_the_partitioned_demo_table(demo_table: Path) -> None:
    root = demo_table
    files = _files_by_first_id(root)  # four files of ten rows, one per day
    assert len(files) == 4
    adds = live_adds(root)
    before = expected_table(root, {}, DEMO_PARTS)
    assert len(before) == 40
    # payload of k rows in one container: 32 + 2k bytes; threshold 36 -> 1-2 rows inline
    w = DeletionVectorWriter(open_storage(str(root)), inline_threshold=36, prefix_length=2)
    w.delete_rows(adds[files[0]], [0])
    w.delete_rows(adds[files[1]], [1, 5, 9])
    w.delete_rows(adds[files[2]], range(10))
    w.delete_rows(adds[files[3]], [9])
    actions = w.finish()
    new_adds, removes = _actions_by_kind(actions)
    assert set(removes) == set(files)
    assert set(new_adds) == {files[0], files[1], files[3]}
    assert new_adds[files[0]]["deletionVector"]["storageType"] == "i"
    assert new_adds[files[3]]["deletionVector"]["storageType"] == "i"
    on_disk = new_adds[files[1]]["deletionVector"]
    assert on_disk["storageType"] == "u"
    assert len(on_disk["pathOrInlineDv"]) == 22
    (dv_file,) = _dv_files(root)
    assert dv_file.startswith(on_disk["pathOrInlineDv"][:2] + "/")
    for path in new_adds:
        assert new_adds[path]["partitionValues"] == adds[path]["partitionValues"]
        assert removes[path]["partitionValues"] == adds[path]["partitionValues"]
    commit(root, actions)
    deleted = {files[0]: {0}, files[1]: {1, 5, 9}, files[3]: {9}}
    expected = expected_table(root, deleted, DEMO_PARTS)
    assert len(expected) == 40 - 1 - 3 - 10 - 1
    _check_state_agrees(root)
    assert_all_readers(root, expected)

    # pruned and projected scans still apply the DVs
    snap = lq.DeltaTable(str(root)).snapshot()
    day1 = adds[files[1]]["partitionValues"]["day"]
    scan = snap.scan(columns=["id"], filter=f"day = DATE '{day1}'")
    want = sorted(r[2] for r in expected if str(r[1]) == day1)  # columns: amount, day, id, kind
    assert len(want) == 7
    assert sorted(scan.to_arrow().column("id").to_pylist()) == want
    assert sorted(scan.to_duckdb().to_arrow_table().column("id").to_pylist()) == want
    assert sorted(scan.to_polars().collect().get_column("id").to_list()) == want


# --- property: random deletes agree with the oracle ---------------------------------------------


@settings(max_examples=12, deadline=None)
@given(
    rounds=st.lists(
        st.lists(
            st.tuples(st.integers(0, 2), st.sets(st.integers(0, 149), max_size=60)), max_size=3
        ),
        min_size=1,
        max_size=3,
    ),
    threshold=st.sampled_from([0, 40, 64, 10_000]),
)
def test_random_delete_rounds_match_the_oracle(
    rounds: list[list[tuple[int, set[int]]]], threshold: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "t"
        write_deltalake_table(root, [_batch(k * 150, 150) for k in range(3)], 40)
        enable_deletion_vectors(root)
        files = _files_by_first_id(root)
        storage = open_storage(str(root))
        deleted: dict[str, set[int]] = {}
        for rnd in rounds:
            adds = live_adds(root)
            w = DeletionVectorWriter(storage, inline_threshold=threshold)
            for k, rows in rnd:
                if files[k] in adds:
                    w.delete_rows(adds[files[k]], sorted(rows))
                    deleted.setdefault(files[k], set()).update(rows)
            actions = w.finish()
            check_commit_rules(actions)
            if actions:
                commit(root, actions)
            for path, rows in list(deleted.items()):
                if len(rows) == 150:
                    assert path not in live_adds(root)
                    del deleted[path]
        scan = lq.DeltaTable(str(root)).snapshot().scan()
        expected = expected_table(root, deleted)
        assert normalise(scan.to_arrow()) == expected
        assert normalise(scan.to_duckdb().to_arrow_table()) == expected
        assert normalise(scan.to_polars().collect().to_arrow()) == expected


@pytest.mark.parametrize(
    "flt",
    [
        "id >= 950 AND id < 1100",  # skips row groups of the file holding ids 800..1199
        "id < 30 OR id > 1990",
        "s = 'v00925' OR s = 'v00950' OR s = 'v00952'",  # two deleted, one kept
        "x > 450.0",
    ],
)
def test_filtered_scans_keep_file_row_positions(dl_table: Path, flt: str) -> None:
    """Row-group skipping must not shift DV positions (digest §11.8)."""
    root = dl_table
    files = _files_by_first_id(root)
    adds = live_adds(root)
    deleted = {
        files[0]: {0, 1, 2, 25, 399},
        files[2]: set(range(90, 130)) | {150, 151, 399},  # ids 890..929, 950, 951, 1199
        files[4]: set(range(350, 400)),  # ids 1950..1999
    }
    w = DeletionVectorWriter(open_storage(str(root)), inline_threshold=40)
    for path, rows in deleted.items():
        w.delete_rows(adds[path], sorted(rows))
    commit(root, w.finish())
    columns = list(zip(*expected_table(root, deleted), strict=True))
    survivors = pa.table(dict(zip(["id", "s", "x"], columns, strict=True)))
    con = duckdb.connect()
    con.register("survivors", survivors)
    want = normalise(con.sql(f"SELECT * FROM survivors WHERE {flt}").to_arrow_table())
    assert want, "the filter should keep some rows"
    scan = lq.DeltaTable(str(root)).snapshot().scan(filter=flt)
    assert normalise(scan.to_arrow()) == want
    assert normalise(scan.to_duckdb().to_arrow_table()) == want
    assert normalise(scan.to_polars().collect().to_arrow()) == want
