"""lakequery reads tables that Spark-Delta writes at test time, with the features that the
static conformance tables cover thinly: deletion vectors under DELETE/UPDATE/MERGE and
REORG PURGE, Z-order and liquid clustering, type widening, column mapping with renames and
drops, row tracking, in-commit timestamps, V2 checkpoints with sidecars, identity columns and
the change data feed.

Every version of every table is read by each lakequery engine (Arrow, DuckDB, Polars and
``lakequery.spark.read``) and compared with Spark-Delta's read of the same version; where the
change data feed is on, ``DeltaTable.changes`` is compared with Spark's ``readChangeFeed``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sparkkit import assert_same_rows, delta_sql, lq_engines, spark_changes, spark_read

import lakequery as lq
import lakequery.spark as lqs

DV = "'delta.enableDeletionVectors' = 'true'"
CDF = "'delta.enableChangeDataFeed' = 'true'"

#: kind -> statements (``{t}`` is the table) run in order; each commits one version or more.
TABLES: dict[str, list[str]] = {
    "dv_dml": [
        f"CREATE TABLE {{t}} (id INT, name STRING, part STRING) USING delta "
        f"PARTITIONED BY (part) TBLPROPERTIES ({DV}, {CDF}, 'delta.enableRowTracking' = 'true')",
        "INSERT INTO {t} SELECT id, concat('n', id), IF(id % 2 = 0, 'even', 'odd') "
        "FROM range(0, 40) AS r(id)",
        "DELETE FROM {t} WHERE id % 5 = 0",
        "UPDATE {t} SET name = upper(name) WHERE id % 3 = 0",
        "MERGE INTO {t} AS d USING (SELECT id, concat('m', id) AS name, "
        "IF(id % 2 = 0, 'even', 'odd') AS part FROM range(30, 50) AS r(id)) AS s "
        "ON d.id = s.id WHEN MATCHED AND s.id % 4 = 0 THEN DELETE "
        "WHEN MATCHED THEN UPDATE SET name = s.name WHEN NOT MATCHED THEN INSERT *",
        "DELETE FROM {t} WHERE id < 3",
    ],
    "reorg_purge": [
        f"CREATE TABLE {{t}} (id BIGINT, v DOUBLE) USING delta TBLPROPERTIES ({DV})",
        "INSERT INTO {t} SELECT id, id * 1.5 FROM range(0, 30) AS r(id)",
        "INSERT INTO {t} SELECT id, -id FROM range(30, 50) AS r(id)",
        "DELETE FROM {t} WHERE id % 4 = 1",
        "UPDATE {t} SET v = 0 WHERE id > 45",
        "REORG TABLE {t} APPLY (PURGE)",
    ],
    "zorder": [
        "CREATE TABLE {t} (a INT, b INT, s STRING) USING delta",
        "INSERT INTO {t} SELECT id % 7, id % 11, concat('s', id) FROM range(0, 40) AS r(id)",
        "INSERT INTO {t} SELECT id % 5, id % 3, NULL FROM range(40, 70) AS r(id)",
        "INSERT INTO {t} SELECT NULL, id, 'x' FROM range(70, 75) AS r(id)",
        "OPTIMIZE {t} ZORDER BY (a, b)",
    ],
    "liquid": [
        "CREATE TABLE {t} (k INT, d DATE, s STRING) USING delta CLUSTER BY (k, d)",
        "INSERT INTO {t} SELECT id % 9, date_add(DATE '2024-02-27', CAST(id % 4 AS INT)), "
        "concat('s', id) FROM range(0, 30) AS r(id)",
        "INSERT INTO {t} SELECT id % 4, DATE '2024-03-01', NULL FROM range(30, 45) AS r(id)",
        "OPTIMIZE {t}",
        "ALTER TABLE {t} CLUSTER BY (s)",
        "INSERT INTO {t} VALUES (100, NULL, 'late')",
        "OPTIMIZE {t} FULL",
    ],
    "type_widening": [
        "CREATE TABLE {t} (id INT, small SMALLINT, f FLOAT, dec DECIMAL(5, 2), d DATE, "
        "st STRUCT<x: BYTE>, arr ARRAY<SMALLINT>) USING delta "
        "TBLPROPERTIES ('delta.enableTypeWidening' = 'true', "
        "'delta.feature.timestampNtz' = 'supported')",
        "INSERT INTO {t} VALUES (1, 32000, 1.5, 123.45, DATE '2024-01-02', named_struct('x', "
        "CAST(7 AS BYTE)), array(CAST(1 AS SMALLINT), NULL)), "
        "(2, NULL, NULL, NULL, NULL, NULL, NULL)",
        "ALTER TABLE {t} ALTER COLUMN small TYPE INT",
        "ALTER TABLE {t} ALTER COLUMN f TYPE DOUBLE",
        "ALTER TABLE {t} ALTER COLUMN dec TYPE DECIMAL(10, 4)",
        "ALTER TABLE {t} ALTER COLUMN d TYPE TIMESTAMP_NTZ",
        "ALTER TABLE {t} ALTER COLUMN st.x TYPE INT",
        "ALTER TABLE {t} ALTER COLUMN arr.element TYPE BIGINT",
        "ALTER TABLE {t} ALTER COLUMN id TYPE BIGINT",
        "INSERT INTO {t} VALUES (3000000000, 2000000, 1e300, 123456.7891, "
        "TIMESTAMP_NTZ '2024-05-06 07:08:09', named_struct('x', 100000), array(5000000000))",
    ],
    "column_mapping": [
        "CREATE TABLE {t} (id INT, a STRING, b DOUBLE, nest STRUCT<p: INT, q: STRING>, "
        "part STRING) USING delta PARTITIONED BY (part) "
        "TBLPROPERTIES ('delta.columnMapping.mode' = 'name')",
        "INSERT INTO {t} SELECT id, concat('a', id), id / 2, named_struct('p', id, 'q', "
        "concat('q', id)), IF(id < 5, 'lo', 'hi') FROM range(0, 10) AS r(id)",
        "ALTER TABLE {t} RENAME COLUMN a TO `a renamed`",
        "ALTER TABLE {t} RENAME COLUMN nest.q TO `q;2`",
        "ALTER TABLE {t} DROP COLUMN b",
        "ALTER TABLE {t} ADD COLUMNS (b INT)",
        "INSERT INTO {t} VALUES (20, 'new', named_struct('p', 1, 'q;2', 'z'), 'lo', 7)",
        "ALTER TABLE {t} RENAME COLUMN part TO `the part`",
        "INSERT INTO {t} VALUES (21, 'newer', NULL, 'mid', 8)",
    ],
    "v2_checkpoint": [
        "CREATE TABLE {t} (id INT, s STRING, p INT) USING delta PARTITIONED BY (p) "
        "TBLPROPERTIES ('delta.checkpointPolicy' = 'v2', 'delta.checkpointInterval' = '2', "
        f"{DV})",
        "INSERT INTO {t} SELECT id, concat('s', id), id % 3 FROM range(0, 12) AS r(id)",
        "INSERT INTO {t} SELECT id, NULL, id % 3 FROM range(12, 20) AS r(id)",
        "DELETE FROM {t} WHERE id % 5 = 0",
        "INSERT INTO {t} VALUES (100, 'x', 1)",
        "UPDATE {t} SET s = 'u' WHERE p = 2",
    ],
    "identity": [
        "CREATE TABLE {t} (id BIGINT GENERATED ALWAYS AS IDENTITY (START WITH 10 INCREMENT BY "
        "5), d BIGINT GENERATED BY DEFAULT AS IDENTITY (START WITH -1 INCREMENT BY -2), "
        "s STRING) USING delta",
        "INSERT INTO {t} (s) VALUES ('a'), ('b'), ('c')",
        "INSERT INTO {t} (d, s) VALUES (1000, 'explicit')",
        "INSERT INTO {t} (s) SELECT concat('r', id) FROM range(0, 5) AS r(id)",
    ],
    "cdf": [
        f"CREATE TABLE {{t}} (id INT, v STRING, p STRING) USING delta PARTITIONED BY (p) "
        f"TBLPROPERTIES ({CDF}, 'delta.enableInCommitTimestamps' = 'true')",
        "INSERT INTO {t} SELECT id, concat('v', id), IF(id < 8, 'a', 'b') "
        "FROM range(0, 16) AS r(id)",
        "UPDATE {t} SET v = 'up' WHERE id % 3 = 0",
        "DELETE FROM {t} WHERE id IN (1, 9)",
        "DELETE FROM {t} WHERE p = 'b' AND id > 13",
        "MERGE INTO {t} AS d USING (SELECT id, 'm' AS v, 'b' AS p FROM range(10, 20) AS r(id)) "
        "AS s ON d.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT *",
        "INSERT OVERWRITE {t} PARTITION (p = 'a') SELECT 50, 'over'",
    ],
    "struct_stats_checkpoint": [
        "CREATE TABLE {t} (id INT, ts TIMESTAMP, s STRING, day DATE) USING delta "
        "PARTITIONED BY (day) TBLPROPERTIES ('delta.columnMapping.mode' = 'name', "
        "'delta.checkpoint.writeStatsAsStruct' = 'true', "
        "'delta.checkpoint.writeStatsAsJson' = 'false', 'delta.checkpointInterval' = '2', "
        f"{DV})",
        "INSERT INTO {t} SELECT id, TIMESTAMP '2024-01-01 00:00:00.123456' + "
        "make_interval(0, 0, 0, 0, 0, 0, id), concat(repeat('x', 40), id), "
        "date_add(DATE '2024-01-01', CAST(id % 2 AS INT)) FROM range(0, 10) AS r(id)",
        "INSERT INTO {t} VALUES (50, TIMESTAMP '2024-06-01 12:00:00.999999', "
        "concat(repeat('y', 40), 'z'), DATE '2024-06-01')",
        "DELETE FROM {t} WHERE id = 3",
        "ALTER TABLE {t} RENAME COLUMN ts TO `ts 2`",
        "INSERT INTO {t} VALUES (60, NULL, NULL, NULL)",
    ],
    "type_widening_numeric": [
        "CREATE TABLE {t} (i INT, j INT, b BYTE, p SMALLINT) USING delta PARTITIONED BY (p) "
        "TBLPROPERTIES ('delta.enableTypeWidening' = 'true')",
        "INSERT INTO {t} VALUES (1, 2, 3, 4), (-5, 600000, -7, 8), (NULL, NULL, NULL, NULL)",
        "ALTER TABLE {t} ALTER COLUMN i TYPE DOUBLE",
        "ALTER TABLE {t} ALTER COLUMN j TYPE DECIMAL(12, 2)",
        "ALTER TABLE {t} ALTER COLUMN b TYPE DECIMAL(12, 1)",
        "ALTER TABLE {t} ALTER COLUMN p TYPE INT",
        "INSERT INTO {t} VALUES (0.5, 1234567890.12, 1234.5, 100000)",
    ],
    "cdf_mapped": [
        "CREATE TABLE {t} (id INT, v STRING, p STRING) USING delta PARTITIONED BY (p) "
        f"TBLPROPERTIES ('delta.columnMapping.mode' = 'name', {CDF}, {DV})",
        "INSERT INTO {t} SELECT id, concat('v', id), IF(id < 6, 'a', 'b') "
        "FROM range(0, 12) AS r(id)",
        "UPDATE {t} SET v = 'up' WHERE id % 4 = 0",
        "DELETE FROM {t} WHERE id IN (1, 7)",
        "MERGE INTO {t} AS d USING (SELECT id, 'm' AS v, 'b' AS p FROM range(9, 14) AS r(id)) "
        "AS s ON d.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT *",
    ],
    "multipart_drop_dv": [
        "SET spark.databricks.delta.checkpoint.partSize = 3",  # actions per checkpoint part
        "CREATE TABLE {t} (id INT, p INT) USING delta PARTITIONED BY (p) "
        f"TBLPROPERTIES ('delta.checkpointInterval' = '2', {DV})",
        "INSERT INTO {t} SELECT id, id % 5 FROM range(0, 20) AS r(id)",
        "DELETE FROM {t} WHERE id % 3 = 0",
        "INSERT INTO {t} SELECT id, id % 4 FROM range(20, 30) AS r(id)",
        "ALTER TABLE {t} DROP FEATURE deletionVectors",
        "INSERT INTO {t} VALUES (99, NULL)",
        "RESET spark.databricks.delta.checkpoint.partSize",
    ],
    "skip_awkward": [
        "CREATE TABLE {t} (a INT, b INT, ts TIMESTAMP, p STRING) USING delta "
        "PARTITIONED BY (ts, p) TBLPROPERTIES ('delta.dataSkippingNumIndexedCols' = '1', "
        "'delta.randomizeFilePrefixes' = 'true')",
        "INSERT INTO {t} VALUES (1, 10, TIMESTAMP '2024-01-01 00:00:00.123456', 'a/b c%'), "
        "(2, 20, NULL, NULL), (3, 30, TIMESTAMP '2024-03-01 10:00:00', '=x')",
        "INSERT INTO {t} VALUES (4, 40, TIMESTAMP '2024-01-01 00:00:00.123456', 'a/b c%')",
    ],
}

#: Kinds written with the change data feed on from version 0.
CDF_TABLES = ("dv_dml", "cdf", "cdf_mapped")


@pytest.fixture(scope="module")
def spark_table(delta_spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], str]:
    """Builds a kind of table with Spark-Delta once per module; returns its location."""
    built: dict[str, str] = {}

    def get(kind: str) -> str:
        if kind not in built:
            uri = str(tmp_path_factory.mktemp("spark") / kind)
            for statement in TABLES[kind]:
                delta_sql(delta_spark, statement, uri)
            built[kind] = uri
        return built[kind]

    return get


def spark_versions(spark: Any, uri: str) -> list[int]:
    rows = delta_sql(spark, "DESCRIBE HISTORY {t}", uri).select("version").collect()
    return sorted(r[0] for r in rows)


@pytest.mark.parametrize("kind", sorted(TABLES))
def test_every_version_agrees(
    delta_spark: Any, spark_table: Callable[[str], str], kind: str
) -> None:
    """Each lakequery engine reads each version as Spark-Delta does: the same columns in the
    same order and the same rows; the latest version is lakequery's default snapshot."""
    uri = spark_table(kind)
    versions = spark_versions(delta_spark, uri)
    commits = [st for st in TABLES[kind] if not st.startswith(("SET ", "RESET "))]
    assert versions == list(range(len(versions))) and len(versions) >= len(commits)
    assert lq.DeltaTable(uri).snapshot().version == versions[-1]
    for v in versions:
        theirs = spark_read(delta_spark, uri, version=v)
        ours = lq_engines(uri, version=v)
        ours["spark"] = lqs.read(delta_spark, uri, version=v).toArrow()
        for engine, table in ours.items():
            assert_same_rows(table, theirs, f"{kind} v{v} {engine}")


