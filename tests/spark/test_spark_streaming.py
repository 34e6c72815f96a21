"""Spark Structured Streaming through the ``lakequery`` data source (issue 13, item 3):
``readStream`` with delta-spark's semantics, ``writeStream`` with one idempotent commit
per micro-batch, ``Trigger.AvailableNow``."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lakequery as lq
from lakequery.spark.datasource import register
from lakequery.spark.datasource_stream import ADMISSION_CONTROL

DV = {"delta.enableDeletionVectors": "true", "delta.enableChangeDataFeed": "true"}


@pytest.fixture
def source(spark: Any, tmp_path: Path) -> str:
    register(spark)
    uri = str(tmp_path / "a")
    lq.write(
        uri, pa.table({"id": pa.array(range(10), pa.int64()), "v": ["x"] * 10}), configuration=DV
    )
    return uri


def _append(uri: str, start: int, n: int = 5) -> None:
    t = pa.table({"id": pa.array(range(start, start + n), pa.int64()), "v": ["y"] * n})
    lq.write(uri, t, mode="append")


def _run_available_now(spark: Any, src: str, dst: str, checkpoint: Path, **options: str) -> Any:
    return _limited_query(spark, src, dst, checkpoint, available_now=True, **options)


def _collect_available_now(stream_df: Any, checkpoint: Path) -> list[Any]:
    """The rows of every micro-batch of ``stream_df`` run with ``Trigger.AvailableNow``."""
    rows: list[Any] = []
    query = (
        stream_df.writeStream.foreachBatch(lambda df, _: rows.extend(df.collect()))
        .trigger(availableNow=True)
        .option("checkpointLocation", str(checkpoint))
        .start()
    )
    query.awaitTermination(300)
    return rows


def _ids(uri: str) -> list[int]:
    return sorted(lq.DeltaTable(uri).snapshot().scan(columns=["id"]).to_arrow()["id"].to_pylist())


def test_a_to_b_twice_with_one_checkpoint(spark: Any, source: str, tmp_path: Path) -> None:
    """A streaming query copies table A into table B; run again after more appends to A
    with the same checkpoint, B equals A and holds no row twice; each micro-batch is one
    version of B with the query's txn."""
    dst, ck = str(tmp_path / "b"), tmp_path / "ck"
    lq.DeltaTable(source).delete("id = 3")  # a DV: the snapshot must not deliver row 3
    query = _run_available_now(spark, source, dst, ck)
    assert _ids(dst) == _ids(source)
    _append(source, 100)
    _append(source, 200)
    again = _run_available_now(spark, source, dst, ck)
    assert again.id == query.id  # the same query, resumed from its checkpoint
    assert _ids(dst) == _ids(source)
    assert len(_ids(dst)) == len(set(_ids(dst)))
    snap = lq.DeltaTable(dst).snapshot()
    assert snap.txns == {str(query.id): snap.txns[str(query.id)]}
    history = lq.DeltaTable(dst).history()
    assert {e.operation for e in history} <= {"CREATE TABLE", "WRITE"}


def test_a_replayed_micro_batch_commits_nothing(spark: Any, source: str, tmp_path: Path) -> None:
    """The sink dies after its table commit but before Spark records the micro-batch as
    done (simulated by removing Spark's commit record): Spark replays the batch, its
    files are written again, and the txn in the table makes the commit a no-op."""
    dst, ck = str(tmp_path / "b"), tmp_path / "ck"
    _run_available_now(spark, source, dst, ck)
    version = lq.DeltaTable(dst).snapshot().version
    commits = sorted((ck / "commits").iterdir())
    assert commits, "Spark recorded no micro-batch"
    last = commits[-1]
    last.unlink()
    crc = last.parent / f".{last.name}.crc"
    if crc.exists():
        crc.unlink()
    _run_available_now(spark, source, dst, ck)  # replays the last micro-batch
    assert lq.DeltaTable(dst).snapshot().version == version  # nothing committed again
    assert _ids(dst) == list(range(10))


