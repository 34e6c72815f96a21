"""Spark-Delta on the features of lakequery's tables beyond plain rows: the change data
feed, row ids and row commit versions, and data skipping on lakequery's statistics."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest
from lq_tables import CDF_KINDS
from sparkkit import assert_same_rows, delta_sql, spark_changes, spark_read

import lakequery as lq


@pytest.mark.parametrize("kind", CDF_KINDS)
def test_change_data_feed_agrees(delta_spark: Any, build: Callable[[str], str], kind: str) -> None:
    """Spark's ``readChangeFeed`` equals ``DeltaTable.changes`` over the whole history and
    over a range starting mid-way: the same rows, change types, versions and timestamps."""
    uri = build(kind)
    dt = lq.DeltaTable(uri)
    latest = dt.snapshot().version
    assert latest >= 5
    for start, end in ((0, latest), (2, latest - 1)):
        ours = dt.changes(starting_version=start, ending_version=end).to_arrow()
        theirs = spark_changes(delta_spark, uri, start, end).select(ours.column_names)
        assert_same_rows(theirs, ours, f"{kind} changes {start}..{end}")
        kinds = set(ours.column("_change_type").to_pylist())
        assert {"insert", "delete", "update_preimage", "update_postimage"} <= kinds or start > 0


def test_row_ids_and_commit_versions(delta_spark: Any, build: Callable[[str], str]) -> None:
    """Spark derives ``_metadata.row_id`` / ``row_commit_version`` from lakequery's
    ``baseRowId`` / ``defaultRowCommitVersion`` (digest §14 row tracking): unique ids, stable
    across versions and a DELETE with deletion vectors, below the high-water mark, and each
    row's commit version is the version that inserted it."""
    uri = build("row_tracking")
    dt = lq.DeltaTable(uri)
    inserted_by = {v: set() for v in range(dt.snapshot().version + 1)}
    for v in inserted_by:
        now = set(
            lq.DeltaTable(uri).snapshot(version=v).scan(columns=["id"]).to_arrow()["id"].to_pylist()
        )
        before = set().union(*(inserted_by[u] for u in range(v)))
        earlier = (
            set(
                lq.DeltaTable(uri)
                .snapshot(version=v - 1)
                .scan(columns=["id"])
                .to_arrow()["id"]
                .to_pylist()
            )
            if v
            else set()
        )
        inserted_by[v] = now - earlier - before

    def ids(version: int | None) -> dict[int, tuple[int, int]]:
        reader = delta_spark.read.format("delta")
        if version is not None:
            reader = reader.option("versionAsOf", version)
        t = (
            reader.load(uri)
            .select("id", "_metadata.row_id", "_metadata.row_commit_version")
            .toArrow()
        )
        rows = t.to_pylist()
        assert len({r["row_id"] for r in rows}) == len(rows), "row ids are not unique"
        return {r["id"]: (r["row_id"], r["row_commit_version"]) for r in rows}

    latest = ids(None)
    first = ids(0)
    for key, (row_id, _) in latest.items():
        if key in first:
            assert first[key][0] == row_id, f"row id of {key} changed"
    for v, inserted in inserted_by.items():
        for key in inserted & set(latest):
            assert latest[key][1] == v, f"row {key} inserted at v{v}"
    mark = dt.snapshot().domains["delta.rowTracking"]
    assert max(r for r, _ in latest.values()) <= int(mark.split(":")[1].strip(" }"))


#: (kind, predicate) pairs on which Spark should skip exactly the files lakequery skips.
SKIPPING = [
    ("appends", "id >= 60"),
    ("appends", "ts < TIMESTAMP '2024-01-02 00:00:00'"),
    ("appends", "s > 's0068'"),
    ("appends", "dec < 0"),
    ("appends", "dt = DATE '2024-01-01'"),
    ("optimize_zorder", "id BETWEEN 10 AND 20"),
    ("optimize_hilbert", "i < -40"),
    ("partition_typed", "day = DATE '2024-02-29'"),
    ("partition_typed", "at > TIMESTAMP '2024-06-15 20:00:00'"),
    ("partition_awkward_strings", "p = 'a=b'"),
    ("partition_awkward_strings", "p IS NULL"),
    ("checkpoint_only", "id >= 40"),
    ("checkpoint_stats_struct_only", "id >= 40"),
    ("checkpoint_v2", "id < 5"),
    ("column_mapping_id", "id >= 30"),
    ("type_widening", "v > 100"),
    ("appends", "st.x > 60"),
    ("stats_columns", "ts < TIMESTAMP '2024-01-02 00:00:00'"),
    ("stats_columns", "st.x < 10"),
    ("wide_types", "i16 < -2900"),
    ("wide_types", "d38 >= 500"),
]


