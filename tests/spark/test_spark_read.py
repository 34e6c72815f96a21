"""``lakequery.spark.read`` with a real local Spark session: deletion vectors of every
storage type applied exactly, partition values from the log, column mapping, filters
that prune files and reach Spark's Parquet reader, awkward paths, time travel, and the
check of the workers' Python."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import lakequery as lq
import lakequery.spark as lqs
from lakequery.dv.descriptor import Descriptor
from lakequery.spark import deletions as spark_deletions
from lakequery.spark import position_bitmap
from lakequery.spark import reading as spark_reading

REPO = Path(__file__).resolve().parents[2]


def rows(table: pa.Table) -> list[dict[str, Any]]:
    return sorted(table.to_pylist(), key=lambda r: (r.get("id", 0), repr(r)))


def same_as_lakequery(spark: Any, uri: str, **kw: Any) -> list[dict[str, Any]]:
    """Asserts Spark's read equals lakequery's Arrow read (same arguments); its rows."""
    scan_kw = {k: v for k, v in kw.items() if k in ("columns", "filter")}
    snap_kw = {k: v for k, v in kw.items() if k in ("version", "as_of")}
    expected = rows(lq.DeltaTable(uri).snapshot(**snap_kw).scan(**scan_kw).to_arrow())
    got = rows(lqs.read(spark, uri, **kw).toArrow())
    assert got == expected
    return got


def data(n: int, start: int = 0) -> pa.Table:
    ids = np.arange(start, start + n)
    return pa.table(
        {
            "id": ids,
            "x": (ids * 7) % 101,
            "s": pa.array([f"s{i % 13}" for i in ids]),
        }
    )


# ---------------------------------------------------------------------------------------------
# Deletion vectors
# ---------------------------------------------------------------------------------------------


def _rewrite_dv_as_absolute(uri: str) -> None:
    """Commits the table's on-disk ('u') DVs again as absolute-path ('p') descriptors."""
    dt = lq.DeltaTable(uri)
    snap = dt.snapshot()
    actions = []
    for add in snap.files().to_pylist():
        dv = add["deletion_vector"]
        if not dv or dv["storageType"] != "u":
            continue
        d = Descriptor.from_dict(dv)
        absolute = Path(d.absolute_path(dt.uri)).resolve().as_uri()
        body = {
            "path": add["path"],
            "partitionValues": {},
            "size": add["size"],
            "modificationTime": add["modification_time"],
            "dataChange": True,
            "stats": add["stats"],
        }
        new_dv = {**{k: v for k, v in dv.items() if v is not None}, "storageType": "p"}
        new_dv["pathOrInlineDv"] = absolute
        actions.append({"remove": {**body, "deletionTimestamp": 1, "deletionVector": dv}})
        actions.append({"add": {**body, "deletionVector": new_dv}})
    assert actions, "the table has no on-disk DV to rewrite"
    log = Path(dt.uri) / "_delta_log" / f"{snap.version + 1:020d}.json"
    log.write_text("\n".join(json.dumps(a) for a in actions) + "\n")


def test_deletion_vectors_of_all_three_storage_types(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "dv")
    for i in range(3):
        lq.write(uri, data(2000, i * 2000), mode="append")
    dt = lq.DeltaTable(uri)
    dt.delete("id = 5 OR id = 2001")  # a few rows: small bitmaps, inline in the log
    dt.delete("id >= 4000 AND id % 3 = 0")  # many rows of the third file: a DV file
    _rewrite_dv_as_absolute(uri)
    dt.delete("id >= 2000 AND id < 4000 AND id % 5 = 0")  # the second file: a DV file
    kinds = {d["storageType"] for d in dt.snapshot().files().column("deletion_vector").to_pylist()}
    assert kinds == {"i", "u", "p"}
    got = same_as_lakequery(spark, uri)
    ids = {r["id"] for r in got}
    assert 5 not in ids and 2001 not in ids and 4002 not in ids and 2005 not in ids
    assert len(got) == 6000 - 2 - len(range(4002, 6000, 3)) - len(range(2000, 4000, 5))
    # every older version reads the same through both
    for version in range(dt.snapshot().version + 1):
        same_as_lakequery(spark, uri, version=version)


