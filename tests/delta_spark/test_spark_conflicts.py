"""Spark-Delta's own conflict detection against a lakequery commit that won the race
(issue 14, item 4; digest §17.4).

To make the race deterministic, Spark's transaction carries a Python UDF in its condition
that, the first time any task evaluates it, commits with lakequery. Spark has by then fixed
its read version (delta-spark opens the transaction before it scans or writes), so its
commit attempt finds lakequery's commit as the winner and runs its checks against it.

Open-source delta-spark runs at ``Serializable`` (§17.2): a winner's blind append
conflicts with a transaction whose read covers the appended partition, not with one that
read another partition.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from sparkkit import assert_same_rows, delta_sql, lq_read, spark_read

import lakequery as lq


def _rows(part: str, start: int, n: int = 10) -> pa.Table:
    return pa.table(
        {"id": list(range(start, start + n)), "part": [part] * n, "v": [float(i) for i in range(n)]}
    )


def _versions(uri: str) -> list[int]:
    return sorted(int(p.name[:20]) for p in Path(uri, "_delta_log").glob("*.json"))


def _once_hook(spark: Any, marker: Path, action: Callable[[], object]) -> str:
    """Registers a boolean SQL function ``lq_hook(x)`` that runs ``action`` in the first
    task that evaluates it (a marker file created exclusively makes it once per test) and
    is true for every row. Returns its name. ``action`` runs in a Python worker, so it must
    not call this module's functions (pickled by reference, not importable there)."""
    from pyspark.sql.types import BooleanType

    def hook(_: object) -> bool:
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return True
        os.close(fd)
        action()
        return True

    spark.udf.register("lq_hook", hook, BooleanType())
    return "lq_hook"


def _spark_error(excinfo: pytest.ExceptionInfo[BaseException]) -> str:
    return f"{type(excinfo.value).__name__}: {excinfo.value}"


@pytest.fixture
def dv_table(tmp_path: Path) -> str:
    uri = str(tmp_path / "t")
    lq.write(uri, _rows("a", 0), configuration={"delta.enableDeletionVectors": "true"})
    return uri


def test_spark_delete_loses_to_a_lakequery_delete_of_its_file(
    delta_spark: Any, dv_table: str, tmp_path: Path
) -> None:
    """lakequery deletes a row of the file Spark's DELETE is scanning (a DV: the file is
    removed and added back). Spark's check against that winner (§17.4 step 6: the winner
    is not a blind append, the table is unpartitioned) refuses its commit with
    ConcurrentAppendException; nothing of Spark's lands and lakequery's delete stands."""
    uri = dv_table
    hook = _once_hook(delta_spark, tmp_path / "once", lambda: lq.DeltaTable(uri).delete("id = 7"))
    with pytest.raises(Exception) as excinfo:
        delta_sql(delta_spark, f"DELETE FROM {{t}} WHERE id < 3 AND {hook}(id)", uri)
    assert "ConcurrentAppendException" in _spark_error(excinfo), _spark_error(excinfo)
    assert _versions(uri) == [0, 1]
    rows = lq_read(uri)
    assert sorted(rows["id"].to_pylist()) == [i for i in range(10) if i != 7]
    assert_same_rows(spark_read(delta_spark, uri), rows, "after Spark lost")
    # Spark's retry, now at version 1, commits
    delta_sql(delta_spark, "DELETE FROM {t} WHERE id < 3", uri)
    assert sorted(lq_read(uri)["id"].to_pylist()) == [3, 4, 5, 6, 8, 9]


def test_spark_update_loses_to_a_lakequery_blind_append(
    delta_spark: Any, dv_table: str, tmp_path: Path
) -> None:
    """A lakequery append commits while Spark's UPDATE of the unpartitioned table runs.
    lakequery records ``isBlindAppend: true``; under Serializable Spark still counts its
    files as ones it should have read (§17.4 step 6) and refuses."""
    uri, more = dv_table, _rows("a", 100)  # built here: the hook pickles by value
    hook = _once_hook(delta_spark, tmp_path / "once", lambda: lq.write(uri, more, mode="append"))
    with pytest.raises(Exception) as excinfo:
        delta_sql(delta_spark, f"UPDATE {{t}} SET v = -1 WHERE id < 3 AND {hook}(id)", uri)
    assert "ConcurrentAppendException" in _spark_error(excinfo), _spark_error(excinfo)
    assert _versions(uri) == [0, 1]
    assert lq_read(uri).num_rows == 20
    assert lq.DeltaTable(uri).history()[0].operation == "WRITE"


def test_a_lakequery_append_to_another_partition_does_not_stop_spark(
    delta_spark: Any, tmp_path: Path
) -> None:
    """On a partitioned table Spark's DELETE reads partition ``a`` only; lakequery's blind
    append to partition ``b`` meanwhile is no conflict (§17.4 step 6: the winner's files
    must satisfy the read's partition predicate), so Spark commits after it and both
    changes are there; the same append into ``a`` is a conflict."""
    uri = str(tmp_path / "p")
    lq.write(
        uri,
        pa.concat_tables([_rows("a", 0), _rows("b", 50)]),
        partition_by=["part"],
        configuration={"delta.enableDeletionVectors": "true"},
    )
    in_b, in_a = _rows("b", 100), _rows("a", 200)
    hook = _once_hook(delta_spark, tmp_path / "once-b", lambda: lq.write(uri, in_b, mode="append"))
    delta_sql(delta_spark, f"DELETE FROM {{t}} WHERE part = 'a' AND id < 3 AND {hook}(id)", uri)
    assert _versions(uri) == [0, 1, 2]
    ops = [e.operation for e in reversed(lq.DeltaTable(uri).history())]
    assert ops[1:] == ["WRITE", "DELETE"]
    rows = lq_read(uri)
    assert rows.num_rows == 30 - 3
    assert_same_rows(spark_read(delta_spark, uri), rows, "after both committed")

    hook = _once_hook(delta_spark, tmp_path / "once-a", lambda: lq.write(uri, in_a, mode="append"))
    with pytest.raises(Exception) as excinfo:
        delta_sql(delta_spark, f"DELETE FROM {{t}} WHERE part = 'a' AND id < 6 AND {hook}(id)", uri)
    assert "ConcurrentAppendException" in _spark_error(excinfo), _spark_error(excinfo)
    assert _versions(uri) == [0, 1, 2, 3]
    assert lq_read(uri).num_rows == 37


def test_a_spark_append_loses_to_a_lakequery_schema_change(
    delta_spark: Any, dv_table: str, tmp_path: Path
) -> None:
    """lakequery overwrites the table with a new column while Spark appends: the winner
    carries ``metaData`` (§17.4 step 2), so Spark's append fails with
    MetadataChangedException instead of writing files of the old schema."""
    uri = dv_table
    wider = _rows("a", 300).append_column("w", pa.array(["x"] * 10))

    def overwrite() -> None:
        lq.write(uri, wider, mode="overwrite", schema_mode="overwrite")

    hook = _once_hook(delta_spark, tmp_path / "once", overwrite)
    df = delta_spark.createDataFrame(_rows("a", 400).to_pandas()).where(f"{hook}(id)")
    with pytest.raises(Exception) as excinfo:
        df.write.format("delta").mode("append").save(uri)
    assert "MetadataChangedException" in _spark_error(excinfo), _spark_error(excinfo)
    assert _versions(uri) == [0, 1]
    rows = lq_read(uri)
    assert rows.column_names == ["id", "part", "v", "w"] and rows.num_rows == 10
    assert_same_rows(spark_read(delta_spark, uri), rows, "after the schema change")