@pytest.mark.parametrize("kind", CDF_TABLES)
def test_change_feed_agrees(delta_spark: Any, spark_table: Callable[[str], str], kind: str) -> None:
    """``DeltaTable.changes`` equals Spark's ``readChangeFeed`` over the whole history, from
    every later start, and over an inner range: rows, change types, versions, timestamps."""
    uri = spark_table(kind)
    dt = lq.DeltaTable(uri)
    latest = dt.snapshot().version
    ranges = [(s, latest) for s in range(latest + 1)] + [(2, 3)]
    seen: set[str] = set()
    for start, end in ranges:
        ours = dt.changes(starting_version=start, ending_version=end).to_arrow()
        theirs = spark_changes(delta_spark, uri, start, end)
        assert sorted(theirs.column_names) == sorted(ours.column_names)
        assert_same_rows(ours, theirs.select(ours.column_names), f"{kind} changes {start}..{end}")
        seen.update(str(k) for k in ours.column("_change_type").to_pylist())
    assert seen == {"insert", "delete", "update_preimage", "update_postimage"}


def test_deletion_vectors_and_purge(delta_spark: Any, spark_table: Callable[[str], str]) -> None:
    """The DV tables really carry deletion vectors (so the reads above exercised them), and
    REORG PURGE leaves none in the latest version."""
    for kind in ("dv_dml", "v2_checkpoint"):
        files = lq.DeltaTable(spark_table(kind)).snapshot().files()
        assert files.column("deletion_vector").null_count < files.num_rows, kind
    purged = lq.DeltaTable(spark_table("reorg_purge"))
    before = purged.snapshot(version=purged.snapshot().version - 1).files()
    assert before.column("deletion_vector").null_count < before.num_rows
    after = purged.snapshot().files()
    assert after.column("deletion_vector").null_count == after.num_rows


