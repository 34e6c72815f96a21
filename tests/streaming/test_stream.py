"""``DeltaTable.stream``: a table read as a stream of micro-batches (issue 13, item 2)."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pytest

import lakequery as lq
from lakequery.streaming import StreamOffset

DV = {"delta.enableDeletionVectors": "true", "delta.enableChangeDataFeed": "true"}


def _ids(batches: list[lq.StreamBatch]) -> list[list[int]]:
    return [sorted(b.to_arrow()["id"].to_pylist()) for b in batches]


def _all_ids(batches: list[lq.StreamBatch]) -> list[int]:
    return sorted(i for b in batches for i in b.to_arrow()["id"].to_pylist())


def _append(uri: str, ids: list[int], **kw: object) -> None:
    lq.write(uri, pa.table({"id": pa.array(ids, pa.int64())}), mode="append", **kw)  # type: ignore[arg-type]


@pytest.fixture
def table(tmp_path: Path) -> str:
    uri = str(tmp_path / "t")
    lq.write(uri, pa.table({"id": pa.array([0, 1], pa.int64())}), configuration=DV)
    return uri


def test_snapshot_first_then_each_append_once(table: str) -> None:
    dt = lq.DeltaTable(table)
    first = list(dt.stream())
    assert _ids(first) == [[0, 1]]
    assert (first[0].start_version, first[0].end_version) == (0, 0)
    for v in range(1, 6):
        _append(table, [10 * v, 10 * v + 1])
    rest = list(dt.stream(starting_offset=first[-1].offset.to_json(), max_files_per_batch=2))
    assert [(b.start_version, b.end_version) for b in rest] == [(1, 2), (3, 4), (5, 5)]
    assert _ids(rest) == [[10, 11, 20, 21], [30, 31, 40, 41], [50, 51]]
    assert [b.num_files for b in rest] == [2, 2, 1]
    # resuming after the last batch: nothing new, nothing again
    assert list(dt.stream(starting_offset=rest[-1].offset)) == []
    # resuming in the middle gives the rest only
    again = list(dt.stream(starting_offset=json.loads(rest[0].offset.to_json())))
    assert _ids(again) == [[30, 31, 40, 41, 50, 51]]


def test_a_starting_version_past_the_end_is_named_in_the_error(table: str) -> None:
    _append(table, [2])
    with pytest.raises(lq.VersionNotFoundError, match=r"version 100 .*versions: 0\.\.1") as info:
        list(lq.DeltaTable(table).stream(starting_version=100))
    assert info.value.version == 100  # not 99, the snapshot the stream starts from


def test_batch_limits_split_inside_a_version_and_resume_there(table: str) -> None:
    dt = lq.DeltaTable(table)
    start = list(dt.stream())[-1].offset
    many = pa.table({"id": pa.array(range(100, 103), pa.int64())})
    lq.write(table, many, mode="append", target_file_size=1)  # one commit, a file per row
    by_files = list(dt.stream(starting_offset=start, max_files_per_batch=1))
    assert [b.num_files for b in by_files] == [1, 1, 1]
    assert _all_ids(by_files) == list(range(100, 103))
    assert by_files[0].offset.version == 1 and by_files[0].offset.index == 0
    tail = list(dt.stream(starting_offset=by_files[0].offset))
    assert _all_ids(tail) == _all_ids(by_files[1:])
    sizes = [b.num_bytes for b in by_files]
    by_bytes = list(dt.stream(starting_offset=start, max_bytes_per_batch=sizes[0] + sizes[1]))
    assert [b.num_files for b in by_bytes] == [2, 1]
    tiny = list(dt.stream(starting_offset=start, max_bytes_per_batch=1))
    assert [b.num_files for b in tiny] == [1, 1, 1]  # at least one file per batch


def test_the_starting_snapshot_applies_deletion_vectors_and_optimize_is_skipped(
    table: str,
) -> None:
    _append(table, [2, 3, 4])
    dt = lq.DeltaTable(table)
    dt.delete("id = 3")  # a DV on the second file
    first = list(dt.stream(max_files_per_batch=1))
    assert _all_ids(first) == [0, 1, 2, 4]
    dt.optimize()  # dataChange=false: its rewritten rows are not delivered again
    _append(table, [5])
    rest = list(dt.stream(starting_offset=first[-1].offset))
    assert _ids(rest) == [[5]]
    assert rest[0].start_version == dt.snapshot().version


def test_a_delete_stops_the_stream_at_its_version_unless_told(table: str) -> None:
    dt = lq.DeltaTable(table)
    start = list(dt.stream())[-1].offset
    _append(table, [2])  # v1
    dt.delete("id = 0")  # v2: rewrites data already delivered
    _append(table, [3])  # v3
    delivered: list[list[int]] = []
    with pytest.raises(lq.StreamError) as err:
        for b in dt.stream(starting_offset=start):
            delivered.append(sorted(b.to_arrow()["id"].to_pylist()))
    assert err.value.version == 2 and "version 2" in str(err.value)
    assert delivered == [[2]]  # everything before the commit was delivered first
    skipped = list(dt.stream(starting_offset=start, skip_change_commits=True))
    assert _all_ids(skipped) == [2, 3]
    with pytest.raises(lq.StreamError):  # a DV delete is not a whole-file delete
        list(dt.stream(starting_offset=start, ignore_deletes=True))
    changes = list(dt.stream(starting_offset=start, read_change_feed=True))
    rows = sorted(
        (r["_commit_version"], r["_change_type"], r["id"])
        for b in changes
        for r in b.to_arrow().to_pylist()
    )
    assert rows == [(1, "insert", 2), (2, "delete", 0), (3, "insert", 3)]


def test_ignore_deletes_passes_over_whole_file_deletes(tmp_path: Path) -> None:
    uri = str(tmp_path / "p")
    t = pa.table({"id": pa.array([1, 2], pa.int64()), "day": ["a", "b"]})
    lq.write(uri, t, partition_by=["day"], configuration=DV)
    dt = lq.DeltaTable(uri)
    start = list(dt.stream())[-1].offset
    dt.delete("day = 'a'")  # removes the whole file: no add
    lq.write(uri, pa.table({"id": pa.array([3], pa.int64()), "day": ["c"]}), mode="append")
    with pytest.raises(lq.StreamError):
        list(dt.stream(starting_offset=start))
    assert _ids(list(dt.stream(starting_offset=start, ignore_deletes=True))) == [[3]]


def test_additive_schema_changes_are_read_through_others_stop(table: str) -> None:
    dt = lq.DeltaTable(table)
    start = list(dt.stream())[-1].offset
    wider = pa.table({"id": pa.array([7], pa.int64()), "note": ["x"]})
    lq.write(table, wider, mode="append", schema_mode="merge")
    batches = list(dt.stream(starting_offset=start))
    assert batches[0].to_arrow().to_pylist() == [{"id": 7, "note": "x"}]
    other = pa.table({"id": pa.array(["s"], pa.string())})
    lq.write(table, other, mode="overwrite", schema_mode="overwrite")
    with pytest.raises(lq.StreamError, match=r"non-additive|removes or rewrites"):
        list(dt.stream(starting_offset=batches[-1].offset, skip_change_commits=True))


def test_starting_version_and_timestamp(table: str) -> None:
    dt = lq.DeltaTable(table)
    _append(table, [2])
    _append(table, [3])
    assert _ids(list(dt.stream(starting_version=1))) == [[2, 3]]
    assert _ids(list(dt.stream(starting_version=0, max_files_per_batch=1))) == [[0, 1], [2], [3]]
    when = dt.history()[0].timestamp
    assert _ids(list(dt.stream(starting_timestamp=when))) == [[3]]
    late = datetime(2999, 1, 1, tzinfo=timezone.utc)
    with pytest.raises(lq.VersionNotFoundError):
        list(dt.stream(starting_timestamp=late))


def test_a_stream_can_start_at_a_commit_that_renames_a_column(table: str) -> None:
    """The commit a stream starts at is read with its own schema: nothing was delivered
    under the one before it."""
    dt = lq.DeltaTable(table)
    lq.write(table, pa.table({"id": [1], "v": ["a"]}), mode="append", schema_mode="merge")
    renamed = dt.alter.rename_column("v", "w").version
    lq.write(table, pa.table({"id": [2], "w": ["b"]}), mode="append")
    for feed in (False, True):
        batches = dt.stream(starting_version=renamed, read_change_feed=feed)
        rows = [r for b in batches for r in b.to_arrow().select(["id", "w"]).to_pylist()]
        assert rows == [{"id": 2, "w": "b"}]
    # a stream that delivered the version before the rename stops at it
    before = StreamOffset(renamed, -1, False, dt.snapshot().metadata.id)
    with pytest.raises(lq.StreamError, match="non-additive"):
        list(dt.stream(starting_offset=before))


def test_a_stream_starts_or_resumes_at_the_oldest_commit_after_log_cleanup(
    table: str,
) -> None:
    """After log cleanup the state before the oldest commit kept is gone; a stream that
    starts or resumes at that commit reads it with the commit's own state."""
    import os

    dt = lq.DeltaTable(table)
    for i in range(2, 5):
        _append(table, [i])  # versions 1..3
    dt.checkpoint()
    log = Path(table) / "_delta_log"
    for f in log.iterdir():
        os.utime(f, (1, 1))  # older than any retention
    _append(table, [5])  # version 4
    dt.checkpoint()
    dt.cleanup_log()
    assert not (log / f"{2:020d}.json").exists() and (log / f"{3:020d}.json").exists()
    table_id = dt.snapshot().metadata.id
    resumed = StreamOffset(3, -1, False, table_id)  # the consumer delivered version 2
    for kw in ({"starting_version": 3}, {"starting_offset": resumed}):
        assert _all_ids(list(dt.stream(**kw))) == [4, 5]  # type: ignore[arg-type]
    with pytest.raises(lq.VersionNotFoundError, match="version 1 "):
        list(dt.stream(starting_version=1))