def spark_files_read(spark: Any, uri: str, predicate: str) -> tuple[int, int]:
    """(files Spark's scan read, rows) for ``SELECT * WHERE predicate``."""
    df = spark.read.format("delta").load(uri).where(predicate)
    n = len(df.collect())
    plan = df._jdf.queryExecution().executedPlan()
    leaves = plan.collectLeaves()
    files = 0
    for i in range(leaves.size()):
        metrics = leaves.apply(i).metrics()
        if metrics.contains("numFiles"):
            files += int(metrics.apply("numFiles").value())
    return files, n


@pytest.mark.parametrize(("kind", "predicate"), SKIPPING)
def test_spark_skips_files_by_lakequery_stats(
    delta_spark: Any, build: Callable[[str], str], kind: str, predicate: str
) -> None:
    uri = build(kind)
    snap = lq.DeltaTable(uri).snapshot()
    plan = snap.scan(filter=predicate).plan()
    assert plan.num_files < snap.num_files, "a predicate that lets lakequery skip files"
    files, n = spark_files_read(delta_spark, uri, predicate)
    assert n == snap.scan(filter=predicate).to_arrow().num_rows
    assert files == plan.num_files, f"Spark read {files} files, lakequery plans {plan.num_files}"
    assert spark_read(delta_spark, uri, where=predicate).num_rows == n


@pytest.mark.parametrize("kind", ["partition_typed", "wide_types", "appends"])
def test_reads_do_not_depend_on_the_session_time_zone(
    delta_spark: Any, build: Callable[[str], str], kind: str
) -> None:
    """Timestamp partition values (ISO-8601 with Z, digest §9.1), timestamp statistics and
    timestamp_ntz values read the same with a Spark session far from UTC."""
    uri = build(kind)
    expected = lq.DeltaTable(uri).snapshot().scan().to_arrow()
    delta_spark.conf.set("spark.sql.session.timeZone", "Pacific/Kiritimati")  # UTC+14
    try:
        assert_same_rows(spark_read(delta_spark, uri), expected, f"{kind} at UTC+14")
    finally:
        delta_spark.conf.set("spark.sql.session.timeZone", "UTC")


def test_application_transactions_are_shared(
    delta_spark: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """lakequery's ``txn`` actions (app_id/app_version) make Spark's idempotent writes
    (``txnAppId``/``txnVersion``) skip, and Spark's make lakequery's skip."""
    uri = str(tmp_path_factory.mktemp("txn") / "t")
    first = lq.write(uri, pa.table({"id": [1]}), app_id="ingest", app_version=3)
    assert first.version == 0

    def spark_append(version: int, value: int) -> None:
        (
            delta_spark.createDataFrame([(value,)], "id LONG")
            .write.format("delta")
            .mode("append")
            .option("txnAppId", "ingest")
            .option("txnVersion", version)
            .save(uri)
        )

    spark_append(3, 2)  # already committed by lakequery: skipped
    spark_append(2, 3)  # older: skipped
    assert lq.DeltaTable(uri).snapshot().version == 0
    spark_append(4, 4)
    assert lq.DeltaTable(uri).snapshot().txns == {"ingest": 4}
    again = lq.write(uri, pa.table({"id": [5]}), mode="append", app_id="ingest", app_version=4)
    assert again.skipped
    lq.write(uri, pa.table({"id": [6]}), mode="append", app_id="ingest", app_version=5)
    assert sorted(spark_read(delta_spark, uri).column("id").to_pylist()) == [1, 4, 6]


def test_append_only_binds_spark(
    delta_spark: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """``delta.appendOnly`` set by lakequery: Spark appends, but refuses DELETE and UPDATE."""
    uri = str(tmp_path_factory.mktemp("ao") / "t")
    lq.write(uri, pa.table({"id": [1, 2]}), configuration={"delta.appendOnly": "true"})
    delta_spark.createDataFrame([(3,)], "id LONG").write.format("delta").mode("append").save(uri)
    for statement in ("DELETE FROM {t} WHERE id = 1", "UPDATE {t} SET id = 0"):
        with pytest.raises(Exception, match=r"(?i)append.?only"):
            delta_sql(delta_spark, statement, uri).collect()
    assert lq.DeltaTable(uri).snapshot().version == 1
    assert sorted(lq.DeltaTable(uri).snapshot().scan().to_arrow()["id"].to_pylist()) == [1, 2, 3]
