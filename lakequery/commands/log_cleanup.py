"""Expired log cleanup (digest §7.8): delete commits and checkpoints nobody can time-travel to.

1. ``cutoff`` = midnight UTC of ``now - delta.logRetentionDuration`` (30 days);
2. the newest commit whose timestamp (in-commit timestamp where enabled, else the file's
   modification time made monotonic) is at or before ``cutoff``;
3. the newest complete checkpoint at or below that commit; none: nothing is deleted;
4. commits, checkpoints (every kind, also incomplete or empty ones) and ``.crc`` files
   below that checkpoint's version are deleted, oldest first, as are compaction files
   starting at or below it. The checkpoint itself, its commit and everything newer stay,
   so every version inside the retention window remains reconstructable. ``_last_checkpoint``
   is never touched;
5. V2 sidecars (``_delta_log/_sidecars/``) that no remaining checkpoint references and that
   are more than a day old (a checkpoint being written may not reference its sidecars
   yet) are deleted. If a remaining checkpoint cannot be read, no sidecar is deleted.
6. lakequery's own temporary files in ``_delta_log`` (a commit or ``_last_checkpoint``
   written beside its final name, a checkpoint being written) older than ``cutoff`` are
   deleted: what a writer killed mid-write left; a live writer's are seconds old.

:class:`~lakequery.txn.Transaction` runs it after each automatic checkpoint unless
``delta.enableExpiredLogCleanup`` is false; :meth:`lakequery.DeltaTable.cleanup_log`
runs it on demand. Tables with the ``checkpointProtection`` feature are left alone while
``delta.requireCheckpointProtectionBeforeVersion`` lies above the cutoff checkpoint.

Example:
    >>> import pyarrow as pa, lakequery as lq
    >>> uri = "memory://log-cleanup-doc"
    >>> _ = lq.write(uri, pa.table({"x": [1]}))
    >>> lq.DeltaTable(uri).cleanup_log().files_deleted     # nothing is 30 days old
    ()
"""

from __future__ import annotations

import re
import time
from urllib.parse import unquote

from lakequery.commands.metrics import LogCleanupResult
from lakequery.duckdb_databases import private_cursor
from lakequery.errors import CorruptLogError, ObjectNotFoundError
from lakequery.history import monotonic_ms, read_commit_infos
from lakequery.log_reader import LogReader
from lakequery.log_segment import load_state, log_dir
from lakequery.metadata import Metadata
from lakequery.protocol.features import Protocol
from lakequery.protocol.log_files import Listing, build_listing, classify
from lakequery.protocol.properties import TableProperties, parse_bool
from lakequery.storage import Storage

_DAY_MS = 86_400_000
#: Temporary names lakequery writes in ``_delta_log``: ``.<name>.<uuid>.tmp`` (local
#: storage's write beside the final name) and ``.tmp-<uuid>.checkpoint.parquet``.
_OWN_TEMP = re.compile(r"^\.(?:.+\.[0-9a-f]{32}\.tmp|tmp-[0-9a-f]{32}\.checkpoint\.parquet)$")


def cleanup_enabled(configuration: dict[str, str]) -> bool:
    """``delta.enableExpiredLogCleanup`` (default true)."""
    return parse_bool(configuration.get("delta.enableExpiredLogCleanup"), True)


def _cutoff_checkpoint(
    storage: Storage, listing: Listing, props: TableProperties, cutoff: int
) -> int | None:
    """The newest complete checkpoint whose commit is at or before ``cutoff``.

    Commit timestamps only grow with the version, so "the newest checkpoint at or below
    the newest commit older than the cutoff" is the newest checkpoint whose own commit is
    older than the cutoff: only the checkpoint versions' timestamps are needed (file times
    made monotonic over the whole listing, or their in-commit timestamps).
    """
    commits = listing.commits
    file_times = dict(
        zip(
            (c.version for c in commits),
            monotonic_ms([c.modified_ms for c in commits]),
            strict=True,
        )
    )
    candidates = sorted({c.version for c in listing.checkpoints if c.version in file_times})
    ict: dict[int, dict[str, object]] = {}
    if props.in_commit_timestamps:
        start = props.ict_enablement_version or 0
        ict = read_commit_infos(storage, [v for v in candidates if v >= start])
    best = None
    for version in candidates:
        value = ict.get(version, {}).get("inCommitTimestamp")
        ts = int(str(value)) if value is not None else file_times[version]
        if ts <= cutoff:
            best = version
    return best


