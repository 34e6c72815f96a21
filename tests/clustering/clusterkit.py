"""Helpers of the liquid clustering tests: reading a table with lakequery's engines and
with ``deltalake`` (independent reader), and the log's actions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
from write.writekit import commit_actions, copy_conformance_table, dl_table

import lakequery as lq

__all__ = [
    "adds_of",
    "commit_actions",
    "copy_conformance_table",
    "dl_ids",
    "dl_table",
    "engine_ids",
    "latest_version",
    "lq_ids",
]


def latest_version(uri: str) -> int:
    return max(int(p.name[:20]) for p in (Path(uri) / "_delta_log").glob("*.json"))


def adds_of(uri: str, version: int) -> list[dict[str, Any]]:
    return [a["add"] for a in commit_actions(uri, version) if "add" in a]


def lq_ids(uri: str, column: str = "id") -> list[Any]:
    return sorted(lq.DeltaTable(uri).snapshot().scan().to_arrow().column(column).to_pylist())


def dl_ids(uri: str, column: str = "id") -> list[Any]:
    return sorted(dl_table(uri).column(column).to_pylist())


def engine_ids(uri: str, column: str = "id") -> dict[str, list[Any]]:
    """The column as every lakequery engine reads it (sorted)."""
    scan = lq.DeltaTable(uri).snapshot().scan()
    polars_df = scan.to_polars().collect()
    duck = scan.to_duckdb().to_arrow_table()
    return {
        "arrow": sorted(scan.to_arrow().column(column).to_pylist()),
        "duckdb": sorted(duck.column(column).to_pylist()),
        "polars": sorted(polars_df.get_column(column).to_list()),
    }


def stats_of(add: dict[str, Any]) -> dict[str, Any]:
    stats: dict[str, Any] = json.loads(add["stats"])
    return stats


def ranges(uri: str, version: int, column: str) -> list[tuple[Any, Any]]:
    """(min, max) of ``column`` per file added in ``version``, sorted."""
    out = []
    for a in adds_of(uri, version):
        s = stats_of(a)
        out.append((s["minValues"][column], s["maxValues"][column]))
    return sorted(out)


def table_of(n: int, start: int = 0) -> pa.Table:
    ids = [start + (i * 7919) % n for i in range(n)]  # a permutation: 7919 is prime
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "k": pa.array([i % 13 for i in range(n)], pa.int32()),
            "name": [f"n{i}" for i in range(n)],
        }
    )