def test_read_stream_semantics(spark: Any, source: str, tmp_path: Path) -> None:
    """maxFilesPerTrigger cuts micro-batches (inside one commit too); OPTIMIZE delivers
    nothing; a DELETE stops the query naming its version unless skipChangeCommits;
    readChangeFeed streams the change rows."""
    _append(source, 100)
    out = str(tmp_path / "out")
    q = (
        spark.readStream.format("lakequery")
        .option("maxFilesPerTrigger", 8)
        .option("startingVersion", 1)
        .load(source)
        .writeStream.format("lakequery")
        .option("checkpointLocation", str(tmp_path / "ck1"))
        .start(out)
    )
    try:
        q.processAllAvailable()
        # one commit of 20 one-row files: the query sees it whole, whenever it polls
        more = pa.table({"id": pa.array(range(200, 220), pa.int64()), "v": ["z"] * 20})
        lq.write(source, more, mode="append", target_file_size=1)
        lq.DeltaTable(source).optimize()
        q.processAllAvailable()
    finally:
        q.stop()
    assert lq.DeltaTable(source).history()[0].operation == "OPTIMIZE"
    assert _ids(out) == [*range(100, 105), *range(200, 220)]  # OPTIMIZE delivered nothing
    assert [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]] == [5, 8, 8, 4]
    # a DELETE after the start: the stream cannot go past it
    start = lq.DeltaTable(source).snapshot().version + 1
    _append(source, 500)
    lq.DeltaTable(source).delete("id = 500")
    _append(source, 600)
    with pytest.raises(Exception, match=f"StreamError|version {start + 1}"):
        _run_available_now(
            spark, source, str(tmp_path / "o2"), tmp_path / "ck2", startingVersion=str(start)
        )
    skipped = str(tmp_path / "o3")
    _run_available_now(
        spark,
        source,
        skipped,
        tmp_path / "ck3",
        startingVersion=str(start),
        skipChangeCommits="true",
    )
    assert _ids(skipped) == [500, 501, 502, 503, 504, 600, 601, 602, 603, 604]
    feed = (
        spark.readStream.format("lakequery")
        .option("readChangeFeed", "true")
        .option("startingVersion", start)
        .load(source)
    )
    rows = _collect_available_now(feed, tmp_path / "ck4")
    changes = sorted((r["_commit_version"], r["_change_type"], r["id"]) for r in rows)
    assert (start + 1, "delete", 500) in changes
    assert sum(1 for c in changes if c[1] == "insert") == 10


def _one_row_files(uri: str, start: int, n: int, *, create: bool = False) -> None:
    """One commit of ``n`` files of one row each (ids ``start..start+n-1``)."""
    t = pa.table({"id": pa.array(range(start, start + n), pa.int64()), "v": ["f"] * n})
    lq.write(uri, t, mode="error" if create else "append", target_file_size=1)


def _limited_query(
    spark: Any, src: str, dst: str, checkpoint: Path, *, available_now: bool = False, **options: Any
) -> Any:
    reader = spark.readStream.format("lakequery")
    for k, v in options.items():
        reader = reader.option(k, v)
    writer = (
        reader.load(src)
        .writeStream.format("lakequery")
        .option("checkpointLocation", str(checkpoint))
    )
    if available_now:
        writer = writer.trigger(availableNow=True)
    query = writer.start(dst)
    try:
        if available_now:
            query.awaitTermination(300)
        else:
            query.processAllAvailable()
    finally:
        query.stop()
    if query.exception() is not None:
        raise query.exception()
    return query


def _batch_rows(query: Any) -> list[int]:
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]


needs_admission_control = pytest.mark.skipif(
    not ADMISSION_CONTROL, reason="PySpark < 4.2 asks a Python source for no read limit"
)


@needs_admission_control
def test_the_first_micro_batch_is_rate_limited_also_after_a_restart(
    spark: Any, tmp_path: Path
) -> None:
    """maxFilesPerTrigger=5 over a snapshot of 20 one-row files: micro-batches of exactly 5
    files from the first on; the query restarted from its checkpoint after 12 more files
    goes on in batches of at most 5, and the sink holds every row exactly once."""
    register(spark)
    src, dst, ck = str(tmp_path / "a"), str(tmp_path / "b"), tmp_path / "ck"
    _one_row_files(src, 0, 20, create=True)
    assert lq.DeltaTable(src).snapshot().num_files == 20
    first = _limited_query(spark, src, dst, ck, maxFilesPerTrigger=5)
    assert _batch_rows(first) == [5, 5, 5, 5]
    assert _ids(dst) == list(range(20))
    _one_row_files(src, 100, 12)
    again = _limited_query(spark, src, dst, ck, maxFilesPerTrigger=5)
    assert again.id == first.id  # resumed from the checkpoint, not started afresh
    assert _batch_rows(again) == [5, 5, 2]
    assert _ids(dst) == [*range(20), *range(100, 112)]  # every row once
    # one table version per micro-batch of the sink (and the creating one)
    assert lq.DeltaTable(dst).snapshot().txns[str(first.id)] == 6


