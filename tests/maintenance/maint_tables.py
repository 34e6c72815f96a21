"""Helpers for the maintenance tests: tables with deletion vectors, and the rows every
reader (lakequery's three engines and deltalake) returns."""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import deltalake
import numpy as np
import pyarrow as pa

import lakequery as lq
from lakequery.commands.file_actions import add_actions
from lakequery.dv.writer import DeletionVectorWriter
from lakequery.txn import Transaction

DV_CONFIG = {"delta.enableDeletionVectors": "true"}


def sample_batch(start: int, n: int, parts: Sequence[str] = ("a", "b")) -> pa.Table:
    """Rows with every clusterable type; ``p`` cycles over ``parts``."""
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table(
        {
            "id": ids,
            "x": (ids * 0.5).astype(np.float64),
            "s": [f"v{i % 97:03d}" for i in ids],
            "d": pa.array([dt.date(2026, 1, 1) + dt.timedelta(days=int(i % 40)) for i in ids]),
            "ts": pa.array(
                [
                    dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(seconds=int(i))
                    for i in ids
                ],
                pa.timestamp("us", "UTC"),
            ),
            "dec": pa.array([decimal.Decimal(int(i)) / 100 for i in ids], pa.decimal128(10, 2)),
            "flag": pa.array([bool(i % 3) if i % 7 else None for i in ids], pa.bool_()),
            "p": [parts[int(i) % len(parts)] for i in ids],
        }
    )


def delete_rows(uri: str, choose: Callable[[str, int], Sequence[int]]) -> int | None:
    """Deletes, with deletion vectors, the positions ``choose(path, num_records)`` picks
    in each live file; returns the committed version (None when nothing was chosen)."""
    table = lq.DeltaTable(uri)
    snap = table.snapshot()
    files = snap.files()
    adds = add_actions(snap, files, data_change=True)
    writer = DeletionVectorWriter(table.storage)
    chosen = False
    for add, path, n in zip(
        adds, files.column("path").to_pylist(), files.column("num_records").to_pylist(), strict=True
    ):
        rows = sorted(set(choose(path, int(n))))
        if rows:
            writer.delete_rows(add, rows)
            chosen = True
    if not chosen:
        return None
    txn = Transaction(table.storage, snap, operation="DELETE")
    txn.read_files(files.column("path").to_pylist())
    txn.add_actions(writer.finish())
    return txn.commit().version


def normalise(t: pa.Table) -> list[tuple[Any, ...]]:
    """Rows as sorted tuples over the columns in name order (types unified)."""
    names = sorted(t.column_names)
    cols = []
    for n in names:
        col = t.column(n)
        if pa.types.is_timestamp(col.type):
            col = col.cast(pa.timestamp("us", "UTC"))
        if pa.types.is_large_string(col.type) or pa.types.is_string_view(col.type):
            col = col.cast(pa.string())
        cols.append(col.to_pylist())
    return sorted(zip(*cols, strict=True), key=repr) if cols else []


def lakequery_rows(uri: str, version: int | None = None) -> dict[str, list[tuple[Any, ...]]]:
    scan = lq.DeltaTable(uri).snapshot(version=version).scan()
    return {
        "to_arrow": normalise(scan.to_arrow()),
        "to_duckdb": normalise(scan.to_duckdb().to_arrow_table()),
        "to_polars": normalise(scan.to_polars().collect().to_arrow()),
    }


def deltalake_rows(root: str | Path, version: int | None = None) -> list[tuple[Any, ...]]:
    table = deltalake.DeltaTable(str(root), version=version)
    reader = deltalake.QueryBuilder().register("t", table).execute("select * from t")
    return normalise(pa.table(reader.read_all()))


def assert_readers_agree(
    uri: str, expected: list[tuple[Any, ...]], *, deltalake_too: bool = True
) -> None:
    got = lakequery_rows(uri)
    if deltalake_too:
        got["deltalake"] = deltalake_rows(uri)
    wrong = {k: len(v) for k, v in got.items() if v != expected}
    assert not wrong, f"readers disagree with the expected {len(expected)} rows: {wrong}"
