"""SHALLOW CLONE (``DeltaTable.clone``): one commit referencing the source's files by
absolute URI, read alike by lakequery's engines and ``deltalake``, and a table of its own
afterwards: DML, OPTIMIZE, RESTORE, checkpoints and VACUUM on the clone never touch the
source's files or rows."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from maint_tables import (
    DV_CONFIG,
    assert_readers_agree,
    deltalake_rows,
    lakequery_rows,
    normalise,
)

import lakequery as lq


def _source(tmp_path: Path) -> str:
    """A partitioned DV table: v0 write, v1 append, v2 DV delete (on-disk DVs: the
    bitmaps are too large to be inline)."""
    uri = str(tmp_path / "src")
    ids = list(range(200))
    rows = pa.table({"id": ids, "p": ["a", "b"] * 100, "v": [f"s{i}" for i in ids]})
    lq.write(uri, rows, partition_by=["p"], configuration=DV_CONFIG)
    extra = pa.table({"id": [200, 201], "p": ["a", "c"], "v": ["s200", "s201"]})
    lq.write(uri, extra, mode="append")
    lq.DeltaTable(uri).delete("id % 3 = 0")
    return uri


SOURCE_IDS = [i for i in range(202) if i % 3]


def _commit(uri: str, version: int) -> list[dict[str, Any]]:
    text = (Path(uri) / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines()]


def _data_files(uri: str) -> dict[str, float]:
    """Every file under the table root outside the log, with its mtime."""
    return {
        str(p): p.stat().st_mtime
        for p in Path(uri).rglob("*")
        if p.is_file() and "_delta_log" not in p.parts
    }


def _ids(uri: str) -> list[int]:
    got = lq.DeltaTable(uri).snapshot().scan(columns=["id"]).to_arrow().column("id")
    return sorted(got.to_pylist())


def test_clone_commit_and_every_reader(tmp_path: Path) -> None:
    src = _source(tmp_path)
    source = lq.DeltaTable(src)
    expected = lakequery_rows(src)["to_arrow"]
    assert [r[0] for r in sorted(expected)] == SOURCE_IDS
    clone = source.clone(str(tmp_path / "clone"))
    assert clone.snapshot().version == 0
    # one commit: commitInfo CLONE (Spark's parameters), protocol, metadata, the adds
    actions = _commit(clone.uri, 0)
    info = actions[0]["commitInfo"]
    assert info["operation"] == "CLONE"
    assert info["operationParameters"] == {
        "source": f"delta.`file:{src}`",
        "sourceVersion": "2",
        "isShallow": "true",
    }
    assert info["operationMetrics"]["sourceNumOfFiles"] == str(source.snapshot().num_files)
    assert info["operationMetrics"]["numCopiedFiles"] == "0"
    kinds = [next(iter(a)) for a in actions]
    assert kinds.count("commitInfo") == kinds.count("protocol") == kinds.count("metaData") == 1
    assert set(kinds) == {"commitInfo", "protocol", "metaData", "add"}
    meta = next(a["metaData"] for a in actions if "metaData" in a)
    src_meta = source.snapshot().metadata
    assert meta["id"] != src_meta.id and meta["partitionColumns"] == ["p"]
    assert meta["createdTime"] == src_meta.created_time  # as Spark's clone keeps it
    assert meta["schemaString"] == src_meta.to_action()["schemaString"]
    proto = next(a["protocol"] for a in actions if "protocol" in a)
    assert proto == source.snapshot().protocol.to_action()
    adds = [a["add"] for a in actions if "add" in a]
    assert len(adds) == source.snapshot().num_files
    assert all(a["path"].startswith(f"file:{src}/p=") for a in adds)
    dvs = [a["deletionVector"] for a in adds if a.get("deletionVector")]
    on_disk = [d for d in dvs if d["storageType"] != "i"]
    assert on_disk and all(d["storageType"] == "p" for d in on_disk)
    assert all(d["pathOrInlineDv"].startswith(f"file:{src}/") for d in on_disk)
    # no data file was copied or written
    assert _data_files(clone.uri) == {}
    # lakequery's engines and deltalake read the source's rows, DVs applied
    assert_readers_agree(clone.uri, expected)
    filtered = clone.snapshot().scan(filter="p = 'a' AND id > 190").to_arrow()
    assert sorted(filtered.column("id").to_pylist()) == [194, 196, 200]


def test_clone_of_an_older_version_and_of_a_clone(tmp_path: Path) -> None:
    src = _source(tmp_path)
    old = lq.DeltaTable(src).clone(str(tmp_path / "v1"), version=1)
    assert _ids(old.uri) == list(range(202))
    assert _commit(old.uri, 0)[0]["commitInfo"]["operationParameters"]["sourceVersion"] == "1"
    when = next(h.timestamp for h in lq.DeltaTable(src).history() if h.version == 1)
    by_time = lq.DeltaTable(src).clone(str(tmp_path / "as-of"), as_of=when)
    assert _commit(by_time.uri, 0)[0]["commitInfo"]["operationParameters"]["sourceVersion"] == "1"
    again = old.clone(str(tmp_path / "v1-again"))
    # a clone of a clone references the original files, not the first clone's root
    paths = [a["add"]["path"] for a in _commit(again.uri, 0) if "add" in a]
    assert all(p.startswith(f"file:{src}/") for p in paths)
    assert_readers_agree(again.uri, lakequery_rows(old.uri)["to_arrow"])


def test_dml_on_the_clone_leaves_the_source_intact(tmp_path: Path) -> None:
    src = _source(tmp_path)
    before = lakequery_rows(src)["to_arrow"]
    source_files = _data_files(src)
    clone = lq.DeltaTable(src).clone(str(tmp_path / "clone"))
    clone.delete("id < 4")  # DVs on the source's files, written in the clone
    clone.update("p = 'b'", set={"v": "'changed'"})
    clone.delete("p = 'c'")  # partition-only: removes the whole file
    lq.write(clone.uri, pa.table({"id": [1000], "p": ["a"], "v": ["new"]}), mode="append")
    clone.delete("id = 7", copy_on_write=True)
    merge_source = pa.table({"id": [9, 200], "p": ["b", "a"], "v": ["m9", "m200"]})  # 9: new
    (
        clone.merge(merge_source, on="t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    clone.optimize()
    # the source: same rows, same files, untouched (deltalake agrees)
    assert lakequery_rows(src)["to_arrow"] == before
    assert deltalake_rows(src) == before
    assert _data_files(src) == source_files
    # the clone: what the statements say
    rows = lq.DeltaTable(clone.uri).snapshot().scan().to_arrow()
    expected = (set(SOURCE_IDS) - {0, 1, 2, 3, 7, 201}) | {1000, 9}
    assert sorted(rows.column("id").to_pylist()) == sorted(expected)
    by_id = {r["id"]: r for r in rows.to_pylist()}
    assert by_id[11]["v"] == "changed" and by_id[10]["v"] == "s10"
    assert by_id[9]["v"] == "m9" and by_id[200]["v"] == "m200"
    assert_readers_agree(clone.uri, lakequery_rows(clone.uri)["to_arrow"])
    # the clone's removes name the source's files by their absolute URI
    removed = [
        a["remove"]["path"]
        for v in range(1, lq.DeltaTable(clone.uri).snapshot().version + 1)
        for a in _commit(clone.uri, v)
        if "remove" in a
    ]
    assert removed and any(p.startswith(f"file:{src}/") for p in removed)


def _age(uri: str, hours: float) -> None:
    old = time.time() - hours * 3600
    for p in Path(uri).rglob("*"):
        if p.is_file() and "_delta_log" not in p.parts:
            os.utime(p, (old, old))


def test_vacuum_on_the_clone_deletes_nothing_of_the_source(tmp_path: Path) -> None:
    src = _source(tmp_path)
    before = lakequery_rows(src)["to_arrow"]
    source_files = _data_files(src)
    clone = lq.DeltaTable(src).clone(str(tmp_path / "clone"))
    clone.delete("id < 4")
    clone.optimize()  # retires every source file of the clone (removes), writes its own
    live = [str(p) for p in clone.snapshot().files().column("path").to_pylist()]
    assert live and not any(p.startswith(("/", "file:")) for p in live)
    _age(clone.uri, hours=1000)
    _age(src, hours=1000)
    result = clone.vacuum(retention_hours=0, enforce_retention=False, dry_run=False)
    # only the clone's own DV files (superseded by OPTIMIZE) are deleted and counted
    assert result.files_deleted == len(result.files) > 0
    assert all(f.startswith(clone.uri + "/") for f in result.files)
    assert _data_files(src).keys() == source_files.keys()
    assert lakequery_rows(src)["to_arrow"] == before
    assert deltalake_rows(src) == before
    assert_readers_agree(clone.uri, lakequery_rows(clone.uri)["to_arrow"])


def test_restore_and_checkpoint_on_the_clone(tmp_path: Path) -> None:
    src = _source(tmp_path)
    clone = lq.DeltaTable(src).clone(str(tmp_path / "clone"))
    first = lakequery_rows(clone.uri)["to_arrow"]
    clone.delete("p = 'a'")
    assert clone.restore(version=0).files_added > 0  # the source's files come back
    assert lakequery_rows(clone.uri)["to_arrow"] == first
    clone.checkpoint()
    version = clone.snapshot().version
    checkpoint = Path(clone.uri) / "_delta_log" / f"{version:020d}.checkpoint.parquet"
    adds = [a for a in pq.read_table(checkpoint).column("add").to_pylist() if a]
    assert adds and all(a["path"].startswith(f"file:{src}/") for a in adds)
    # a fresh reader starts at the checkpoint
    assert_readers_agree(clone.uri, first)
    # the source vacuumed away what the clone references: RESTORE refuses, naming it
    lq.DeltaTable(src).delete("p = 'b'")
    clone.delete("p = 'b'")
    _age(src, hours=1000)
    vac = lq.DeltaTable(src).vacuum(retention_hours=0, enforce_retention=False, dry_run=False)
    assert vac.files_deleted > 0
    with pytest.raises(lq.RestoreError, match="p=b"):
        clone.restore(version=version)


def test_clone_refusals(tmp_path: Path) -> None:
    src = _source(tmp_path)
    source = lq.DeltaTable(src)
    target = str(tmp_path / "clone")
    source.clone(target)
    with pytest.raises(lq.TableAlreadyExistsError):
        source.clone(target)
    with pytest.raises(lq.InvalidPathError, match="inside its source"):
        source.clone(str(tmp_path / "src" / "nested"))
    with pytest.raises(lq.InvalidPathError, match="inside its source"):
        lq.DeltaTable(target).clone(str(tmp_path))  # would contain the source
    with pytest.raises(lq.InvalidPathError, match="same kind of storage"):
        source.clone("memory://clone-refusal/t")
    assert not (tmp_path / "src" / "nested").exists()


def _engines(dt: lq.DeltaTable) -> dict[str, list[tuple[Any, ...]]]:
    scan = dt.snapshot().scan()
    return {
        "to_arrow": normalise(scan.to_arrow()),
        "to_duckdb": normalise(scan.to_duckdb().to_arrow_table()),
        "to_polars": normalise(scan.to_polars().collect().to_arrow()),
    }


def test_clone_on_s3(s3_table_uri: str, s3_storage_options: dict[str, Any]) -> None:
    """On S3 the clone's adds are s3:// URIs, read by every engine with the clone's
    storage options; DML and VACUUM on the clone leave the source alone."""
    opts = s3_storage_options
    ids = list(range(120))
    rows = pa.table({"id": ids, "p": ["a", "b", "c"] * 40})
    lq.write(s3_table_uri, rows, partition_by=["p"], configuration=DV_CONFIG, storage_options=opts)
    source = lq.DeltaTable(s3_table_uri, storage_options=opts)
    source.delete("id % 4 = 0")
    before = _engines(source)
    clone = source.clone(s3_table_uri + "-clone")
    paths = clone.snapshot().files().column("path").to_pylist()
    assert paths and all(p.startswith(s3_table_uri + "/p=") for p in paths)
    assert _engines(clone) == before
    clone.delete("p = 'a' OR id < 10")
    clone.optimize()
    time.sleep(0.01)
    done = clone.vacuum(retention_hours=0, enforce_retention=False, dry_run=False)
    assert all(f.startswith(s3_table_uri + "-clone/") for f in done.files)
    expected = sorted(i for i in ids if i % 4 and i % 3 != 0 and i >= 10)
    got = clone.snapshot().scan(columns=["id"]).to_arrow().column("id").to_pylist()
    assert sorted(got) == expected
    assert _engines(lq.DeltaTable(s3_table_uri, storage_options=opts)) == before


def test_clone_of_a_row_tracking_table_keeps_row_ids(tmp_path: Path) -> None:
    src = str(tmp_path / "src")
    lq.write(src, pa.table({"id": [1, 2, 3]}), configuration={"delta.enableRowTracking": "true"})
    lq.write(src, pa.table({"id": [4, 5]}), mode="append")
    clone = lq.DeltaTable(src).clone(str(tmp_path / "clone"))
    base = {
        Path(a["path"]).name: a["baseRowId"]
        for v in (0, 1)
        for a in (x["add"] for x in _commit(src, v) if "add" in x)
    }
    adds = [a["add"] for a in _commit(clone.uri, 0) if "add" in a]
    assert {Path(a["path"]).name: a["baseRowId"] for a in adds} == base
    assert {a["defaultRowCommitVersion"] for a in adds} == {0}
    assert clone.snapshot().domains == lq.DeltaTable(src).snapshot().domains
    # the clone's next rows get ids above the copied high-water mark
    lq.write(clone.uri, pa.table({"id": [6]}), mode="append")
    new = next(a["add"] for a in _commit(clone.uri, 1) if "add" in a)
    assert new["baseRowId"] == max(base.values()) + 2 and new["defaultRowCommitVersion"] == 1
