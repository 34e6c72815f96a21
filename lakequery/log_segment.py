"""Finding and loading the log files of one version (digest §3, §7.5).

``load_state`` is the I/O shell around the pure pieces: it reads the ``_last_checkpoint``
hint, lists ``_delta_log`` from it, picks a segment, loads it into DuckDB and replays it.
A checkpoint that turns out unreadable is dropped and an older one (or the commits from
version 0) is used instead.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

import duckdb
import pyarrow as pa

from lakequery.dv.descriptor import check_descriptors
from lakequery.errors import (
    CorruptLogError,
    ObjectNotFoundError,
    TableNotFoundError,
    VersionNotFoundError,
)
from lakequery.log_reader import CHECKPOINT, COMMIT_KEYS, COMMITS, LogReader, replay_cursor
from lakequery.metadata import Metadata
from lakequery.protocol.column_mapping import column_mapping_mode, physical_name
from lakequery.protocol.features import Protocol, check_readable
from lakequery.protocol.last_checkpoint import parse_last_checkpoint
from lakequery.protocol.log_files import Listing, LogSegment, build_listing, select_segment
from lakequery.protocol.properties import TableProperties
from lakequery.protocol.replay import (
    check_paths,
    latest_non_file_actions,
    partition_value_sql,
    replay_files,
    replay_tombstones,
)
from lakequery.protocol.schema import DeltaType, PrimitiveType, validate_type_changes
from lakequery.storage import Storage
from lakequery.storage.engine_errors import log_storage_failure


class TableState(NamedTuple):
    """Everything replay produced for one version."""

    version: int
    protocol: Protocol
    metadata: Metadata
    files: pa.Table  # live files, columns replay.FILE_COLUMNS
    txns: Mapping[str, Mapping[str, Any]]
    domains: Mapping[str, str]
    segment: LogSegment
    #: every ``txn`` action that survived replay, before retention: ``txns`` is this
    #: filtered by ``delta.setTransactionRetentionDuration`` at load time. Kept so that an
    #: incremental update filters with the metadata and the clock of the new version, as
    #: a fresh replay would (None for synthetic states: then ``txns``).
    raw_txns: Mapping[str, Mapping[str, Any]] | None = None
    #: True when this state's own load found every live data file on disk, each by its
    #: link check's ``lstat`` (local tables with few files per directory; False after an
    #: incremental update): the engines then need not stat a long file list again
    #: (:func:`lakequery.engines.layout.require_local_files`).
    files_found: bool = False
    #: True when this state's load found every live file's path plainly relative (no
    #: scheme, no leading or trailing ``/``, no ``..``:
    #: :func:`~lakequery.protocol.file_locations.all_plain_relative`), so that a scan
    #: need not look at its paths again; False when some is not, or nobody looked.
    plain_paths: bool = False


def log_dir(storage: Storage) -> str:
    return storage.join("_delta_log")


def list_log(storage: Storage, start_version: int = 0) -> Listing:
    """Lists ``_delta_log`` from a version on (lexicographic = version order)."""
    infos = storage.list_from(log_dir(storage), f"{start_version:020d}")
    return build_listing((i.path, i.name, i.size, i.modified_ms, i.etag) for i in infos)


def _hint_version(storage: Storage) -> int | None:
    try:
        data = storage.read(storage.join("_delta_log", "_last_checkpoint"))
    except ObjectNotFoundError:
        return None
    hint = parse_last_checkpoint(data)
    return hint.version if hint else None


def find_listing(storage: Storage, version: int | None) -> Listing:
    """Lists the log from the checkpoint hint when it is usable, else from the start."""
    hint = _hint_version(storage)
    if hint is not None and (version is None or hint <= version):
        listing = list_log(storage, hint)
        if any(c.version == hint for c in listing.checkpoints):
            return listing
    listing = list_log(storage, 0)
    if listing.latest_version is None:
        raise TableNotFoundError(storage.root, "no commit files in _delta_log")
    return listing


def _drop_checkpoint(listing: Listing, segment: LogSegment) -> Listing:
    return listing._replace(
        checkpoints=tuple(c for c in listing.checkpoints if c != segment.checkpoint)
    )


def load_state(
    storage: Storage,
    version: int | None,
    con: duckdb.DuckDBPyConnection | None = None,
    *,
    with_files: bool = True,
    listing: Listing | None = None,
) -> TableState:
    """Reconstructs the table state at ``version`` (latest when None). Without
    ``with_files`` the live files are not replayed (``files`` is empty): enough for the
    protocol, metadata, txns and domains. ``listing`` is a listing of the log already
    made (from the hint's checkpoint or from version 0), saving the LIST."""
    with loaded_log(
        storage,
        version,
        con,
        with_files=with_files,
        file_actions=with_files,
        listing=listing,
        close=True,
    ) as (state, _cur):
        return state


@contextlib.contextmanager
def loaded_log(
    storage: Storage,
    version: int | None,
    con: duckdb.DuckDBPyConnection | None = None,
    *,
    with_files: bool = False,
    file_actions: bool = True,
    listing: Listing | None = None,
    close: bool = False,
) -> Iterator[tuple[TableState, duckdb.DuckDBPyConnection]]:
    """:func:`load_state`, with the segment's actions still loaded on the cursor for the
    block (the reader's relations, :data:`~lakequery.log_reader.COMMITS` and the others),
    so that a caller that replays more from them (the checkpoint writer: adds and
    tombstones) does not load the log a second time. ``file_actions``: load the file
    actions of the checkpoint too (see :meth:`LogReader.load`). The relations are dropped
    when the block ends; the cursor (``con``, else a new one) stays usable, unless
    ``close``: then a cursor opened here is closed instead, which drops them at once
    (0.1 ms against 0.5-1.9 ms for the statements that drop them one by one)."""
    if listing is None:
        listing = find_listing(storage, version)
    listed_from_start = False
    while True:
        try:
            segment = select_segment(listing, version, uri=storage.root)
        except VersionNotFoundError:
            if listed_from_start:
                raise
            # a listing from the checkpoint hint cannot say which older versions exist:
            # list from version 0 (error path only), so the error names the real range
            listing, listed_from_start = list_log(storage, 0), True
            continue
        cur = con or replay_cursor(segment.checkpoint, segment.commits)
        reader = LogReader(storage, cur)
        try:
            reader.load(segment.checkpoint, segment.commits, file_actions=file_actions)
            state = _replay(storage, cur, reader, segment, with_files)
            break
        except (CorruptLogError, ObjectNotFoundError) as exc:
            reader.drop()
            if not _is_checkpoint_error(exc, segment):
                raise
            # An unusable checkpoint: forget it and reconstruct from an older one.
            if not listed_from_start:
                listing, listed_from_start = list_log(storage, 0), True
            listing = _drop_checkpoint(listing, segment)
            try:
                select_segment(listing, version, uri=storage.root)
            except (VersionNotFoundError, CorruptLogError):
                raise exc from None
        except BaseException:
            reader.drop()
            raise
    try:
        yield state, cur
    finally:
        if close and con is None:
            cur.close()
        else:
            reader.drop()


def _is_checkpoint_error(exc: Exception, segment: LogSegment) -> bool:
    cp = segment.checkpoint
    if cp is None:
        return False
    where = getattr(exc, "path", None) or getattr(exc, "uri", "")
    sidecars = "/_sidecars/" in str(where)
    return sidecars or any(str(where) == f.path for f in cp.files)


def partition_specs(metadata: Metadata, protocol: Protocol) -> list[tuple[str, str, DeltaType]]:
    """(logical name, key in partitionValues, Delta type) per partition column."""
    schema = metadata.schema
    mode = column_mapping_mode(metadata.configuration, protocol.supports("columnMapping"))
    out = []
    for col in metadata.partition_columns:
        field = schema.get(col)
        if field is None:
            raise CorruptLogError("metaData", f"partition column {col!r} is not in the schema")
        out.append((col, physical_name(field, mode), field.type))
    return out


def _replay(
    storage: Storage,
    con: duckdb.DuckDBPyConnection,
    reader: LogReader,
    segment: LogSegment,
    with_files: bool,
) -> TableState:
    try:
        return _replay_loaded(storage, con, reader, segment, with_files)
    except duckdb.Error as exc:  # large logs are views: replay reads the store again
        read = [f.path for f in segment.commits]
        if segment.checkpoint is not None:
            read += [f.path for f in segment.checkpoint.files]
        failure = log_storage_failure(exc, read, log_dir(storage))
        if failure is not None:
            raise failure from exc
        where = segment.checkpoint.files[0].path if segment.checkpoint else log_dir(storage)
        raise CorruptLogError(where, str(exc).splitlines()[0][:300]) from exc


def _replay_loaded(
    storage: Storage,
    con: duckdb.DuckDBPyConnection,
    reader: LogReader,
    segment: LogSegment,
    with_files: bool,
) -> TableState:
    found = latest_non_file_actions(con, reader.non_file_actions_sql())
    where = segment.commits[-1].path if segment.commits else log_dir(storage)
    if not found["protocol"]:
        raise CorruptLogError(
            where, f"no protocol action in the log up to version {segment.version}"
        )
    if not found["metaData"]:
        raise CorruptLogError(
            where, f"no metaData action in the log up to version {segment.version}"
        )
    protocol = Protocol.from_action(found["protocol"][0][1])
    check_readable(protocol)
    metadata = Metadata.from_action(found["metaData"][0][1])
    validate_type_changes(metadata.schema)
    props = TableProperties(metadata.configuration)
    now_ms = int(time.time() * 1000)
    files = pa.table({})
    files_found = plain_paths = False
    if with_files:
        files = replay_files(
            con,
            commit_keys=COMMIT_KEYS,
            commits=COMMITS,
            checkpoint=CHECKPOINT,
            partition_sql=[
                partition_value_sql(key, t.name if isinstance(t, PrimitiveType) else "")
                for _, key, t in partition_specs(metadata, protocol)
            ],
            small=reader.small,
            where=log_dir(storage),
        )
        files_found, plain_paths = check_files(storage, files)
    raw_txns = {str(txn["appId"]): txn for _, txn in found["txn"]}
    domains = {
        str(d["domain"]): str(d.get("configuration") or "")
        for _, d in found["domainMetadata"]
        if not d.get("removed")
    }
    return TableState(
        segment.version,
        protocol,
        metadata,
        files,
        _unexpired_txns(raw_txns, props, now_ms),
        domains,
        segment,
        raw_txns,
        files_found,
        plain_paths,
    )


def check_files(storage: Storage, files: pa.Table) -> tuple[bool, bool]:
    """Refuses replayed files lakequery must not read, before any is read: paths escaping
    the root or on other storage (:func:`check_paths`), malformed deletion vector
    descriptors and DV paths escaping the root (:func:`check_descriptors`), and files
    reached through a symbolic link out of a local root (:meth:`Storage.check_links`).

    Returns:
        Whether the link check found every data file on disk
        (:attr:`TableState.files_found`), and whether every path is plainly relative
        (:attr:`TableState.plain_paths`; one pass over the paths serves both checks).

    Raises:
        InvalidPathError: a path escapes the root.
        DeletionVectorError: a malformed descriptor.
    """
    from lakequery.protocol.file_locations import all_plain_relative

    plain = files.num_rows == 0 or all_plain_relative(files.column("path"))
    check_paths(files, root=storage.root, plain=plain)
    check_descriptors(files, root=storage.root)
    return storage.check_links(files, plain=plain), plain


def _unexpired_txns(
    raw: Mapping[str, Mapping[str, Any]], props: TableProperties, now_ms: int
) -> dict[str, Mapping[str, Any]]:
    """The txns a reader sees: ``delta.setTransactionRetentionDuration`` expires those
    whose ``lastUpdated`` is older (or missing), as in the reference implementation."""
    retention = props.set_transaction_retention_ms
    if retention is None:
        return dict(raw)
    return {
        app: txn
        for app, txn in raw.items()
        if txn.get("lastUpdated") is not None and int(txn["lastUpdated"]) > now_ms - retention
    }


def load_tombstones(storage: Storage, state: TableState, cutoff_ms: int | None = None) -> pa.Table:
    """The ``remove`` actions of a loaded state deleted after ``cutoff_ms`` (default: now
    minus the table's ``delta.deletedFileRetentionDuration``), read again from its segment:
    only VACUUM-like work needs them, so snapshots do not keep them."""
    segment = state.segment
    if cutoff_ms is None:
        cutoff_ms = (
            int(time.time() * 1000)
            - TableProperties(state.metadata.configuration).deleted_file_retention_ms
        )
    con = replay_cursor(segment.checkpoint, segment.commits)
    reader = LogReader(storage, con)
    try:
        reader.load(segment.checkpoint, segment.commits)
        return replay_tombstones(
            con,
            commit_keys=COMMIT_KEYS,
            commits=COMMITS,
            checkpoint=CHECKPOINT,
            cutoff_ms=cutoff_ms,
        )
    finally:
        con.close()  # and with it what the reader created
