"""The ``lakequery`` Spark data source (``spark.read.format("lakequery")``,
``df.write.format("lakequery")``) on the real local Spark session of ``tests/conftest.py``.

Reads are compared with lakequery's own Arrow read (every conformance table and version,
deletion vectors from lakequery's DML and from an independent writer, time travel, the
change data feed) or with rows computed without lakequery; filters are checked against
Spark's own evaluation of the same ``WHERE`` clause and by the number of files planned.
Writes are read back by lakequery and by ``deltalake``.

Which conformance tables Spark cannot represent: none. Every Delta type has a Spark type
(``variant`` -> VariantType, ``void`` -> NullType, ``timestamp_ntz`` -> TimestampNTZType,
``geometry``/``geography`` -> their WKB ``binary``), so :data:`NOT_REPRESENTABLE` is empty
and every ``rows`` version must match; the ``error`` versions must raise the lakequery
error the conformance suite expects (:data:`conformance._cases.EXPECTED_ERRORS`). PySpark's
``DataFrame.toArrow()`` fails on variants inside arrays (its cast of the collected batches
refuses null elements under the non-nullable variant fields), so DataFrames with a variant
column are collected as rows instead (:func:`spark_arrow`).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from conformance._cases import (
    EXPECTED_ERRORS,
    MISSING_CASE_ID,
    VersionCase,
    missing_reason,
    require_data,
    version_cases,
)
from conformance._compare import assert_tables_match
from tablekit import TableKit, dv_payload, dv_protocol, with_dv, z85_encode

import lakequery as lq
from lakequery.spark.datasource import lakequery_errors, register
from lakequery.spark.schema import logical_schema

REPO = Path(__file__).resolve().parents[2]

#: (table, version) -> why Spark cannot represent it. Empty: see the module docstring.
NOT_REPRESENTABLE: dict[tuple[str, int], str] = {}


@pytest.fixture(scope="module")
def lqs(spark: Any) -> Any:
    """The session with the ``lakequery`` source registered."""
    register(spark)
    return spark


def load(spark: Any, uri: str, **options: Any) -> Any:
    reader = spark.read.format("lakequery")
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load(uri)


def _python_value(value: Any) -> Any:
    """A collected Spark value as Arrow's ``from_pylist`` takes it (variants as the
    ``metadata``/``value`` struct lakequery reads)."""
    from pyspark.sql import Row
    from pyspark.sql.types import VariantVal

    if isinstance(value, VariantVal):
        return {"metadata": bytes(value.metadata), "value": bytes(value.value)}
    if isinstance(value, Row):
        return {k: _python_value(v) for k, v in value.asDict(recursive=False).items()}
    if isinstance(value, dict):
        return [(k, _python_value(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [_python_value(v) for v in value]
    if isinstance(value, bytearray):
        return bytes(value)
    return value


def spark_arrow(df: Any, schema: pa.Schema) -> pa.Table:
    """A DataFrame's rows as Arrow (``schema``: lakequery's, used for variant tables)."""
    if "variant" not in df.schema.simpleString():
        return df.toArrow()
    rows = [{k: _python_value(v) for k, v in r.asDict().items()} for r in df.collect()]
    return pa.Table.from_pylist(rows, schema=schema)


def lq_table(uri: str, **snapshot: Any) -> pa.Table:
    return lq.DeltaTable(uri).snapshot(**snapshot).scan().to_arrow()


def deltalake_table(uri: str, columns: list[str]) -> pa.Table:
    import deltalake

    # QueryBuilder: deltalake's pyarrow reader refuses the deletionVectors reader feature
    query = deltalake.QueryBuilder().register("t", deltalake.DeltaTable(uri))
    cols = ", ".join(f'"{c}"' for c in columns)
    return pa.table(query.execute(f"SELECT {cols} FROM t"))


def sorted_rows(table: pa.Table, key: str = "id") -> list[dict[str, Any]]:
    return sorted(table.to_pylist(), key=lambda r: (r[key] is None, r[key]))


def raised(fn: Any) -> lq.LakeQueryError:
    """The lakequery error ``fn()`` raises through Spark (unwrapped by lakequery_errors)."""
    with pytest.raises(lq.LakeQueryError) as info, lakequery_errors():
        fn()
    return info.value


# -- conformance --------------------------------------------------------------------------


def _conformance_params() -> list[Any]:
    if missing_reason() is not None:
        return [pytest.param(None, id=MISSING_CASE_ID)]
    return [pytest.param(vc, id=vc.id) for vc in version_cases()]


@pytest.mark.slow
@pytest.mark.parametrize("case", _conformance_params())
def test_conformance_version(lqs: Any, case: VersionCase | None) -> None:
    """Every conformance table and version through ``format("lakequery")``: the rows of
    lakequery's Arrow read, or the lakequery error the conformance suite expects."""
    require_data()
    assert case is not None
    path = str(case.table_dir)
    assert (case.name, case.version) not in NOT_REPRESENTABLE
    if case.expect == "error":
        spec = EXPECTED_ERRORS[(case.name, case.version)]
        if spec.stage == "snapshot":  # the planner's snapshot fails: load() raises
            err = raised(lambda: load(lqs, path, versionAsOf=case.version))
        else:
            df = load(lqs, path, versionAsOf=case.version)
            err = raised(df.collect)
        for cls in spec.classes:
            wanted = getattr(lq, cls) if isinstance(cls, str) else cls
            assert isinstance(err, wanted), f"{case.id}: {type(err).__name__}: {err}"
        for pattern in spec.message:
            assert re.search(pattern, str(err), re.IGNORECASE), str(err)
        return
    snap = lq.DeltaTable(path).snapshot(version=case.version)
    df = load(lqs, path, versionAsOf=case.version)
    assert df.schema == logical_schema(snap.metadata.schema)
    expected = snap.scan().to_arrow()
    assert_tables_match(spark_arrow(df, expected.schema), expected, context=case.id)


