"""VACUUM: delete data, DV and change-data files no version inside the retention window uses.

Digest §15.4. The table directory is listed once (:func:`~lakequery.commands.listing.list_tree`)
and every decision is vectorised over that listing:

- never touched: ``_delta_log`` and every hidden path (a directory or file name starting
  with ``_`` or ``.``), except ``_change_data`` and partition directories (``col=...``);
- kept: files of the latest version and their DV files; files (and DV files) of removes
  younger than the retention (``deletionTimestamp > now - retention``), which are exactly
  the files of the versions committed inside the window; change-data (``cdc``) files
  named by commits inside the window; any file modified inside the window (a write
  still in flight);
- the rest is deleted (or only returned, with ``dry_run=True``, the default).

The retention defaults to ``delta.deletedFileRetentionDuration`` (7 days); a shorter one
raises :class:`~lakequery.errors.RetentionError` unless ``enforce_retention=False``.
The writer protocol is checked first (mandatory with the ``vacuumProtocolCheck``
feature): a table with a writer feature lakequery does not know is refused.

Example:
    >>> import pyarrow as pa, lakequery as lq
    >>> uri = "memory://vacuum-doc"
    >>> _ = lq.write(uri, pa.table({"x": [1]}))
    >>> _ = lq.write(uri, pa.table({"x": [2]}), mode="overwrite")
    >>> import time; time.sleep(0.01)
    >>> dt = lq.DeltaTable(uri)
    >>> len(dt.vacuum().files)                         # inside the 7-day retention
    0
    >>> len(dt.vacuum(retention_hours=0, enforce_retention=False).files)   # dry run
    1
    >>> dt.vacuum(retention_hours=0, enforce_retention=False, dry_run=False).files_deleted
    1
    >>> dt.snapshot().scan().to_arrow().column("x").to_pylist()
    [2]
"""

from __future__ import annotations

import time
from typing import Any

import duckdb
import pyarrow as pa

from lakequery import arrow_kernels as pc
from lakequery.arrow_buffers import int64_scalar, python_array
from lakequery.commands.listing import list_tree
from lakequery.commands.metrics import VacuumResult
from lakequery.commands.progress import ProgressCallback, ProgressReporter
from lakequery.dv.descriptor import Descriptor
from lakequery.errors import RetentionError, StorageError
from lakequery.log_reader import CHECKPOINT, COMMIT_KEYS, COMMITS
from lakequery.log_segment import list_log, loaded_log
from lakequery.protocol.features import check_table_writable
from lakequery.protocol.properties import TableProperties
from lakequery.protocol.replay import replay_tombstones
from lakequery.storage import Storage

_HOUR_MS = 3_600_000
#: Files deleted per filesystem call.
DELETE_BATCH = 1000


def hidden_mask(paths: Any) -> pa.Array[Any]:
    """True where a relative path is hidden from VACUUM (digest §15.4).

    Example:
        >>> hidden_mask(pa.array(["a=1/p.parquet", "_delta_log/0.json", "_change_data/c",
        ...                       ".x/p", "a=1/.p.crc", "_tmp=1/p", "_x/p"])).to_pylist()
        [False, True, False, True, True, False, True]
    """
    # _change_data/ is visible: rename it out of the way before matching hidden names.
    visible: Any = pc.replace_substring_regex(paths, r"(^|/)_change_data/", r"\1change_data/")
    hidden_dir = pc.match_substring_regex(visible, r"(^|/)[_.][^/=]*/")
    hidden_file = pc.match_substring_regex(visible, r"(^|/)[_.][^/]*$")
    out: pa.Array[Any] = pc.or_(hidden_dir, hidden_file)
    return out


def _dv_paths(storage: Storage, dvs: list[Any]) -> list[str]:
    """Relative paths of the on-disk DV files among some ``deletionVector`` structs."""
    root = storage.root.rstrip("/") + "/"
    out = []
    for dv in dvs:
        if not dv or dv.get("storageType") not in ("u", "p"):
            continue
        location = Descriptor.from_dict(dv).absolute_path(storage.root)
        if location.startswith(root):
            out.append(location[len(root) :])
    return out


def _present_dvs(column: Any) -> list[Any]:
    """The non-null ``deletionVector`` structs of a column, as Python dicts (a table's
    files with DVs; the others are not converted)."""
    present = pc.filter(column, pc.is_valid(column))
    return [dv for dv in present.to_pylist() if dv]


def _retained_cdc_paths(storage: Storage, props: TableProperties, cutoff_ms: int) -> list[str]:
    """``cdc`` paths named by commits whose timestamp is inside the window."""
    from urllib.parse import unquote

    from lakequery.duckdb_databases import private_cursor
    from lakequery.history import commit_timestamps
    from lakequery.protocol.sql_spelling import glob_list_sql
    from lakequery.storage.engine_errors import commit_read_error

    commits = list_log(storage, 0).commits
    if not commits:
        return []
    times = commit_timestamps(storage, commits, props)
    recent = [c for c, t in zip(commits, times, strict=True) if t > cutoff_ms]
    if not recent:
        return []
    con = private_cursor(fixed_joins=False)  # one scan, no join
    storage.register_duckdb(con)
    files = glob_list_sql([storage.duckdb_path(c.path) for c in recent])
    try:
        rows = con.sql(
            f"SELECT json_extract_string(json, '$.cdc.path') FROM read_ndjson_objects({files}) "
            "WHERE json_exists(json, '$.cdc')"
        ).fetchall()
    except duckdb.Error as exc:
        paths = [c.path for c in recent]
        raise commit_read_error(exc, storage.join("_delta_log"), paths) from exc
    finally:
        con.close()
    return [unquote(str(p)) for (p,) in rows if p]