def test_columns_filter_and_a_change_feed_from_the_snapshot(table: str) -> None:
    lq.write(
        table,
        pa.table({"id": pa.array([5, 6], pa.int64()), "v": ["a", "b"]}),
        mode="append",
        schema_mode="merge",
    )
    dt = lq.DeltaTable(table)
    rows = [b.to_arrow() for b in dt.stream(columns=["v"], filter="id > 5")]
    assert [r.to_pylist() for r in rows] == [[{"v": "b"}]]
    feed = list(lq.DeltaTable(table).stream(read_change_feed=True))
    got = feed[0].to_arrow()
    assert got.column_names == ["id", "v", "_change_type", "_commit_version", "_commit_timestamp"]
    assert set(got["_change_type"].to_pylist()) == {"insert"}
    assert set(got["_commit_version"].to_pylist()) == {1}
    assert got.num_rows == 4


def test_a_change_feed_stream_filters_and_selects_change_columns_from_the_snapshot(
    table: str,
) -> None:
    """The starting snapshot's rows carry the change columns before ``columns`` and
    ``filter`` apply, as the commits after it do."""
    _append(table, [2])
    dt = lq.DeltaTable(table)
    for kw in ({"starting_version": 1}, {}):
        batches = list(
            dt.stream(
                read_change_feed=True,
                columns=["id", "_commit_version"],
                filter="_change_type = 'insert' AND _commit_version >= 1",
                **kw,  # type: ignore[arg-type]
            )
        )
        rows = [r for b in batches for r in b.to_arrow().to_pylist()]
        want = [2] if kw else [0, 1, 2]
        assert sorted(r["id"] for r in rows) == want
        assert {r["_commit_version"] for r in rows} == {1}
        assert list(rows[0])[:2] == ["id", "_commit_version"]
    gone = list(dt.stream(read_change_feed=True, filter="_change_type = 'delete'"))
    assert sum(b.to_arrow().num_rows for b in gone) == 0


