"""Spark-Delta writes on top of lakequery's tables (INSERT, DELETE, UPDATE, MERGE, OPTIMIZE,
ZORDER, REORG PURGE, VACUUM through Spark SQL), lakequery keeps reading them with every
engine and writing them, and Spark reads lakequery's next commits."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from sparkkit import assert_same_rows, copy_table, delta_sql, lq_engines, spark_changes, spark_read

import lakequery as lq
from lakequery.errors import ConstraintViolationError

#: lakequery tables Spark then writes to, and which Spark statements beyond INSERT, DELETE,
#: UPDATE and MERGE run on each ("maintenance": OPTIMIZE, REORG PURGE, ZORDER, VACUUM;
#: "columns": ADD / RENAME / DROP COLUMN; "cdf": the change feed switched on by Spark).
KINDS: dict[str, tuple[str, ...]] = {
    "appends": ("maintenance", "cdf"),
    "dml_copy_on_write_partitioned": ("maintenance",),
    "partition_awkward_strings": (),
    "type_widening": (),
    "cdf_dv": ("maintenance",),
    "column_mapping_name": ("columns",),
    "column_mapping_id": ("columns", "maintenance"),
    "check_constraints": (),
    "generated_columns": (),
    "in_commit_timestamps": (),
    "row_tracking": ("maintenance",),
    "checkpoint_v2": ("maintenance",),
}


def generated_columns(uri: str) -> dict[str, str]:
    """Columns with a generation expression, and the expression."""
    out = {}
    for f in lq.DeltaTable(uri).snapshot().schema:
        meta = json.loads((f.metadata or {}).get(b"delta.metadata", b"{}"))
        if "delta.generationExpression" in meta:
            out[f.name] = meta["delta.generationExpression"]
    return out


def source_sql(offset: int, predicate: str, generated: dict[str, str]) -> str:
    """Rows of the table matching ``predicate`` with ``offset`` added to ``id`` (generated
    columns recomputed), as Spark SQL over ``{t}``."""
    except_ = ", ".join(["id", *generated])
    inner = f"SELECT id + {offset} AS id, * EXCEPT ({except_}) FROM {{t}} WHERE {predicate}"
    extra = "".join(f", {expr} AS `{name}`" for name, expr in generated.items())
    return f"SELECT *{extra} FROM ({inner})"


def spark_steps(uri: str, extras: tuple[str, ...]) -> list[tuple[str, str]]:
    """The Spark SQL statements to run on the table and the operation each commits. New
    ids are old ids plus a power of ten per statement, so they stay unique (MERGE needs
    that)."""
    generated = generated_columns(uri)
    dvs = "deletionVectors" in (lq.DeltaTable(uri).snapshot().protocol.writer_features or ())
    steps = []
    if "cdf" in extras:
        steps.append(
            (
                "ALTER TABLE {t} SET TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')",
                "SET TBLPROPERTIES",
            )
        )
    if "columns" in extras:
        steps += [
            ("ALTER TABLE {t} ADD COLUMNS (`added by spark` STRING)", "ADD COLUMNS"),
            ("ALTER TABLE {t} RENAME COLUMN s TO `s renamed`", "RENAME COLUMN"),
            ("ALTER TABLE {t} DROP COLUMN i", "DROP COLUMNS"),
        ]
    steps += [
        ("ALTER TABLE {t} ADD CONSTRAINT spark_ids CHECK (id >= 0)", "ADD CONSTRAINT"),
        ("INSERT INTO {t} BY NAME " + source_sql(10**8, "id % 9 = 2", generated), "WRITE"),
        ("DELETE FROM {t} WHERE id % 5 = 2", "DELETE"),
        ("UPDATE {t} SET id = id + 1000000000 WHERE id % 7 = 3", "UPDATE"),
        (
            f"MERGE INTO {{t}} AS t USING ({source_sql(0, 'id % 3 = 0', generated)}"
            f" UNION ALL {source_sql(10**10, 'id % 4 = 1', generated)}) AS s ON t.id = s.id"
            " WHEN MATCHED AND t.id % 2 = 0 THEN DELETE"
            " WHEN MATCHED THEN UPDATE SET *"
            " WHEN NOT MATCHED THEN INSERT *",
            "MERGE",
        ),
    ]
    if "maintenance" in extras:
        steps += [("OPTIMIZE {t}", "OPTIMIZE"), ("DELETE FROM {t} WHERE id % 6 = 5", "DELETE")]
        if dvs:
            steps.append(("REORG TABLE {t} APPLY (PURGE)", "REORG"))
        steps += [
            # back to the state after ADD CONSTRAINT: lakequery's files (and DVs) again
            ("RESTORE TABLE {t} TO VERSION AS OF {constrained}", "RESTORE"),
            ("OPTIMIZE {t} ZORDER BY (id)", "OPTIMIZE"),
            ("VACUUM {t} RETAIN 0 HOURS", ""),  # VACUUM START / END when logging is on
        ]
    return steps


def lakequery_writes(uri: str) -> None:
    """lakequery's writes and DML on a table Spark wrote to."""
    dt = lq.DeltaTable(uri)
    snap = dt.snapshot()
    generated = generated_columns(uri)
    current = snap.scan().to_arrow()
    some = current.filter(pc.equal(pc.bit_wise_and(current["id"], 3), 1)).slice(0, 3)
    some = some.set_column(
        some.column_names.index("id"), "id", pc.add(some["id"], pa.scalar(10**11, pa.int64()))
    ).drop_columns(list(generated))
    assert lq.write(uri, some, mode="append").version is not None
    ids = sorted(current["id"].to_pylist())
    assert dt.delete(f"id IN ({ids[1]}, {ids[-2]})").committed
    predicate = f"id IN ({', '.join(map(str, [ids[0], *ids[3:-2:4]]))})"
    assert dt.update(predicate, set={"id": "id + 1000000000000"}).committed
    source = current.filter(pc.equal(pc.bit_wise_and(current["id"], 1), 1)).slice(0, 5)
    builder = dt.merge(
        source.drop_columns(list(generated)), on="t.id = s.id", source_alias="s", target_alias="t"
    )
    builder = builder.when_matched_update_all()
    assert builder.when_not_matched_insert_all().execute().committed
    assert dt.optimize(z_order_by=["id"]).version is not None
    dt.checkpoint()


