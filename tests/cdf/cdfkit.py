"""Helpers of the change data feed tests: an independent oracle (deltalake's
``load_cdf``) and order-insensitive comparison of change rows."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pyarrow.compute as pc

import lakequery as lq

CONFORMANCE = Path("/work/shared/conformance/tables")
CDF = {"delta.enableChangeDataFeed": "true"}
CHANGE_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")


def _plain(table: pa.Table) -> pa.Table:
    """View types as plain types and timestamps as integer microseconds (so naive and
    UTC timestamps compare by instant)."""
    cols = []
    for col in table.columns:
        t = col.type
        if t == pa.string_view() or t == pa.large_string():
            col = col.cast(pa.string())
        elif t == pa.binary_view() or t == pa.large_binary():
            col = col.cast(pa.binary())
        elif pa.types.is_timestamp(t):
            col = pc.cast(col.cast(pa.timestamp("us", tz=t.tz)), pa.int64())
        cols.append(col)
    return pa.table(cols, names=table.column_names)


def rows(data: Any, *, timestamps: bool = False) -> Counter[tuple[tuple[str, Any], ...]]:
    """The rows of an Arrow table/reader (or DuckDB/Polars result) as a multiset of
    ``(column, value)`` tuples, column order ignored; ``_commit_timestamp`` is left out
    unless ``timestamps``."""
    table = _as_table(data)
    if not timestamps and "_commit_timestamp" in table.column_names:
        table = table.drop_columns(["_commit_timestamp"])
    table = _plain(table)
    return Counter(tuple(sorted(r.items())) for r in table.to_pylist())


def _as_table(data: Any) -> pa.Table:
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatchReader):
        return data.read_all()
    if hasattr(data, "to_arrow_table"):  # DuckDB relation
        out: pa.Table = data.to_arrow_table()
        return out
    if hasattr(data, "collect"):  # Polars LazyFrame
        return _as_table(data.collect())
    if hasattr(data, "to_arrow"):  # Polars DataFrame
        return pa.table(data.to_arrow())
    raise TypeError(type(data))


def oracle(path: str | Path, start: int, end: int | None = None) -> pa.Table:
    """deltalake's change feed of ``start..end``."""
    dt = deltalake.DeltaTable(str(path))
    reader = dt.load_cdf(starting_version=start, ending_version=end)
    return pa.table(reader.read_all())


def by_version(table: pa.Table) -> dict[int, Counter[tuple[tuple[str, Any], ...]]]:
    """Rows grouped by ``_commit_version``."""
    out: dict[int, Counter[tuple[tuple[str, Any], ...]]] = {}
    versions = table.column("_commit_version").to_pylist()
    for v in sorted(set(versions)):
        mask = pc.equal(table.column("_commit_version"), pa.scalar(v, pa.int64()))
        out[v] = rows(table.filter(mask))
    return out


def simple(data: Any, *cols: str) -> list[tuple[Any, ...]]:
    """Sorted tuples of the given columns (for hand-derived expectations)."""
    table = _plain(_as_table(data))
    picked = table.select(list(cols)).to_pylist()
    return sorted((tuple(r[c] for c in cols) for r in picked), key=repr)


MINUS = {"delete", "update_preimage"}
PLUS = {"insert", "update_postimage"}


def _strip(counter: Counter[tuple[tuple[str, Any], ...]]) -> Counter[tuple[tuple[str, Any], ...]]:
    return Counter(
        {tuple(kv for kv in k if not kv[0].startswith("_")): n for k, n in counter.items()}
    )


def check_every_version(root: str) -> None:
    """Applying each version's changes to the rows before it gives the rows at that
    version (minus delete/update_preimage, plus insert/update_postimage)."""
    dt = lq.DeltaTable(root)
    latest = dt.snapshot().version
    feed = dt.changes(starting_version=0).to_arrow()
    state: Counter[tuple[tuple[str, Any], ...]] = Counter()
    for version in range(latest + 1):
        at = feed.filter(pc.equal(feed.column("_commit_version"), version))
        for change_type, n in Counter(at.column("_change_type").to_pylist()).items():
            assert change_type in MINUS | PLUS, change_type
            assert n > 0
        minus = at.filter(pc.is_in(at.column("_change_type"), pa.array(sorted(MINUS))))
        plus = at.filter(pc.is_in(at.column("_change_type"), pa.array(sorted(PLUS))))
        removed = _strip(rows(minus))
        assert not removed - state, f"version {version} deletes rows that were not there"
        state = state - removed + _strip(rows(plus))
        table = dt.snapshot(version=version).scan().to_arrow()
        assert state == _strip(rows(table)), f"version {version}"
