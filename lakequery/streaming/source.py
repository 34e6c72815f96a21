"""Reading a table as a stream of micro-batches (the table as a message queue).

Semantics follow delta-spark's streaming source:

* Without a starting version the stream starts with the snapshot it opens (every live
  file, deletion vectors applied), then the commits after it in version order; with
  ``starting_version`` (or ``starting_timestamp``) it starts with that commit's files.
* A commit whose file actions all have ``dataChange=false`` (OPTIMIZE, a purge) delivers
  nothing: its rows were delivered when first appended.
* A commit that removes data (DELETE, UPDATE, MERGE, overwrite: a ``remove`` with
  ``dataChange=true``) is refused with :class:`~lakequery.errors.StreamError` naming the
  version, unless ``ignore_deletes`` (a commit that only removes whole files is passed
  over) or ``skip_change_commits`` (every such commit is passed over, its adds too), or
  ``read_change_feed=True``, where each batch is the change feed of its commits.
* An additive schema change (a new column) is read through; any other schema or
  partitioning change is refused.

The commits of a range are parsed in one DuckDB statement, the same parse the change
feed uses (:mod:`lakequery.cdf`), and a batch's files become the live files of a
synthetic snapshot, scanned by the usual engines. ``follow=True`` lists ``_delta_log``
from the next version every ``poll_interval`` seconds (never a full listing).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from lakequery import arrow_kernels as pc
from lakequery import cdf
from lakequery.arrow_buffers import int64_array, int64_scalar, int_values
from lakequery.cdf import ChangeScan
from lakequery.errors import StreamError, VersionNotFoundError
from lakequery.log_reader import replay_cursor
from lakequery.log_segment import TableState, list_log, load_state
from lakequery.metadata import Metadata
from lakequery.protocol.change_feed import non_additive_change
from lakequery.protocol.features import Protocol, check_readable
from lakequery.protocol.replay import key_sql
from lakequery.streaming.batch import StreamBatch
from lakequery.streaming.offsets import StreamOffset

if TYPE_CHECKING:
    from pyarrow.compute import Expression

    from lakequery.protocol.log_files import Listing
    from lakequery.scan import Scan
    from lakequery.snapshot import Snapshot
    from lakequery.table import DeltaTable


@dataclass
class _Options:
    columns: list[str] | None
    filter: str | Expression | None
    max_files: int | None
    max_bytes: int | None
    ignore_deletes: bool
    skip_change_commits: bool
    read_change_feed: bool


@dataclass
class _Commits:
    """What a range of commits holds for a stream."""

    adds: pa.Table  # cdf task columns + ``index``, ordered by (version, index)
    versions: list[int]  # every version of the range
    schema_changes: dict[int, tuple[dict[str, Any] | None, dict[str, Any] | None]]
    removing: set[int]  # versions with a remove of dataChange=true
    adding: set[int]  # versions with an add of dataChange=true


def _read_commits(dt: DeltaTable, listing: Listing, first: int, last: int) -> _Commits | None:
    """The commits ``first..last`` of ``listing`` parsed (None when it has none of them)."""
    commits = [c for c in listing.commits if first <= c.version <= last]
    if not commits:
        return None
    versions = [c.version for c in commits]
    if versions != list(range(first, first + len(versions))):
        raise StreamError(dt.uri, "a commit is missing from the log", version=first)
    con = replay_cursor(None, commits)  # the commits become a table: see replay_cursor
    try:
        cdf._load_actions(con, dt.storage, commits)
        table = cdf._ACTIONS
        counts = con.sql(
            "SELECT version, "
            "count(*) FILTER (WHERE add IS NOT NULL AND coalesce(add.dataChange, true)), "
            "count(*) FILTER (WHERE remove IS NOT NULL AND coalesce(remove.dataChange, true)) "
            f"FROM {table} GROUP BY version"
        ).fetchall()
        a = "add"
        adds = con.sql(
            f"SELECT version, {key_sql(f'{a}.path', dt.storage.root)} AS path, {a}.size AS size, "
            f"{a}.partitionValues AS pv, {a}.stats AS stats, {a}.deletionVector AS dv, "
            f"TRY_CAST(json_extract_string({a}.stats, '$.numRecords') AS BIGINT) AS num_records, "
            f"CAST(row_number() OVER (PARTITION BY version ORDER BY {a}.path) - 1 AS BIGINT) "
            f"AS index, count(*) OVER (PARTITION BY version) AS files_in_version "
            f"FROM {table} WHERE {a} IS NOT NULL AND coalesce({a}.dataChange, true) "
            "ORDER BY version, index"
        ).to_arrow_table()
        schema_changes = cdf._metadata_changes(con)
    finally:
        con.close()
    return _Commits(
        adds=adds,
        versions=versions,
        schema_changes=schema_changes,
        removing={int(v) for v, _, r in counts if r},
        adding={int(v) for v, n, _ in counts if n},
    )


class _Stream:
    """The state of one stream: the metadata in force and the batches."""

    def __init__(self, dt: DeltaTable, opts: _Options, metadata: Metadata, protocol: Protocol):
        self.dt = dt
        self.opts = opts
        self.storage = dt.storage
        self.metadata = metadata
        self.protocol = protocol
        #: the last position to deliver (inclusive), or None: up to the latest commit
        self.until: StreamOffset | None = None

    def columns(self) -> list[str]:
        names = [f.name for f in self.metadata.schema]
        if self.opts.columns is None:
            return names
        missing = [c for c in self.opts.columns if c not in names]
        if missing:
            raise StreamError(self.dt.uri, f"no column {missing[0]!r} in the table ({names})")
        return list(self.opts.columns)

    def scan_of(self, version: int, files: pa.Table) -> Scan:
        """A scan of ``files`` (rows of a replay's file table) as one snapshot's files."""
        return cdf._scan(
            self.storage,
            version,
            self.protocol,
            self.metadata,
            cdf._fill_counts(self.storage, files),
            self.columns(),
            self.opts.filter,
        )

    def cuts(self, sizes: pa.ChunkedArray[Any], start: int) -> Iterator[tuple[int, int]]:
        """``[lo, hi)`` ranges from ``start`` within the batch limits (at least one file
        per batch)."""
        n = len(sizes)
        max_files, max_bytes = self.opts.max_files, self.opts.max_bytes
        running = np.cumsum(int_values(sizes)) if max_bytes is not None else None
        lo = start
        while lo < n:
            hi = n if max_files is None else min(n, lo + max_files)
            if running is not None and max_bytes is not None:
                base = int(running[lo - 1]) if lo else 0
                fit = int(((running[lo:hi] - base) <= max_bytes).sum())
                hi = lo + max(1, fit)
            yield lo, hi
            lo = hi

    # -- the snapshot the stream starts from ---------------------------------------------
    def snapshot_batches(self, snap: Snapshot, after: int) -> Iterator[StreamBatch]:
        """The starting snapshot's files after index ``after``, in batches."""
        files = snap._state.files
        order = pc.sort_indices(
            files, sort_keys=[("modification_time", "ascending"), ("path", "ascending")]
        )
        files = pc.take(files, order)
        n, v, table_id = files.num_rows, snap.version, snap.metadata.id
        until = self.until
        if until is not None and until.snapshot and until.version == v:
            n = min(n, until.index + 1)
            files = files.slice(0, n)
        for lo, hi in self.cuts(files.column("size"), after + 1):
            part = files.slice(lo, hi - lo)
            done = hi == n  # the last snapshot file: next come the commits after it
            offset = (
                StreamOffset(v + 1, -1, False, table_id)
                if done
                else StreamOffset(v, hi - 1, True, table_id)
            )
            if self.opts.read_change_feed:  # every row an insert at the snapshot's version
                inserts = cdf.inserts_scan(
                    self.storage, snap, part, self.opts.columns, self.opts.filter
                )
                scan = ChangeScan(v, v, [inserts], inserts.output_schema.names)
            else:
                scan = ChangeScan(v, v, [self.scan_of(v, part)], self.columns())
            yield StreamBatch(scan, offset, _bytes(part))

    # -- commits after it ----------------------------------------------------------------
    def schema_error(self, version: int, change: tuple[Any, Any]) -> StreamError | None:
        """Applies a commit's metaData/protocol; the error when a stream cannot go on."""
        meta_action, proto_action = change
        protocol = Protocol.from_action(proto_action) if proto_action else self.protocol
        check_readable(protocol)
        metadata = Metadata.from_action(meta_action) if meta_action else self.metadata
        if meta_action:
            if metadata.id != self.metadata.id:
                return StreamError(self.dt.uri, "the table was replaced", version=version)
            why = non_additive_change(self.metadata, self.protocol, metadata, protocol)
            if why:
                return StreamError(
                    self.dt.uri,
                    f"the schema changed in a non-additive way ({why}); start a new stream",
                    version=version,
                )
        self.metadata, self.protocol = metadata, protocol
        return None

    def plan_versions(self, commits: _Commits) -> tuple[list[int], StreamError | None]:
        """The versions passed over, and the error at the first version the stream
        cannot go past (its files and later ones are not delivered)."""
        opts, skip = self.opts, list[int]()
        for v in commits.versions:
            if v in commits.schema_changes:
                error = self.schema_error(v, commits.schema_changes[v])
                if error is not None:
                    return skip, error
            if v not in commits.removing or opts.read_change_feed:
                continue
            if opts.skip_change_commits or (opts.ignore_deletes and v not in commits.adding):
                skip.append(v)
                continue
            return skip, StreamError(
                self.dt.uri,
                "the commit removes or rewrites data already in the stream (DELETE, UPDATE, "
                "MERGE or an overwrite); pass ignore_deletes=True (for commits that only "
                "delete files), skip_change_commits=True, or read_change_feed=True",
                version=v,
            )
        return skip, None

    def commit_batches(self, commits: _Commits, after: StreamOffset) -> Iterator[StreamBatch]:
        """Batches of the commits' data files after ``after``; raises at a commit the
        stream cannot go past, after delivering everything before it."""
        skip, error = self.plan_versions(commits)
        last_ok = error.version - 1 if error is not None and error.version is not None else None
        if self.opts.read_change_feed:
            yield from self.change_batches(commits, after, last_ok)
        else:
            yield from self.data_batches(commits, after, skip, last_ok)
        if error is not None:
            raise error

    def data_batches(
        self, commits: _Commits, after: StreamOffset, skip: list[int], last_ok: int | None
    ) -> Iterator[StreamBatch]:
        adds = commits.adds
        versions = adds.column("version")
        v0, i0 = int64_scalar(after.version), int64_scalar(after.index)
        keep = pc.and_(
            pc.invert(pc.is_in(versions, int64_array(np.array(skip, dtype=np.int64)))),
            # after the offset: later versions, or later files of its version
            pc.or_(
                pc.greater(versions, v0),
                pc.and_(pc.equal(versions, v0), pc.greater(adds.column("index"), i0)),
            ),
        )
        if last_ok is not None:
            keep = pc.and_(keep, pc.less_equal(versions, int64_scalar(last_ok)))
        if self.until is not None and not self.until.snapshot:
            v1, i1 = int64_scalar(self.until.version), int64_scalar(self.until.index)
            keep = pc.and_(
                keep,
                pc.or_(
                    pc.less(versions, v1),
                    pc.and_(pc.equal(versions, v1), pc.less_equal(adds.column("index"), i1)),
                ),
            )
        adds = pc.filter(adds, keep)
        if adds.num_rows == 0:
            return
        # a version's last file: the batch that ends on it hands on to the next version
        vs, idx = int_values(adds.column("version")), int_values(adds.column("index"))
        last_index = idx == int_values(adds.column("files_in_version")) - 1
        for lo, hi in self.cuts(adds.column("size"), 0):
            part = adds.slice(lo, hi - lo)
            v, i = int(vs[hi - 1]), int(idx[hi - 1])
            offset = (
                StreamOffset(v + 1, -1, False, self.metadata.id)
                if last_index[hi - 1]
                else (StreamOffset(v, i, False, self.metadata.id))
            )
            tasks = cdf._conform_tasks(part)
            times = {x: 0 for x in range(int(vs[lo]), v + 1)}
            scans = [
                self.scan_of(v, cdf._files_table(layer, self.metadata, self.protocol, times))
                for layer in cdf._layers(tasks)
            ]
            yield StreamBatch(
                ChangeScan(int(vs[lo]), v, scans, self.columns()), offset, _bytes(part)
            )

    def change_batches(
        self, commits: _Commits, after: StreamOffset, last_ok: int | None
    ) -> Iterator[StreamBatch]:
        """With ``read_change_feed``: the change feed of whole commits per batch (a batch
        closes before the commit whose data files would take it past
        ``max_files_per_batch`` or ``max_bytes_per_batch``; a batch holds one commit at
        least)."""
        todo = [
            v for v in commits.versions if v >= after.version and (last_ok is None or v <= last_ok)
        ]
        # data files and bytes per version (the range's versions are contiguous)
        base = commits.versions[0]
        at = int_values(commits.adds.column("version")) - base
        sizes = int_values(pc.fill_null(commits.adds.column("size"), int64_scalar(0)))
        files_in = np.bincount(at, minlength=len(commits.versions))
        bytes_in = np.bincount(at, weights=sizes, minlength=len(commits.versions))
        max_files, max_bytes, lo = self.opts.max_files, self.opts.max_bytes, 0
        while lo < len(todo):
            hi, files, nbytes = lo, 0, 0
            while hi < len(todo):
                n, b = int(files_in[todo[hi] - base]), int(bytes_in[todo[hi] - base])
                over = (max_files is not None and files + n > max_files) or (
                    max_bytes is not None and nbytes + b > max_bytes
                )
                if hi > lo and over:
                    break
                files, nbytes, hi = files + n, nbytes + b, hi + 1
            first, last = todo[lo], todo[hi - 1]
            changes = self.dt.changes(
                starting_version=first,
                ending_version=last,
                columns=self.opts.columns,
                filter=self.opts.filter,
            )
            offset = StreamOffset(last + 1, -1, False, self.metadata.id)
            nbytes = sum(
                int(int_values(s.plan().files.column("size")).sum()) for s in changes.scans
            )
            yield StreamBatch(changes, offset, nbytes)
            lo = hi


def _bytes(files: pa.Table) -> int:
    return int(pc.sum(files.column("size")).as_py() or 0)


def stream(
    dt: DeltaTable,
    *,
    starting_version: int | None = None,
    starting_timestamp: datetime | str | None = None,
    columns: Sequence[str] | None = None,
    filter: str | Expression | None = None,
    max_files_per_batch: int | None = None,
    max_bytes_per_batch: int | None = None,
    ignore_deletes: bool = False,
    skip_change_commits: bool = False,
    read_change_feed: bool = False,
    follow: bool = False,
    poll_interval: float = 1.0,
    starting_offset: StreamOffset | str | dict[str, Any] | None = None,
    ending_offset: StreamOffset | str | dict[str, Any] | None = None,
) -> Iterator[StreamBatch]:
    """Micro-batches of ``dt``; see :meth:`lakequery.DeltaTable.stream`.

    ``ending_offset`` (not on the method: the Spark source plans a micro-batch between
    two offsets with it) stops the stream after the file it names, or, for an offset
    ``(version, -1)``, before that version."""
    uri = dt.uri
    for name, limit in (
        ("max_files_per_batch", max_files_per_batch),
        ("max_bytes_per_batch", max_bytes_per_batch),
    ):
        if limit is not None and (
            isinstance(limit, bool) or not isinstance(limit, int) or limit < 1
        ):
            raise StreamError(uri, f"{name} must be a positive integer, not {limit!r}")
    given = [
        n
        for n, v in (
            ("starting_version", starting_version),
            ("starting_timestamp", starting_timestamp),
            ("starting_offset", starting_offset),
        )
        if v is not None
    ]
    if len(given) > 1:
        raise StreamError(uri, f"pass one of {', '.join(given)}, not several")
    if starting_version is not None and (
        isinstance(starting_version, bool)
        or not isinstance(starting_version, int)
        or starting_version < 0
    ):
        raise StreamError(
            uri, f"starting_version must be a non-negative integer, not {starting_version!r}"
        )
    if not 0 < poll_interval < math.inf:  # (NaN too)
        raise StreamError(uri, f"poll_interval must be a positive number, not {poll_interval!r}")
    opts = _Options(
        list(columns) if columns is not None else None,
        filter,
        max_files_per_batch,
        max_bytes_per_batch,
        ignore_deletes,
        skip_change_commits,
        read_change_feed,
    )
    offset = StreamOffset.parse(starting_offset, uri) if starting_offset is not None else None
    if starting_timestamp is not None:
        starting_version = cdf._resolve_range(dt, None, None, starting_timestamp, None).start
    until = StreamOffset.parse(ending_offset, uri) if ending_offset is not None else None
    if until is not None and follow:
        raise StreamError(uri, "ending_offset and follow=True exclude each other")
    return _run(dt, opts, starting_version, offset, until, follow, poll_interval)


def _state_for_commit(dt: DeltaTable, version: int, *, consumed: bool) -> TableState:
    """The metadata and protocol a stream reads the commit ``version`` with (no live
    files replayed).

    A stream that already delivered the commits before it (``consumed``) reads with the
    state before it, so that a schema change in the commit is checked against what was
    delivered; when that state is gone from the log (cleaned up behind a checkpoint at
    ``version``), with the commit's own. A stream that starts at the commit reads with
    the commit's own state, as its files were written with it (a commit that renames a
    column can be a stream's first); the version after the latest, with the latest.
    Decision recorded in ARCHITECTURE.md ("Streams: the state a commit is read with")."""
    first = version - 1 if consumed and version > 0 else version
    try:
        return load_state(dt.storage, first, with_files=False)
    except VersionNotFoundError as exc:
        gone = consumed and exc.earliest is not None and first < exc.earliest <= version
        next_one = not consumed and exc.latest is not None and version == exc.latest + 1
        if not (gone or next_one):
            raise
    return load_state(dt.storage, version if gone else version - 1, with_files=False)


def start_offset(dt: DeltaTable, starting_version: int | None = None) -> StreamOffset:
    """Where a stream starts: the latest snapshot's files first (no version given), or
    the commit ``starting_version``."""
    if starting_version is None:
        snap = dt.snapshot()
        return StreamOffset(snap.version, -1, True, snap.metadata.id)
    state = _state_for_commit(dt, starting_version, consumed=False)
    return StreamOffset(starting_version, -1, False, state.metadata.id)


def latest_offset(dt: DeltaTable, start: StreamOffset) -> StreamOffset:
    """The position after every commit in the log now (one LIST from ``start``)."""
    first = start.version + 1 if start.snapshot else start.version
    latest = list_log(dt.storage, first).latest_version
    if latest is None or latest < first:
        return start
    return StreamOffset(latest + 1, -1, False, start.table_id)


def _run(
    dt: DeltaTable,
    opts: _Options,
    starting_version: int | None,
    offset: StreamOffset | None,
    until: StreamOffset | None,
    follow: bool,
    poll_interval: float,
) -> Iterator[StreamBatch]:
    snap: Snapshot | None = None
    if offset is None and starting_version is None:
        snap = dt.snapshot()
        offset = StreamOffset(snap.version, -1, True, snap.metadata.id)
    elif offset is None:
        assert starting_version is not None
        state = _state_for_commit(dt, starting_version, consumed=False)
        offset = StreamOffset(starting_version, -1, False, state.metadata.id)
    elif offset.snapshot:  # the snapshot's files are read first
        snap = dt.snapshot(version=offset.version)
    else:  # inside a commit (its own state), or before it
        state = _state_for_commit(dt, offset.version, consumed=offset.index < 0)
    if snap is not None:
        metadata, protocol = snap.metadata, snap.protocol
    else:
        metadata, protocol = state.metadata, state.protocol
    if metadata.id != offset.table_id:
        raise StreamError(
            dt.uri, f"the offset belongs to table {offset.table_id!r}, not to this one"
        )
    s = _Stream(dt, opts, metadata, protocol)
    s.until = until
    last = None if until is None else until.version - (1 if until.index < 0 else 0)
    if offset.snapshot:
        assert snap is not None  # a snapshot offset loads its snapshot above
        for batch in s.snapshot_batches(snap, offset.index):
            yield batch
        offset = StreamOffset(snap.version + 1, -1, False, snap.metadata.id)
    next_version = offset.version
    while True:
        listing = list_log(dt.storage, next_version)
        latest = listing.latest_version
        if latest is not None and last is not None:
            latest = min(latest, last)
        if latest is not None and latest >= next_version:
            commits = _read_commits(dt, listing, next_version, latest)
            if commits is not None:
                for batch in s.commit_batches(commits, offset):
                    yield batch
                next_version = commits.versions[-1] + 1
                offset = StreamOffset(next_version, -1, False, s.metadata.id)
        if not follow:
            return
        time.sleep(poll_interval)


__all__ = ["latest_offset", "start_offset", "stream"]