@pytest.mark.parametrize(
    ("key", "where"),
    [
        ("bitmap", "driver"),
        ("long", "driver"),
        ("pair", "driver"),
        ("long", "executors"),
        ("pair", "executors"),
    ],
)
def test_deletion_vector_filter_and_join_variants(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key: str, where: str
) -> None:
    """The bitmap filter (positions decoded on the driver), and the anti-joins on the
    one-long key and the (file, row) key with positions loaded on the driver (broadcast)
    or on the executors (shuffled join): all exact."""
    if key != "bitmap":
        monkeypatch.setattr(position_bitmap, "MAX_WORDS", 0)
    if key == "pair":
        monkeypatch.setattr(spark_deletions, "MAX_BUCKETS", 0)
    if where == "executors":
        monkeypatch.setattr(spark_deletions, "BROADCAST_DELETED_ROWS", 0)
    uri = str(tmp_path / "t")
    for i in range(4):
        lq.write(uri, data(3000, i * 3000), mode="append")
    lq.DeltaTable(uri).delete("id % 17 = 3 OR x = 50")
    df = lqs.read(spark, uri)
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert ("UnsafeArrayData" in plan) == (key == "bitmap")
    assert ("shiftleft" in plan) == (key == "long")
    assert ("BroadcastHashJoin" in plan) == (key != "bitmap" and where == "driver")
    assert ("ShuffledHashJoin" in plan) == (where == "executors")
    got = same_as_lakequery(spark, uri)
    assert not [r for r in got if r["id"] % 17 == 3 or r["x"] == 50]


def test_files_of_equal_size_go_to_separate_buckets(spark: Any, tmp_path: Path) -> None:
    """Identical files have identical sizes: the one-long key stays exact by scanning
    them separately (a key built from the size alone would mix their deletions)."""
    uri = str(tmp_path / "same")
    for _ in range(3):
        lq.write(uri, data(500), mode="append")  # three byte-identical files
    dt = lq.DeltaTable(uri)
    sizes = dt.snapshot().files().column("size").to_pylist()
    assert len(set(sizes)) == 1
    # delete different rows of each file: the predicate cannot tell them apart, so
    # delete through the DV writer, one file at a time
    from lakequery.dv.writer import DeletionVectorWriter

    snap = dt.snapshot()
    writer = DeletionVectorWriter(dt.storage)
    adds = []
    for i, f in enumerate(snap.files().to_pylist()):
        add = {
            "path": f["path"],
            "partitionValues": {},
            "size": f["size"],
            "modificationTime": f["modification_time"],
            "dataChange": True,
            "stats": f["stats"],
        }
        writer.delete_rows(add, [i, 10 + i, 100 + i])
        adds.append(add)
    actions = writer.finish()
    log = Path(dt.uri) / "_delta_log" / f"{snap.version + 1:020d}.json"
    log.write_text("\n".join(json.dumps(a) for a in actions) + "\n")
    key = spark_deletions.long_key(dt.snapshot().scan().plan(), dt.storage)
    assert key is not None and sorted(key.buckets.tolist()) == [0, 1, 2]
    got = same_as_lakequery(spark, uri)
    counts = {i: sum(r["id"] == i for r in got) for i in (0, 1, 2, 10, 11, 12, 3)}
    assert counts == {0: 2, 1: 2, 2: 2, 10: 2, 11: 2, 12: 2, 3: 3}


def test_dml_written_partitioned_column_mapped_table(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "cm")
    conf = {"delta.columnMapping.mode": "name"}
    t = data(3000).append_column("day", pa.array([f"2026-11-0{i % 3 + 1}" for i in range(3000)]))
    t = t.append_column(
        "nested",
        pa.array(
            [{"a": i, "b": f"b{i}"} for i in range(3000)],
            pa.struct([("a", pa.int64()), ("b", pa.string())]),
        ),
    )
    lq.write(uri, t, partition_by=["day"], configuration=conf)
    dt = lq.DeltaTable(uri)
    dt.delete("x < 10")
    dt.update("s = 's3'", set={"x": "x + 1000"})
    files = dt.snapshot().files()
    assert any(d is not None for d in files.column("deletion_vector").to_pylist())
    got = same_as_lakequery(spark, uri)
    assert got and all(r["x"] >= 10 for r in got)
    same_as_lakequery(spark, uri, columns=["nested", "id"], filter="day = '2026-11-02'")