@needs_admission_control
def test_max_bytes_per_trigger_limits_the_first_micro_batch(spark: Any, tmp_path: Path) -> None:
    """maxBytesPerTrigger smaller than any file: one file per micro-batch, from the first."""
    register(spark)
    src, dst = str(tmp_path / "a"), str(tmp_path / "b")
    _one_row_files(src, 0, 4, create=True)
    q = _limited_query(spark, src, dst, tmp_path / "ck", maxBytesPerTrigger=1)
    assert _batch_rows(q) == [1, 1, 1, 1]
    assert _ids(dst) == [0, 1, 2, 3]


@needs_admission_control
def test_available_now_reads_everything_in_limited_micro_batches(
    spark: Any, tmp_path: Path
) -> None:
    """Trigger.AvailableNow with maxFilesPerTrigger: everything committed at the start, in
    micro-batches of the limit, then the query stops; run again after more commits with
    the same checkpoint, it reads only those, and without a limit in one micro-batch."""
    register(spark)
    src, dst, ck = str(tmp_path / "a"), str(tmp_path / "b"), tmp_path / "ck"
    _one_row_files(src, 0, 20, create=True)
    q = _limited_query(spark, src, dst, ck, available_now=True, maxFilesPerTrigger=6)
    assert _batch_rows(q) == [6, 6, 6, 2]
    assert _ids(dst) == list(range(20))
    _one_row_files(src, 100, 7)
    _one_row_files(src, 200, 3)
    q = _limited_query(spark, src, dst, ck, available_now=True, maxFilesPerTrigger=6)
    assert _batch_rows(q) == [6, 4]  # 7 + 3 files of two commits, cut inside the first
    assert _ids(dst) == [*range(20), *range(100, 107), *range(200, 203)]
    _one_row_files(src, 300, 9)
    q = _limited_query(spark, src, dst, ck, available_now=True)
    assert _batch_rows(q) == [9]
    assert len(_ids(dst)) == len(set(_ids(dst))) == 39


def test_a_stream_write_needs_append_and_a_query_id(
    spark: Any, source: str, tmp_path: Path
) -> None:
    """A complete-mode sink and a change feed stream without a start are refused."""
    with pytest.raises(Exception, match="needs startingVersion"):
        spark.readStream.format("lakequery").option("readChangeFeed", "true").load(source)
    df = spark.readStream.format("lakequery").load(source)
    with pytest.raises(Exception, match="append"):
        q = (
            df.groupBy("v")
            .count()
            .writeStream.format("lakequery")
            .outputMode("complete")
            .option("checkpointLocation", str(tmp_path / "ck"))
            .trigger(availableNow=True)
            .start(str(tmp_path / "agg"))
        )
        q.awaitTermination(120)
        if q.exception() is not None:
            raise q.exception()
    shutil.rmtree(tmp_path / "ck", ignore_errors=True)


def _files(partitions: list[Any]) -> list[tuple[int, tuple[str, ...]]]:
    """What a micro-batch's read tasks read: each unit's version and file paths."""
    return sorted(
        (u.version, tuple(u.files.column("path").to_pylist())) for p in partitions for u in p.units
    )


def test_a_micro_batch_is_planned_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """latestOffset plans a rate-limited micro-batch to find where it ends; partitions
    takes that plan for the same range instead of parsing the commits again, and plans
    anew for any other range (a micro-batch replayed from Spark's offset log). Driven as
    Spark's driver would, without a session."""
    import lakequery.streaming.source as source_module
    from lakequery.spark.datasource_stream import (
        DeltaStreamReader,
        stream_read_options,
        stream_schema,
    )

    uri = str(tmp_path / "t")
    t = pa.table({"id": pa.array(range(6), pa.int64()), "k": pa.array([0, 1, 2] * 2)})
    lq.write(uri, t, partition_by=["k"])
    for _ in range(4):
        lq.write(uri, t, mode="append")
    options = {"path": uri, "maxFilesPerTrigger": "4", "startingVersion": "0"}
    opts = stream_read_options(options)
    calls = []
    real = source_module.stream

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs.get("ending_offset"))
        return real(*args, **kwargs)

    monkeypatch.setattr(source_module, "stream", counting)
    reader = DeltaStreamReader(opts, stream_schema(opts), 2)
    fresh = DeltaStreamReader(opts, stream_schema(opts), 2)  # never asked for an offset
    start = reader.initialOffset()
    batches = 0
    while True:
        end = reader.latestOffset(start, None)
        if end == start:
            break
        before = len(calls)
        planned = reader.partitions(start, end)
        assert len(calls) == before  # no second parse of the range
        assert _files(planned) == _files(fresh.partitions(start, end))
        assert len(calls) == before + 1  # the fresh reader had to plan it
        assert sum(p.units[0].files.num_rows for p in planned) <= 4
        batches += 1
        start = end
    assert batches == 4  # 15 files (3 per commit, 5 commits), at most 4 per batch
    assert reader.partitions(reader.initialOffset(), start)  # another range: planned anew
    assert len(calls) == 2 * batches + 1