def check_lakequery_reads_like_spark(spark: Any, uri: str, what: str) -> None:
    expected = spark_read(spark, uri)
    for engine, table in lq_engines(uri).items():
        assert_same_rows(table, expected, f"{what} [{engine}]")


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_spark_then_lakequery_write_one_table(
    delta_spark: Any, build: Callable[[str], str], tmp_path: Path, kind: str
) -> None:
    """After each Spark statement lakequery reads the table as Spark does; after all of
    them every engine does, lakequery's DML, OPTIMIZE, checkpoint, RESTORE and VACUUM work
    on Spark's files, DVs and metadata, and Spark reads lakequery's commits."""
    uri = copy_table(build(kind), tmp_path / kind)
    dt = lq.DeltaTable(uri)
    constrained = -1
    for statement, operation in spark_steps(uri, KINDS[kind]):
        before = dt.snapshot().version
        delta_sql(delta_spark, statement.replace("{constrained}", str(constrained)), uri).collect()
        snap = dt.snapshot()
        if operation == "ADD CONSTRAINT":
            constrained = snap.version
        assert snap.version > before, statement
        if operation:
            assert snap.commit_info is not None
            assert snap.commit_info["operation"] == operation, statement
        assert_same_rows(
            snap.scan().to_arrow(), spark_read(delta_spark, uri), f"{kind} after {statement}"
        )
    check_lakequery_reads_like_spark(delta_spark, uri, f"{kind} after Spark")
    spark_version = dt.snapshot().version
    feed = dt.snapshot().metadata.configuration.get("delta.enableChangeDataFeed") == "true"

    lakequery_writes(uri)
    check_lakequery_reads_like_spark(delta_spark, uri, f"{kind} after lakequery")
    assert dt.restore(version=spark_version).version is not None
    assert_same_rows(
        dt.snapshot().scan().to_arrow(),
        spark_read(delta_spark, uri),
        f"{kind} after lakequery's RESTORE",
    )
    detail = delta_sql(delta_spark, "DESCRIBE DETAIL {t}", uri).collect()[0]
    assert detail["numFiles"] == dt.snapshot().num_files
    if feed:  # Spark's and lakequery's change files, read by both
        start, end = spark_version + 1, dt.snapshot().version
        ours = dt.changes(starting_version=start, ending_version=end).to_arrow()
        theirs = spark_changes(delta_spark, uri, start, end).select(ours.column_names)
        assert_same_rows(theirs, ours, f"{kind} changes {start}..{end}")
    # lakequery's VACUUM keeps every file Spark's latest snapshot needs
    assert dt.vacuum(retention_hours=0, enforce_retention=False, dry_run=False).files
    assert_same_rows(
        dt.snapshot().scan().to_arrow(),
        spark_read(delta_spark, uri),
        f"{kind} after lakequery's VACUUM",
    )
    history = delta_sql(delta_spark, "DESCRIBE HISTORY {t}", uri).toArrow()
    assert history.column("operation").to_pylist()[0] == "RESTORE"
    conf = dt.snapshot().metadata.configuration
    if conf.get("delta.enableInCommitTimestamps") == "true":
        # each writer's in-commit timestamp exceeds the other's previous one (digest §14)
        times = history.column("timestamp").to_pylist()
        assert times == sorted(times, reverse=True) and len(set(times)) == len(times)
    if conf.get("delta.enableRowTracking") == "true":
        # lakequery's row ids continue from Spark's high-water mark and vice versa
        ids = delta_sql(delta_spark, "SELECT _metadata.row_id AS r FROM {t}", uri).toArrow()
        assert ids.num_rows == len(set(ids.column("r").to_pylist())) > 0
    # lakequery's constraints and generation expressions bind Spark's writes
    if "delta.constraints.s_set" in conf:
        with pytest.raises(Exception, match="s_set"):
            delta_sql(
                delta_spark,
                "INSERT INTO {t} BY NAME SELECT 7L AS id, 'a' AS p, CAST(NULL AS STRING) AS s",
                uri,
            ).collect()
    if generated_columns(uri):
        with pytest.raises(Exception, match=r"(?i)generat"):
            delta_sql(
                delta_spark, "INSERT INTO {t} BY NAME SELECT 5L AS id, 11L AS twice, 'x' AS s", uri
            ).collect()
    # the constraint Spark added binds lakequery's writes
    row = dt.snapshot().scan(filter="id > 0").to_arrow().slice(0, 1)
    row = row.drop_columns(list(generated_columns(uri)))
    row = row.set_column(row.column_names.index("id"), "id", pa.array([-5], pa.int64()))
    with pytest.raises(ConstraintViolationError, match=r"spark_ids|id_positive"):
        lq.write(uri, row, mode="append")