def test_independent_writer_table_with_spark_dvs(spark: Any) -> None:
    """Spark/Databricks-written DV tables from the conformance data (DVs in files)."""
    from tablekit import conformance_table

    uri = str(conformance_table("golden_dv_partitioned_with_checkpoint"))
    assert lq.DeltaTable(uri).snapshot().files().column("deletion_vector").null_count < len(
        lq.DeltaTable(uri).snapshot().files()
    )
    same_as_lakequery(spark, uri)


# ---------------------------------------------------------------------------------------------
# Partition values, paths, filters
# ---------------------------------------------------------------------------------------------

AWKWARD = ["plain", "with space", "100%", "a=b", "ünï", "sl/ash", "[x]{y}*?", None]


def test_awkward_partition_values_and_table_root(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "we ird [root] 100%")
    n = len(AWKWARD) * 50
    t = data(n).append_column("p", pa.array([AWKWARD[i % len(AWKWARD)] for i in range(n)]))
    lq.write(uri, t, partition_by=["p"])
    lq.DeltaTable(uri).delete("id % 3 = 1")
    got = same_as_lakequery(spark, uri)
    assert {r["p"] for r in got} == set(AWKWARD)
    same_as_lakequery(spark, uri, filter="p = '100%' OR p IS NULL")


def test_many_partition_groups_are_joined_by_file(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(spark_reading, "MAX_LITERAL_GROUPS", 2)
    uri = str(tmp_path / "many")
    t = data(600).append_column("p", pa.array([f"v {i % 6}" for i in range(600)]))
    lq.write(uri, t, partition_by=["p"])
    lq.DeltaTable(uri).delete("id % 9 = 0")
    df = lqs.read(spark, uri)
    assert "BroadcastHashJoin" in df._jdf.queryExecution().executedPlan().toString()
    same_as_lakequery(spark, uri)


def test_typed_partition_columns_from_the_log(spark: Any, tmp_path: Path) -> None:
    import datetime as dt

    uri = str(tmp_path / "typed")
    n = 120
    t = data(n).append_column("d", pa.array([dt.date(2026, 1, 1 + i % 3) for i in range(n)]))
    t = t.append_column(
        "ts",
        pa.array(
            [dt.datetime(2026, 1, 1, i % 4, 30, tzinfo=dt.timezone.utc) for i in range(n)],
            pa.timestamp("us", "UTC"),
        ),
    )
    t = t.append_column("b", pa.array([i % 2 == 0 for i in range(n)]))
    t = t.append_column("dec", pa.array([i % 5 for i in range(n)], pa.decimal128(10, 2)))
    lq.write(uri, t, partition_by=["d", "ts", "b", "dec"])
    df = lqs.read(spark, uri)
    types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    assert types == {
        "id": "bigint",
        "x": "bigint",
        "s": "string",
        "d": "date",
        "ts": "timestamp",
        "b": "boolean",
        "dec": "decimal(10,2)",
    }
    same_as_lakequery(spark, uri)
    same_as_lakequery(spark, uri, filter="ts > TIMESTAMP '2026-01-01 01:00:00+00:00' AND b")


def test_timestamp_partitions_before_the_gregorian_cutover(spark: Any, tmp_path: Path) -> None:
    """A timestamp handed to the JVM as java.sql.Timestamp lands in its hybrid Julian
    calendar: partition values before 1582-10-15 came back days earlier."""
    import datetime as dt

    uri = str(tmp_path / "old")
    stamps = [
        dt.datetime(1000, 3, 1, 12, tzinfo=dt.timezone.utc),
        dt.datetime(1582, 10, 10, 12, tzinfo=dt.timezone.utc),
    ]
    t = pa.table({"id": [0, 1], "p": pa.array(stamps, pa.timestamp("us", "UTC"))})
    lq.write(uri, t, partition_by=["p"])
    got = same_as_lakequery(spark, uri)
    assert [r["p"] for r in got] == stamps
    same_as_lakequery(spark, uri, filter="p = TIMESTAMP '1000-03-01 12:00:00+00:00'")
    assert lqs.read(spark, uri, filter="p = TIMESTAMP '1000-03-01 12:00:00+00:00'").count() == 1


@pytest.mark.parametrize("groups", [3, 70])  # literals; more than MAX_LITERAL_GROUPS: a join
def test_timestamp_ntz_partitions_in_a_session_zone_with_daylight_saving(
    spark: Any, tmp_path: Path, groups: int
) -> None:
    """Spark read zone-less partition values handed to it (a datetime literal, an Arrow
    column of createDataFrame) in the session's zone: 12:00 came back as 04:00 in Los
    Angeles, the joined form typed the column ``timestamp``, and a value in the
    daylight-saving gap (2024-03-10 02:30) failed the read."""
    import datetime as dt

    uri = str(tmp_path / f"ntz{groups}")
    start = dt.datetime(2024, 3, 10, 2, 30)
    stamps = [start + dt.timedelta(hours=i) for i in range(groups)]
    lq.write(
        uri,
        pa.table({"id": list(range(groups)), "ntz": pa.array(stamps, pa.timestamp("us"))}),
        partition_by=["ntz"],
    )
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/Los_Angeles")
    try:
        df = lqs.read(spark, uri)
        assert df.schema["ntz"].dataType.simpleString() == "timestamp_ntz"
        got = sorted((r.id, r.ntz) for r in df.collect())
        assert got == list(enumerate(stamps))
        assert df.where("ntz = TIMESTAMP_NTZ'2024-03-10 02:30:00'").count() == 1
    finally:
        spark.conf.set("spark.sql.session.timeZone", before)


def test_filters_prune_files_and_reach_the_parquet_reader(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "prune")
    for i in range(5):
        lq.write(uri, data(1000, i * 1000), mode="append")
    df = lqs.read(spark, uri, filter="id >= 3000 AND s <> 's1'", columns=["id", "x"])
    assert len(df.inputFiles()) == 2  # pruned by min/max statistics on the driver
    plan = df._jdf.queryExecution().executedPlan().toString()
    pushed = plan[plan.index("PushedFilters: [") :].split("]")[0]
    assert "GreaterThanOrEqual(id,3000)" in pushed and "Not(EqualTo(s,s1))" in pushed
    assert "ReadSchema: struct<id:bigint,x:bigint,s:string>" in plan  # column pruning
    got = same_as_lakequery(spark, uri, filter="id >= 3000 AND s <> 's1'", columns=["id", "x"])
    assert len(got) == 2000 - sum(1 for i in range(3000, 5000) if i % 13 == 1)
    # pyarrow expressions are the same predicate language
    import pyarrow.compute as pc

    expr = (pc.field("x") < 5) | pc.field("s").isin(["s2"])
    same_as_lakequery(spark, uri, filter=expr)
    # Spark's own filters and projections on the result still reach the scan
    narrowed = lqs.read(spark, uri).where("x = 7").select("id")
    text = narrowed._jdf.queryExecution().executedPlan().toString()
    assert "EqualTo(x,7)" in text and "ReadSchema: struct<id:bigint,x:bigint>" in text


def test_filter_literals_of_every_kind(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "lits")
    t = pa.table(
        {
            "id": [1, 2, 3, 4],
            "f": [1.5, float("nan"), -2.0, None],
            "s": ["it's", "back\\slash", "50%", "_x"],
            "dec": pa.array([1, 2, 3, 4], pa.decimal128(5, 1)),
        }
    )
    lq.write(uri, t)
    for predicate, expected in [
        ("s = 'it''s'", [1]),
        ("s LIKE 'back\\%'", [2]),
        ("s LIKE '50%'", [3]),
        ("s LIKE '\\_%'", []),
        ("f > 1", [1, 2]),  # NaN is above every number, as in DuckDB
        ("f IS NULL", [4]),
        ("dec BETWEEN 1.5 AND 3", [2, 3]),
        ("id IN (1, 4) AND NOT (f < 0)", [1]),
        ("id / 2 = 1.5", [3]),
        ("id + 1 > 3", [3, 4]),  # exact integer arithmetic, in a type Spark has
        ("id * 2 - 1 = 5", [3]),
        ("id IN (1, NULL)", [1]),
        ("id NOT IN (1, NULL)", []),
    ]:
        got = same_as_lakequery(spark, uri, filter=predicate, columns=["id"])
        assert [r["id"] for r in got] == expected, predicate


@pytest.mark.parametrize("ansi", ["true", "false"])
def test_division_by_zero_as_the_other_engines(spark: Any, tmp_path: Path, ansi: str) -> None:
    """lakequery's ``/`` is IEEE division in every engine (``x / 0`` an infinity or NaN);
    Spark's gives NULL, or fails under ANSI mode: the Spark rendering spells it out."""
    uri = str(tmp_path / "div")
    t = pa.table(
        {
            "id": list(range(1, 9)),
            "a": [5.0, -5.0, 5.0, 0.0, float("nan"), None, 5.0, 3.0],
            "b": [0.0, 0.0, 1.0, 0.0, 0.0, 0.0, -0.0, None],
            "i": [4, -4, 2, 0, 1, 1, 1, 1],
            "z": [0, 0, 1, 0, 0, 0, 0, 0],
        }
    )
    lq.write(uri, t)
    previous = spark.conf.get("spark.sql.ansi.enabled")
    spark.conf.set("spark.sql.ansi.enabled", ansi)
    try:
        for predicate, expected in [
            ("a / b > 1", [1, 3, 4, 5]),  # +inf, 5; 0 / 0 and NaN / 0 are NaN, the largest
            ("a / b < -1", [2, 7]),  # -inf, also 5 / -0.0
            ("a / b IS NULL", [6, 8]),
            ("i / z > 1", [1, 3, 4, 5, 6, 7, 8]),
            ("i / z = 2", [3]),
        ]:
            got = same_as_lakequery(spark, uri, filter=predicate, columns=["id"])
            assert [r["id"] for r in got] == expected, predicate
    finally:
        spark.conf.set("spark.sql.ansi.enabled", previous)


@pytest.mark.parametrize("mapping", ["none", "name"])
def test_void_fields_of_structs(spark: Any, tmp_path: Path, mapping: str) -> None:
    """Files leave void struct fields out (digest 8.3); the read puts a NULL back in each,
    at any depth, keeps NULL structs NULL, and renames fields under column mapping."""
    uri = str(tmp_path / f"void_{mapping}")
    inner = pa.struct([("n", pa.null()), ("x", pa.int64())])
    st = pa.struct([("a", pa.int64()), ("v", pa.null()), ("in", inner)])
    t = pa.table(
        {
            "id": [1, 2, 3],
            "st": pa.array(
                [{"a": 1, "v": None, "in": {"n": None, "x": 10}}, None, {"a": 3, "in": None}], st
            ),
        }
    )
    config = {"delta.columnMapping.mode": mapping} if mapping != "none" else None
    lq.write(uri, t, configuration=config)
    got = same_as_lakequery(spark, uri)
    assert [r["st"] for r in got] == [
        {"a": 1, "v": None, "in": {"n": None, "x": 10}},
        None,
        {"a": 3, "v": None, "in": None},
    ]
    assert [r["id"] for r in same_as_lakequery(spark, uri, filter="st.in.x = 10")] == [1]


# ---------------------------------------------------------------------------------------------
# Versions, errors
# ---------------------------------------------------------------------------------------------


def test_time_travel_by_version_and_timestamp(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "tt")
    lq.write(uri, data(10))
    time.sleep(0.05)
    lq.write(uri, data(10, 10), mode="append")
    dt = lq.DeltaTable(uri)
    dt.delete("id < 3")
    assert len(same_as_lakequery(spark, uri, version=0)) == 10
    assert len(same_as_lakequery(spark, uri, version=1)) == 20
    assert len(same_as_lakequery(spark, uri)) == 17
    when = dt.history()[-2].timestamp  # commit time of version 1 (history is newest first)
    assert len(same_as_lakequery(spark, uri, as_of=when)) == 20
    with pytest.raises(lq.VersionNotFoundError):
        lqs.read(spark, uri, version=9)


def test_empty_and_missing(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "empty")
    lq.write(uri, data(5))
    lq.DeltaTable(uri).delete("id >= 0")
    df = lqs.read(spark, uri)
    assert df.count() == 0 and df.columns == ["id", "x", "s"]
    with pytest.raises(lq.TableNotFoundError):
        lqs.read(spark, str(tmp_path / "nothing here"))
    vacuumed = str(tmp_path / "vacuumed")
    lq.write(vacuumed, data(5))
    lq.write(vacuumed, data(5), mode="overwrite")
    lq.DeltaTable(vacuumed).vacuum(retention_hours=0, enforce_retention=False, dry_run=False)
    with pytest.raises(lq.ObjectNotFoundError):
        lqs.read(spark, vacuumed, version=0)


def test_nothing_proportional_to_the_data_is_collected(spark: Any, tmp_path: Path) -> None:
    """The DataFrame is lazy: building it runs no Spark job (DVs small enough to broadcast
    are decoded on the driver from their descriptors, the rows are never touched)."""
    uri = str(tmp_path / "lazy")
    lq.write(uri, data(1000))
    lq.DeltaTable(uri).delete("id % 10 = 0")
    tracker = spark.sparkContext.statusTracker()
    before = set(tracker.getJobIdsForGroup(None))
    df = lqs.read(spark, uri)
    assert set(tracker.getJobIdsForGroup(None)) == before
    assert df.count() == 900


# ---------------------------------------------------------------------------------------------
# The workers' Python
# ---------------------------------------------------------------------------------------------


def _bare_python(tmp_path: Path) -> str:
    """A Python without pyarrow or lakequery (a fresh venv of the base interpreter)."""
    env = tmp_path / "bare"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(env)], check=True, timeout=120
    )
    python = str(env / "bin" / "python")
    missing = subprocess.run(
        [python, "-c", "import pyarrow"], capture_output=True, timeout=60, check=False
    )
    assert missing.returncode != 0
    return python


