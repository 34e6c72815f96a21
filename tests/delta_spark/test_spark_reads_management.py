"""Spark-Delta (the reference implementation) reads the tables ``DeltaTable.create`` and
``lq.convert_to_delta`` make and the table ``DeltaTable.repair`` repairs, as lakequery
does; its DESCRIBE DETAIL equals ``DeltaTable.detail()``; Spark's own CONVERT TO DELTA of
the same Parquet folder gives the same schema and rows."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
from sparkkit import assert_same_detail, assert_same_rows, lq_read, spark_read

import lakequery as lq


def parquet_folder(root: Path) -> pa.Table:
    n = 30
    data = pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "v": [None if i % 7 == 0 else f"v{i:02d}" for i in range(n)],
            "amount": pa.array([decimal.Decimal(i) / 4 for i in range(n)], pa.decimal128(8, 2)),
            "ts": pa.array(
                [dt.datetime(2024, 1, 1, i, tzinfo=dt.timezone.utc) for i in range(24)]
                + [None] * 6,
                pa.timestamp("us", tz="UTC"),
            ),
            "ratio": [i / 3 for i in range(n)],
            "year": [2023 + i % 2 for i in range(n)],
            "day": [dt.date(2024, 3, 1 + i % 3) for i in range(n)],
            "tag": ["a b" if i % 2 else "c" for i in range(n)],
        }
    )
    ds.write_dataset(
        data,
        root,
        format="parquet",
        partitioning=["year", "day", "tag"],
        partitioning_flavor="hive",
        max_rows_per_group=4,
        max_rows_per_file=8,
    )
    return data


def test_spark_reads_a_created_table(delta_spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "created")
    schema = pa.schema([("id", pa.int64()), ("g", pa.string())])
    lq.DeltaTable.create(
        uri,
        schema,
        partition_by=["g"],
        configuration={"delta.enableChangeDataFeed": "true"},
        name="created",
        description="by DeltaTable.create",
    )
    assert spark_read(delta_spark, uri).num_rows == 0
    assert_same_detail(delta_spark, uri)
    lq.write(uri, pa.table({"id": [1, 2, 3], "g": ["x", "y", None]}), mode="append")
    assert_same_rows(spark_read(delta_spark, uri), lq_read(uri), "created + appended")
    assert_same_detail(delta_spark, uri)


def test_spark_reads_a_converted_folder(delta_spark: Any, tmp_path: Path) -> None:
    folder = tmp_path / "parquet"
    parquet_folder(folder)
    theirs_folder = tmp_path / "parquet-spark"
    shutil.copytree(folder, theirs_folder)

    uri = str(folder)
    lq.convert_to_delta(uri, partition_by=["year", "day", "tag"])
    ours = lq_read(uri)
    assert_same_rows(spark_read(delta_spark, uri), ours, "converted by lakequery")
    for where in (
        "id >= 25",
        "v = 'v03'",
        "ts < TIMESTAMP '2024-01-01 03:00:00'",
        "day = DATE '2024-03-02'",
    ):
        assert_same_rows(
            spark_read(delta_spark, uri, where=where), lq_read(uri, where=where), where
        )
    assert_same_detail(delta_spark, uri)

    # Spark's own CONVERT TO DELTA of the same files, with the types lakequery inferred
    delta_spark.sql(
        f"CONVERT TO DELTA parquet.`{theirs_folder}` "
        "PARTITIONED BY (year INT, day DATE, tag STRING)"
    )
    spark_converted = spark_read(delta_spark, str(theirs_folder))
    assert spark_converted.schema.names == ours.schema.names
    assert_same_rows(spark_converted, ours, "Spark's CONVERT vs lakequery's")
    spark_schema = lq.DeltaTable(str(theirs_folder)).snapshot().metadata.schema
    ours_schema = lq.DeltaTable(uri).snapshot().metadata.schema
    assert [(f.name, f.type) for f in spark_schema.fields] == [
        (f.name, f.type) for f in ours_schema.fields
    ]

    # the same statistics as Spark's (which reads the data), but no float bounds
    def stats(root: Path) -> dict[str, dict[str, Any]]:
        files = lq.DeltaTable(str(root)).snapshot().files().select(["path", "stats"])
        return {r["path"]: json.loads(r["stats"]) for r in files.to_pylist()}

    spark_stats, our_stats = stats(theirs_folder), stats(folder)
    assert sorted(spark_stats) == sorted(our_stats)
    for path, theirs in spark_stats.items():
        for bound in ("minValues", "maxValues"):
            theirs[bound].pop("ratio", None)
        assert our_stats[path] == theirs, path


def test_spark_reads_a_repaired_table(delta_spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "repaired")
    for g in ("a", "b", "c"):
        lq.write(uri, pa.table({"id": [ord(g)], "g": [g]}), mode="append", partition_by=["g"])
    dt_ = lq.DeltaTable(uri)
    lost = next(p for p in dt_.snapshot().files().column("path").to_pylist() if p.startswith("g=b"))
    os.remove(os.path.join(uri, lost))
    assert dt_.repair(dry_run=False).files_removed == (lost,)
    assert_same_rows(spark_read(delta_spark, uri), lq_read(uri), "after FSCK")
    assert sorted(lq_read(uri)["g"].to_pylist()) == ["a", "c"]
    assert_same_detail(delta_spark, uri)
