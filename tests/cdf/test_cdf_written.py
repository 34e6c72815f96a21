"""Change feeds of tables written here: by deltalake (DELETE / UPDATE / MERGE write
change files) and by lakequery (appends and overwrites, whose changes come from the
add and remove actions), compared with deltalake's ``load_cdf`` and by hand."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pytest
from cdfkit import CDF, by_version, check_every_version, oracle, rows, simple
from deltalake import DeltaTable as DeltaRsTable
from deltalake import write_deltalake

import lakequery as lq


def _people(ids: list[int], part: list[str] | None = None) -> pa.Table:
    data = {
        "id": pa.array(ids, pa.int64()),
        "name": [f"n{i}" for i in ids],
        "score": pa.array([i * 1.5 for i in ids], pa.float64()),
    }
    if part is not None:
        data["region"] = part
    return pa.table(data)


def _commit_actions(root: str, version: int) -> list[str]:
    path = Path(root) / "_delta_log" / f"{version:020d}.json"
    return [next(iter(json.loads(line))) for line in path.read_text().splitlines()]


def _all_ranges_match(root: str) -> None:
    latest = lq.DeltaTable(root).snapshot().version
    for start in range(latest + 1):
        for end in range(start, latest + 1):
            ours = lq.DeltaTable(root).changes(starting_version=start, ending_version=end)
            assert rows(ours.to_arrow()) == rows(oracle(root, start, end)), (start, end)
    feed = lq.DeltaTable(root).changes(starting_version=0)
    assert rows(feed.to_duckdb()) == rows(feed.to_arrow())
    assert rows(feed.to_polars()) == rows(feed.to_arrow())


@pytest.mark.parametrize("partitioned", [False, True])
def test_deltalake_dml_change_files(tmp_path: Path, partitioned: bool) -> None:
    root = str(tmp_path / "t")
    part = ["eu", "eu", "us", "us", "apac", "eu"] if partitioned else None
    write_deltalake(
        root,
        _people([1, 2, 3, 4, 5, 6], part),
        partition_by=["region"] if partitioned else None,
        configuration=CDF,
    )
    dt = DeltaRsTable(root)
    dt.delete("id = 1")
    dt.update(updates={"name": "'renamed'"}, predicate="id >= 3 AND id <= 4")
    source = _people([2, 7], ["eu", "us"] if partitioned else None)
    (
        dt.merge(source, "t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    write_deltalake(root, _people([8], ["us"] if partitioned else None), mode="append")
    for version in (1, 2, 3):
        assert "cdc" in _commit_actions(root, version)
    _all_ranges_match(root)
    check_every_version(root)
    feed = lq.DeltaTable(root).changes(starting_version=1).to_arrow()
    per = by_version(feed)
    assert {dict(r)["_change_type"] for r in per[1]} == {"delete"}
    assert sorted(dict(r)["name"] for r in per[2]) == ["n3", "n4", "renamed", "renamed"]
    assert {dict(r)["_change_type"] for r in per[3]} == {
        "update_preimage",
        "update_postimage",
        "insert",
    }
    assert {(dict(r)["id"], dict(r)["_change_type"]) for r in per[4]} == {(8, "insert")}


def test_lakequery_appends_and_overwrites(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    lq.write(root, _people([1, 2]), configuration=CDF)
    lq.write(root, _people([3]), mode="append")
    lq.write(root, _people([10, 11]), mode="overwrite")
    lq.write(root, _people([12]), mode="append")
    _all_ranges_match(root)
    feed = lq.DeltaTable(root).changes(starting_version=0).to_arrow()
    assert simple(feed, "_commit_version", "id", "_change_type") == sorted(
        [
            (0, 1, "insert"),
            (0, 2, "insert"),
            (1, 3, "insert"),
            (2, 1, "delete"),
            (2, 2, "delete"),
            (2, 3, "delete"),
            (2, 10, "insert"),
            (2, 11, "insert"),
            (3, 12, "insert"),
        ],
        key=repr,
    )


def test_lakequery_partitioned_predicate_overwrite(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    lq.write(
        root,
        _people([1, 2, 3], ["eu", "us", "us"]),
        partition_by=["region"],
        configuration=CDF,
    )
    lq.write(root, _people([4], ["us"]), mode="overwrite", predicate="region = 'us'")
    _all_ranges_match(root)
    one = lq.DeltaTable(root).changes(starting_version=1).to_arrow()
    assert simple(one, "id", "region", "_change_type") == sorted(
        [(2, "us", "delete"), (3, "us", "delete"), (4, "us", "insert")], key=repr
    )


@pytest.mark.parametrize("dvs", [False, True])
def test_a_row_level_overwrite_writes_change_files(tmp_path: Path, dvs: bool) -> None:
    """A predicate overwrite that copies the rows it does not match into new files
    rewrites rows, so it writes change files (digest §13): the replaced rows are deletes,
    the new ones inserts, and the copied rows are no change; deltalake reads them so."""
    root = str(tmp_path / "t")
    conf = {**CDF, "delta.enableDeletionVectors": str(dvs).lower()}
    lq.write(root, _people([1, 2, 3, 4]), configuration=conf)
    new = _people([2]).set_column(1, "name", pa.array(["m2"]))
    lq.write(root, new, mode="overwrite", predicate="id >= 2 AND id < 4")
    assert "cdc" in _commit_actions(root, 1)
    _all_ranges_match(root)
    one = lq.DeltaTable(root).changes(starting_version=1).to_arrow()
    assert simple(one, "id", "name", "_change_type") == sorted(
        [(2, "n2", "delete"), (3, "n3", "delete"), (2, "m2", "insert")], key=repr
    )
    table = lq.DeltaTable(root).snapshot().scan().to_arrow()
    assert sorted(table["name"].to_pylist()) == ["m2", "n1", "n4"]


def test_column_mapping_name_mode(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    conf = {**CDF, "delta.columnMapping.mode": "name"}
    lq.write(root, _people([1, 2], ["eu", "us"]), partition_by=["region"], configuration=conf)
    lq.write(root, _people([3], ["eu"]), mode="append")
    lq.write(root, _people([4], ["us"]), mode="overwrite", predicate="region = 'us'")
    feed = lq.DeltaTable(root).changes(starting_version=0)
    expected = sorted(
        [
            (0, 1, "n1", "eu", "insert"),
            (0, 2, "n2", "us", "insert"),
            (1, 3, "n3", "eu", "insert"),
            (2, 2, "n2", "us", "delete"),
            (2, 4, "n4", "us", "insert"),
        ],
        key=repr,
    )
    cols = ("_commit_version", "id", "name", "region", "_change_type")
    assert simple(feed.to_arrow(), *cols) == expected
    assert simple(feed.to_duckdb().to_arrow_table(), *cols) == expected
    assert simple(feed.to_polars().collect(), *cols) == expected


def test_additive_schema_change_reads_across(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    lq.write(root, _people([1]), configuration=CDF)
    wider = _people([2]).append_column("extra", pa.array(["x"]))
    lq.write(root, wider, mode="append", schema_mode="merge")
    feed = lq.DeltaTable(root).changes(starting_version=0).to_arrow()
    assert simple(feed, "id", "extra", "_change_type") == [(1, None, "insert"), (2, "x", "insert")]


def test_memory_table(memory_table_uri: str) -> None:
    root = memory_table_uri
    lq.write(root, _people([1, 2]), configuration=CDF)
    lq.write(root, _people([3]), mode="overwrite")
    feed = lq.DeltaTable(root).changes(starting_version=1)
    assert simple(feed.to_arrow(), "id", "_change_type") == [
        (1, "delete"),
        (2, "delete"),
        (3, "insert"),
    ]
    assert rows(feed.to_duckdb()) == rows(feed.to_arrow())


def _strip_remove_partition_values(root: str, version: int) -> None:
    path = Path(root) / "_delta_log" / f"{version:020d}.json"
    out = []
    for line in path.read_text().splitlines():
        action = json.loads(line)
        if "remove" in action:
            action["remove"].pop("partitionValues", None)
            action["remove"]["extendedFileMetadata"] = False
        out.append(json.dumps(action))
    path.write_text("\n".join(out) + "\n")


def test_removes_without_partition_values(tmp_path: Path) -> None:
    """Old writers left partitionValues out of removes: they come from the file's add,
    in the range or, before it, from the live files of the version before the range."""
    root = str(tmp_path / "t")
    lq.write(root, _people([1, 2], ["eu", "us"]), partition_by=["region"], configuration=CDF)
    lq.write(root, _people([3], ["us"]), mode="append")
    lq.write(root, _people([4], ["us"]), mode="overwrite", predicate="region = 'us'")
    _strip_remove_partition_values(root, 2)
    log = (Path(root) / "_delta_log" / f"{2:020d}.json").read_text().splitlines()
    assert all('"partitionValues"' not in line for line in log if '"remove"' in line)
    expected = sorted([(2, "us", "delete"), (3, "us", "delete"), (4, "us", "insert")], key=repr)
    for start in (0, 1, 2):
        feed = lq.DeltaTable(root).changes(starting_version=start).to_arrow()
        at2 = feed.filter(pa.compute.equal(feed.column("_commit_version"), 2))
        assert simple(at2, "id", "region", "_change_type") == expected, start


def test_filter_on_commit_timestamp(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    lq.write(root, _people([1]), configuration=CDF)
    lq.write(root, _people([2]), mode="append")
    for version, sec in ((0, 1_800_000_000), (1, 1_800_000_100)):
        p = Path(root) / "_delta_log" / f"{version:020d}.json"
        os.utime(p, (sec, sec))
    feed = lq.DeltaTable(root).changes(
        starting_version=0, filter="_commit_timestamp > TIMESTAMP '2027-01-15 08:01:00+00:00'"
    )
    assert feed.num_files == 1
    assert simple(feed.to_arrow(), "id") == [(2,)]
    assert simple(feed.to_duckdb().to_arrow_table(), "id") == [(2,)]
