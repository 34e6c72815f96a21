"""``DeltaTable``: the entry point to one table.

Example:
    >>> import lakequery as lq
    >>> dt = lq.DeltaTable(lq.demo.example_table())
    >>> snap = dt.snapshot()
    >>> snap.version >= 0
    True
    >>> dt.snapshot(version=0).version
    0
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Literal

from lakequery.errors import VersionNotFoundError
from lakequery.log_segment import TableState, list_log, load_state
from lakequery.log_update import latest_state, still_listed
from lakequery.protocol.log_files import earliest_version
from lakequery.protocol.properties import TableProperties
from lakequery.snapshot import Snapshot
from lakequery.storage import Storage, TableLocation, open_storage

if TYPE_CHECKING:
    from collections.abc import Sequence

    import pyarrow.compute as pc

    from lakequery.cdf import ChangeScan
    from lakequery.checkpoint_writer import CheckpointInfo
    from lakequery.commands.change_set import DmlMetrics
    from lakequery.commands.merge import MergeBuilder
    from lakequery.commands.metrics import (
        LogCleanupResult,
        ManifestResult,
        OptimizeMetrics,
        RestoreMetrics,
        VacuumResult,
    )
    from lakequery.commands.progress import ProgressCallback
    from lakequery.history import History
    from lakequery.management.alter import TableAlterer
    from lakequery.management.create import CreateMode
    from lakequery.management.detail import TableDetail
    from lakequery.management.repair import RepairResult
    from lakequery.streaming import StreamBatch, StreamOffset
    from lakequery.writer.identity import Identity


def _parse_as_of(as_of: datetime | str) -> datetime:
    if isinstance(as_of, str):
        text = as_of.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            as_of = datetime.fromisoformat(text)
        except ValueError as exc:
            raise ValueError(f"as_of {as_of!r} is not an ISO-8601 timestamp") from exc
    if as_of.tzinfo is None:  # a naive time is taken as UTC (documented)
        as_of = as_of.replace(tzinfo=timezone.utc)
    return as_of


class DeltaTable:
    """A Delta table at a location: local path, ``file://``, ``s3://`` or ``memory://``.

    Args:
        uri: where the table lives.
        storage_options: s3fs arguments for ``s3://`` (``key``, ``secret``,
            ``endpoint_url``, ``client_kwargs``...).
    """

    def __init__(
        self, uri: TableLocation, *, storage_options: Mapping[str, Any] | None = None
    ) -> None:
        self.storage: Storage = open_storage(uri, storage_options)
        self._latest: Snapshot | None = None

    @classmethod
    def create(
        cls,
        uri: TableLocation,
        schema: Any,
        *,
        partition_by: Sequence[str] | str | None = None,
        configuration: Mapping[str, str] | None = None,
        name: str | None = None,
        description: str | None = None,
        mode: CreateMode = "error",
        storage_options: Mapping[str, Any] | None = None,
        identity: Mapping[str, Identity] | None = None,
        cluster_by: Sequence[str] | None = None,
    ) -> DeltaTable:
        """Creates an empty table (one commit: protocol + metaData); see
        :mod:`lakequery.management.create`.

        Args:
            uri: where the table goes.
            schema: a ``pyarrow.Schema`` or a Delta ``StructType``.
            partition_by: partition columns.
            configuration: table properties; ``delta.feature.<name>=supported`` adds a
                feature to the protocol without storing the key.
            name: table name stored in the metadata.
            description: table description stored in the metadata.
            mode: ``"error"`` (default), ``"ignore"`` (IF NOT EXISTS) or ``"overwrite"``
                (OR REPLACE).
            storage_options: s3fs options for ``s3://`` tables.
            identity: identity columns (``{"id": lq.Identity(start=1, step=1)}``):
                ``GENERATED ALWAYS`` (or, with ``always=False``, ``BY DEFAULT``) ``AS
                IDENTITY`` columns of type long; see :mod:`lakequery.writer.identity`.
            cluster_by: liquid clustering columns (instead of ``partition_by``): the
                ``clustering`` feature and the ``delta.clustering`` domain, as Spark's
                ``CREATE TABLE ... CLUSTER BY``; see :mod:`lakequery.clustering`.

        Raises:
            TableAlreadyExistsError: ``mode="error"`` and a table exists at ``uri``.

        Example:
            >>> import pyarrow as pa, lakequery as lq
            >>> dt = lq.DeltaTable.create("memory://dt-create", pa.schema([("x", pa.int32())]))
            >>> dt.snapshot().version, dt.snapshot().num_files
            (0, 0)
        """
        from lakequery.management.create import create_table

        return create_table(
            uri,
            schema,
            partition_by=partition_by,
            configuration=configuration,
            name=name,
            description=description,
            mode=mode,
            storage_options=storage_options,
            identity=identity,
            cluster_by=cluster_by,
        )

    @property
    def storage_options(self) -> dict[str, Any] | None:
        """The storage options the table was opened with (None when there are none)."""
        return self.storage.options

    @property
    def uri(self) -> str:
        return self.storage.root

    def __repr__(self) -> str:
        return f"DeltaTable({self.uri!r})"

    def _repr_html_(self) -> str:
        """Jupyter's view: latest version, schema, partitions, files, last operations
        (:func:`lakequery.display.html.table_html`; storage options are never shown)."""
        from lakequery.display.html import table_html

        return table_html(self)

    def snapshot(
        self, *, version: int | None = None, as_of: datetime | str | None = None
    ) -> Snapshot:
        """The table at a version (latest by default) or as of a time.

        Args:
            version: an exact version.
            as_of: a ``datetime`` or ISO-8601 string; the newest version committed at or
                before it. Naive times are UTC. A time after the latest commit gives the
                latest version; one before the earliest reconstructable commit raises.

        The latest snapshot is kept: asking again lists ``_delta_log`` from its version
        (one LIST) and replays only what was committed since (:meth:`Snapshot.update`);
        an unchanged table returns the same ``Snapshot``. Small tables are also
        remembered per process, so ``DeltaTable(uri).snapshot()`` in a loop does not
        replay either.

        Raises:
            TableNotFoundError: no table at the location.
            VersionNotFoundError: the version or time cannot be reconstructed.
        """
        if version is not None and as_of is not None:
            raise ValueError("pass version or as_of, not both")
        if as_of is not None:
            version = self.version_as_of(as_of)
        if version is None:
            return self._latest_snapshot()
        known = self._latest
        # the kept snapshot is that version only while its log is the one listed (the
        # table may have been dropped and recreated since): one LIST says so
        if (
            known is not None
            and known.version == version
            and still_listed(self.storage, known._state)
        ):
            return known
        return Snapshot(self.storage, load_state(self.storage, version))

    @property
    def alter(self) -> TableAlterer:
        """ALTER TABLE: columns, properties, constraints and table features, one commit
        per call; see :mod:`lakequery.management.alter`.

        Example:
            >>> import pyarrow as pa, lakequery as lq
            >>> uri = "memory://table-alter-doc"
            >>> _ = lq.write(uri, pa.table({"x": [1]}))
            >>> lq.DeltaTable(uri).alter.add_columns(pa.field("y", pa.string())).version
            1
        """
        from lakequery.management.alter import TableAlterer

        return TableAlterer(self)

    def _latest_snapshot(self) -> Snapshot:
        """The latest snapshot: the one this table (or, for small tables, this process)
        loaded last, brought up to date with one LIST (:meth:`Snapshot.update`)."""
        known = self._latest
        if known is not None:
            latest = known.update()
        else:
            latest = Snapshot(self.storage, latest_state(self.storage))
        self._latest = latest
        return latest

    def version_as_of(self, as_of: datetime | str) -> int:
        """The newest version whose commit timestamp is at or before ``as_of``."""
        from lakequery.history import commit_timestamps, search_range

        when = _parse_as_of(as_of)
        target_ms = int(when.timestamp() * 1000)
        listing = list_log(self.storage, 0)
        latest = self._latest_without_files()
        earliest = earliest_version(listing)
        commits = [c for c in listing.commits if earliest is not None and c.version >= earliest]
        props = TableProperties(latest.metadata.configuration)
        times = commit_timestamps(self.storage, commits, props)
        i = bisect.bisect_right(times, target_ms, *search_range(commits, props, target_ms))
        if i == 0:
            raise VersionNotFoundError(
                self.uri,
                timestamp=when.isoformat(),
                earliest=earliest,
                latest=latest.version,
                detail="the time is before the earliest reconstructable commit",
            )
        return commits[i - 1].version

    def history(self, *, limit: int | None = None) -> History:
        """Commits newest first: version, timestamp, operation, parameters, metrics.

        Returns a :class:`~lakequery.history.History`: a list of
        :class:`~lakequery.history.CommitEntry` that displays as a table in Jupyter and
        has ``to_arrow()`` / ``to_pandas()``.

        Example:
            >>> import lakequery as lq
            >>> [e.version for e in lq.DeltaTable(lq.demo.example_table()).history(limit=2)]
            [2, 1]
        """
        from lakequery.history import history_entries

        if limit is not None and limit < 0:
            raise ValueError(f"limit must be 0 or more, not {limit}")
        listing = list_log(self.storage, 0)
        latest = self._latest_without_files()
        return history_entries(
            self.storage, listing.commits, TableProperties(latest.metadata.configuration), limit
        )

    def checkpoint(self, *, progress: ProgressCallback | None = None) -> CheckpointInfo:
        """Creates a checkpoint of the latest version now (and updates ``_last_checkpoint``).

        Later snapshots start from it instead of replaying every commit. See
        :func:`lakequery.checkpoint_writer.write_checkpoint` for what it contains.

        Example:
            >>> import tempfile, pathlib, lakequery as lq
            >>> root = lq.demo.build_example_table(pathlib.Path(tempfile.mkdtemp()))
            >>> dt = lq.DeltaTable(str(root))
            >>> dt.checkpoint().version
            2
            >>> dt.snapshot().files().num_rows
            4
        """
        from lakequery.checkpoint_writer import write_checkpoint

        return write_checkpoint(self.storage, progress=progress)

    # -- DML ------------------------------------------------------------------------------------
    def delete(
        self,
        predicate: str | None = None,
        *,
        copy_on_write: bool = False,
        rewrite_threshold: float | None = None,
        progress: ProgressCallback | None = None,
    ) -> DmlMetrics:
        """Deletes the rows for which ``predicate`` (SQL, DuckDB dialect) is TRUE; every
        row when None. One commit; no commit when no row matches.

        On tables with ``delta.enableDeletionVectors=true`` (the default for tables
        lakequery creates) the rows are marked in deletion vectors and no data file is
        rewritten; otherwise the touched files are rewritten without them. A predicate on
        partition columns only removes whole files without reading them.

        Args:
            predicate: which rows to delete.
            copy_on_write: rewrite the touched files even when the table has DVs.
            rewrite_threshold: with DVs, rewrite a file instead when more than this
                fraction of its rows would be deleted.
            progress: callback receiving :class:`~lakequery.commands.progress.Progress`
                (rows written into new files); default: a bar when someone is watching.

        Returns:
            :class:`~lakequery.commands.change_set.DmlMetrics` (``.version``, row, file
            and byte counts).

        Raises:
            PredicateError: the predicate does not parse or names unknown columns.
            AppendOnlyError: the table is ``delta.appendOnly``.
            CommitConflictError: a concurrent commit conflicts (a subclass names it).

        Example:
            >>> import pyarrow as pa, lakequery as lq
            >>> _ = lq.write("memory://dt-delete", pa.table({"id": [1, 2, 3]}))
            >>> lq.DeltaTable("memory://dt-delete").delete("id > 1").num_deleted_rows
            2
        """
        from lakequery.commands.delete import delete

        return delete(
            self,
            predicate,
            copy_on_write=copy_on_write,
            rewrite_threshold=rewrite_threshold,
            progress=progress,
        )

    def update(
        self,
        predicate: str | None = None,
        *,
        set: Mapping[str, str],
        copy_on_write: bool = False,
        rewrite_threshold: float | None = None,
        progress: ProgressCallback | None = None,
    ) -> DmlMetrics:
        """Sets columns of the rows for which ``predicate`` is TRUE (every row when None).

        Args:
            predicate: which rows to update (SQL, DuckDB dialect).
            set: column -> SQL expression over the row's columns (DuckDB dialect); the
                value is cast to the column's type.
            copy_on_write: rewrite the touched files even when the table has DVs.
            rewrite_threshold: with DVs, rewrite a file instead when more than this
                fraction of its rows would change.
            progress: callback receiving :class:`~lakequery.commands.progress.Progress`
                (rows written into new files); default: a bar when someone is watching.

        Returns:
            :class:`~lakequery.commands.change_set.DmlMetrics`.

        Raises:
            PredicateError: an expression or column does not resolve.
            ConstraintViolationError: an updated row breaks a constraint.

        Example:
            >>> import pyarrow as pa, lakequery as lq
            >>> _ = lq.write("memory://dt-update", pa.table({"id": [1, 2], "v": [0, 0]}))
            >>> lq.DeltaTable("memory://dt-update").update("id = 2", set={"v": "id * 10"}).version
            1
        """
        from lakequery.commands.update import update

        return update(
            self,
            predicate,
            set=set,
            copy_on_write=copy_on_write,
            rewrite_threshold=rewrite_threshold,
            progress=progress,
        )

    def merge(
        self,
        source: Any,
        *,
        on: str,
        source_alias: str = "source",
        target_alias: str = "target",
        schema_mode: Literal["merge"] | None = None,
        copy_on_write: bool = False,
        rewrite_threshold: float | None = None,
    ) -> MergeBuilder:
        """Starts a MERGE of ``source`` into this table; add clauses, then ``execute()``.

        Args:
            source: Arrow data (table, batches, reader, anything with
                ``__arrow_c_stream__``), a Polars or pandas DataFrame or a DuckDB relation.
            on: the join condition in SQL (DuckDB dialect) over both aliases.
            source_alias: the source's name in expressions.
            target_alias: the table's name in expressions.
            schema_mode: ``"merge"`` adds source columns the table lacks (with
                ``*_all`` clauses) as new nullable columns.
            copy_on_write: rewrite touched files even when the table has DVs.
            rewrite_threshold: with DVs, rewrite a file instead when more than this
                fraction of its rows would change.

        Returns:
            a :class:`~lakequery.commands.merge.MergeBuilder`.

        Example:
            >>> import pyarrow as pa, lakequery as lq
            >>> _ = lq.write("memory://dt-merge", pa.table({"id": [1, 2], "v": [1, 2]}))
            >>> dt = lq.DeltaTable("memory://dt-merge")
            >>> m = (dt.merge(pa.table({"id": [2, 3], "v": [20, 30]}), on="target.id = source.id")
            ...        .when_matched_update_all().when_not_matched_insert_all().execute())
            >>> m.num_updated_rows, m.num_inserted_rows
            (1, 1)
        """
        from lakequery.commands.merge import MergeBuilder

        return MergeBuilder(
            self,
            source,
            on=on,
            source_alias=source_alias,
            target_alias=target_alias,
            schema_mode=schema_mode,
            copy_on_write=copy_on_write,
            rewrite_threshold=rewrite_threshold,
        )

    def _latest_without_files(self) -> TableState:
        """The latest protocol and metadata: the kept latest snapshot's state brought up to
        date when there is one (one LIST), else a replay without the live files."""
        if self._latest is not None:
            return self._latest_snapshot()._state
        return load_state(self.storage, None, with_files=False)

    def changes(
        self,
        *,
        starting_version: int | None = None,
        ending_version: int | None = None,
        starting_timestamp: datetime | str | None = None,
        ending_timestamp: datetime | str | None = None,
        columns: Sequence[str] | None = None,
        filter: str | pc.Expression | None = None,
    ) -> ChangeScan:
        """The Change Data Feed: row-level changes committed in a range of versions.

        Rows carry the table's columns plus ``_change_type`` (``insert``, ``delete``,
        ``update_preimage``, ``update_postimage``), ``_commit_version`` and
        ``_commit_timestamp`` (the commit's in-commit timestamp, else its file time made
        strictly increasing). Commits with change files give those files' rows; other
        commits give the rows of the files they add (inserts) and remove (deletes), with
        deletion vectors taken into account (see :mod:`lakequery.cdf`).

        Args:
            starting_version: first version of the range (inclusive).
            ending_version: last version (inclusive; latest by default).
            starting_timestamp: instead of ``starting_version``: the first commit at or
                after this time (``datetime`` or ISO-8601; naive times are UTC).
            ending_timestamp: instead of ``ending_version``: the newest commit at or
                before this time, as :meth:`version_as_of` maps it.
            columns: table columns to return, in order (all by default); the change
                columns are appended unless named.
            filter: a SQL boolean expression or ``pyarrow.compute.Expression`` over the
                table and change columns (``"_change_type = 'delete' AND id > 3"``).

        Returns:
            A :class:`~lakequery.cdf.ChangeScan`: ``to_arrow()``, ``to_arrow_reader()``,
            ``to_duckdb()``, ``to_polars()``.

        Raises:
            ChangeDataFeedError: no start given, start after end, the feed was not
                enabled at some version of the range, or the schema changed there in a
                non-additive way.
            VersionNotFoundError: a version or time outside the table's commits.

        Example:
            >>> import tempfile, pyarrow as pa, lakequery as lq
            >>> root = tempfile.mkdtemp()
            >>> conf = {"delta.enableChangeDataFeed": "true"}
            >>> _ = lq.write(root, pa.table({"id": [1, 2]}), configuration=conf)
            >>> _ = lq.write(root, pa.table({"id": [3, 4]}), mode="overwrite")
            >>> feed = lq.DeltaTable(root).changes(starting_version=1).to_arrow()
            >>> sorted(feed.select(["id", "_change_type"]).to_pylist(), key=str)[:2]
            [{'id': 1, '_change_type': 'delete'}, {'id': 2, '_change_type': 'delete'}]
        """
        from lakequery.cdf import changes

        return changes(
            self,
            starting_version=starting_version,
            ending_version=ending_version,
            starting_timestamp=starting_timestamp,
            ending_timestamp=ending_timestamp,
            columns=columns,
            filter=filter,
        )

    def stream(
        self,
        *,
        starting_version: int | None = None,
        starting_timestamp: datetime | str | None = None,
        columns: Sequence[str] | None = None,
        filter: str | pc.Expression | None = None,
        max_files_per_batch: int | None = None,
        max_bytes_per_batch: int | None = None,
        ignore_deletes: bool = False,
        skip_change_commits: bool = False,
        read_change_feed: bool = False,
        follow: bool = False,
        poll_interval: float = 1.0,
        starting_offset: StreamOffset | str | dict[str, Any] | None = None,
    ) -> Iterator[StreamBatch]:
        """Reads the table as a stream of micro-batches (the table as a message queue).

        Without a start, the first batches hold the current snapshot's rows, then each
        later commit's appended rows, in version order; OPTIMIZE and other commits that
        change no data deliver nothing. A commit that removes or rewrites rows (DELETE,
        UPDATE, MERGE, overwrite) stops the stream with :class:`~lakequery.StreamError`
        naming its version, unless an option says otherwise. See
        :mod:`lakequery.streaming`.

        Args:
            starting_version: start with this commit's rows (no snapshot first).
            starting_timestamp: start with the first commit at or after this time.
            columns: the columns to read (all by default).
            filter: a SQL or pyarrow predicate on the rows.
            max_files_per_batch: at most this many data files per batch.
            max_bytes_per_batch: at most this many bytes of data files per batch (a
                batch holds at least one file).
            ignore_deletes: pass over commits that only delete whole files.
            skip_change_commits: pass over every commit that removes data (its added
                rows too).
            read_change_feed: batches of change rows (``_change_type`` ...) instead.
            follow: keep listing ``_delta_log`` for new commits every ``poll_interval``
                seconds until the iterator is closed; otherwise stop at the version
                that was latest when the stream reached it.
            poll_interval: seconds between listings when following.
            starting_offset: a batch's ``offset`` (or ``offset.to_json()``): resume
                right after that batch.

        Example:
            >>> import tempfile, pyarrow as pa, lakequery as lq
            >>> root = tempfile.mkdtemp()
            >>> _ = lq.write(root, pa.table({"id": [1, 2]}))
            >>> first = list(lq.DeltaTable(root).stream())
            >>> _ = lq.write(root, pa.table({"id": [3]}), mode="append")
            >>> rest = lq.DeltaTable(root).stream(starting_offset=first[-1].offset.to_json())
            >>> [b.to_arrow()["id"].to_pylist() for b in rest]
            [[3]]
        """
        from lakequery.streaming import stream

        return stream(
            self,
            starting_version=starting_version,
            starting_timestamp=starting_timestamp,
            columns=columns,
            filter=filter,
            max_files_per_batch=max_files_per_batch,
            max_bytes_per_batch=max_bytes_per_batch,
            ignore_deletes=ignore_deletes,
            skip_change_commits=skip_change_commits,
            read_change_feed=read_change_feed,
            follow=follow,
            poll_interval=poll_interval,
            starting_offset=starting_offset,
        )

    # -- maintenance (lakequery.commands) --------------------------------------------------------
    def optimize(
        self,
        *,
        predicate: str | None = None,
        target_file_size: int | None = None,
        min_file_size: int | None = None,
        z_order_by: Sequence[str] | str | None = None,
        curve: Literal["zorder", "hilbert"] = "zorder",
        max_concurrent_tasks: int | None = None,
        progress: ProgressCallback | None = None,
        full: bool = False,
    ) -> OptimizeMetrics:
        """Compacts small files, purges deletion vectors, or clusters rows (Z-order or
        Hilbert) in one ``dataChange=false`` commit; see :mod:`lakequery.commands.optimize`.

        Args:
            predicate: only partitions matching this (partition columns only).
            target_file_size: bytes per output file (``delta.targetFileSize``, else 128 MiB).
            min_file_size: files below this are compacted (default: the target).
            z_order_by: clustering columns; rewrites whole partitions sorted by the key.
                Refused on a liquid-clustered table, which OPTIMIZE clusters by its own
                clustering columns (Hilbert, incrementally; :mod:`lakequery.clustering`).
            curve: ``"zorder"`` or ``"hilbert"``.
            max_concurrent_tasks: bins rewritten at once (default: CPU count).
            progress: callback receiving :class:`~lakequery.commands.progress.Progress`.
            full: on a clustered table, recluster every file (Spark's ``OPTIMIZE FULL``);
                by default only files not yet clustered by the clustering columns.

        Example:
            >>> import pyarrow as pa, lakequery as lq
            >>> uri = "memory://table-optimize-doc"
            >>> for i in range(3):
            ...     _ = lq.write(uri, pa.table({"x": [i], "y": [3 - i]}), mode="append")
            >>> m = lq.DeltaTable(uri).optimize(z_order_by=["x", "y"])
            >>> m.files_removed, m.files_added
            (3, 1)
        """
        from lakequery.commands.optimize import optimize

        return optimize(
            self.storage,
            predicate=predicate,
            target_file_size=target_file_size,
            min_file_size=min_file_size,
            z_order_by=z_order_by,
            curve=curve,
            max_concurrent_tasks=max_concurrent_tasks,
            progress=progress,
            full=full,
        )

    def vacuum(
        self,
        *,
        retention_hours: float | None = None,
        dry_run: bool = True,
        enforce_retention: bool = True,
        progress: ProgressCallback | None = None,
    ) -> VacuumResult:
        """Deletes files that no version inside the retention window needs (data files,
        DV files, change-data files); see :mod:`lakequery.commands.vacuum`.

        Args:
            retention_hours: default ``delta.deletedFileRetentionDuration`` (7 days).
            dry_run: only return the files (default True).
            enforce_retention: refuse a retention below the table's (RetentionError).
            progress: callback receiving :class:`~lakequery.commands.progress.Progress`.

        Example:
            >>> import pyarrow as pa, lakequery as lq
            >>> uri = "memory://table-vacuum-doc"
            >>> _ = lq.write(uri, pa.table({"x": [1]}))
            >>> lq.DeltaTable(uri).vacuum().files
            ()
        """
        from lakequery.commands.vacuum import vacuum

        return vacuum(
            self.storage,
            retention_hours=retention_hours,
            dry_run=dry_run,
            enforce_retention=enforce_retention,
            progress=progress,
        )

    def restore(
        self,
        *,
        version: int | None = None,
        as_of: datetime | str | None = None,
        progress: ProgressCallback | None = None,
    ) -> RestoreMetrics:
        """Returns the table to an older version's state in one new commit; see
        :mod:`lakequery.commands.restore`.

        Args:
            version: the version to restore.
            as_of: or the newest version committed at or before this time.

        Raises:
            RestoreError: files of that version were vacuumed.

        Example:
            >>> import pyarrow as pa, lakequery as lq
            >>> uri = "memory://table-restore-doc"
            >>> _ = lq.write(uri, pa.table({"x": [1]}))
            >>> _ = lq.write(uri, pa.table({"x": [2]}), mode="append")
            >>> lq.DeltaTable(uri).restore(version=0).version
            2
        """
        from lakequery.commands.restore import restore

        if (version is None) == (as_of is None):
            raise ValueError("pass exactly one of version and as_of")
        if as_of is not None:
            target = self.version_as_of(as_of)
            params: dict[str, Any] = {"timestamp": _parse_as_of(as_of).isoformat()}
        else:
            assert version is not None
            target, params = version, {"version": version}
        return restore(self.storage, target, parameters=params, progress=progress)

    def clone(
        self,
        target_uri: TableLocation,
        *,
        version: int | None = None,
        as_of: datetime | str | None = None,
        storage_options: Mapping[str, Any] | None = None,
    ) -> DeltaTable:
        """SHALLOW CLONE: a new table at ``target_uri`` whose one commit references this
        table's files (of the latest version, ``version`` or ``as_of``) by absolute URI;
        see :mod:`lakequery.commands.clone`.

        Args:
            target_uri: where the clone is created (a new location, same storage kind).
            version: the source version to clone (default: the latest).
            as_of: or the newest version committed at or before this time.
            storage_options: for the clone (default: this table's).

        Raises:
            TableAlreadyExistsError: a table exists at ``target_uri``.
            InvalidPathError: the target is on another kind of storage or nested with
                this table.

        Example:
            >>> import pyarrow as pa, lakequery as lq
            >>> _ = lq.write("memory://table-clone-doc/src", pa.table({"x": [1, 2]}))
            >>> c = lq.DeltaTable("memory://table-clone-doc/src").clone("memory://table-clone-doc/c")
            >>> c.snapshot().version, c.history()[0].operation, c.snapshot().scan().to_arrow().num_rows
            (0, 'CLONE', 2)
        """
        from lakequery.commands.clone import clone

        return clone(
            self, target_uri, version=version, as_of=as_of, storage_options=storage_options
        )

    def generate_symlink_manifest(self) -> ManifestResult:
        """Writes ``_symlink_format_manifest/`` (one file list per partition) for
        file-list readers; refused while the table has deletion vectors. See
        :mod:`lakequery.commands.manifest`.

        Example:
            >>> import pyarrow as pa, lakequery as lq
            >>> uri = "memory://table-manifest-doc"
            >>> _ = lq.write(uri, pa.table({"x": [1]}))
            >>> lq.DeltaTable(uri).generate_symlink_manifest().files_listed
            1
        """
        from lakequery.commands.manifest import generate_symlink_manifest

        return generate_symlink_manifest(self.storage)

    def cleanup_log(self, *, retention_hours: float | None = None) -> LogCleanupResult:
        """Deletes commits and checkpoints older than ``delta.logRetentionDuration``
        (30 days) that no retained version needs (digest §7.8); also run after automatic
        checkpoints unless ``delta.enableExpiredLogCleanup=false``.

        Example:
            >>> import pyarrow as pa, lakequery as lq
            >>> uri = "memory://table-cleanup-doc"
            >>> _ = lq.write(uri, pa.table({"x": [1]}))
            >>> lq.DeltaTable(uri).cleanup_log().cutoff_version is None
            True
        """
        from lakequery.commands.log_cleanup import cleanup_expired_logs

        retention = None if retention_hours is None else int(retention_hours * 3_600_000)
        return cleanup_expired_logs(self.storage, retention_ms=retention)

    # -- management (lakequery.management) -------------------------------------------------------
    def detail(self) -> TableDetail:
        """DESCRIBE DETAIL of the latest version; see :mod:`lakequery.management.detail`.

        Example:
            >>> import pyarrow as pa, lakequery as lq
            >>> _ = lq.write("memory://dt-detail", pa.table({"x": [1]}))
            >>> lq.DeltaTable("memory://dt-detail").detail().num_files
            1
        """
        from lakequery.management.detail import describe_detail

        return describe_detail(self.snapshot())

    def repair(self, *, dry_run: bool = True) -> RepairResult:
        """FSCK REPAIR TABLE: finds live files whose data file is missing and, unless
        ``dry_run`` (the default), removes them in one commit; see
        :mod:`lakequery.management.repair`.

        Example:
            >>> import pyarrow as pa, lakequery as lq
            >>> _ = lq.write("memory://dt-repair", pa.table({"x": [1]}))
            >>> lq.DeltaTable("memory://dt-repair").repair().files_removed
            ()
        """
        from lakequery.management.repair import repair

        return repair(self.storage, self.snapshot(), dry_run=dry_run)