def _log_actions(uri: str, version: int) -> list[dict[str, Any]]:
    text = (Path(uri) / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines()]


def _data_files(uri: str) -> set[str]:
    return {str(p) for p in Path(uri).rglob("*") if p.is_file() and "_delta_log" not in p.parts}


def test_lakequery_reads_and_writes_a_spark_shallow_clone(
    delta_spark: Any, build: Callable[[str], str], tmp_path: Path
) -> None:
    """Spark's SHALLOW CLONE of a lakequery table references the source's files (and DV
    files) by absolute URI (digest §4.3): every lakequery engine, lakequery's Spark reader
    included, reads it as Spark does; lakequery's DML, OPTIMIZE and VACUUM on the clone
    leave the source alone, and Spark reads the result."""
    import lakequery.spark as lqs

    source = copy_table(build("dml_dv_partitioned"), tmp_path / "source")
    source_rows = lq_engines(source)["arrow"]
    source_files = _data_files(source)
    clone = str(tmp_path / "clone")
    delta_sql(delta_spark, f"CREATE TABLE delta.`{clone}` SHALLOW CLONE {{t}}", source).collect()
    adds = [a["add"] for a in _log_actions(clone, 0) if "add" in a]
    assert adds and all(a["path"].startswith("file:") for a in adds)  # absolute, outside
    assert any(a.get("deletionVector") for a in adds)
    expected = spark_read(delta_spark, clone)
    assert_same_rows(expected, source_rows, "Spark's clone")
    for engine, table in lq_engines(clone).items():
        assert_same_rows(table, expected, f"lakequery {engine} of Spark's clone")
    assert_same_rows(lqs.read(delta_spark, clone).toArrow(), expected, "lakequery.spark")
    where = "p = 'a' AND id > 3"
    assert_same_rows(
        lq.DeltaTable(clone).snapshot().scan(filter=where).to_arrow(),
        spark_read(delta_spark, clone, where=where),
        "filtered",
    )
    # lakequery writes on Spark's clone; Spark reads it; the source never changes
    dt = lq.DeltaTable(clone)
    dt.delete("id % 4 = 1")
    dt.update("p = 'b'", set={"id": "id + 1000"})
    dt.optimize()
    dt.vacuum(retention_hours=0, enforce_retention=False, dry_run=False)
    assert_same_rows(spark_read(delta_spark, clone), lq_engines(clone)["arrow"], "after DML")
    assert_same_rows(spark_read(delta_spark, source), source_rows, "source after clone DML")
    assert _data_files(source) == source_files


