"""``lakequery.spark.write`` with a real local Spark session: executors write the files,
the driver commits once, and lakequery, ``deltalake`` and Spark agree on the rows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lakequery as lq
import lakequery.spark as lqs
from lakequery.writer.add_actions import add_actions_from_arrow

#: Every column type the tests write; ``p`` is the partition column (with nulls).
COLUMNS = [
    "id",
    "CAST(IF(id % 7 = 3, NULL, id * 3 - 50) AS INT) AS i",
    "IF(id % 5 = 1, NULL, concat('s-', id, '-é')) AS s",
    "IF(id % 6 = 2, NULL, id / 8.0D - 3.25D) AS d",
    "IF(id % 9 = 4, NULL, timestamp_micros(1700000000000000 + id * 3600000001)) AS ts",
    "IF(id % 8 = 5, NULL, date_add(DATE'2023-12-30', CAST(id AS INT))) AS dt",
    "IF(id % 4 = 0, NULL, CAST(id * 1.125 - 7 AS DECIMAL(12, 3))) AS dec",
    "IF(id % 10 = 6, NULL, id % 3 = 0) AS b",
    # (a NOT NULL field in a nullable struct breaks PySpark's own toArrow)
    "IF(id % 11 = 7, NULL, named_struct('x', CAST(IF(id % 17 = 1, NULL, id) AS INT),"
    " 'y', IF(id % 2 = 0, NULL, CAST(id AS STRING)))) AS st",
    "IF(id % 13 = 0, NULL, element_at(array('a', 'b/c', 'd e'), CAST(id % 3 + 1 AS INT))) AS p",
]


def frame(spark: Any, n: int = 60, partitions: int = 2, start: int = 0) -> Any:
    """``n`` rows of every test type, in ``partitions`` Spark partitions."""
    return spark.range(start, start + n, 1, partitions).selectExpr(*COLUMNS)


def rows(table: pa.Table) -> list[dict[str, Any]]:
    """Rows sorted by ``id``, then ``s`` (aware timestamps compare as instants)."""
    return sorted(table.to_pylist(), key=lambda r: (r["id"], str(r.get("s"))))


def spark_rows(df: Any) -> list[dict[str, Any]]:
    return rows(df.toArrow())


def lq_rows(uri: str, columns: list[str], **kw: Any) -> list[dict[str, Any]]:
    table = lq.DeltaTable(uri, **kw).snapshot().scan().to_arrow()
    return rows(table.select(columns))


def deltalake_rows(uri: str, columns: list[str]) -> list[dict[str, Any]]:
    import deltalake

    # QueryBuilder: deltalake's pyarrow reader refuses the deletionVectors reader feature
    query = deltalake.QueryBuilder().register("t", deltalake.DeltaTable(uri))
    cols = ", ".join(f'"{c}"' for c in columns)
    return rows(pa.table(query.execute(f"SELECT {cols} FROM t")))


def log_adds(uri: str) -> dict[int, list[dict[str, Any]]]:
    """The ``add`` actions of every commit file, by version."""
    out = {}
    for f in sorted(Path(uri, "_delta_log").glob("*.json")):
        lines = [json.loads(line) for line in f.read_text().splitlines() if line]
        out[int(f.stem)] = [a["add"] for a in lines if "add" in a]
    return out


def task_row_counts(df: Any) -> list[int]:
    """Rows per Spark partition (= per write task) of a DataFrame."""
    from pyspark.sql import functions as F

    counts = df.groupBy(F.spark_partition_id().alias("task")).count().collect()
    return sorted(r["count"] for r in counts)


def test_unpartitioned_write_roundtrip(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    df = frame(spark, n=80, partitions=2)
    result = lqs.write(df, uri)
    assert (result.version, result.num_rows, result.skipped) == (0, 80, False)

    adds = log_adds(uri)
    assert list(adds) == [0]  # one commit for the whole job
    assert result.num_files == len(adds[0]) == len(lq.DeltaTable(uri).snapshot().files())
    # Each task wrote its own file: one per Spark partition, holding that task's rows.
    assert len(adds[0]) >= 2
    per_file = sorted(json.loads(a["stats"])["numRecords"] for a in adds[0])
    assert per_file == task_row_counts(df)
    assert all(a["path"].endswith(".zstd.parquet") for a in adds[0])

    expected = spark_rows(df)
    assert len(expected) == 80
    assert lq_rows(uri, df.columns) == expected
    assert deltalake_rows(uri, df.columns) == expected

    # Spark's NOT NULL (``id`` from range) does not make the table's column NOT NULL.
    snapshot = lq.DeltaTable(uri).snapshot()
    assert all(f.nullable for f in snapshot.metadata.schema.fields)
    history = lq.DeltaTable(uri).history()
    assert [h.version for h in history] == [0]
    assert history[0].metrics.get("numFiles") in (len(adds[0]), str(len(adds[0])))


def test_path_objects_as_locations(spark: Any, tmp_path: Path) -> None:
    """``lqs.write`` and ``lqs.read`` take a ``pathlib.Path`` as ``lq.write`` does."""
    df = frame(spark, n=20, partitions=2)
    assert lqs.write(df, tmp_path / "t").num_rows == 20
    assert lqs.read(spark, tmp_path / "t").count() == 20


def test_partitioned_write_roundtrip(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    df = frame(spark, n=90, partitions=3)
    result = lqs.write(df, uri, partition_by=["p"])
    assert result.version == 0

    adds = log_adds(uri)[0]
    assert len(adds) == result.num_files
    values = {a["partitionValues"]["p"] for a in adds}
    assert values == {"a", "b/c", "d e", None}
    # A file per task and partition value: 3 tasks, each saw all 4 values.
    assert len(adds) == 12
    assert sum(json.loads(a["stats"])["numRecords"] for a in adds) == 90

    expected = spark_rows(df)
    assert lq_rows(uri, df.columns) == expected
    assert deltalake_rows(uri, df.columns) == expected
    picked = lq.DeltaTable(uri).snapshot().scan(filter="p = 'b/c'").to_arrow()
    assert rows(picked.select(df.columns)) == [r for r in expected if r["p"] == "b/c"]
    assert list(lq.DeltaTable(uri).snapshot().metadata.partition_columns) == ["p"]


def test_modes_one_commit_per_job(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    first = frame(spark, n=20, partitions=2)
    second = frame(spark, n=30, partitions=2, start=100)
    assert lqs.write(first, uri, partition_by="p").version == 0

    with pytest.raises(lq.TableAlreadyExistsError):
        lqs.write(second, uri)  # mode="error"
    skipped = lqs.write(second, uri, mode="ignore")
    assert skipped.skipped and skipped.version == 0 and skipped.num_files == 0

    appended = lqs.write(second, uri, mode="append")
    assert appended.version == 1
    assert lq_rows(uri, first.columns) == rows(first.union(second).toArrow())

    replaced = lqs.write(second.where("p = 'a'"), uri, mode="overwrite", predicate="p = 'a'")
    assert replaced.version == 2 and replaced.num_removed_files > 0
    expected = rows(first.where("p IS NULL OR p <> 'a'").union(second).toArrow())
    assert lq_rows(uri, first.columns) == expected
    assert deltalake_rows(uri, first.columns) == expected

    overwritten = lqs.write(first, uri, mode="overwrite")
    assert overwritten.version == 3
    assert lq_rows(uri, first.columns) == spark_rows(first)

    empty = lqs.write(first.limit(0), uri, mode="append")
    assert (empty.version, empty.num_files) == (4, 0)

    assert sorted(log_adds(uri)) == [0, 1, 2, 3, 4]  # exactly one commit per job
    history = lq.DeltaTable(uri).history()
    modes = {h.version: h.parameters.get("mode") for h in history}
    assert modes == {
        0: "ErrorIfExists",
        1: "Append",
        2: "Overwrite",
        3: "Overwrite",
        4: "Append",
    }
    assert deltalake_rows(uri, first.columns) == spark_rows(first)


def test_schema_mismatch(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    lqs.write(spark.range(10).selectExpr("id", "CAST(id AS STRING) AS s"), uri)

    wrong_type = spark.range(5).selectExpr("id", "named_struct('a', id) AS s")
    with pytest.raises(lq.SchemaMismatchError, match="'s'"):
        lqs.write(wrong_type, uri, mode="append")
    extra = spark.range(5).selectExpr("id", "'x' AS s", "id * 2 AS extra")
    with pytest.raises(lq.SchemaMismatchError, match="extra"):
        lqs.write(extra, uri, mode="append")
    assert sorted(log_adds(uri)) == [0]  # nothing committed

    merged = lqs.write(extra, uri, mode="append", schema_mode="merge")
    assert merged.version == 1
    got = lq_rows(uri, ["id", "s", "extra"])
    assert [r["extra"] for r in got].count(None) == 10
    assert deltalake_rows(uri, ["id", "s", "extra"]) == got


def test_task_error_raised_as_lakequery_error(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False)])
    lq.write(uri, pa.table({"id": [1]}, schema=schema))
    with_nulls = spark.range(0, 10, 1, 2).selectExpr("IF(id = 7, NULL, id) AS id")
    # The table's NOT NULL is checked by the writing task; the driver re-raises it.
    with pytest.raises(lq.SchemaMismatchError, match="null values") as info:
        lqs.write(with_nulls, uri, mode="append")
    assert info.value.__cause__ is not None  # chained to Spark's exception

    parted = str(tmp_path / "parted")
    lqs.write(frame(spark, n=12), parted, partition_by="p")
    with pytest.raises(lq.ConstraintViolationError):
        lqs.write(frame(spark, n=12), parted, mode="overwrite", predicate="p = 'a'")
    assert sorted(log_adds(uri)) == [0] and sorted(log_adds(parted)) == [0]


def test_idempotent_app_id(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    df = spark.range(0, 10, 1, 2).selectExpr("id", "id % 2 AS k")
    assert lqs.write(df, uri, mode="append", app_id="job", app_version=1).version == 0
    again = lqs.write(df, uri, mode="append", app_id="job", app_version=1)
    assert again.skipped and again.version == 0
    older = lqs.write(df, uri, mode="append", app_id="job", app_version=0)
    assert older.skipped
    assert lqs.write(df, uri, mode="append", app_id="job", app_version=2).version == 1
    snapshot = lq.DeltaTable(uri).snapshot()
    assert snapshot.txns == {"job": 2}
    assert snapshot.scan().to_arrow().num_rows == 20
    assert sorted(log_adds(uri)) == [0, 1]


def test_pipeline_from_public_pieces(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    df = frame(spark, n=40, partitions=2)
    plan = lq.plan_write(uri, lqs.arrow_schema_of(df, nullable=True), partition_by=["dt"])
    assert plan.state is not None
    out = df.mapInArrow(lqs.executor_function(plan.state), lqs.ADD_ACTION_DDL)
    adds = add_actions_from_arrow(out.toArrow())
    assert adds and all(set(a["partitionValues"]) == {"dt"} for a in adds)
    result = lq.commit_write(plan, adds)
    assert (result.version, result.num_files, result.num_rows) == (0, len(adds), 40)
    assert lq_rows(uri, df.columns) == spark_rows(df)
    assert deltalake_rows(uri, df.columns) == spark_rows(df)


def test_write_to_s3(spark: Any, s3_table_uri: str, s3_storage_options: dict[str, Any]) -> None:
    df = frame(spark, n=30, partitions=2)
    result = lqs.write(df, s3_table_uri, partition_by="p", storage_options=s3_storage_options)
    assert result.version == 0 and result.num_files >= 2
    # The executors opened the S3 storage themselves from the WriteState.
    got = lq_rows(s3_table_uri, df.columns, storage_options=s3_storage_options)
    assert got == spark_rows(df)
    appended = lqs.write(df, s3_table_uri, mode="append", storage_options=s3_storage_options)
    assert appended.version == 1
    snapshot = lq.DeltaTable(s3_table_uri, storage_options=s3_storage_options).snapshot()
    assert snapshot.scan().to_arrow().num_rows == 60


def test_timestamps_in_a_non_utc_session(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    old = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        df = spark.range(0, 6, 1, 2).selectExpr(
            "id",
            "timestamp_micros(1710054000000000 + id * 1800000000) AS ts",  # DST switch
            "CAST(timestamp_micros(1710054000000000 + id * 1800000000) AS TIMESTAMP_NTZ) AS ntz",
        )
        lqs.write(df, uri)
        expected = spark_rows(df)
    finally:
        spark.conf.set("spark.sql.session.timeZone", old)
    got = lq.DeltaTable(uri).snapshot().scan().to_arrow()
    assert got.schema.field("ntz").type == pa.timestamp("us")
    assert got.schema.field("ts").type.tz is not None
    assert rows(got.select(["id", "ts", "ntz"])) == expected
    assert deltalake_rows(uri, ["id", "ts", "ntz"]) == expected


def test_dotted_column_names_and_variant_columns(spark: Any, tmp_path: Path) -> None:
    """A column named ``a.b`` is written as it is (mapInArrow read it as field ``b`` of
    ``a``); a variant column is refused, by the function and by the data source alike,
    where it silently became a struct of two binaries."""
    dotted = spark.sql("SELECT 1L AS `a.b`, 'x' AS `c``d`")
    uri = str(tmp_path / "dotted")
    lqs.write(dotted, uri)
    assert lq.DeltaTable(uri).snapshot().scan().to_arrow().to_pylist() == [{"a.b": 1, "c`d": "x"}]
    variant = spark.sql("""SELECT 1L AS id, named_struct('v', parse_json('{"a": 1}')) AS s""")
    with pytest.raises(lq.UnsupportedFeatureError, match=r"variantType.*'s\.v'"):
        lqs.write(variant, str(tmp_path / "v1"))
    from lakequery.spark.datasource import register

    register(spark)
    with pytest.raises(Exception, match="variantType"):
        variant.write.format("lakequery").mode("append").save(str(tmp_path / "v2"))
    assert not (tmp_path / "v1" / "_delta_log").exists()
    assert not (tmp_path / "v2" / "_delta_log").exists()