def test_new_user_in_local_mode_gets_working_workers(tmp_path: Path) -> None:
    """A job started as `.venv/bin/python job.py` whose workers would run a Python
    without lakequery: local mode switches them to this interpreter and says so."""
    script = tmp_path / "job.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import os
            from pyspark.sql import SparkSession
            import lakequery.spark as lqs
            spark = (SparkSession.builder.master("local[1]")
                     .config("spark.ui.enabled", "false")
                     .config("spark.driver.host", "127.0.0.1")
                     .config("spark.driver.bindAddress", "127.0.0.1").getOrCreate())
            uri = {str(tmp_path / "t")!r}
            lqs.write(spark.range(5), uri)
            print("ROWS", lqs.read(spark, uri).count())
            """
        )
    )
    env = {**os.environ, "PYSPARK_PYTHON": _bare_python(tmp_path), "SPARK_LOCAL_IP": "127.0.0.1"}
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "ROWS 5" in done.stdout
    assert "cannot import" in done.stderr and sys.executable in done.stderr


def test_workers_without_lakequery_fail_fast_with_a_clear_error(tmp_path: Path) -> None:
    """Outside local mode the check asks a worker; a worker Python lacking the modules
    is one SparkWorkerError naming it and the setting, before any lakequery job."""
    script = tmp_path / "probe.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import sys
            sys.path.insert(0, {str(REPO)!r})  # this checkout, for the driver only
            from pyspark.sql import SparkSession
            import lakequery as lq
            from lakequery.spark import workers
            spark = (SparkSession.builder.master("local[1]")
                     .config("spark.ui.enabled", "false")
                     .config("spark.driver.host", "127.0.0.1")
                     .config("spark.driver.bindAddress", "127.0.0.1").getOrCreate())
            python, missing = workers._probe_cluster(spark.sparkContext)
            print("PROBE", python, sorted(missing))
            print("ERROR", lq.SparkWorkerError(python, missing))
            """
        )
    )
    bare = _bare_python(tmp_path)
    # without PYTHONPATH: it reaches the workers (seen with PySpark 4.2), and a
    # checkout on it would give the bare Python lakequery
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env |= {"PYSPARK_PYTHON": bare, "SPARK_LOCAL_IP": "127.0.0.1"}
    done = subprocess.run(  # not in the checkout: its lakequery/ would import from the cwd
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"PROBE {bare} ['lakequery', 'pyarrow']" in done.stdout
    assert "PYSPARK_PYTHON" in done.stdout and bare in done.stdout


def test_readme_pipeline_example_runs(spark: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """The README's Spark pipeline (read A, transform, write B with both APIs) runs on
    the shared session (its ``getOrCreate()`` returns it) and prints what it promises."""
    import re

    text = (REPO / "README.md").read_text()
    section = text[text.index("### A pipeline: read table A") :]
    block = re.search(r"```py\n(.*?)```", section, re.S)
    assert block is not None
    code = block.group(1)
    promised = re.findall(r"^print\((?:.|\n)*?\)[ ]+# ([^\n]+)$", code, re.M)
    assert len(promised) == 3
    exec(compile(code, "README.md[Spark pipeline]", "exec"), {"__name__": "readme"})
    assert capsys.readouterr().out.strip().splitlines() == [p.strip() for p in promised]


def test_hive_layout_under_a_root_with_glob_characters(spark: Any, tmp_path: Path) -> None:
    """Plain partition values are read by Spark's partition discovery (basePath), which
    takes the table root literally: its glob characters must not be escaped there."""
    uri = str(tmp_path / "root [1] {a,b}")
    t = data(300).append_column("p", pa.array([f"v{i % 3}" for i in range(300)]))
    lq.write(uri, t, partition_by=["p"])
    plan = lqs.read(spark, uri)._jdf.queryExecution().executedPlan().toString()
    assert "Union" not in plan and plan.count("FileScan") == 1  # one scan, values from paths
    same_as_lakequery(spark, uri)
    lq.DeltaTable(uri).delete("id % 7 = 0")
    got = same_as_lakequery(spark, uri)
    assert {r["p"] for r in got} == {"v0", "v1", "v2"}
    same_as_lakequery(spark, uri, filter="p = 'v1'")


def test_date_partitions_before_the_year_1000(spark: Any, tmp_path: Path) -> None:
    """PySpark spells a date literal with strftime('%Y'), unpadded on Linux: the JVM
    refused '1-01-01' (a NULL partition keeps the read off the Hive-directory path)."""
    import datetime as dt

    uri = str(tmp_path / "old_dates")
    days = [dt.date(1, 1, 1), dt.date(999, 12, 31), dt.date(1500, 3, 1), None]
    lq.write(
        uri, pa.table({"id": [0, 1, 2, 3], "d": pa.array(days, pa.date32())}), partition_by="d"
    )
    got = sorted((r.id, r.d) for r in lqs.read(spark, uri).collect())
    assert got == list(enumerate(days))


def test_nested_divisions_render_in_linear_text() -> None:
    """Each operand of the IEEE division is written once: eight nested divisions stay
    about eight times one (repeating operands made 45 MB of SQL)."""
    from lakequery.protocol.predicates import bind, parse_predicate
    from lakequery.spark.predicate import to_spark_sql

    schema = pa.schema([("x", pa.float64())])

    def size(n: int) -> int:
        return len(to_spark_sql(bind(parse_predicate("x" + " / 2" * n + " > 0"), schema)))

    assert size(8) < 10 * size(1)
