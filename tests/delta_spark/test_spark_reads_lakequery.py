"""Spark-Delta (the reference implementation) reads every kind of table lakequery writes
exactly as lakequery does: every version, filtered reads (data skipping on lakequery's
statistics), time travel by timestamp, DESCRIBE HISTORY and DESCRIBE DETAIL."""

from __future__ import annotations

import datetime as dt_
import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest
from lq_tables import BUILDERS, FILTER_KINDS, FILTERS
from sparkkit import (
    assert_same_detail,
    assert_same_rows,
    delta_sql,
    lq_read,
    reconstructable_versions,
    spark_read,
)

import lakequery as lq


@pytest.mark.parametrize("kind", sorted(BUILDERS))
def test_every_version_reads_the_same(
    delta_spark: Any, build: Callable[[str], str], kind: str
) -> None:
    uri = build(kind)
    versions = reconstructable_versions(uri)
    assert len(versions) >= 2
    for v in versions:
        try:
            expected = lq_read(uri, version=v)
        except FileNotFoundError:  # a vacuumed version: the reference must not read it either
            with pytest.raises(Exception, match=r"(?i)not.?exist|FileNotFound|FILE_NOT_EXIST"):
                spark_read(delta_spark, uri, version=v)
            continue
        assert_same_rows(spark_read(delta_spark, uri, version=v), expected, f"{kind} v{v}")


@pytest.mark.parametrize("kind", FILTER_KINDS)
def test_filtered_reads_agree(delta_spark: Any, build: Callable[[str], str], kind: str) -> None:
    """Spark skips files by lakequery's statistics (JSON or checkpoint structs) and
    partition values; a wrong bound would lose rows here. One Spark job runs every
    predicate's scan (a union of filtered scans, each pruned on its own)."""
    from pyspark.sql import functions as F

    uri = build(kind)
    columns = set(lq.DeltaTable(uri).snapshot().schema.names)
    predicates = [p for p, needs in FILTERS.items() if set(needs) <= columns]
    assert predicates
    scans = [
        delta_spark.read.format("delta").load(uri).where(p).withColumn("__k", F.lit(k))
        for k, p in enumerate(predicates)
    ]
    union = functools.reduce(lambda a, b: a.unionByName(b), scans)
    got = union.toArrow()
    for k, predicate in enumerate(predicates):
        mine = got.filter(pc.equal(got.column("__k"), k)).drop_columns(["__k"])
        assert_same_rows(mine, lq_read(uri, where=predicate), f"{kind} WHERE {predicate}")


@pytest.mark.parametrize("kind", sorted(BUILDERS))
def test_describe_history_and_detail(
    delta_spark: Any, build: Callable[[str], str], kind: str
) -> None:
    uri = build(kind)
    dt = lq.DeltaTable(uri)
    snap = dt.snapshot()

    history = delta_sql(delta_spark, "DESCRIBE HISTORY {t}", uri).toArrow()
    ours = dt.history()
    assert history.column("version").to_pylist() == [e.version for e in ours]
    assert history.column("operation").to_pylist() == [e.operation for e in ours]
    # commit timestamps: in-commit timestamps where enabled, else monotonised file times
    assert [t.timestamp() for t in history.column("timestamp").to_pylist()] == [
        e.timestamp.timestamp() for e in ours
    ]

    assert_same_detail(delta_spark, uri, kind)  # DeltaTable.detail: one implementation
    assert dt.detail().num_files == snap.num_files


def test_time_travel_by_timestamp(delta_spark: Any, build: Callable[[str], str]) -> None:
    """``timestampAsOf`` and lakequery's ``as_of`` pick the same version, from file times
    (monotonised) and from in-commit timestamps: half-way between commits (the older
    version) and at the latest commit's time; before the first commit both refuse."""
    between = 0
    for kind in ("overwrite", "in_commit_timestamps"):
        uri = build(kind)
        dt = lq.DeltaTable(uri)
        entries = list(reversed(dt.history()))
        times = [(e.timestamp, e.version) for e in entries]
        for (t, v), (t_next, _) in zip(times, [*times[1:], (None, None)], strict=True):
            probes = [t]  # the commit's own time, or half-way to the next commit
            if t_next is not None and t_next - t >= dt_.timedelta(milliseconds=2):
                probes = [t + (t_next - t) / 2]
                between += 1
            for when in probes:
                text = when.isoformat(timespec="milliseconds").replace("+00:00", "")
                assert dt.snapshot(as_of=when).version == v
                assert_same_rows(
                    spark_read(delta_spark, uri, timestamp=text),
                    lq_read(uri, version=v),
                    f"{kind} as of {text}",
                )
        early = (times[0][0] - dt_.timedelta(seconds=1)).isoformat().replace("+00:00", "")
        with pytest.raises(lq.errors.VersionNotFoundError):
            dt.snapshot(as_of=early)
        with pytest.raises(Exception, match=r"(?i)before the earliest|TIMESTAMP_EARLIER"):
            spark_read(delta_spark, uri, timestamp=early)
    assert between > 0


def test_checkpoint_kinds_are_what_they_claim(build: Callable[[str], str]) -> None:
    """The checkpoint builders really produce the kinds the read tests rely on."""
    import pyarrow.parquet as pq

    def checkpoint_columns(kind: str) -> tuple[set[str], int]:
        log = Path(build(kind), "_delta_log")
        files = sorted(log.glob("*.checkpoint.parquet"))
        assert files, kind
        table = pq.read_table(files[-1])
        add = table.schema.field("add").type
        names = {add.field(i).name for i in range(add.num_fields)}
        return names, table.column("checkpointMetadata").null_count if (
            "checkpointMetadata" in table.column_names
        ) else -1

    names, _ = checkpoint_columns("checkpoint_classic")
    assert {"stats", "stats_parsed", "partitionValues_parsed"} <= names
    names, _ = checkpoint_columns("checkpoint_stats_json_only")
    assert "stats" in names and "stats_parsed" not in names
    names, _ = checkpoint_columns("checkpoint_stats_struct_only")
    assert "stats_parsed" in names and "stats" not in names
    _, nulls = checkpoint_columns("checkpoint_v2")
    assert nulls >= 0  # a checkpointMetadata column: a V2 checkpoint
    last = json.loads(Path(build("checkpoint_only"), "_delta_log", "_last_checkpoint").read_text())
    assert last["version"] >= 3