def test_a_change_feed_stream_keeps_the_byte_limit(table: str) -> None:
    for i in range(2, 5):
        _append(table, [i])
    dt = lq.DeltaTable(table)
    batches = list(dt.stream(starting_version=1, read_change_feed=True, max_bytes_per_batch=1))
    assert [(b.start_version, b.end_version) for b in batches] == [(1, 1), (2, 2), (3, 3)]
    one = list(dt.stream(starting_version=1, read_change_feed=True, max_bytes_per_batch=10**9))
    assert [(b.start_version, b.end_version) for b in one] == [(1, 3)]


def test_a_change_feed_stream_counts_each_commits_own_files(table: str) -> None:
    """Whole commits per batch, cut before the commit whose files pass the limit (a commit
    of more files than the limit alone), in every batch, not only the first two."""
    for n in (1, 1, 1, 1, 4, 1, 1):  # versions 1..7; version 5 writes 4 files
        data = pa.table({"id": pa.array(range(n), pa.int64())})
        lq.write(table, data, mode="append", target_file_size=1)
    dt = lq.DeltaTable(table)
    batches = dt.stream(starting_version=1, read_change_feed=True, max_files_per_batch=2)
    got = [(b.start_version, b.end_version) for b in batches]
    assert got == [(1, 2), (3, 4), (5, 5), (6, 7)]