def test_a_reader_with_a_planned_micro_batch_pickles_without_it(tmp_path: Path) -> None:
    """Spark ships the stream reader to its workers; the planned micro-batch (snapshots)
    stays behind."""
    import pickle

    from lakequery.spark.datasource_stream import (
        DeltaStreamReader,
        stream_read_options,
        stream_schema,
    )

    uri = str(tmp_path / "t")
    for mode in ("error", "append", "append"):
        lq.write(uri, pa.table({"id": pa.array([1, 2], pa.int64())}), mode=mode)
    opts = stream_read_options({"path": uri, "maxFilesPerTrigger": "1", "startingVersion": "0"})
    reader = DeltaStreamReader(opts, stream_schema(opts), 2)
    start = reader.initialOffset()
    end = reader.latestOffset(start, None)
    assert reader._planned is not None
    copy = pickle.loads(pickle.dumps(reader))
    assert copy._planned is None and reader._planned is not None
    assert _files(copy.partitions(start, end)) == _files(reader.partitions(start, end))


def _evolved_table(uri: str) -> None:
    """Versions 0-1 with ``id`` only; version 2 adds the column ``b`` (schema merge)."""
    t = pa.table({"id": pa.array(range(3), pa.int64())})
    lq.write(uri, t, configuration={"delta.enableChangeDataFeed": "true"})
    lq.write(uri, pa.table({"id": pa.array([3, 4], pa.int64())}), mode="append")
    late = pa.table({"id": pa.array([9], pa.int64()), "b": pa.array(["x"])})
    lq.write(uri, late, mode="append", schema_mode="merge")


@pytest.mark.parametrize("feed", [False, True], ids=["data", "change_feed"])
def test_micro_batches_before_an_added_column_read_it_as_null(tmp_path: Path, feed: bool) -> None:
    """The query's schema is the table's latest (with ``b``); a micro-batch of the commits
    before ``b`` was added is read with that schema, ``b`` null, whether latestOffset
    planned it or it is replanned (a restart replays it from Spark's offset log). Driven as
    Spark's driver and workers would, without a session."""
    from lakequery.spark.datasource_stream import (
        DeltaStreamReader,
        stream_read_options,
        stream_schema,
    )

    uri = str(tmp_path / "t")
    _evolved_table(uri)
    options = {"path": uri, "maxFilesPerTrigger": "1", "startingVersion": "0"}
    if feed:
        options["readChangeFeed"] = "true"
    opts = stream_read_options(options)
    schema = stream_schema(opts)
    assert "b" in schema.names
    reader = DeltaStreamReader(opts, schema, 2)
    start = reader.initialOffset()

    def rows(planner: DeltaStreamReader, begin: Any, until: Any) -> list[tuple[Any, Any]]:
        return sorted(
            (i, b)
            for p in planner.partitions(begin, until)
            for batch in planner.read(p)
            for i, b in zip(batch["id"].to_pylist(), batch["b"].to_pylist(), strict=True)
        )

    seen: list[tuple[Any, Any]] = []
    while (end := reader.latestOffset(start, None)) != start:
        planned = rows(reader, start, end)
        assert rows(DeltaStreamReader(opts, schema, 2), start, end) == planned  # replanned
        seen += planned
        start = end
    assert sorted(seen) == [(0, None), (1, None), (2, None), (3, None), (4, None), (9, "x")]


