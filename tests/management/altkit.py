"""Helpers of the ALTER tests: small tables, every engine's rows, deltalake's rows, and a
concurrent append committed between an ALTER's snapshot and its commit."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
from tablekit import read_engines

import lakequery as lq
from lakequery.management.alter import TableAlterer


def rows(table: pa.Table, key: str = "id") -> list[dict[str, Any]]:
    """Rows as dicts, sorted by ``key`` then by their text (engine order is free)."""
    return sorted(table.to_pylist(), key=lambda r: (r.get(key) is None, r.get(key), repr(r)))


def engine_tables(uri: str) -> dict[str, pa.Table]:
    """The latest version as read by each lakequery engine."""
    return read_engines(uri)


def assert_engines(uri: str, expected: list[dict[str, Any]], key: str = "id") -> None:
    """Every lakequery engine reads exactly ``expected`` (same columns, same rows)."""
    want = rows(pa.Table.from_pylist(expected), key) if expected else []
    for name, table in engine_tables(uri).items():
        got = rows(table, key)
        assert got == want, f"{name}: {got} != {want}"


def deltalake_rows(uri: str, key: str = "id") -> list[dict[str, Any]]:
    """What ``deltalake`` (an independent reader) reads: its DataFusion QueryBuilder,
    which implements column mapping and deletion vectors."""
    import deltalake

    dt = deltalake.DeltaTable(uri)
    if dt.protocol().min_reader_version >= 2:
        query = deltalake.QueryBuilder().register("t", dt)
        return rows(pa.table(query.execute("SELECT * FROM t").read_all()), key)
    return rows(dt.to_pyarrow_table(), key)


def protocol_of(uri: str) -> tuple[int, int, tuple[str, ...], tuple[str, ...]]:
    p = lq.DeltaTable(uri).snapshot().protocol
    return (
        p.min_reader_version,
        p.min_writer_version,
        tuple(sorted(p.reader_features or ())),
        tuple(sorted(p.writer_features or ())),
    )


def config_of(uri: str) -> dict[str, str]:
    return dict(lq.DeltaTable(uri).snapshot().metadata.configuration)


def plain_table(
    path: str,
    data: pa.Table | None = None,
    *,
    partition_by: Sequence[str] | None = None,
    configuration: dict[str, str] | None = None,
) -> str:
    """A table at ``path``; deletion vectors off unless asked, so the protocol starts at
    (1, 1) and every feature an ALTER adds shows."""
    if data is None:
        data = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "v": ["a", "b", "c"]})
    config = {"delta.enableDeletionVectors": "false", **(configuration or {})}
    lq.write(path, data, partition_by=partition_by, configuration=config)
    return path


def alter_after_concurrent_write(
    uri: str, concurrent: Callable[[], Any], call: Callable[[TableAlterer], Any]
) -> Any:
    """Runs an ALTER planned on the version *before* ``concurrent()`` commits: the ALTER's
    first attempt reads the old snapshot, loses the race and must retry or raise."""
    dt = lq.DeltaTable(uri)
    stale = dt.snapshot()
    concurrent()
    assert lq.DeltaTable(uri).snapshot().version == stale.version + 1
    return call(TableAlterer(dt, snapshot=stale))