def cleanup_expired_logs(
    storage: Storage,
    *,
    retention_ms: int | None = None,
    now_ms: int | None = None,
    table: tuple[Metadata, Protocol] | None = None,
) -> LogCleanupResult:
    """Deletes the expired part of ``_delta_log``; see the module docstring.

    Args:
        storage: the table's storage.
        retention_ms: log retention; default ``delta.logRetentionDuration``.
        now_ms: the current time (tests).
        table: the table's metadata and protocol, when the caller has them (a commit
            that just wrote a checkpoint: those of its version); else the latest
            version's are loaded.
    """
    if retention_ms is not None and retention_ms < 0:
        raise ValueError("the log retention must not be negative")  # as VACUUM's
    if table is None:
        state = load_state(storage, None, with_files=False)
        table = (state.metadata, state.protocol)
    metadata, protocol = table
    config = dict(metadata.configuration)
    props = TableProperties(config)
    retention = (
        props.retention_ms("delta.logRetentionDuration")
        if retention_ms is None
        else int(retention_ms)
    )
    now = int(time.time() * 1000) if now_ms is None else now_ms
    cutoff = ((now - retention) // _DAY_MS) * _DAY_MS
    infos = storage.list_from(log_dir(storage), "")
    stale = tuple(i.path for i in infos if _OWN_TEMP.match(i.name) and i.modified_ms < cutoff)
    for path in stale:
        storage.delete(path)
    listing = build_listing((i.path, i.name, i.size, i.modified_ms) for i in infos)
    commits = listing.commits
    if not commits or not listing.checkpoints:
        return LogCleanupResult(None, stale)
    keep_from = _cutoff_checkpoint(storage, listing, props, cutoff)
    if keep_from is None or keep_from <= commits[0].version:
        return LogCleanupResult(keep_from, stale)
    if protocol.supports("checkpointProtection"):
        protected = int(config.get("delta.requireCheckpointProtectionBeforeVersion") or 0)
        if protected > keep_from:
            return LogCleanupResult(keep_from, stale)
    doomed: list[tuple[int, str]] = []
    for info in infos:
        name = classify(info.name)
        if name is None:
            continue
        if (name.kind in ("commit", "checkpoint", "crc") and name.version < keep_from) or (
            name.kind == "compacted" and name.version <= keep_from
        ):
            doomed.append((name.version, info.path))
    doomed.sort()
    for _, path in doomed:
        storage.delete(path)
    sidecars = _unreferenced_sidecars(storage, listing, keep_from, now)
    for path in sidecars:
        storage.delete(path)
    return LogCleanupResult(keep_from, stale + tuple(p for _, p in doomed) + tuple(sidecars))


def _unreferenced_sidecars(
    storage: Storage, listing: Listing, keep_from: int, now: int
) -> list[str]:
    """Sidecars older than a day that no checkpoint at or above ``keep_from`` references
    (digest §7.8 step 6); none when a remaining checkpoint cannot be read."""
    infos = storage.list_from(storage.join("_delta_log", "_sidecars"), "")
    old = [i for i in infos if i.name.endswith(".parquet") and i.modified_ms < now - _DAY_MS]
    if not old:
        return []
    con = private_cursor(fixed_joins=False)  # reads checkpoints' sidecar columns, no join
    try:
        reader = LogReader(storage, con)
        referenced: set[str] = set()
        for checkpoint in listing.checkpoints:
            if checkpoint.version >= keep_from:
                # by file name: sidecar paths in checkpoints are URI-encoded file names
                referenced.update(
                    unquote(p.rsplit("/", 1)[-1]) for p in reader.sidecar_paths(checkpoint)
                )
    except (CorruptLogError, ObjectNotFoundError):
        return []  # keep everything rather than guess what an unreadable checkpoint needs
    finally:
        con.close()
    return sorted(i.path for i in old if i.name not in referenced)


__all__ = ["cleanup_enabled", "cleanup_expired_logs"]