def test_a_change_feed_stream_over_an_added_column(spark: Any, tmp_path: Path) -> None:
    """End to end: a readChangeFeed query from version 0 over a table that gained a column
    later reads every change row, the older ones with the column null."""
    register(spark)
    uri = str(tmp_path / "t")
    _evolved_table(uri)
    feed = (
        spark.readStream.format("lakequery")
        .option("readChangeFeed", "true")
        .option("startingVersion", "0")
        .option("maxFilesPerTrigger", "1")
        .load(uri)
    )
    rows = _collect_available_now(feed, tmp_path / "ck")
    got = sorted((r["_commit_version"], r["id"], r["b"]) for r in rows)
    assert got == [
        (0, 0, None),
        (0, 1, None),
        (0, 2, None),
        (1, 3, None),
        (1, 4, None),
        (2, 9, "x"),
    ]


@pytest.mark.parametrize(
    ("limit", "feed"),
    [("3", False), ("50", False), ("4", True)],
    ids=["small-limit", "limit-above-window", "change-feed"],
)
def test_a_backlog_is_planned_in_windows_with_the_same_micro_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, limit: str, feed: bool
) -> None:
    """latestOffset parses a long backlog in growing windows of commits, not whole for
    every micro-batch: the micro-batches (their ends and files) are those of planning the
    whole backlog at once, and no parse reaches far past the micro-batch it plans."""
    import lakequery.spark.datasource_stream as ds
    import lakequery.streaming.source as source_module

    uri = str(tmp_path / "t")
    one = pa.table({"id": pa.array([0], pa.int64())})
    lq.write(uri, one, configuration={"delta.enableChangeDataFeed": "true"})
    for i in range(1, 60):
        lq.write(uri, one.set_column(0, "id", pa.array([i], pa.int64())), mode="append")
    lq.DeltaTable(uri).optimize()  # a commit without files to deliver in the middle
    for i in range(60, 80):
        lq.write(uri, one.set_column(0, "id", pa.array([i], pa.int64())), mode="append")
    options = {"path": uri, "maxFilesPerTrigger": limit, "startingVersion": "0"}
    if feed:
        options["readChangeFeed"] = "true"
    opts = ds.stream_read_options(options)
    spans: list[int] = []
    real = source_module.stream

    def spanning(*args: Any, **kwargs: Any) -> Any:
        spans.append(kwargs["ending_offset"].version - kwargs["starting_offset"].version)
        return real(*args, **kwargs)

    monkeypatch.setattr(source_module, "stream", spanning)

    def micro_batches(window: int) -> list[tuple[Any, Any]]:
        monkeypatch.setattr(ds, "FIRST_WINDOW", window)
        reader = ds.DeltaStreamReader(opts, ds.stream_schema(opts), 2)
        start, out = reader.initialOffset(), []
        while (end := reader.latestOffset(start, None)) != start:
            out.append((end, _files(reader.partitions(start, end))))
            start = end
        return out

    whole = micro_batches(10_000)
    assert max(spans) > 60
    spans.clear()
    windowed = micro_batches(8)
    assert windowed == whole
    assert len(whole) >= 80 // int(limit)
    assert max(spans) <= 4 * max(8, 2 * int(limit))  # windows stay near the micro-batch


def test_a_micro_batch_before_a_dropped_column_stops_the_stream(tmp_path: Path) -> None:
    """Reading old commits with the newer schema is for added columns only: with a column
    of the batch's commits dropped since, the micro-batch raises the stream's error naming
    the change, not a read with the column silently gone."""
    from lakequery.spark.datasource_stream import (
        DeltaStreamReader,
        stream_read_options,
        stream_schema,
    )

    uri = str(tmp_path / "t")
    t = pa.table({"id": pa.array([0, 1], pa.int64()), "x": pa.array(["a", "b"])})
    lq.write(uri, t, configuration={"delta.columnMapping.mode": "name"})
    dt = lq.DeltaTable(uri)
    dt.alter.add_columns(pa.field("b", pa.string()))
    dt.alter.drop_columns(["x"])
    opts = stream_read_options({"path": uri, "maxFilesPerTrigger": "1", "startingVersion": "0"})
    schema = stream_schema(opts)
    assert schema.names == ["id", "b"]
    reader = DeltaStreamReader(opts, schema, 2)
    start = reader.initialOffset()
    end = DeltaStreamReader(opts, schema, 2).latestOffset(start, None)
    with pytest.raises(lq.StreamError, match="non-additive"):
        reader.partitions(start, end)
