"""Bringing a loaded table state up to date: one LIST, then only the new commits.

``update_state(storage, state)`` lists ``_delta_log`` from the state's version. When
nothing new is listed it returns the very same state (no replay). Otherwise the new
commits are loaded like any segment (:class:`~lakequery.log_reader.LogReader`) and
replayed with the same SQL as a fresh load (:func:`~lakequery.protocol.replay.replay_files`,
:func:`~lakequery.protocol.replay.latest_non_file_actions`), with the state's live files
as the base in place of a checkpoint: a base file survives unless a new commit names its
(path, DV id) key — exactly the rule applied to checkpoint rows (digest §6). Non-file
actions follow the same "newest wins" rule (protocol, metaData, txn per appId, domain per
name). A fresh replay is used instead when the state cannot be a base (synthetic or
metadata-only states, a replaced table, a cleaned-up commit) or when the partition
columns change, and when a newer checkpoint appeared and more than
:data:`INCREMENTAL_MAX_COMMITS` commits would have to be applied.

``latest_state(storage, known)`` is what ``DeltaTable.snapshot()`` uses: it updates the
state the caller knows, else the one this process last loaded for the table (small
tables only, see :data:`CACHE_MAX_BYTES`), else replays from scratch.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from lakequery import arrow_kernels as pc
from lakequery.arrow_buffers import bool_array
from lakequery.errors import CorruptLogError
from lakequery.log_reader import CHECKPOINT, COMMIT_KEYS, COMMITS, LogReader, replay_cursor
from lakequery.log_segment import (
    TableState,
    _unexpired_txns,
    check_files,
    list_log,
    load_state,
    log_dir,
    partition_specs,
)
from lakequery.metadata import Metadata
from lakequery.protocol.features import Protocol, check_readable
from lakequery.protocol.log_files import Listing, LogFile, LogSegment, select_segment
from lakequery.protocol.properties import TableProperties
from lakequery.protocol.replay import (
    dv_unique_id_sql,
    key_hash_sql,
    latest_non_file_actions,
    partition_value_sql,
    replay_files,
)
from lakequery.protocol.schema import PrimitiveType, validate_type_changes
from lakequery.storage import Storage
from lakequery.storage.engine_errors import log_storage_failure

#: With a newer checkpoint listed, apply at most this many commits incrementally; beyond,
#: a replay from that checkpoint reads less.
INCREMENTAL_MAX_COMMITS = 256
#: Latest states kept per process for tables opened again (``lq.DeltaTable(p).snapshot()``
#: in a loop): only states whose live-file table holds at most this many bytes of Arrow
#: buffers (``get_total_buffer_size``: the memory kept, slices' whole buffers included;
#: ~10x cheaper than ``nbytes`` on a table of many chunks) ...
CACHE_MAX_BYTES = 16 * 1024 * 1024
#: ... and at most this many tables (least recently used dropped first).
CACHE_MAX_TABLES = 64
#: An updated state's live-file table is regrouped once it has more chunks than this:
#: each update appends the new winners (and the slices around superseded base rows) as
#: chunks of their own, and every Arrow operation on the table, planning and the engines'
#: layout included, pays per chunk (600 one-commit updates took a small table's update
#: from 22 to 38 ms). Regrouping (:func:`_few_chunks`) copies only runs of small chunks,
#: so a long-running reader (a stream consumer, a service appending to a table) stays at
#: the cost of its first updates, on a table of 200,000 files too.
MAX_CHUNKS = 64
#: Regrouping joins runs of consecutive short chunks (fewer rows than this) into chunks
#: of up to :data:`REGROUP_ROWS` rows; a longer chunk is kept as it is, never copied.
SHORT_CHUNK_ROWS = 4096
REGROUP_ROWS = 64 * 1024

_CACHE: OrderedDict[tuple[str, str, str], TableState] = OrderedDict()
_CACHE_LOCK = threading.Lock()


def _cache_key(storage: Storage) -> tuple[str, str, str]:
    return (type(storage).__name__, storage.root, repr(sorted((storage.options or {}).items())))


def _remember(storage: Storage, state: TableState) -> None:
    key = _cache_key(storage)
    with _CACHE_LOCK:
        if state.segment is None or state.files.get_total_buffer_size() > CACHE_MAX_BYTES:
            _CACHE.pop(key, None)
            return
        _CACHE[key] = state
        _CACHE.move_to_end(key)
        while len(_CACHE) > CACHE_MAX_TABLES:
            _CACHE.popitem(last=False)


def forget(storage: Storage) -> None:
    """Drops this process's cached latest state of the table (if any)."""
    with _CACHE_LOCK:
        _CACHE.pop(_cache_key(storage), None)