# -- deletion vectors ---------------------------------------------------------------------


def _dv_types(uri: str) -> set[str]:
    dv = lq.DeltaTable(uri).snapshot().files().column("deletion_vector")
    return {t for t in pc.struct_field(dv, "storageType").to_pylist() if t}


def test_dml_deletion_vectors_partitioned_column_mapped(lqs: Any, tmp_path: Path) -> None:
    """lakequery's DELETE on a partitioned, column-mapped table writes inline and file
    DVs; Spark reads exactly the remaining rows."""
    uri = str(tmp_path / "t")

    def rows(lo: int, hi: int) -> pa.Table:
        ids = pa.array(range(lo, hi), pa.int64())
        return pa.table(
            {
                "id": ids,
                "Part Col": pc.cast(pc.bit_wise_and(ids, pa.scalar(1, pa.int64())), pa.string()),
                "v": pc.multiply(pc.cast(ids, pa.float64()), pa.scalar(0.5)),
            }
        )

    conf = {"delta.columnMapping.mode": "name"}
    lq.write(uri, rows(0, 3000), partition_by=["Part Col"], configuration=conf)
    dt = lq.DeltaTable(uri)
    assert dt.delete("id % 3 = 0").num_deleted_rows == 1000  # large bitmaps: a DV file
    lq.write(uri, rows(3000, 3010), mode="append")
    assert dt.delete("id = 3001").num_deleted_rows == 1  # a tiny bitmap: inline
    assert _dv_types(uri) == {"i", "u"}
    assert lq.DeltaTable(uri).snapshot().column_mapping_mode == "name"
    data = pa.concat_tables([rows(0, 3000), rows(3000, 3010)])
    expected = [r for r in data.to_pylist() if r["id"] % 3 != 0 or r["id"] >= 3000]
    expected = [r for r in expected if r["id"] != 3001]
    got = load(lqs, uri).toArrow()
    assert got.column_names == ["id", "Part Col", "v"]
    assert sorted_rows(got) == sorted(expected, key=lambda r: r["id"])


def test_independent_writer_deletion_vectors_of_three_storage_types(
    lqs: Any, tmp_path: Path
) -> None:
    """A table written without lakequery (tests/tablekit.py) whose files carry an inline
    (``i``), a relative (``u``) and an absolute-path (``p``) deletion vector."""
    kit = TableKit(tmp_path / "t")
    schema = pa.schema([("id", pa.int64()), ("p", pa.string())])
    kit.create(schema, partition_by=["p"], protocol=dv_protocol())
    parts = {"a": range(0, 100), "b": range(100, 200), "c": range(200, 300), "d": range(300, 310)}
    adds = {
        p: kit.write_parquet(
            pa.table({"id": pa.array(list(r), pa.int64())}), partition_values={"p": p}
        )
        for p, r in parts.items()
    }
    deleted = {"a": [0, 5, 99], "b": list(range(0, 100, 2)), "c": [1, 2, 3, 50]}
    u = kit.write_dv(deleted["b"])
    elsewhere = kit.write_dv(deleted["c"])  # moved out of the table: referenced by absolute path
    moved = tmp_path / "dvs" / "absolute dv.bin"
    moved.parent.mkdir()
    (kit.root / f"deletion_vector_{_uuid_of(elsewhere)}.bin").rename(moved)
    p = dict(elsewhere, storageType="p", pathOrInlineDv=moved.as_uri())
    payload = dv_payload(deleted["a"])
    padded = payload + b"\0" * (-len(payload) % 4)
    inline = {
        "storageType": "i",
        "pathOrInlineDv": z85_encode(padded),
        "sizeInBytes": len(payload),
        "cardinality": len(deleted["a"]),
    }
    kit.commit(
        [with_dv(adds["a"], inline), with_dv(adds["b"], u), with_dv(adds["c"], p), adds["d"]]
    )
    assert _dv_types(str(kit.root)) == {"i", "u", "p"}
    expected = sorted(
        i for p, r in parts.items() for pos, i in enumerate(r) if pos not in deleted.get(p, [])
    )
    got = load(lqs, str(kit.root)).toArrow()
    assert sorted(got.column("id").to_pylist()) == expected
    assert got.num_rows == 310 - 3 - 50 - 4


def _uuid_of(dv: dict[str, Any]) -> uuid.UUID:
    from lakequery.dv.descriptor import Descriptor

    path = Descriptor.from_dict(dv).absolute_path("/")
    return uuid.UUID(Path(path).stem.removeprefix("deletion_vector_"))


# -- time travel, schemas, options --------------------------------------------------------


