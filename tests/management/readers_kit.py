"""Independent readers of the management tests' tables: the ``deltalake`` package and
plain pyarrow over the Parquet files."""

from __future__ import annotations

from typing import Any

import deltalake
import pyarrow as pa


def deltalake_table(uri: str) -> pa.Table:
    """What ``deltalake`` reads: its DataFusion ``QueryBuilder`` (which honours reader
    features such as deletion vectors, that ``to_pyarrow_table`` refuses)."""
    dt = deltalake.DeltaTable(uri)
    query = deltalake.QueryBuilder().register("t", dt)
    table = pa.table(query.execute("SELECT * FROM t"))
    views = {pa.string_view(): pa.string(), pa.binary_view(): pa.binary()}
    return table.cast(pa.schema([f.with_type(views.get(f.type, f.type)) for f in table.schema]))


def rows(table: pa.Table, key: str = "id") -> list[dict[str, Any]]:
    """Rows sorted by ``key``, for order-free comparison."""
    out: list[dict[str, Any]] = table.sort_by(key).to_pylist()
    return out
