"""Commit history and commit timestamps (digest §16).

Example:
    >>> import lakequery as lq
    >>> entries = lq.DeltaTable(lq.demo.example_table()).history(limit=1)
    >>> entries[0].operation
    'WRITE'
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from lakequery.duckdb_databases import private_cursor
from lakequery.protocol.log_files import LogFile
from lakequery.protocol.properties import TableProperties
from lakequery.protocol.sql_spelling import glob_list_sql
from lakequery.storage import Storage
from lakequery.storage.engine_errors import commit_read_error


@dataclass(frozen=True)
class CommitEntry:
    """One commit of the table's history."""

    version: int
    timestamp: datetime
    operation: str | None
    parameters: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)


_STR_MAP: Any = pa.map_(pa.string(), pa.string())
HISTORY_SCHEMA = pa.schema(
    [
        ("version", pa.int64()),
        ("timestamp", pa.timestamp("ms", tz="UTC")),
        ("operation", pa.string()),
        ("parameters", _STR_MAP),
        ("metrics", _STR_MAP),
    ]
)


def _as_strings(values: dict[str, Any]) -> list[tuple[str, str]]:
    """Map entries as strings (JSON for non-strings), as Spark's DESCRIBE HISTORY shows."""
    return [(k, v if isinstance(v, str) else json.dumps(v)) for k, v in values.items()]


class History(list[CommitEntry]):
    """The commits :meth:`lakequery.DeltaTable.history` returns, newest first.

    A plain list of :class:`CommitEntry` (indexing, ``len``, equality with lists) that also
    displays as a table in Jupyter and converts to Arrow or pandas, one row per commit
    like Spark's ``DESCRIBE HISTORY``: ``version``, ``timestamp`` (UTC), ``operation``,
    ``parameters`` and ``metrics`` (maps of strings).

    Example:
        >>> import lakequery as lq
        >>> h = lq.DeltaTable(lq.demo.example_table()).history()
        >>> h
        History(3 commits, versions 2..0)
        >>> h.to_arrow().column("version").to_pylist()
        [2, 1, 0]
    """

    def __repr__(self) -> str:
        if not self:
            return "History(0 commits)"
        return f"History({len(self)} commits, versions {self[0].version}..{self[-1].version})"

    def _repr_html_(self) -> str:
        from lakequery.display.html import history_html

        return history_html(self)

    def to_arrow(self) -> pa.Table:
        """One row per commit (see the class docstring for the columns)."""
        return pa.table(
            [
                pa.array([e.version for e in self], pa.int64()),
                pa.array([e.timestamp for e in self], pa.timestamp("ms", tz="UTC")),
                pa.array([e.operation for e in self], pa.string()),
                pa.array([_as_strings(e.parameters) for e in self], _STR_MAP),
                pa.array([_as_strings(e.metrics) for e in self], _STR_MAP),
            ],
            schema=HISTORY_SCHEMA,
        )

    def to_pandas(self) -> Any:
        """:meth:`to_arrow` as a pandas DataFrame (maps become lists of pairs)."""
        return self.to_arrow().to_pandas()


def read_commit_infos(storage: Storage, versions: Sequence[int]) -> dict[int, dict[str, Any]]:
    """``commitInfo`` of each commit by version (commits without one are absent).

    The commits are read as raw lines in one DuckDB pass (like replay does); only the
    ``commitInfo`` line of each is parsed into Python.

    Raises:
        ObjectNotFoundError: a commit file does not exist.
        StorageError: the store failed.
        CorruptLogError: a commit does not parse.
    """
    if not versions:
        return {}
    paths = [storage.join("_delta_log", f"{v:020d}.json") for v in versions]
    con = private_cursor(fixed_joins=False)  # a filter over the lines, no join
    storage.register_duckdb(con)
    files = glob_list_sql([storage.duckdb_path(p) for p in paths])
    try:
        rows = con.sql(
            "SELECT CAST(left(right(filename, 25), 20) AS BIGINT), "
            "CAST(json_extract(json, '$.commitInfo') AS VARCHAR) "
            f"FROM read_ndjson_objects({files}, filename=true) "
            "WHERE json_exists(json, '$.commitInfo')"
        ).fetchall()
    except duckdb.Error as exc:
        raise commit_read_error(exc, storage.join("_delta_log"), paths) from exc
    finally:
        con.close()
    out: dict[int, dict[str, Any]] = {}
    for version, text in rows:
        doc = json.loads(text)
        if isinstance(doc, dict):
            out[int(version)] = doc
    return out


def monotonic_ms(times: Sequence[int]) -> list[int]:
    """File times made strictly increasing: a time not after its predecessor becomes
    predecessor + 1 ms (digest §16)."""
    ts = np.asarray(times, dtype=np.int64)
    idx = np.arange(ts.size, dtype=np.int64)
    return [int(x) for x in np.maximum.accumulate(ts - idx) + idx]


def commit_timestamps(
    storage: Storage, commits: Sequence[LogFile], props: TableProperties
) -> list[int]:
    """The timestamp (ms) of each commit: in-commit timestamps where enabled, else
    monotonised file modification times."""
    file_times = monotonic_ms([c.modified_ms for c in commits])
    if not props.in_commit_timestamps:
        return file_times
    start = props.ict_enablement_version or 0
    ict = read_commit_infos(storage, [c.version for c in commits if c.version >= start])
    out = []
    for c, ft in zip(commits, file_times, strict=True):
        value = ict.get(c.version, {}).get("inCommitTimestamp") if c.version >= start else None
        out.append(int(value) if value is not None else ft)
    return out


def search_range(commits: Sequence[LogFile], props: TableProperties, ms: int) -> tuple[int, int]:
    """``(lo, hi)``: the indices of ``commits`` (ascending) whose timestamps a time
    ``ms`` is searched among (digest §16). From the in-commit timestamp enablement on,
    those with in-commit timestamps; before it, those before (their file times may run
    past the first in-commit timestamp: the two do not make one order)."""
    lo, hi = 0, len(commits)
    at, since = props.ict_enablement_version, props.ict_enablement_timestamp
    if props.in_commit_timestamps and at is not None and since is not None:
        split = bisect.bisect_left([c.version for c in commits], at)
        lo, hi = (split, hi) if ms >= since else (lo, split)
    return lo, hi


def _as_datetime(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


def _decode_parameters(params: Any) -> dict[str, Any]:
    """``operationParameters`` values are JSON-encoded strings; decode what decodes."""
    if not isinstance(params, dict):
        return {}
    out: dict[str, Any] = {}
    for k, v in params.items():
        if isinstance(v, str):
            try:
                out[k] = json.loads(v)
            except ValueError:
                out[k] = v
        else:
            out[k] = v
    return out


def history_entries(
    storage: Storage, commits: Sequence[LogFile], props: TableProperties, limit: int | None
) -> History:
    """History newest first, at most ``limit`` entries."""
    times = commit_timestamps(storage, commits, props)
    chosen = list(zip(commits, times, strict=True))[::-1]
    if limit is not None:
        chosen = chosen[: max(limit, 0)]
    infos = read_commit_infos(storage, [c.version for c, _ in chosen])
    out = History()
    for c, ms in chosen:
        info = infos.get(c.version, {})
        out.append(
            CommitEntry(
                version=c.version,
                timestamp=_as_datetime(int(info.get("inCommitTimestamp", ms))),
                operation=info.get("operation"),
                parameters=_decode_parameters(info.get("operationParameters")),
                metrics=dict(info.get("operationMetrics") or {}),
                info=info,
            )
        )
    return out