def test_v2_checkpoint_with_sidecars(delta_spark: Any, spark_table: Callable[[str], str]) -> None:
    """Spark wrote V2 checkpoints whose file actions live in sidecars; lakequery reads the
    latest version from the newest of them (not only from commits)."""
    uri = spark_table("v2_checkpoint")
    log = Path(uri) / "_delta_log"
    assert list((log / "_sidecars").glob("*.parquet")), "no sidecar files"
    uuid_checkpoints = [p for p in log.iterdir() if ".checkpoint." in p.name]
    assert uuid_checkpoints, "no V2 checkpoint"
    latest = lq.DeltaTable(uri).snapshot()
    assert latest.protocol.reader_features is not None
    assert "v2Checkpoint" in latest.protocol.reader_features


def test_row_tracking(delta_spark: Any, spark_table: Callable[[str], str]) -> None:
    """lakequery sees Spark's row tracking: every live file has a base row id and a default
    row commit version, and the high-water mark bounds the row ids Spark reports."""
    uri = spark_table("dv_dml")
    snap = lq.DeltaTable(uri).snapshot()
    files = snap.files()
    assert files.column("base_row_id").null_count == 0
    assert files.column("default_row_commit_version").null_count == 0
    df = delta_sql(delta_spark, "SELECT _metadata.row_id AS r FROM {t}", uri)
    row_ids = [r[0] for r in df.collect()]
    assert len(set(row_ids)) == len(row_ids) == snap.scan().to_arrow().num_rows
    mark = json.loads(snap.domains["delta.rowTracking"])["rowIdHighWaterMark"]
    assert max(row_ids) <= mark