def latest_state(storage: Storage, known: TableState | None = None) -> TableState:
    """The latest state of the table: ``known`` (or this process's cached state of the
    table) brought up to date by :func:`update_state`, else a fresh replay."""
    if known is None:
        with _CACHE_LOCK:
            known = _CACHE.get(_cache_key(storage))
    state = update_state(storage, known) if known is not None else load_state(storage, None)
    _remember(storage, state)
    return state


def still_listed(storage: Storage, state: TableState) -> bool:
    """Whether the log still holds the file ``state`` was replayed up to, as it was (one
    LIST from its version): False once the table was replaced, or its log cleaned up
    past it."""
    segment = state.segment
    return segment is not None and _same_base(list_log(storage, state.version), segment)


def update_state(
    storage: Storage, state: TableState, con: duckdb.DuckDBPyConnection | None = None
) -> TableState:
    """The latest state of the table, from ``state`` plus the commits after it.

    Returns ``state`` itself when the log holds nothing newer (one LIST). The result equals
    a fresh replay of the latest version (files, DVs, stats, protocol, metadata, txns,
    domains and the segment a fresh load would pick).
    """
    segment = state.segment
    if segment is None or not state.files.num_columns or state.raw_txns is None:
        return load_state(storage, None, con)  # synthetic or metadata-only: no base
    listing = list_log(storage, state.version)  # (still_listed's test, on this listing)
    if not _same_base(listing, segment):
        # the state's last file is gone or changed (log cleanup, a replaced table)
        return load_state(storage, None, con)
    new = tuple(c for c in listing.commits if c.version > state.version)
    if not new:
        return _with_newer_checkpoint(state, listing)
    checkpoints = {c.sort_key: c for c in listing.checkpoints}
    if segment.checkpoint is not None:
        checkpoints.setdefault(segment.checkpoint.sort_key, segment.checkpoint)
    merged = Listing(segment.commits + new, tuple(checkpoints[k] for k in sorted(checkpoints)))
    target = select_segment(merged, None, uri=storage.root)
    contiguous = all(c.version == state.version + 1 + i for i, c in enumerate(new))
    newer_checkpoint = target.checkpoint is not None and target.checkpoint != segment.checkpoint
    if not contiguous or (newer_checkpoint and len(new) > INCREMENTAL_MAX_COMMITS):
        return load_state(storage, None, con, listing=merged)
    cur = con or replay_cursor(None, new)
    reader = LogReader(storage, cur)
    try:
        reader.load(None, new)
        updated = _apply(storage, cur, reader, state, new, target)
    except duckdb.Error as exc:
        failure = log_storage_failure(exc, [c.path for c in new], log_dir(storage))
        if failure is not None:
            raise failure from exc
        raise CorruptLogError(new[-1].path, str(exc).splitlines()[0][:300]) from exc
    finally:
        if con is None:
            cur.close()  # and with it what the reader made (~0.1 ms, dropping them ~1 ms)
        else:
            reader.drop()
    return updated if updated is not None else load_state(storage, None, con, listing=merged)


def _with_newer_checkpoint(state: TableState, listing: Listing) -> TableState:
    """``state``, or the same state over a checkpoint of its version written since (so
    that later work, e.g. tombstones, reads what a fresh load would)."""
    segment = state.segment
    at_version = [c for c in listing.checkpoints if c.version == state.version]
    if not at_version or at_version[-1] == segment.checkpoint:
        return state
    if segment.checkpoint is not None and segment.checkpoint.sort_key >= at_version[-1].sort_key:
        return state
    return state._replace(segment=LogSegment(state.version, at_version[-1], ()))


