"""Helpers of the row tracking tests: tables keyed by a unique ``key`` column, the row id
and commit version of every key as each engine reads them, and ``deltalake``'s view."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from pathlib import Path

import pyarrow as pa

import lakequery as lq

TRACKED = {"delta.enableRowTracking": "true"}
COW = {**TRACKED, "delta.enableDeletionVectors": "false"}
DVS = {**TRACKED, "delta.enableDeletionVectors": "true"}


def rows(keys: list[int], value: int = 0) -> pa.Table:
    return pa.table(
        {
            "key": pa.array(keys, pa.int64()),
            "v": pa.array([value] * len(keys), pa.int64()),
        }
    )


def tracked(uri: str | Path) -> dict[int, tuple[int, int]]:
    """key -> (row id, row commit version), as the DuckDB, Arrow and Polars engines read
    them (asserted equal)."""
    scan = lq.DeltaTable(str(uri)).snapshot().scan(columns=["key"], row_tracking=True)
    arrow = scan.to_arrow()
    duck = scan.to_duckdb().to_arrow_table()
    polars = scan.to_polars().collect().to_arrow()
    out = _keyed(arrow)
    assert _keyed(duck) == out, "DuckDB and Arrow disagree on row ids"
    assert _keyed(polars) == out, "Polars and Arrow disagree on row ids"
    assert len(out) == arrow.num_rows, "a key appears twice"
    return out


def _keyed(t: pa.Table) -> dict[int, tuple[int, int]]:
    d = t.to_pydict()
    return {
        k: (i, v) for k, i, v in zip(d["key"], d["_row_id"], d["_row_commit_version"], strict=True)
    }


def values(uri: str | Path) -> dict[int, int]:
    t = lq.DeltaTable(str(uri)).snapshot().scan().to_arrow().to_pydict()
    return dict(zip(t["key"], t["v"], strict=True))


def deltalake_rows(uri: str | Path) -> dict[int, int]:
    """key -> v as ``deltalake`` reads the table (QueryBuilder: it honours DVs), checking
    that it sees no columns beyond the schema's."""
    import deltalake

    dt = deltalake.DeltaTable(str(uri))
    t = pa.table(deltalake.QueryBuilder().register("t", dt).execute("SELECT * FROM t"))
    assert sorted(t.column_names) == ["key", "v"], t.column_names
    d = t.to_pydict()
    return dict(zip(d["key"], d["v"], strict=True))


def latest_version(uri: str | Path) -> int:
    return lq.DeltaTable(str(uri)).snapshot().version


def high_water_mark(uri: str | Path) -> int:
    import json

    snap = lq.DeltaTable(str(uri)).snapshot()
    return int(json.loads(snap.domains["delta.rowTracking"])["rowIdHighWaterMark"])


def check_invariants(uri: str | Path) -> None:
    """Every live file has row ids below the high-water mark and file id ranges do not
    overlap."""
    snap = lq.DeltaTable(str(uri)).snapshot()
    files = snap.files().to_pylist()
    mark = high_water_mark(uri)
    spans = sorted((f["base_row_id"], f["base_row_id"] + f["num_records"]) for f in files)
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert end <= start, f"overlapping baseRowId ranges: {spans}"
    assert all(end - 1 <= mark for _, end in spans), (spans, mark)
    assert all(f["default_row_commit_version"] is not None for f in files)


def config_names(uri: str | Path) -> tuple[str, str]:
    config: Mapping[str, str] = lq.DeltaTable(str(uri)).snapshot().metadata.configuration
    return (
        config["delta.rowTracking.materializedRowIdColumnName"],
        config["delta.rowTracking.materializedRowCommitVersionColumnName"],
    )