def test_multipart_checkpoint_after_drop_feature(
    delta_spark: Any, spark_table: Callable[[str], str]
) -> None:
    """Spark wrote multi-part checkpoints, and DROP FEATURE left a table without deletion
    vectors in its protocol or its files, whose latest version lakequery reads."""
    uri = spark_table("multipart_drop_dv")
    log = Path(uri) / "_delta_log"
    assert [p for p in log.glob("*.checkpoint.0000000002.*.parquet")], "no multi-part checkpoint"
    snap = lq.DeltaTable(uri).snapshot()
    assert "deletionVectors" not in (snap.protocol.reader_features or ())
    assert snap.files().column("deletion_vector").null_count == snap.files().num_rows
    assert snap.scan().to_arrow().num_rows == 30 - 7 + 1


def test_in_commit_timestamps(delta_spark: Any, spark_table: Callable[[str], str]) -> None:
    """lakequery's history takes each commit's time from its in-commit timestamp, as Spark's
    DESCRIBE HISTORY does, and time travel by those times finds the same versions."""
    uri = spark_table("cdf")
    rows = delta_sql(delta_spark, "DESCRIBE HISTORY {t}", uri).select("version", "timestamp")
    theirs = {r[0]: r[1] for r in rows.collect()}
    dt = lq.DeltaTable(uri)
    assert "inCommitTimestamp" in (dt.snapshot().commit_info or {})
    ours = {e.version: e.timestamp for e in dt.history()}
    assert set(ours) == set(theirs)
    for v, t in theirs.items():
        assert ours[v].replace(tzinfo=None) == t.replace(tzinfo=None), v
        assert dt.version_as_of(ours[v]) == v


