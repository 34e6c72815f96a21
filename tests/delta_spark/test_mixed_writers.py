"""Spark-Delta and lakequery committing to one local table (issue 14, item 4).

Both sides create the next commit file with an atomic put-if-absent (delta-spark's local
log store renames without overwrite; lakequery links), so concurrent writers never lose
or duplicate a version; a logical conflict is detected by the writer that lost the race
(digest §17).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from sparkkit import assert_same_rows, delta_sql, lq_read, spark_read

import lakequery as lq
from lakequery.txn import Transaction

ROUNDS = 6


def _rows(writer: str, seq: int, n: int = 20) -> pa.Table:
    return pa.table(
        {
            "id": [seq * 1000 + i for i in range(n)],
            "writer": [writer] * n,
            "seq": [seq] * n,
            "v": [float(i) for i in range(n)],
        }
    )


def _versions(uri: str) -> list[int]:
    return sorted(int(p.name[:20]) for p in Path(uri, "_delta_log").glob("*.json"))


def _operations(uri: str) -> list[str]:
    ops = []
    for v in _versions(uri):
        path = Path(uri, "_delta_log", f"{v:020d}.json")
        for line in path.read_text().splitlines():
            action = json.loads(line)
            if "commitInfo" in action:
                ops.append(str(action["commitInfo"].get("operation")))
    return ops


LQ_WORKER = textwrap.dedent(
    """
    import sys, pyarrow as pa, lakequery as lq
    uri, name, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    def rows(seq, n=20):
        return pa.table({"id": [seq * 1000 + i for i in range(n)], "writer": [name] * n,
                         "seq": [seq] * n, "v": [float(i) for i in range(n)]})
    conflicts = 0
    for seq in range(rounds):
        lq.write(uri, rows(seq), mode="append")
        if seq % 2 == 1:  # delete part of an earlier round of our own
            while True:
                try:
                    lq.DeltaTable(uri).delete(f"writer = '{name}' AND seq = {seq - 1} AND v < 5")
                    break
                except lq.CommitConflictError:
                    conflicts += 1
    print("CONFLICTS", conflicts)
    """
)


def test_concurrent_appends_and_deletes_from_both_engines(delta_spark: Any, tmp_path: Path) -> None:
    """Two lakequery processes and Spark-Delta append and delete at the same time; every
    commit lands once, versions are contiguous, and both engines read the same rows."""
    uri = str(tmp_path / "mixed")
    lq.write(uri, _rows("init", 99, 5), configuration={"delta.enableDeletionVectors": "true"})
    script = tmp_path / "lq_worker.py"
    script.write_text(LQ_WORKER)
    workers = [
        subprocess.Popen(
            [sys.executable, str(script), uri, f"lq{k}", str(ROUNDS)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for k in range(2)
    ]
    errors: list[BaseException] = []

    def spark_side() -> None:
        try:
            for seq in range(ROUNDS):
                df = delta_spark.createDataFrame(_rows("spark", seq).to_pandas())
                df.write.format("delta").mode("append").save(uri)
                if seq % 2 == 1:
                    delta_sql(
                        delta_spark,
                        f"DELETE FROM {{t}} WHERE writer = 'spark' AND seq = {seq - 1} AND v < 5",
                        uri,
                    )
        except BaseException as exc:  # reported below
            errors.append(exc)

    thread = threading.Thread(target=spark_side)
    thread.start()
    outputs = [w.communicate(timeout=600) for w in workers]
    thread.join(timeout=600)
    assert not errors, errors
    for w, (out, err) in zip(workers, outputs, strict=True):
        assert w.returncode == 0, err[-3000:]
        assert "CONFLICTS" in out

    versions = _versions(uri)
    assert versions == list(range(len(versions)))  # contiguous, none lost or doubled
    ops = _operations(uri)
    deletes = ROUNDS // 2
    assert ops.count("DELETE") == 3 * deletes
    assert len(versions) == 1 + 3 * ROUNDS + 3 * deletes
    expected_ids = {
        (w, s * 1000 + i)
        for w in ("lq0", "lq1", "spark")
        for s in range(ROUNDS)
        for i in range(20)
        if not (s % 2 == 0 and s + 1 < ROUNDS and i < 5)
    }
    expected_ids |= {("init", 99 * 1000 + i) for i in range(5)}
    ours = lq_read(uri)
    assert {
        (w, i) for w, i in zip(ours["writer"].to_pylist(), ours["id"].to_pylist(), strict=True)
    } == expected_ids
    assert ours.num_rows == len(expected_ids)
    assert_same_rows(spark_read(delta_spark, uri), ours, "Spark-Delta vs lakequery")


def test_lakequery_detects_a_spark_delete_of_a_file_it_read(
    delta_spark: Any, tmp_path: Path
) -> None:
    """A lakequery transaction that read the whole table and removes its file loses to a
    Spark-Delta DELETE committed meanwhile on that file (§17); Spark's DV delete removes
    the file and adds it back with a DV, so the first conflict found is the added file
    the read covers (delta-spark checks in the same order). A blind append started at
    the same version still commits after it (WriteSerializable)."""
    uri = str(tmp_path / "conflict")
    lq.write(uri, _rows("a", 0), configuration={"delta.enableDeletionVectors": "true"})
    dt = lq.DeltaTable(uri)
    snap = dt.snapshot()
    files = snap.files().to_pylist()
    remover = Transaction(dt.storage, snap, operation="DELETE")
    remover.read_whole_table()
    remover.remove_files(
        [
            {"path": f["path"], "dataChange": True, "deletionTimestamp": 1, "size": f["size"]}
            for f in files
        ]
    )
    appender = Transaction(dt.storage, snap, operation="WRITE")
    delta_sql(delta_spark, "DELETE FROM {t} WHERE id = 3", uri)  # Spark commits version 1
    with pytest.raises(
        (lq.ConcurrentAppendError, lq.ConcurrentDeleteReadError, lq.ConcurrentDeleteDeleteError)
    ):
        remover.commit()
    assert _versions(uri) == [0, 1]
    plan = lq.plan_write(uri, _rows("b", 1).schema, mode="append")
    assert plan.state is not None
    from lakequery.writer import write_data_files

    appender.add_files(write_data_files(_rows("b", 1), plan.state))
    assert appender.commit().version == 2
    rows = lq_read(uri)
    assert rows.num_rows == 39 and 3 not in rows["id"].to_pylist()
    assert_same_rows(spark_read(delta_spark, uri), rows, "after the lost race")


def test_spark_merge_sees_a_lakequery_delete_committed_after_it_was_built(
    delta_spark: Any, tmp_path: Path
) -> None:
    """A Spark-Delta MERGE built before lakequery deletes a row (a DV) runs against the
    new version: the deleted row is not matched any more, so its source row is inserted
    as a new row; the other matched row is updated in place; versions stay contiguous and
    both engines read the same rows."""
    uri = str(tmp_path / "spark_merge")
    lq.write(uri, _rows("a", 0), configuration={"delta.enableDeletionVectors": "true"})
    from delta.tables import DeltaTable as SparkDeltaTable

    target = SparkDeltaTable.forPath(delta_spark, uri)
    source = delta_spark.createDataFrame(
        pa.table({"id": [1, 2, 5000], "v": [10.0, 20.0, 30.0]}).to_pandas()
    )
    merge = (
        target.alias("t")
        .merge(source.alias("s"), "t.id = s.id")
        .whenMatchedUpdate(set={"v": "s.v"})
        .whenNotMatchedInsert(values={"id": "s.id", "v": "s.v", "writer": "'s'", "seq": "9"})
    )
    assert lq.DeltaTable(uri).delete("id = 2").num_deleted_rows == 1  # version 1, a DV
    merge.execute()
    rows = {r["id"]: (r["writer"], r["v"]) for r in lq_read(uri).to_pylist()}
    assert rows[1] == ("a", 10.0)  # matched: updated
    assert rows[2] == ("s", 20.0)  # deleted by lakequery, so not matched: inserted
    assert rows[5000] == ("s", 30.0)
    assert len(rows) == 21
    assert _versions(uri) == [0, 1, 2] and _operations(uri)[1:] == ["DELETE", "MERGE"]
    assert_same_rows(spark_read(delta_spark, uri), lq_read(uri), "after the MERGE")
