"""Spark-Delta (the reference implementation) and lakequery's identity columns, both ways:
Spark reads a table whose identity values lakequery generated and continues the sequence
above lakequery's high-water mark; lakequery continues above Spark's; no id repeats."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from sparkkit import delta_sql, spark_read

import lakequery as lq


def _ids(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


@pytest.mark.parametrize("always", [True, False], ids=["always", "by-default"])
def test_identity_sequence_continues_across_engines(
    delta_spark: Any, tmp_path: Path, always: bool
) -> None:
    uri = str(tmp_path / "t")
    lq.write(
        uri,
        pa.table({"v": ["a", "b", "c"]}),
        identity={"id": lq.Identity(start=10, step=5, always=always)},
    )
    assert _ids(spark_read(delta_spark, uri)) == [10, 15, 20]
    # Spark generates above lakequery's high-water mark
    delta_sql(delta_spark, "INSERT INTO {t} (v) VALUES ('spark1'), ('spark2')", uri)
    after_spark = _ids(lq.DeltaTable(uri).snapshot().scan().to_arrow())
    assert after_spark[:3] == [10, 15, 20] and len(set(after_spark)) == 5
    assert all(i > 20 and (i - 10) % 5 == 0 for i in after_spark[3:])
    # and lakequery above Spark's
    lq.write(uri, pa.table({"v": ["lq"]}), mode="append")
    final = _ids(spark_read(delta_spark, uri))
    assert len(set(final)) == 6 and final[-1] > max(after_spark)
    if always:
        with pytest.raises(Exception, match=r"(?i)identity"):
            delta_sql(delta_spark, "INSERT INTO {t} (id, v) VALUES (1, 'explicit')", uri)