@pytest.fixture(scope="module")
def three_versions(tmp_path_factory: pytest.TempPathFactory) -> str:
    uri = str(tmp_path_factory.mktemp("tt") / "t")
    lq.write(uri, pa.table({"id": [1, 2], "s": ["a", "b"]}))
    lq.write(uri, pa.table({"id": [3], "s": ["c"]}), mode="append")
    lq.write(uri, pa.table({"id": [4], "s": ["d"], "x": [1.5]}), mode="append", schema_mode="merge")
    return uri


def test_time_travel_by_version_and_timestamp(lqs: Any, three_versions: str) -> None:
    uri = three_versions
    latest = load(lqs, uri)
    assert latest.columns == ["id", "s", "x"]
    assert sorted(r.id for r in latest.collect()) == [1, 2, 3, 4]
    v1 = load(lqs, uri, versionAsOf=1)
    assert v1.columns == ["id", "s"]  # the schema of version 1
    assert sorted(r.id for r in v1.collect()) == [1, 2, 3]
    times = {e.version: e.timestamp for e in lq.DeltaTable(uri).history()}
    at_v1 = times[1].isoformat()
    by_time = load(lqs, uri, timestampAsOf=at_v1)
    assert sorted(r.id for r in by_time.collect()) == [1, 2, 3]
    before = (times[0].replace(year=times[0].year - 1)).isoformat()
    err = raised(lambda: load(lqs, uri, timestampAsOf=before))
    assert isinstance(err, lq.VersionNotFoundError)


