"""Expired log cleanup (digest §7.8): delete commits and checkpoints nobody can time-travel to.

1. ``cutoff`` = midnight UTC of ``now - delta.logRetentionDuration`` (30 days);
2. the newest commit whose timestamp (in-commit timestamp where enabled, else the file's
   modification time made monotonic) is at or before ``cutoff``;
3. the newest complete checkpoint at or below that commit; none: nothing is deleted;
4. commits, checkpoints (every kind, also incomplete or empty ones) and ``.crc`` files
   below that checkpoint's version are deleted, oldest first, as are compaction files
   starting at or below it. The checkpoint itself, its commit and everything newer stay,
   so every version inside the retention window remains reconstructable. ``_last_checkpoint``
   and V2 sidecars are never touched.

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

import time

from lakequery.commands.metrics import LogCleanupResult
from lakequery.history import commit_timestamps
from lakequery.log_segment import load_state, log_dir
from lakequery.protocol.log_files import build_listing, classify
from lakequery.protocol.properties import TableProperties, parse_bool
from lakequery.storage import Storage

_DAY_MS = 86_400_000


def cleanup_enabled(configuration: dict[str, str]) -> bool:
    """``delta.enableExpiredLogCleanup`` (default true)."""
    return parse_bool(configuration.get("delta.enableExpiredLogCleanup"), True)


def cleanup_expired_logs(
    storage: Storage,
    *,
    retention_ms: int | None = None,
    now_ms: int | None = None,
) -> LogCleanupResult:
    """Deletes the expired part of ``_delta_log``; see the module docstring.

    Args:
        storage: the table's storage.
        retention_ms: log retention; default ``delta.logRetentionDuration``.
        now_ms: the current time (tests).
    """
    state = load_state(storage, None, with_files=False)
    config = dict(state.metadata.configuration)
    props = TableProperties(config)
    retention = props.log_retention_ms if retention_ms is None else int(retention_ms)
    now = int(time.time() * 1000) if now_ms is None else now_ms
    cutoff = ((now - retention) // _DAY_MS) * _DAY_MS
    infos = storage.list_from(log_dir(storage), "")
    listing = build_listing((i.path, i.name, i.size, i.modified_ms) for i in infos)
    commits = listing.commits
    if not commits:
        return LogCleanupResult(None, ())
    times = commit_timestamps(storage, commits, props)
    old = [c.version for c, t in zip(commits, times, strict=True) if t <= cutoff]
    if not old:
        return LogCleanupResult(None, ())
    cutoff_commit = max(old)
    checkpoints = [c.version for c in listing.checkpoints if c.version <= cutoff_commit]
    if not checkpoints:
        return LogCleanupResult(None, ())
    keep_from = max(checkpoints)
    if state.protocol.supports("checkpointProtection"):
        protected = int(config.get("delta.requireCheckpointProtectionBeforeVersion") or 0)
        if protected > keep_from:
            return LogCleanupResult(keep_from, ())
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
    return LogCleanupResult(keep_from, tuple(p for _, p in doomed))


__all__ = ["cleanup_enabled", "cleanup_expired_logs"]