def _same_base(listing: Listing, segment: LogSegment) -> bool:
    """Whether the newest file of ``segment`` is still listed as it was."""
    last: tuple[LogFile, ...]
    if segment.commits:
        last = (segment.commits[-1],)
    elif segment.checkpoint is not None:
        last = segment.checkpoint.files
    else:
        return False
    listed = {f.path: f for f in listing.commits}
    for cp in listing.checkpoints:
        listed.update((f.path, f) for f in cp.files)
    return all(
        (seen := listed.get(f.path)) is not None
        and (seen.size, seen.modified_ms, seen.etag) == (f.size, f.modified_ms, f.etag)
        for f in last
    )


def _raw_partition_sql(metadata: Metadata, protocol: Protocol) -> list[str]:
    return [
        partition_value_sql(key, t.name if isinstance(t, PrimitiveType) else "")
        for _, key, t in partition_specs(metadata, protocol)
    ]


def _apply(
    storage: Storage,
    con: duckdb.DuckDBPyConnection,
    reader: LogReader,
    state: TableState,
    new: tuple[LogFile, ...],
    segment: LogSegment,
) -> TableState | None:
    """Replays the loaded new commits on top of ``state`` (None: the partition columns
    changed, so the base files' raw partition values no longer fit; replay afresh)."""
    found = latest_non_file_actions(con, reader.non_file_actions_sql())
    protocol = state.protocol
    if found["protocol"]:
        protocol = Protocol.from_action(found["protocol"][0][1])
        check_readable(protocol)
    metadata = state.metadata
    if found["metaData"]:
        metadata = Metadata.from_action(found["metaData"][0][1])
        validate_type_changes(metadata.schema)
    partition_sql = _raw_partition_sql(metadata, protocol)
    if partition_sql != _raw_partition_sql(state.metadata, state.protocol):
        return None
    added = replay_files(
        con,
        commit_keys=COMMIT_KEYS,
        commits=COMMITS,
        checkpoint=CHECKPOINT,  # empty: the base plays the checkpoint's part below
        partition_sql=partition_sql,
        small=reader.small,
        where=log_dir(storage),
    )
    _, added_plain = check_files(storage, added)
    files = _merge_files(con, state.files, added)
    raw_txns: dict[str, Mapping[str, Any]] = dict(state.raw_txns or {})
    raw_txns.update((str(t["appId"]), t) for _, t in found["txn"])
    domains = dict(state.domains)
    for _, d in found["domainMetadata"]:
        if d.get("removed"):
            domains.pop(str(d["domain"]), None)
        else:
            domains[str(d["domain"])] = str(d.get("configuration") or "")
    txns = _unexpired_txns(
        raw_txns, TableProperties(metadata.configuration), int(time.time() * 1000)
    )
    # files_found stays False: the files carried over were found at an earlier load
    return TableState(
        new[-1].version,
        protocol,
        metadata,
        files,
        txns,
        domains,
        segment,
        raw_txns,
        plain_paths=state.plain_paths and added_plain,  # removes only take paths away
    )


def _merge_files(con: duckdb.DuckDBPyConnection, base: pa.Table, added: pa.Table) -> pa.Table:
    """The base files no new commit names (by path and DV id), then the new winners (in
    few chunks: :func:`_few_chunks`)."""
    merged = _without_rows(base, _superseded(con, base))
    if added.num_rows:
        if added.schema != merged.schema:
            added = pc.cast_columns(added, merged.schema)
        merged = pa.concat_tables([merged, added])
    return _few_chunks(merged)


