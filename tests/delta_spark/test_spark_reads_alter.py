"""Spark-Delta (the reference implementation) on tables changed by ``DeltaTable.alter``:
it reads the renamed, dropped, widened columns and the table features lakequery turned on,
enforces the constraint lakequery added, and its own appends read back in lakequery."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from sparkkit import assert_same_rows, delta_sql, lq_engines, spark_read

import lakequery as lq


def _altered(root: Path, configuration: dict[str, str]) -> str:
    uri = str(root / "t")
    data = pa.table(
        {
            "id": pa.array([1, 2, 3], pa.int32()),
            "v": ["a", "b", "c"],
            "extra": [0.5, 1.5, 2.5],
        }
    )
    lq.write(uri, data, configuration=configuration)
    alter = lq.DeltaTable(uri).alter
    alter.rename_column("v", "name")
    alter.drop_column("extra")
    alter.change_column_type("id", "long")
    alter.add_constraint({"id_positive": "id > 0"})
    alter.enable_feature(["changeDataFeed", "inCommitTimestamp"])
    lq.write(uri, pa.table({"id": [2**40], "name": ["d"]}), mode="append")
    return uri


@pytest.mark.parametrize(
    "configuration",
    [{"delta.enableDeletionVectors": "false"}, {}],
    ids=["legacy-protocol", "table-features"],
)
def test_spark_reads_and_writes_an_altered_table(
    delta_spark: Any, tmp_path: Path, configuration: dict[str, str]
) -> None:
    uri = _altered(tmp_path, configuration)
    expected = pa.table(
        {"id": pa.array([1, 2, 3, 2**40], pa.int64()), "name": ["a", "b", "c", "d"]}
    )
    assert_same_rows(spark_read(delta_spark, uri), expected, "Spark reads the altered table")
    with pytest.raises(Exception, match=r"(?i)check constraint"):
        delta_sql(delta_spark, "INSERT INTO {t} VALUES (-1, 'bad')", uri)
    delta_sql(delta_spark, "INSERT INTO {t} VALUES (7, 'spark')", uri)
    delta_sql(delta_spark, "DELETE FROM {t} WHERE id = 2", uri)
    after = pa.table(
        {"id": pa.array([1, 3, 2**40, 7], pa.int64()), "name": ["a", "c", "d", "spark"]}
    )
    for engine, table in lq_engines(uri).items():
        assert_same_rows(table, after, f"lakequery {engine} after Spark's writes")
    assert_same_rows(spark_read(delta_spark, uri), after, "Spark after its writes")
    changes = lq.DeltaTable(uri).changes(starting_version=lq.DeltaTable(uri).snapshot().version)
    assert changes.to_arrow().column("_change_type").to_pylist() == ["delete"]


def test_spark_reads_after_drop_feature(delta_spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    lq.write(
        uri,
        pa.table({"id": [1, 2]}),
        configuration={"delta.enableDeletionVectors": "false", "delta.appendOnly": "true"},
    )
    alter = lq.DeltaTable(uri).alter
    alter.set_properties({"delta.appendOnly": "false"})
    alter.drop_feature("appendOnly")
    p = lq.DeltaTable(uri).snapshot().protocol
    assert (p.min_writer_version, p.writer_features) == (7, ("invariants",))
    assert_same_rows(spark_read(delta_spark, uri), pa.table({"id": [1, 2]}), "Spark")
    delta_sql(delta_spark, "DELETE FROM {t} WHERE id = 1", uri)
    assert lq.DeltaTable(uri).snapshot().scan().to_arrow().column("id").to_pylist() == [2]