def test_identity_high_water_marks(delta_spark: Any, spark_table: Callable[[str], str]) -> None:
    """lakequery's schema carries Spark's identity metadata: start, step and a high-water
    mark that bounds every generated value (Spark's tasks generate disjoint runs, so the
    values are unique multiples of the step above the start, not necessarily contiguous)."""
    uri = spark_table("identity")
    column = lq.DeltaTable(uri).snapshot().scan(columns=["id"]).to_arrow().column("id")
    assert column.null_count == 0
    ids = [int(i) for i in column.to_pylist() if i is not None]
    assert len(set(ids)) == len(ids) == 9
    assert all(i >= 10 and (i - 10) % 5 == 0 for i in ids)
    schema = json.loads(lq.DeltaTable(uri).snapshot().metadata.schema_string)
    fields = {f["name"]: f for f in schema["fields"]}
    meta = fields["id"]["metadata"]
    assert meta["delta.identity.start"] == 10 and meta["delta.identity.step"] == 5
    assert meta["delta.identity.highWaterMark"] >= max(ids)


#: (kind, predicate) read at the latest version by both; the predicate is valid in both
#: dialects and exercises skipping on Spark's statistics and partition values.
FILTERS = [
    ("dv_dml", "id BETWEEN 10 AND 20 AND part = 'even'"),
    ("zorder", "a = 2 AND b > 1"),
    ("zorder", "s IS NULL"),
    ("liquid", "k = 3 OR d = DATE '2024-03-01'"),
    ("liquid", "s > 's2'"),
    ("type_widening", "small > 100"),
    ("type_widening", "f < 2"),
    ("type_widening", "dec < 200"),
    ("type_widening", "d < TIMESTAMP '2024-01-03 00:00:00'"),
    ("type_widening", "id > 5"),
    ("column_mapping", "`a renamed` = 'a3'"),
    ("column_mapping", "`the part` = 'lo' AND b IS NULL"),
    ("column_mapping", "nest.p > 4"),
    ("v2_checkpoint", "p = 1 AND id > 3"),
    ("dv_dml", "name = 'N9'"),
    ("struct_stats_checkpoint", "`ts 2` = TIMESTAMP '2024-01-01 00:00:04.123456'"),
    ("struct_stats_checkpoint", "`ts 2` >= TIMESTAMP '2024-06-01 12:00:00.999999'"),
    ("struct_stats_checkpoint", f"s = '{'y' * 40}z'"),  # longer than Spark's string stats
    ("struct_stats_checkpoint", f"s > '{'x' * 40}5'"),
    ("struct_stats_checkpoint", "day = DATE '2024-01-02' AND id > 2"),
    ("type_widening_numeric", "i > 0.4 AND i < 0.6"),
    ("type_widening_numeric", "j > 600000"),
    ("type_widening_numeric", "b < 0"),
    ("type_widening_numeric", "p >= 8"),
    ("cdf_mapped", "p = 'b' AND v = 'm'"),
    ("skip_awkward", "b = 20"),  # b has no statistics
    ("skip_awkward", "ts = TIMESTAMP '2024-01-01 00:00:00.123456'"),
    ("skip_awkward", "p = 'a/b c%' OR p IS NULL"),
    ("multipart_drop_dv", "p = 2 AND id > 4"),
]


@pytest.mark.parametrize(("kind", "predicate"), FILTERS)
def test_filtered_latest_agrees(
    delta_spark: Any, spark_table: Callable[[str], str], kind: str, predicate: str
) -> None:
    """A filtered read (files pruned by Spark's stats and partition values, then rows
    filtered) returns Spark's rows: some, but not all, of the table's."""
    uri = spark_table(kind)
    theirs = spark_read(delta_spark, uri, where=predicate)
    total = lq.DeltaTable(uri).snapshot().scan().to_arrow().num_rows
    assert 0 < theirs.num_rows < total
    ours = lq.DeltaTable(uri).snapshot().scan(filter=predicate).to_arrow()
    assert_same_rows(ours, theirs, f"{kind} where {predicate}")