def _few_chunks(table: pa.Table) -> pa.Table:
    """``table``, or with more than :data:`MAX_CHUNKS` chunks the same rows in the same
    order with each run of short chunks joined (:data:`SHORT_CHUNK_ROWS`): the one-file
    chunks updates leave become one, and the long chunks of the load are not copied
    (``combine_chunks`` would copy a 200,000-file table at every 64th update, ~0.15 s)."""
    if not table.num_columns or table.column(0).num_chunks <= MAX_CHUNKS:
        return table
    groups: list[list[pa.RecordBatch]] = []
    rows = REGROUP_ROWS  # no open group
    for batch in table.to_batches():  # a few dozen batches, not rows
        if batch.num_rows >= SHORT_CHUNK_ROWS:
            groups.append([batch])
            rows = REGROUP_ROWS
            continue
        if rows + batch.num_rows > REGROUP_ROWS:
            groups.append([])
            rows = 0
        groups[-1].append(batch)
        rows += batch.num_rows
    batches = [g[0] if len(g) == 1 else pa.concat_batches(g) for g in groups]  # type: ignore[attr-defined]
    return pa.Table.from_batches(batches, schema=table.schema)


def _superseded(con: duckdb.DuckDBPyConnection, base: pa.Table) -> list[int]:
    """Sorted positions of the base files whose replay key (path, DV id) an action of the
    new commits has. Paths are matched in Arrow first; only those few candidates are
    keyed, with the same SQL as the commits' keys (no Arrow table is registered: that
    would import pandas)."""
    # fetched as Arrow: an Arrow array built from a Python list would import pandas
    keys = (
        con.sql(f"SELECT DISTINCT key FROM {COMMITS} WHERE key IS NOT NULL")
        .to_arrow_reader()
        .read_all()
        .column(0)
    )
    if len(keys) == 0 or base.num_rows == 0:
        return []
    value_set = pc.cast(pa.concat_arrays(keys.chunks), pa.string())
    hit = pc.is_in(base.column("path"), value_set=value_set)
    at = pc.indices_nonzero(hit)
    if len(at) == 0:
        return []
    positions = [int(p) for p in at.to_pylist() if p is not None]
    rows = pc.take(base.select(["path", "deletion_vector"]), at).to_pylist()
    values = ", ".join(
        f"({pos}, {_lit(r['path'])}, {_lit((r['deletion_vector'] or {}).get('storageType'))}, "
        f"{_lit((r['deletion_vector'] or {}).get('pathOrInlineDv'))}, "
        f"{_int((r['deletion_vector'] or {}).get('offset'))})"
        for pos, r in zip(positions, rows, strict=True)
    )
    dv = 'struct_pack(storageType := st, pathOrInlineDv := pid, "offset" := off)'
    key = key_hash_sql("path", dv_unique_id_sql(dv))
    found = con.execute(
        f"SELECT pos FROM (SELECT CAST(pos AS BIGINT) AS pos, CAST(path AS VARCHAR) AS path, "
        f"CAST(st AS VARCHAR) AS st, CAST(pid AS VARCHAR) AS pid, CAST(off AS INTEGER) AS off "
        f"FROM (VALUES {values}) AS t(pos, path, st, pid, off)) "
        f"WHERE {key} IN (SELECT h FROM {COMMIT_KEYS} WHERE h IS NOT NULL)"
    ).fetchall()
    return sorted(int(pos) for (pos,) in found)


def _lit(text: str | None) -> str:
    return "NULL" if text is None else "'" + str(text).replace("'", "''") + "'"


def _int(value: int | None) -> str:
    return "NULL" if value is None else str(int(value))


def _without_rows(table: pa.Table, gone: list[int]) -> pa.Table:
    """``table`` without the rows at the sorted positions ``gone``: zero-copy slices
    between them when they are few, a filter otherwise."""
    if not gone:
        return table
    if len(gone) > 1024:
        keep = np.ones(table.num_rows, dtype=bool)
        keep[np.asarray(gone, dtype=np.int64)] = False
        kept: pa.Table = pc.filter(table, bool_array(keep))
        return kept
    pieces, start = [], 0
    for pos in gone:
        if pos > start:
            pieces.append(table.slice(start, pos - start))
        start = pos + 1
    pieces.append(table.slice(start))
    return pa.concat_tables(pieces)


__all__ = [
    "CACHE_MAX_BYTES",
    "CACHE_MAX_TABLES",
    "INCREMENTAL_MAX_COMMITS",
    "MAX_CHUNKS",
    "REGROUP_ROWS",
    "SHORT_CHUNK_ROWS",
    "forget",
    "latest_state",
    "update_state",
]
