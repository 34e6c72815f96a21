"""The DV kernel registered as a DuckDB and a Spark function agrees with its twin."""

from __future__ import annotations

from typing import Any

import duckdb
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from lakequery.dv.bitmap import serialize
from udfs.duckdb_functions import register_duckdb_functions
from udfs.dv_mask import rows_kept, rows_kept_reference
from udfs.spark_functions import register_spark_functions

rows_st = st.lists(st.integers(0, 2**34), max_size=60)


@settings(max_examples=60, deadline=None)
@given(deleted=rows_st, probe=rows_st)
def test_rows_kept_matches_reference(deleted: list[int], probe: list[int]) -> None:
    sorted_deleted = np.array(sorted(set(deleted)), dtype=np.int64)
    got = rows_kept(sorted_deleted, np.array(probe, dtype=np.int64)).tolist()
    assert got == rows_kept_reference(sorted(set(deleted)), probe)


@settings(max_examples=25, deadline=None)
@given(a=rows_st, b=rows_st, probe=st.lists(st.integers(0, 2**34), min_size=1, max_size=40))
def test_duckdb_function_per_row_dv(a: list[int], b: list[int], probe: list[int]) -> None:
    con = duckdb.connect()
    register_duckdb_functions(con)
    register_duckdb_functions(con)  # idempotent
    dvs = [serialize(sorted(set(a))), serialize(sorted(set(b))), None]
    rows = [(dvs[i % 3], r) for i, r in enumerate(probe)]
    con.execute("CREATE TABLE t(i INTEGER, dv BLOB, r BIGINT)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?)", [(i, d, r) for i, (d, r) in enumerate(rows)])
    got = [k for (k,) in con.execute("SELECT lq_dv_keep(dv, r) FROM t ORDER BY i").fetchall()]
    sets = [set(a), set(b), set()]
    assert got == [r not in sets[i % 3] for i, (_, r) in enumerate(rows)]


def test_spark_function(spark: Any) -> None:
    register_spark_functions(spark)
    deleted = [0, 3, 4, 9, 2**33]
    dv = bytearray(serialize(deleted))
    rows = [(dv if i % 2 == 0 else None, i) for i in range(12)] + [(dv, 2**33)]
    df = spark.createDataFrame(rows, "dv binary, r long")
    df.createOrReplaceTempView("dv_rows")
    got = spark.sql("SELECT r, lq_dv_keep(dv, r) AS keep FROM dv_rows ORDER BY r").collect()
    expect = {r: (d is None) or (r not in set(deleted)) for d, r in rows}
    assert {row["r"]: row["keep"] for row in got} == expect
    assert sum(not row["keep"] for row in got) == 3  # rows 0, 4 and 2**33 carry the DV