def test_spark_reads_and_writes_a_lakequery_shallow_clone(
    delta_spark: Any, build: Callable[[str], str], tmp_path: Path
) -> None:
    """``DeltaTable.clone`` writes the commit Spark writes for a SHALLOW CLONE: Spark reads
    the clone (DVs as absolute ``p`` descriptors), sees the CLONE operation in its history,
    and writes on it without touching the source."""
    source = copy_table(build("dml_dv_partitioned"), tmp_path / "source")
    source_rows = lq_engines(source)["arrow"]
    source_files = _data_files(source)
    clone = str(tmp_path / "clone")
    lq.DeltaTable(source).clone(clone)
    assert_same_rows(spark_read(delta_spark, clone), source_rows, "Spark reads lakequery's clone")
    history = delta_sql(delta_spark, "DESCRIBE HISTORY {t}", clone).collect()
    assert [(r["version"], r["operation"]) for r in history] == [(0, "CLONE")]
    params = history[0]["operationParameters"]
    assert params["sourceVersion"] == str(lq.DeltaTable(source).snapshot().version)
    assert params["isShallow"] == "true" and source in params["source"]
    # the same commit as Spark's own SHALLOW CLONE of the same source (paths and ids aside)
    spark_clone = str(tmp_path / "spark_clone")
    delta_sql(
        delta_spark, f"CREATE TABLE delta.`{spark_clone}` SHALLOW CLONE {{t}}", source
    ).collect()
    ours, theirs = _log_actions(clone, 0), _log_actions(spark_clone, 0)
    assert ours[0]["commitInfo"]["operation"] == theirs[0]["commitInfo"]["operation"] == "CLONE"
    assert set(ours[0]["commitInfo"]["operationParameters"]) >= set(
        theirs[0]["commitInfo"]["operationParameters"]
    )
    assert set(ours[0]["commitInfo"]["operationMetrics"]) == set(
        theirs[0]["commitInfo"]["operationMetrics"]
    )
    meta = [next(a["metaData"] for a in log if "metaData" in a) for log in (ours, theirs)]
    assert meta[0]["createdTime"] == meta[1]["createdTime"] and meta[0]["id"] != meta[1]["id"]
    assert sorted(a["add"]["path"] for a in ours if "add" in a) == (
        sorted(a["add"]["path"] for a in theirs if "add" in a)
    )
    # Spark writes on lakequery's clone; lakequery reads it; the source is untouched
    delta_sql(delta_spark, "DELETE FROM {t} WHERE id % 3 = 0", clone).collect()
    delta_sql(delta_spark, "UPDATE {t} SET id = id + 7 WHERE p = 'a'", clone).collect()
    delta_sql(delta_spark, "OPTIMIZE {t}", clone).collect()
    delta_sql(delta_spark, "VACUUM {t} RETAIN 0 HOURS", clone).collect()
    assert_same_rows(lq_engines(clone)["arrow"], spark_read(delta_spark, clone), "Spark's DML")
    assert_same_rows(lq_engines(source)["arrow"], source_rows, "source after Spark's DML")
    assert _data_files(source) == source_files
