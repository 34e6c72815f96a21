"""Data skipping against statistics written by real Delta writers (conformance tables).

For every conformance table readable at its latest version, filters on each column's
smallest and largest value (and on NULL) must return exactly the rows the expected
content holds for that filter: a file pruned by mistake would lose rows. The tables'
statistics come from Spark, delta-rs and Delta Kernel, including column mapping,
``stats_parsed`` checkpoints, decimals in exponent form and type widening.
"""

from __future__ import annotations

import json
import math
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tablekit import conformance_dir

import lakequery as lq
from lakequery.protocol.arrow_types import category
from lakequery.protocol.predicates import (
    Column,
    Compare,
    Expr,
    IsNull,
    Literal,
    bind,
    format_predicate,
    to_duckdb_sql,
)

ROOT = conformance_dir()
MANIFEST = json.loads((ROOT / "manifest.json").read_text())
BOUNDED = {"int", "float", "decimal", "string", "date", "timestamp", "timestamp_tz"}


def latest_rows(entry: dict[str, Any]) -> dict[str, Any] | None:
    for version in entry["versions"]:
        if version["version"] == entry["latest_version"] and version["expect"] == "rows":
            return dict(version)
    return None


TABLES = [entry for entry in MANIFEST["tables"] if latest_rows(entry) is not None]


def finite(value: object) -> bool:
    return not (isinstance(value, float) and math.isnan(value))


def predicates(schema: pa.Schema, expected: pa.Table) -> list[Expr]:
    out: list[Expr] = []
    for field in schema:
        # void (null-typed) columns are left to the engine tests
        if category(field.type) in ("nested", "other", "null"):
            continue
        if field.name not in expected.column_names:
            continue
        column = Column((field.name,))
        out += [IsNull(column), IsNull(column, negated=True)]
        if category(field.type) not in BOUNDED:
            continue
        values = [v for v in expected.column(field.name).to_pylist() if v is not None and finite(v)]
        if not values:
            continue
        for value in {min(values), max(values)}:
            out += [Compare(op, column, Literal(value)) for op in ("=", "<", ">")]
    return out


DATABASE = duckdb.connect()


@pytest.mark.parametrize("entry", TABLES, ids=[entry["name"] for entry in TABLES])
def test_filters_keep_every_matching_row(entry: dict[str, Any]) -> None:
    version = latest_rows(entry)
    assert version is not None
    snapshot = lq.DeltaTable(str(ROOT / entry["path"])).snapshot()
    expected = pq.read_table(ROOT / version["expected_file"])
    checks = predicates(snapshot.schema, expected)
    assert checks, "the table has no column to filter on"
    con = DATABASE.cursor()
    try:
        for predicate in checks:
            text = format_predicate(predicate)
            sql = to_duckdb_sql(bind(predicate, snapshot.schema))
            want = con.from_arrow(expected).query("t", f"SELECT count(*) FROM t WHERE {sql}")
            got = snapshot.scan(filter=text).to_arrow().num_rows
            assert got == want.fetchall()[0][0], text
    finally:
        con.close()