def test_a_dataframe_keeps_the_version_it_was_created_at(lqs: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    lq.write(uri, pa.table({"id": [1, 2]}))
    df = load(lqs, uri)
    lq.write(uri, pa.table({"id": [3]}), mode="append")
    assert df.count() == 2
    assert load(lqs, uri).count() == 3


def test_declared_schema_reads_only_those_columns(lqs: Any, three_versions: str) -> None:
    df = lqs.read.format("lakequery").schema("X double, id long").load(three_versions)
    rows = sorted((r.id, r.X) for r in df.collect())
    assert rows == [(1, None), (2, None), (3, None), (4, 1.5)]
    wrong = lqs.read.format("lakequery").schema("id int").load(three_versions)
    err = raised(wrong.collect)
    assert isinstance(err, lq.SchemaMismatchError) and "'id'" in str(err)


def test_bad_options_are_errors(lqs: Any, three_versions: str) -> None:
    with pytest.raises(Exception, match=r"unknown option.*versionasoff.*versionAsOf"):
        load(lqs, three_versions, versionAsOff=1)
    with pytest.raises(Exception, match="not both"):
        load(lqs, three_versions, versionAsOf=1, timestampAsOf="2026-01-01")
    # startingVersion alone is a streaming read's option (Spark does not tell a source
    # whether a read is a stream), so a batch read refuses it when it runs
    with pytest.raises(Exception, match="need readChangeFeed"):
        load(lqs, three_versions, startingVersion=1).collect()


# -- filters ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def typed_table(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, pa.Table]:
    """Six appends (two files each: one per ``p``) of rows of many types, nulls and NaN."""
    import datetime as dt
    import decimal

    uri = str(tmp_path_factory.mktemp("filters") / "t")
    utc = dt.timezone.utc
    floats = [0.5, float("nan"), -0.0, None, 2.5, float("-inf")]
    strings = ["a%b", "a_b", "abc", None, "b", "zz"]
    parts = []
    for k in range(6):
        ids = list(range(10 * k, 10 * k + 10))
        parts.append(
            pa.table(
                {
                    "id": pa.array(ids, pa.int64()),
                    "i": pa.array([None if j % 7 == 3 else j % 5 for j in ids], pa.int32()),
                    "f": pa.array([floats[j % 6] for j in ids], pa.float64()),
                    "s": pa.array([strings[(j + k) % 6] for j in ids], pa.string()),
                    "d": pa.array([dt.date(2026, 11, 1 + k)] * 10, pa.date32()),
                    "ts": pa.array(
                        [dt.datetime(2026, 11, 1, j % 24, tzinfo=utc) for j in ids],
                        pa.timestamp("us", tz="UTC"),
                    ),
                    "dec": pa.array([decimal.Decimal(j) / 4 for j in ids], pa.decimal128(10, 2)),
                    "b": pa.array([None if j % 4 == 0 else j % 3 == 0 for j in ids], pa.bool_()),
                    "bin": pa.array([bytes([j % 3, k]) for j in ids], pa.binary()),
                    "st": pa.array([{"x": j % 4} for j in ids], pa.struct([("x", pa.int32())])),
                    "p": pa.array(["even" if j % 2 == 0 else "odd" for j in ids], pa.string()),
                }
            )
        )
    lq.write(uri, parts[0], partition_by=["p"])
    for part in parts[1:]:
        lq.write(uri, part, mode="append")
    return uri, pa.concat_tables(parts)


WHERE = [
    "id = 13",
    "id <=> 13",
    "NOT (id <=> 13)",
    "i <=> NULL",
    "NOT (i <=> 2)",
    "id >= 40",
    "id < 5 AND i > 1",
    "i IN (1, 2)",
    "i IN (1, NULL)",
    "NOT (i IN (1, 2))",
    "i IS NULL",
    "i IS NOT NULL",
    "f > 0",
    "f = double('NaN')",
    "f < double('NaN')",
    "f = 0.0",
    "f <= 0.0",
    "s LIKE 'a%'",
    "s LIKE '%b'",
    "s LIKE '%b%'",
    "s LIKE 'a\\_%'",
    "s >= 'b'",
    "NOT (s <> 'abc')",
    "d > DATE'2026-11-04'",
    "d = DATE'2026-11-02'",
    "ts < TIMESTAMP'2026-11-01 05:00:00+00:00'",
    "dec >= 10.25",
    "b",
    "NOT b",
    "bin = X'0102'",
    "st.x > 1",
    "p = 'odd'",
    "p = 'odd' AND id < 20",
    "id < 3 OR p = 'odd'",
]


@pytest.mark.parametrize("where", WHERE)
def test_filters_select_the_rows_spark_selects(
    lqs: Any, typed_table: tuple[str, pa.Table], where: str
) -> None:
    """Pushed filters skip files and filter rows on the executors; the result must be
    exactly Spark's own evaluation of the same clause over the same rows."""
    uri, data = typed_table
    reference = lqs.createDataFrame(data).where(where)
    got = load(lqs, uri).where(where).toArrow()
    want = reference.toArrow()
    assert_tables_match(got.select(want.column_names), want, context=where)


def test_a_dataframe_queried_again_reads_every_row(lqs: Any, tmp_path: Path) -> None:
    """PySpark 4.2 reuses the read plan of a DataFrame's query that pushed filters for
    its later queries that push none: with pushed filters used to skip files and rows,
    ``df.count()`` after ``df.where("id = 3").count()`` gave 1 and an OR (never pushed)
    found nothing. The source takes no pushed filter, so every query reads all rows."""
    uri = str(tmp_path / "t")
    for i, s in enumerate("abc"):
        lq.write(uri, pa.table({"id": pa.array([i + 1], pa.int64()), "s": [s]}), mode="append")
    df = load(lqs, uri)
    assert df.where("id = 3").count() == 1
    assert sorted(r.id for r in df.where("s = 'a' OR id = 2").collect()) == [1, 2]
    assert df.count() == 3
    assert df.where("s = 'c'").count() == 1
    assert df.select("id").count() == 3
    copy = str(tmp_path / "copy")
    df.write.format("lakequery").mode("overwrite").save(copy)
    assert lq.DeltaTable(copy).snapshot().num_records() == 3


@pytest.mark.parametrize("where", ["p = 'odd'", "id >= 40", "id < 3 OR p = 'odd'"])
def test_filters_are_spark_s_and_read_every_file(
    lqs: Any, typed_table: tuple[str, pa.Table], where: str
) -> None:
    """One read task per file (``maxPartitionBytes=1``) whatever the filter; Spark's
    result equals lakequery's own read with the same filter."""
    uri, _ = typed_table
    snap = lq.DeltaTable(uri).snapshot()
    df = load(lqs, uri, maxPartitionBytes=1).where(where)
    assert df.rdd.getNumPartitions() == snap.num_files == 12
    want = snap.scan(filter=where, columns=["id"]).to_arrow().column("id").to_pylist()
    assert sorted(r.id for r in df.select("id").collect()) == sorted(want)


def test_read_tasks_carry_only_their_own_files(tmp_path: Path) -> None:
    """Spark pickles each task's partition: a slice of the files table pickled the whole
    table, so the bytes sent grew with the square of the file count."""
    import pickle

    from lakequery.spark.datasource_read import plan_partitions

    uri = str(tmp_path / "t")
    data = pa.table({"id": pa.array(range(400), pa.int64()), "p": [i % 200 for i in range(400)]})
    lq.write(uri, data, partition_by=["p"])
    scan = lq.DeltaTable(uri).snapshot().scan()
    whole = len(pickle.dumps(scan.plan().files))
    parts = plan_partitions([scan], ("id", "p"), None, parallelism=1, max_partition_bytes=1)
    assert len(parts) == 200
    # one file's row, the metadata and schemas: a few KB each, not the 200 files' table
    assert max(len(pickle.dumps(p)) for p in parts) < whole / 4


def test_read_tasks_balance_bytes(typed_table: tuple[str, pa.Table]) -> None:
    """Planning without Spark: every file in exactly one task, tasks of about equal bytes."""
    from lakequery.spark.datasource_read import OPEN_COST_BYTES, plan_partitions

    uri, _ = typed_table
    scan = lq.DeltaTable(uri).snapshot().scan()
    parts = plan_partitions(
        [scan], ("id",), None, parallelism=1, max_partition_bytes=2 * OPEN_COST_BYTES + 1
    )
    paths = [p for part in parts for u in part.units for p in u.files.column("path").to_pylist()]
    assert sorted(paths) == sorted(scan.plan().files.column("path").to_pylist())
    assert len(parts) == 6  # 12 small files, two per task
    assert {part.num_files for part in parts} == {2}
    many = plan_partitions([scan], ("id",), None, parallelism=1, max_partition_bytes=1 << 40)
    assert len(many) == 3  # one core: three tasks (each file counts 4 MiB)


# -- change data feed ---------------------------------------------------------------------


def test_change_data_feed(lqs: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    conf = {"delta.enableChangeDataFeed": "true"}
    lq.write(uri, pa.table({"id": [1, 2, 3], "s": ["a", "b", "c"]}), configuration=conf)
    lq.write(uri, pa.table({"id": [4], "s": ["d"]}), mode="append")
    dt = lq.DeltaTable(uri)
    dt.delete("id = 2")
    dt.update("id = 3", set={"s": "'C'"})
    feed = load(lqs, uri, readChangeFeed="true", startingVersion=1)
    assert feed.columns == ["id", "s", "_change_type", "_commit_version", "_commit_timestamp"]
    expected = dt.changes(starting_version=1).to_arrow()
    assert_tables_match(feed.toArrow(), expected)
    kinds = sorted(r._change_type for r in feed.collect())
    assert kinds == ["delete", "insert", "update_postimage", "update_preimage"]
    ranged = load(lqs, uri, readChangeFeed="true", startingVersion=1, endingVersion=2)
    assert sorted((r.id, r._change_type) for r in ranged.collect()) == [
        (2, "delete"),
        (4, "insert"),
    ]
    times = {e.version: e.timestamp for e in dt.history()}
    by_time = load(
        lqs,
        uri,
        readChangeFeed="true",
        startingTimestamp=times[3].isoformat(),
        endingTimestamp=times[3].isoformat(),
    )
    assert sorted(r._change_type for r in by_time.collect()) == [
        "update_postimage",
        "update_preimage",
    ]
    deletes = feed.where("_change_type = 'delete'").select("id", "_commit_version").collect()
    assert [(r.id, r._commit_version) for r in deletes] == [(2, 2)]


# -- writes -------------------------------------------------------------------------------

COLUMNS = [
    "id",
    "CAST(IF(id % 7 = 3, NULL, id * 3 - 50) AS INT) AS i",
    "IF(id % 5 = 1, NULL, concat('s-', id)) AS s",
    "IF(id % 9 = 4, NULL, timestamp_micros(1700000000000000 + id * 3600000001)) AS ts",
    "IF(id % 4 = 0, NULL, CAST(id * 1.125 - 7 AS DECIMAL(12, 3))) AS dec",
    # (nullable fields: a NOT NULL field in a nullable struct breaks PySpark's own toArrow)
    "IF(id % 11 = 7, NULL, named_struct('x', CAST(IF(id % 17 = 1, NULL, id) AS INT),"
    " 'y', IF(id % 2 = 0, NULL, CAST(id AS STRING)))) AS st",
    "element_at(array('a', 'b/c', 'd e'), CAST(id % 3 + 1 AS INT)) AS p",
]


def frame(spark: Any, start: int, n: int, partitions: int = 2) -> Any:
    return spark.range(start, start + n, 1, partitions).selectExpr(*COLUMNS)


def save(df: Any, uri: str, mode: str, **options: Any) -> None:
    writer = df.write.format("lakequery").mode(mode)
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.save(uri)


def test_append_then_overwrite_read_back_by_lakequery_and_deltalake(
    lqs: Any, tmp_path: Path
) -> None:
    uri = str(tmp_path / "t")
    first, second = frame(lqs, 0, 50), frame(lqs, 50, 30)
    save(first, uri, "append", partitionBy="p")
    save(second, uri, "append")
    dt = lq.DeltaTable(uri)
    assert dt.snapshot().version == 1 and dt.snapshot().partition_columns == ["p"]
    want = sorted_rows(first.union(second).toArrow())
    assert sorted_rows(lq_table(uri).select(first.columns)) == want
    assert sorted_rows(deltalake_table(uri, first.columns)) == want
    ops = [(e.operation, e.parameters.get("mode")) for e in dt.history()]
    assert ops[:2] == [("WRITE", "Append"), ("CREATE TABLE", "Append")]
    save(frame(lqs, 100, 7), uri, "overwrite")
    assert sorted(lq_table(uri).column("id").to_pylist()) == list(range(100, 107))
    assert sorted(deltalake_table(uri, ["id"]).column("id").to_pylist()) == list(range(100, 107))
    assert dt.history(limit=1)[0].parameters["mode"] == "Overwrite"


def test_spark_partition_by_and_error_modes_are_refused_by_spark(lqs: Any, tmp_path: Path) -> None:
    """Spark refuses ``.partitionBy()`` and the error/ignore modes for any Python data
    source (documented): nothing is written."""
    uri = str(tmp_path / "t")
    df = frame(lqs, 0, 5)
    with pytest.raises(Exception, match="partitioning"):
        df.write.format("lakequery").mode("append").partitionBy("p").save(uri)
    with pytest.raises(Exception, match="UNSUPPORTED_DATA_SOURCE_SAVE_MODE"):
        df.write.format("lakequery").save(uri)
    with pytest.raises(Exception, match="UNSUPPORTED_DATA_SOURCE_SAVE_MODE"):
        df.write.format("lakequery").mode("ignore").save(uri)
    assert not Path(uri).exists()


def test_replace_where_merge_schema_overwrite_schema(lqs: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    save(frame(lqs, 0, 30), uri, "overwrite", partitionBy="p")
    new = frame(lqs, 1000, 9).where("p = 'a'")
    save(new, uri, "overwrite", replaceWhere="p = 'a'")
    rows = lq_table(uri)
    ids = sorted(rows.column("id").to_pylist())
    assert ids == sorted([i for i in range(30) if i % 3 != 0] + [1002, 1005, 1008])
    # a row outside replaceWhere fails the job on an executor: nothing is committed
    version = lq.DeltaTable(uri).snapshot().version
    err = raised(lambda: save(frame(lqs, 2000, 6), uri, "overwrite", replaceWhere="p = 'a'"))
    assert isinstance(err, lq.ConstraintViolationError)
    assert lq.DeltaTable(uri).snapshot().version == version
    # a new column needs mergeSchema
    wider = frame(lqs, 3000, 4).selectExpr("*", "id * 2 AS extra")
    err = raised(lambda: save(wider, uri, "append"))
    assert isinstance(err, lq.SchemaMismatchError) and "extra" in str(err)
    save(wider, uri, "append", mergeSchema="true")
    merged = lq_table(uri)
    assert merged.column_names[-1] == "extra"
    assert merged.filter(pc.field("id") >= 3000).column("extra").to_pylist() != [None] * 4
    # overwriteSchema replaces columns and partitioning
    other = lqs.range(3).selectExpr("CAST(id AS STRING) AS k", "id AS v")
    save(other, uri, "overwrite", overwriteSchema="true", partitionBy="k")
    snap = lq.DeltaTable(uri).snapshot()
    assert snap.schema.names == ["k", "v"] and snap.partition_columns == ["k"]
    assert sorted(deltalake_table(uri, ["k", "v"]).to_pylist(), key=str) == [
        {"k": "0", "v": 0},
        {"k": "1", "v": 1},
        {"k": "2", "v": 2},
    ]


def test_txn_app_id_makes_a_write_idempotent(lqs: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    df = frame(lqs, 0, 10)
    for _ in range(2):
        save(df, uri, "append", txnAppId="ingest", txnVersion=1)
    assert lq.DeltaTable(uri).snapshot().version == 0
    assert lq.DeltaTable(uri).snapshot().txns == {"ingest": 1}
    save(frame(lqs, 10, 5), uri, "append", txnAppId="ingest", txnVersion=2)
    assert sorted(lq_table(uri).column("id").to_pylist()) == list(range(15))


def test_table_properties_as_options(lqs: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    save(
        frame(lqs, 0, 4),
        uri,
        "append",
        **{"delta.enableChangeDataFeed": "true"},
        configuration=json.dumps({"owner.Team": "Data"}),
    )
    conf = lq.DeltaTable(uri).snapshot().metadata.configuration
    assert conf["delta.enableChangeDataFeed"] == "true" and conf["owner.Team"] == "Data"
    with pytest.raises(Exception, match="configuration"):
        save(frame(lqs, 0, 4), uri, "append", **{"delta.someUnknownThing": "1"})


def test_pipeline_reads_a_and_writes_b_in_both_modes(lqs: Any, tmp_path: Path) -> None:
    """A Spark pipeline on lakequery alone: read table A (with deletion vectors),
    transform, write table B (append, then overwrite)."""
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    lq.write(a, pa.table({"id": list(range(100)), "g": [i % 4 for i in range(100)]}))
    lq.DeltaTable(a).delete("id % 10 = 0")
    src = load(lqs, a)
    out = src.where("g > 0").selectExpr("id", "g", "id * 10 AS t")
    save(out, b, "append", partitionBy="g")
    want = [(i, i % 4, i * 10) for i in range(100) if i % 10 and i % 4]
    got = sorted(tuple(r.values()) for r in deltalake_table(b, ["id", "g", "t"]).to_pylist())
    assert got == want
    save(load(lqs, b).where("g = 1"), b, "overwrite")
    want1 = [w for w in want if w[1] == 1]
    assert (
        sorted(tuple(r.values()) for r in lq_table(b).select(["id", "g", "t"]).to_pylist()) == want1
    )
    got1 = sorted(tuple(r.values()) for r in deltalake_table(b, ["id", "g", "t"]).to_pylist())
    assert got1 == want1


def test_a_failed_job_commits_nothing(lqs: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")

    def fail_partition_one(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        yield from batches
        if ctx is not None and ctx.partitionId() == 1:
            raise RuntimeError("partition 1 always fails")

    save(frame(lqs, 0, 10), uri, "append")
    failing = lqs.range(0, 1000, 1, 2).mapInArrow(fail_partition_one, "id long")
    with pytest.raises(Exception, match="partition 1 always fails"):
        save(failing, uri, "append")
    dt = lq.DeltaTable(uri)
    assert dt.snapshot().version == 0
    assert sorted(lq_table(uri).column("id").to_pylist()) == list(range(10))


def test_abort_deletes_nothing_even_after_a_failed_commit(tmp_path: Path) -> None:
    """The writer's three steps without Spark: the commit fails on a concurrent schema
    change; ``abort`` (which Spark calls then) leaves every written file in place."""
    from pyspark.sql.types import LongType, StructField, StructType

    from lakequery.spark.datasource_options import write_options
    from lakequery.spark.datasource_write import DeltaWriter, plan

    uri = str(tmp_path / "t")
    lq.write(uri, pa.table({"id": [1]}))
    schema = StructType([StructField("id", LongType())])
    writer = DeltaWriter(plan(write_options({"path": uri}, overwrite=False), schema))
    message = writer.write(iter([pa.record_batch({"id": pa.array([2, 3], pa.int64())})]))
    files = [Path(uri) / a["path"] for a in message.adds]
    assert files and all(f.exists() for f in files)
    lq.write(uri, pa.table({"id": [9], "z": ["new"]}), mode="append", schema_mode="merge")
    with pytest.raises(lq.CommitConflictError):
        writer.commit([message])
    writer.abort([message])
    assert all(f.exists() for f in files)
    with pytest.raises(lq.CommitError, match="no commit message"):
        writer.commit([message, None])


def test_concurrent_spark_write_and_local_write(lqs: Any, tmp_path: Path) -> None:
    """A local ``lq.write`` commits while the Spark write's tasks run: both land, the
    Spark commit after it, and no row is lost."""
    uri = str(tmp_path / "t")
    signals = tmp_path / "signals"
    signals.mkdir()
    lq.write(uri, pa.table({"id": pa.array([-1], pa.int64())}))
    started, go = str(signals / "started"), str(signals / "go")

    def gated(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import os as _os
        import time as _time

        open(started, "w").close()
        deadline = _time.monotonic() + 300
        while not _os.path.exists(go) and _time.monotonic() < deadline:
            _time.sleep(0.05)
        yield from batches

    df = lqs.range(0, 200, 1, 2).mapInArrow(gated, "id long")
    errors: list[BaseException] = []

    def spark_write() -> None:
        try:
            register(lqs)  # Spark finds Python data sources via the thread's active session
            save(df, uri, "append")
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    thread = threading.Thread(target=spark_write)
    thread.start()
    try:
        deadline = time.monotonic() + 300
        while not os.path.exists(started) and time.monotonic() < deadline and thread.is_alive():
            time.sleep(0.05)
        assert os.path.exists(started), [str(e)[:3000] for e in errors]
        local = lq.write(uri, pa.table({"id": pa.array([1000, 1001], pa.int64())}), mode="append")
        assert local.version == 1
    finally:
        Path(go).touch()
        thread.join()
    assert not errors, errors
    dt = lq.DeltaTable(uri)
    assert dt.snapshot().version == 2
    assert sorted(lq_table(uri).column("id").to_pylist()) == [-1, *range(200), 1000, 1001]
    assert [e.operation for e in dt.history()] == ["WRITE", "WRITE", "CREATE TABLE"]


RETRY_SCRIPT = """
import json, os, sys
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
from pyspark.sql import SparkSession
import lakequery as lq
from lakequery.spark.datasource import register

uri, marks = sys.argv[1], sys.argv[2]
spark = (
    SparkSession.builder.master("local[2,3]")  # 3 attempts per task (local[N] allows one)
    .config("spark.ui.enabled", "false")
    .config("spark.driver.host", "127.0.0.1")
    .config("spark.driver.bindAddress", "127.0.0.1")
    .getOrCreate()
)
spark.sparkContext.setLogLevel("OFF")
register(spark)


def flaky(batches):
    from pyspark import TaskContext

    ctx = TaskContext.get()
    for batch in batches:
        yield batch
    open(os.path.join(marks, f"p{ctx.partitionId()}-a{ctx.attemptNumber()}"), "w").close()
    if ctx.partitionId() == 1 and ctx.attemptNumber() == 0:
        raise RuntimeError("the first attempt of task 1 fails after writing its rows")


df = spark.range(0, 20000, 1, 2).mapInArrow(flaky, "id long")
df.write.format("lakequery").mode("append").option("targetFileSize", "4000").save(uri)
spark.stop()
print(json.dumps(sorted(os.listdir(marks))))
"""


@pytest.mark.slow
def test_a_task_retried_after_a_failure_adds_its_rows_once(tmp_path: Path) -> None:
    """``local[2]`` (the shared session) never retries a task, so this runs a session of
    its own, ``local[2,3]``, in a subprocess (one JVM per Python process). Task 1 fails
    on its first attempt after passing all its rows to the writer (whose small target
    file size made it write files already); the retry succeeds, and the one commit holds
    the rows exactly once and only files of accepted attempts."""
    uri, marks = str(tmp_path / "t"), tmp_path / "marks"
    marks.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(RETRY_SCRIPT), uri, str(marks)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    attempts = json.loads(done.stdout.strip().splitlines()[-1])
    assert attempts == ["p0-a0", "p1-a0", "p1-a1"]  # task 1 ran twice
    snap = lq.DeltaTable(uri).snapshot()
    assert snap.version == 0
    ids = lq_table(uri).column("id").to_pylist()
    assert len(ids) == 20000 and sorted(ids) == list(range(20000))
    assert snap.num_files > 2  # several files per task: the failed attempt had written some
    on_disk = {p.name for p in Path(uri).glob("*.parquet")}
    in_log = {Path(p).name for p in snap.files().column("path").to_pylist()}
    assert in_log <= on_disk


def test_s3_with_storage_options(
    lqs: Any, s3_table_uri: str, s3_storage_options: dict[str, Any]
) -> None:
    """Executors open an ``s3://`` table themselves with the JSON ``storage_options``."""
    options = json.dumps(s3_storage_options)
    save(frame(lqs, 0, 20), s3_table_uri, "append", partitionBy="p", storage_options=options)
    dt = lq.DeltaTable(s3_table_uri, storage_options=s3_storage_options)
    assert sorted(dt.snapshot().scan().to_arrow().column("id").to_pylist()) == list(range(20))
    dt.delete("id < 5")
    got = load(lqs, s3_table_uri, storage_options=options).where("p = 'a'")
    assert sorted(r.id for r in got.collect()) == [i for i in range(5, 20) if i % 3 == 0]


# -- filter translation (no Spark job) ----------------------------------------------------


def test_translated_filters_keep_sql_null_semantics(memory_table_uri: str) -> None:
    """``NOT`` over ``IN``/``<=>``/``=`` selects exactly the rows Spark's filter would
    (a NULL input or a NULL in the list makes ``IN`` NULL, and ``NOT NULL`` is NULL)."""
    from pyspark.sql.datasource import EqualNullSafe, EqualTo, In, Not

    from lakequery.spark.filters import translate

    lq.write(memory_table_uri, pa.table({"id": [1, 2, 3], "i": pa.array([1, 2, None], pa.int32())}))
    snap = lq.DeltaTable(memory_table_uri).snapshot()
    cases = [
        (In(("i",), (1, None)), [1]),
        (Not(In(("i",), (1, None))), []),
        (In(("i",), (1, 2)), [1, 2]),
        (Not(In(("i",), (1,))), [2]),
        (EqualNullSafe(("i",), None), [3]),
        (Not(EqualNullSafe(("i",), 1)), [2, 3]),
        (EqualNullSafe(("i",), 2), [2]),
        (Not(EqualTo(("i",), 1)), [2]),
        (Not(Not(EqualTo(("i",), 1))), [1]),
    ]
    for f, ids in cases:
        expr = translate(f, snap.schema)
        assert expr is not None, f
        got = snap.scan(filter=expr).to_arrow().column("id").to_pylist()
        assert sorted(got) == ids, f


def test_filters_without_an_exact_equivalent_are_left_to_spark() -> None:
    import datetime as dt
    import decimal

    from pyspark.sql.datasource import EqualTo, GreaterThan, StringContains, StringStartsWith

    from lakequery.spark.filters import to_expression, translate

    schema = pa.schema(
        [
            ("i", pa.int32()),
            ("s", pa.string()),
            ("ts", pa.timestamp("us", tz="UTC")),
            ("dec", pa.decimal128(5, 1)),
            ("st", pa.struct([("x", pa.int64())])),
            ("a", pa.list_(pa.int64())),
        ]
    )
    utc = dt.timezone.utc
    left_out = [
        StringStartsWith(("s",), "a_"),  # LIKE has no escape character
        StringContains(("s",), "%"),
        EqualTo(("i",), True),  # a boolean is not an integer literal
        EqualTo(("i",), 2**40),  # does not fit the column
        EqualTo(("ts",), dt.datetime(2026, 1, 1)),  # naive value for a zoned column
        EqualTo(("dec",), decimal.Decimal("1.25")),  # would lose a digit
        EqualTo(("a",), [1, 2]),  # nested literal
        EqualTo(("nope",), 1),  # not a column
        GreaterThan(("st", "y"), 1),  # not a field
    ]
    assert [translate(f, schema) for f in left_out] == [None] * len(left_out)
    kept = [
        StringStartsWith(("s",), "ab"),
        EqualTo(("ts",), dt.datetime(2026, 1, 1, tzinfo=utc)),
        EqualTo(("dec",), decimal.Decimal("1.5")),
        GreaterThan(("st", "x"), 1),
    ]
    assert all(translate(f, schema) is not None for f in kept)
    combined = to_expression([*left_out, *kept], schema)
    assert combined is not None
    assert str(combined).count(" and ") == len(kept) - 1


def test_readme_spark_data_source_example_runs(
    lqs: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's "Spark data source" example runs on the shared session (its
    ``getOrCreate()`` returns it) and prints the numbers its comments state."""
    text = (REPO / "README.md").read_text()
    section = text[text.index("### Spark data source") :]
    block = re.search(r"```py\n(.*?)```", section, re.S)
    assert block is not None
    code = block.group(1)
    promised = re.findall(r"print\(.*\)\s+# (\d+)", code)
    assert len(promised) == 4
    exec(compile(code, "README.md[Spark data source]", "exec"), {"__name__": "readme"})
    assert capsys.readouterr().out.split() == promised


def test_overwrite_schema_has_no_effect_beside_replace_where() -> None:
    # Delta ignores overwriteSchema when replaceWhere is given (the kept rows keep the
    # schema); it was mapped to schema_mode='overwrite', which lq.write refuses there
    from lakequery.spark.datasource_options import write_options

    opts = {"path": "/x", "replaceWhere": "day = 'mon'", "overwriteSchema": "true"}
    parsed = write_options(opts, overwrite=True)
    assert parsed.schema_mode is None and parsed.predicate == "day = 'mon'"
    assert write_options({"path": "/x", "overwriteSchema": "true"}, overwrite=True).schema_mode == (
        "overwrite"
    )
