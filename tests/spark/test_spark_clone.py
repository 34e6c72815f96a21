"""lakequery's Spark reader and ``format("lakequery")`` on a shallow clone: data files and
on-disk deletion vectors (``p`` descriptors) outside the table root, read on the executors
exactly as lakequery's Arrow engine reads them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa

import lakequery as lq
import lakequery.spark as lqs
from lakequery.spark.datasource import register


def _rows(table: pa.Table) -> list[tuple[Any, ...]]:
    return sorted(tuple(r.values()) for r in table.select(["id", "p", "v"]).to_pylist())


def test_spark_readers_read_a_clone(spark: Any, tmp_path: Path) -> None:
    src = str(tmp_path / "src")
    ids = list(range(300))
    rows = pa.table({"id": ids, "p": ["a", "b", "c"] * 100, "v": [i * 0.5 for i in ids]})
    lq.write(src, rows, partition_by=["p"], configuration={"delta.enableDeletionVectors": "true"})
    lq.DeltaTable(src).delete("id % 2 = 0 OR id = 7")
    clone = lq.DeltaTable(src).clone(str(tmp_path / "clone"))
    log = (Path(clone.uri) / "_delta_log" / f"{0:020d}.json").read_text().splitlines()
    dvs = [json.loads(x)["add"].get("deletionVector") for x in log if '"add"' in x]
    assert any(d and d["storageType"] == "p" for d in dvs)  # on-disk DVs of the source
    expected = _rows(clone.snapshot().scan().to_arrow())
    assert [r[0] for r in expected] == [i for i in ids if i % 2 and i != 7]
    assert _rows(lqs.read(spark, clone.uri).toArrow()) == expected
    register(spark)
    via_source = spark.read.format("lakequery").load(clone.uri).toArrow()
    assert _rows(via_source) == expected
    filtered = lqs.read(spark, clone.uri).where("p = 'c' AND id > 250").toArrow()
    assert _rows(filtered) == [r for r in expected if r[1] == "c" and r[0] > 250]