def test_arguments_and_offsets_are_checked(table: str, tmp_path: Path) -> None:
    dt = lq.DeltaTable(table)
    with pytest.raises(lq.StreamError, match="max_files_per_batch"):
        dt.stream(max_files_per_batch=0)
    with pytest.raises(lq.StreamError, match="not several"):
        dt.stream(starting_version=0, starting_offset=StreamOffset(0, -1, False, "x"))
    with pytest.raises(lq.StreamError, match="not a stream offset"):
        dt.stream(starting_offset="{}")
    other = str(tmp_path / "other")
    lq.write(other, pa.table({"id": pa.array([1], pa.int64())}))
    foreign = list(lq.DeltaTable(other).stream())[-1].offset
    with pytest.raises(lq.StreamError, match="belongs to table"):
        list(dt.stream(starting_offset=foreign))
    offset = StreamOffset(3, 1, False, "abc")
    assert StreamOffset.parse(offset.to_json()) == offset
    assert "versions=0..0" in repr(next(iter(dt.stream())))


def test_planning_between_two_offsets(table: str) -> None:
    """What the Spark source does per micro-batch: the files between two offsets."""
    from lakequery.streaming.source import latest_offset, start_offset, stream

    dt = lq.DeltaTable(table)
    start = start_offset(dt)
    assert start.snapshot and start.version == 0
    for v in range(1, 4):
        _append(table, [v * 10])
    end = latest_offset(dt, start)
    assert (end.version, end.index, end.snapshot) == (4, -1, False)
    assert latest_offset(dt, end) == end  # nothing new: the same offset
    # offsets of one stream (another stream's snapshot may be at another version)
    middle = list(stream(dt, starting_offset=start, max_files_per_batch=1))[1].offset
    assert (middle.version, middle.index) == (2, -1)  # after the snapshot and version 1
    first = list(stream(dt, starting_offset=start, ending_offset=middle))
    rest = list(stream(dt, starting_offset=middle, ending_offset=end))
    assert _all_ids(first) == [0, 1, 10]
    assert _all_ids(rest) == [20, 30]
    _append(table, [40])  # after the end offset: not delivered
    assert _all_ids(list(stream(dt, starting_offset=middle, ending_offset=end))) == [
        20,
        30,
    ]
    assert start_offset(dt, 2) == StreamOffset(2, -1, False, dt.snapshot().metadata.id)


@pytest.mark.parametrize("feed", [False, True])
def test_a_batch_reads_the_same_rows_through_duckdb(table: str, feed: bool) -> None:
    """``StreamBatch.to_duckdb()`` (DuckDB's reader) returns ``to_arrow()``'s rows, the
    change columns of a change feed's starting snapshot included."""
    _append(table, [2, 3])
    lq.DeltaTable(table).delete("id = 0")
    _append(table, [4])
    dt = lq.DeltaTable(table)
    batches = list(dt.stream(read_change_feed=feed, max_files_per_batch=1))
    assert len(batches) >= 2
    for b in batches:
        want = b.to_arrow()
        rel = b.to_duckdb()
        assert rel.columns == want.column_names
        got = [tuple(str(v) for v in r) for r in rel.fetchall()]
        assert sorted(got) == sorted(tuple(str(v) for v in r.values()) for r in want.to_pylist())


@pytest.mark.parametrize("feed", [False, True])
def test_a_batch_reads_the_same_rows_through_polars(table: str, feed: bool) -> None:
    """``StreamBatch.to_polars()`` (Polars' reader) returns ``to_arrow()``'s rows and
    types, the change columns of a change feed's starting snapshot included."""
    import polars as pl

    _append(table, [2, 3])
    lq.DeltaTable(table).delete("id = 0")
    _append(table, [4])
    batches = list(lq.DeltaTable(table).stream(read_change_feed=feed, max_files_per_batch=1))
    assert len(batches) >= 2
    for b in batches:
        want = pl.from_arrow(b.to_arrow())
        assert isinstance(want, pl.DataFrame)
        got = b.to_polars()
        assert got.schema == want.schema
        assert got.sort(got.columns).equals(want.sort(want.columns))


@pytest.mark.parametrize("interval", [0, -1, float("nan"), float("inf")])
def test_a_poll_interval_that_is_no_positive_number_is_refused_up_front(
    table: str, interval: float
) -> None:
    with pytest.raises(lq.StreamError, match="poll_interval"):
        next(iter(lq.DeltaTable(table).stream(follow=True, poll_interval=interval)))