def _unreferenced(
    storage: Storage,
    props: TableProperties,
    cutoff: int,
    candidates: pa.Table,
    live: pa.Table,
    tomb: pa.Table,
) -> pa.Table:
    """The candidates no live file, retained tombstone, deletion vector of either or
    retained change-data file names."""
    keep = _dv_paths(storage, _present_dvs(live.column("deletion_vector")))
    if tomb.num_rows:  # (combine_chunks of no chunks would import pandas)
        removes: Any = tomb.column("remove").combine_chunks()
        keep += _dv_paths(storage, _present_dvs(pc.struct_field(removes, "deletionVector")))
    cdc: Any = pc.starts_with(candidates.column("path"), "_change_data/")
    if pc.any(cdc).as_py():
        keep += _retained_cdc_paths(storage, props, cutoff)
    # the data files stay Arrow: no Python string per live file
    chunks = [*live.column("path").chunks, *tomb.column("path").chunks]
    chunks = [pc.cast(c, pa.string()) for c in chunks] + [python_array(keep, pa.string())]
    referenced = pa.concat_arrays(chunks)
    unreferenced: pa.Table = pc.filter(
        candidates, pc.invert(pc.is_in(candidates.column("path"), value_set=referenced))
    )
    return unreferenced


def vacuum(
    storage: Storage,
    *,
    retention_hours: float | None = None,
    dry_run: bool = True,
    enforce_retention: bool = True,
    now_ms: int | None = None,
    progress: ProgressCallback | None = None,
) -> VacuumResult:
    """Finds (and unless ``dry_run`` deletes) the files no retained version needs.

    Args:
        storage: the table's storage.
        retention_hours: how far back versions stay readable; default the table's
            ``delta.deletedFileRetentionDuration``.
        dry_run: only list the files (default).
        enforce_retention: refuse a retention shorter than the table's.
        now_ms: the current time (tests).
        progress: called as batches of files are deleted.

    Returns:
        :class:`~lakequery.commands.metrics.VacuumResult`.

    Raises:
        RetentionError: the retention is below the table's and ``enforce_retention``.
        UnsupportedFeatureError: the table needs a writer lakequery is not.
    """
    started = time.monotonic()
    now = int(time.time() * 1000) if now_ms is None else now_ms
    # one load of the log: the live files, then (only when some file is old enough to
    # go) the tombstones from the same loaded actions, as the checkpoint writer does
    con: duckdb.DuckDBPyConnection | None = None
    try:
        with loaded_log(storage, None, with_files=True) as (state, con):
            meta, proto = state.metadata, state.protocol
            check_table_writable(proto, meta.schema, meta.configuration)  # vacuumProtocolCheck
            props = TableProperties(meta.configuration)
            table_ms = props.retention_ms("delta.deletedFileRetentionDuration")
            if retention_hours is not None and not retention_hours >= 0:  # NaN included
                raise ValueError(f"retention_hours must not be negative, not {retention_hours}")
            retention_ms = (
                table_ms
                if retention_hours is None
                else int(min(retention_hours * _HOUR_MS, now))  # beyond 1970: keep all
            )
            if enforce_retention and retention_ms < table_ms:
                raise RetentionError(storage.root, retention_ms / _HOUR_MS, table_ms / _HOUR_MS)
            cutoff = now - retention_ms

            listing = list_tree(storage)
            paths = listing.column("path")
            old = pc.less(listing.column("modified_ms"), int64_scalar(cutoff))
            candidates = pc.filter(listing, pc.and_(pc.invert(hidden_mask(paths)), old))
            if candidates.num_rows:
                tomb = replay_tombstones(
                    con,
                    commit_keys=COMMIT_KEYS,
                    commits=COMMITS,
                    checkpoint=CHECKPOINT,
                    cutoff_ms=cutoff,
                )
                candidates = _unreferenced(storage, props, cutoff, candidates, state.files, tomb)
    finally:
        if con is not None:
            con.close()
    chosen = [storage.join(str(p)) for p in candidates.column("path").to_pylist()]
    nbytes = int(pc.sum(candidates.column("size")).as_py() or 0)
    deleted = 0
    if not dry_run and chosen:
        sizes = [int(s or 0) for s in candidates.column("size").to_pylist()]
        with ProgressReporter("VACUUM", len(chosen), nbytes, callback=progress) as reporter:
            for start in range(0, len(chosen), DELETE_BATCH):
                batch = chosen[start : start + DELETE_BATCH]
                native = [storage._fs_path(p) for p in batch]
                with storage._translate(batch[0], "delete"):
                    try:
                        storage.fs.rm(native)
                    except FileNotFoundError:  # raced with another VACUUM: delete one by one
                        for p in batch:
                            storage.delete(p)
                deleted += len(batch)
                reporter.advance(len(batch), sum(sizes[start : start + DELETE_BATCH]))
    if not dry_run and deleted != len(chosen):
        raise StorageError(storage.root, "vacuum", "not every file could be deleted")
    return VacuumResult(
        dry_run=dry_run,
        files=tuple(chosen),
        files_deleted=deleted,
        bytes=nbytes,
        files_listed=listing.num_rows,
        retention_hours=retention_ms / _HOUR_MS,
        duration_ms=int((time.monotonic() - started) * 1000),
    )


__all__ = ["hidden_mask", "vacuum"]
