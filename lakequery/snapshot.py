"""An immutable snapshot: the state of a table at one version.

Example:
    >>> import lakequery as lq
    >>> snap = lq.DeltaTable(lq.demo.example_table()).snapshot()
    >>> snap.files().num_rows > 0
    True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lakequery import arrow_kernels as pc
from lakequery.cached import cached_property
from lakequery.errors import ObjectNotFoundError, TableNotFoundError
from lakequery.log_segment import (
    TableState,
    list_log,
    load_tombstones,
    partition_specs,
)
from lakequery.metadata import Metadata
from lakequery.protocol.column_mapping import (
    ColumnMappingMode,
    column_mapping_mode,
)
from lakequery.protocol.features import Protocol
from lakequery.protocol.properties import TableProperties
from lakequery.protocol.schema import DeltaType
from lakequery.storage import Storage

if TYPE_CHECKING:
    from lakequery.scan import Scan


class Snapshot:
    """The table at one version. Immutable: time travel returns a new Snapshot.

    Attributes:
        version: the table version this snapshot shows.
        protocol: the table's protocol action.
        metadata: the table's metadata action (schema string, partition columns,
            configuration).
    """

    def __init__(self, storage: Storage, state: TableState) -> None:
        self._storage = storage
        self._state = state
        self.version: int = state.version
        self.protocol: Protocol = state.protocol
        self.metadata: Metadata = state.metadata

    @cached_property
    def commit_info(self) -> Mapping[str, Any] | None:
        """The ``commitInfo`` of this version's commit (None if the commit has none)."""
        from lakequery.history import read_commit_infos

        try:
            return read_commit_infos(self._storage, [self.version]).get(self.version)
        except ObjectNotFoundError:
            return None  # the commit file is gone (log cleanup)

    def __repr__(self) -> str:
        return (
            f"Snapshot(uri={self.table_uri!r}, version={self.version}, "
            f"files={self._state.files.num_rows})"
        )

    def _repr_html_(self) -> str:
        """Jupyter's view (:func:`lakequery.display.html.snapshot_html`)."""
        from lakequery.display.html import snapshot_html

        return snapshot_html(self)

    # -- descriptive properties -------------------------------------------------------------
    @property
    def table_uri(self) -> str:
        """The table root."""
        return self._storage.root

    @property
    def storage(self) -> Storage:
        return self._storage

    @property
    def schema(self) -> pa.Schema:
        """The logical Arrow schema (partition columns included, in table order)."""
        return self.metadata.arrow_schema

    @property
    def partition_columns(self) -> list[str]:
        """Partition column names, in directory-nesting order."""
        return list(self.metadata.partition_columns)

    @property
    def properties(self) -> TableProperties:
        return TableProperties(self.metadata.configuration)

    @property
    def column_mapping_mode(self) -> ColumnMappingMode:
        """``none``, ``name`` or ``id``."""
        return column_mapping_mode(
            self.metadata.configuration, self.protocol.supports("columnMapping")
        )

    @property
    def txns(self) -> dict[str, int]:
        """Application transaction versions (``txn`` actions) by appId."""
        return {app: int(t["version"]) for app, t in self._state.txns.items()}

    @property
    def domains(self) -> dict[str, str]:
        """Live domain metadata: domain name -> configuration string."""
        return dict(self._state.domains)

    @property
    def timestamp(self) -> datetime | None:
        """Commit time of this version as time travel sees it (digest §16): the in-commit
        timestamp where enabled, else the commit file's time made strictly increasing."""
        return self._timestamp

    @cached_property
    def _timestamp(self) -> datetime | None:
        listing = list_log(self._storage, 0)
        commits = [c for c in listing.commits if c.version <= self.version]
        if not commits or commits[-1].version != self.version:
            return None  # the commit file is gone (log cleanup)
        from lakequery.history import commit_timestamps

        ms = commit_timestamps(self._storage, commits, self.properties)[-1]
        return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)

    def update(self) -> Snapshot:
        """The newest snapshot of the table, built from this one.

        Lists ``_delta_log`` from this version (one LIST) and replays only the commits
        after it on top of this snapshot's state, with the same rules as a fresh load (a
        newer checkpoint is used instead when that reads less). When nothing was
        committed since, returns this very snapshot. Snapshots stay immutable: this one
        is unchanged, and a time-travel snapshot is only brought forward when asked to.

        Example:
            >>> import tempfile, pyarrow as pa, lakequery as lq
            >>> uri = tempfile.mkdtemp() + "/t"
            >>> _ = lq.write(uri, pa.table({"id": [1, 2]}))
            >>> snap = lq.DeltaTable(uri).snapshot()
            >>> snap.update() is snap                   # nothing new: one LIST, no replay
            True
            >>> _ = lq.write(uri, pa.table({"id": [3]}), mode="append")
            >>> new = snap.update()                     # replays only version 1
            >>> (snap.version, new.version, new.num_files)
            (0, 1, 2)
        """
        from lakequery.log_update import latest_state

        state = latest_state(self._storage, self._state)
        return self if state is self._state else Snapshot(self._storage, state)

    @property
    def num_files(self) -> int:
        return int(self._state.files.num_rows)

    # -- files ----------------------------------------------------------------------------------
    def partition_column_specs(self) -> list[tuple[str, str, DeltaType]]:
        """(logical name, key in partitionValues, Delta type) per partition column."""
        return partition_specs(self.metadata, self.protocol)

    @cached_property
    def _files(self) -> pa.Table:
        table = self._state.files
        specs = self.partition_column_specs()
        raw_names = [f"partition_raw_{i}" for i in range(len(specs))]
        strings = [table.column(n) for n in raw_names]
        table = table.drop_columns(raw_names)
        if specs:
            from lakequery.protocol.partitions import partition_struct_from_strings

            parts = partition_struct_from_strings(
                strings, specs, length=table.num_rows, empty_is_null=True
            )
            table = table.append_column("partition_values", parts)
        out: pa.Table = table
        return out

    def files(self) -> pa.Table:
        """One row per live file.

        Columns: ``path`` (decoded, relative to the table root; for a file outside the
        root, e.g. a shallow clone's, its absolute URI), ``size``,
        ``modification_time`` (ms), ``num_records`` (physical rows, from stats),
        ``stats`` (JSON string), ``deletion_vector`` (struct: storageType,
        pathOrInlineDv, offset, sizeInBytes, cardinality), ``base_row_id``,
        ``default_row_commit_version``, ``tags``, ``clustering_provider`` and, for
        partitioned tables, ``partition_values`` (a struct of typed values by logical
        column name).
        """
        return self._files

    def tombstones(self) -> pa.Table:
        """Unexpired ``remove`` actions (used by VACUUM): ``path``, ``version`` and ``remove``."""
        return load_tombstones(self._storage, self._state)

    def num_records(self) -> int | None:
        """Logical row count from statistics (None when a file lacks ``numRecords``)."""
        files = self._files
        nr = files.column("num_records")
        if nr.null_count:
            return None
        if files.num_rows == 0:
            return 0
        dv = files.column("deletion_vector").combine_chunks()
        card: Any = pc.struct_field(dv, "cardinality")
        # sum skips nulls (files without a DV); no Python value becomes an Arrow scalar,
        # since pyarrow's first such conversion imports pandas (~0.15 s)
        deleted = pc.sum(card).as_py() or 0
        return int((pc.sum(nr).as_py() or 0) - deleted)

    # -- scanning ----------------------------------------------------------------------------
    def scan(
        self,
        *,
        columns: Sequence[str] | None = None,
        filter: str | pc.Expression | None = None,
        row_tracking: bool = False,
    ) -> Scan:
        """Plans a read of this snapshot.

        Args:
            columns: logical column names to return (all when None), in that order;
                ``[]`` returns the rows without columns (Arrow, pandas, Polars; a count),
                which a DuckDB relation cannot hold (``to_duckdb()`` refuses).
            filter: a SQL boolean expression (``"a > 3 AND day = '2026-11-01'"``) or a
                ``pyarrow.compute.Expression``. Files are skipped by partition values and
                statistics; the engines apply the filter to rows exactly.
            row_tracking: also return ``_row_id`` and ``_row_commit_version`` (int64) of
                each row, on tables with row tracking (see :mod:`lakequery.row_tracking`;
                :class:`~lakequery.errors.RowTrackingError` otherwise).

        Example:
            >>> import lakequery as lq
            >>> snap = lq.DeltaTable(lq.demo.example_table()).snapshot()
            >>> snap.scan(columns=["id"], filter="id < 3").to_arrow().num_rows
            3
        """
        from lakequery.scan import Scan

        return Scan(self, columns=columns, filter=filter, row_tracking=row_tracking)


def latest_or_none(storage: Storage) -> Snapshot | None:
    """The latest snapshot at ``storage``, or None when no table is there yet (writers and
    CREATE TABLE decide between creating and appending with it). Like
    ``DeltaTable.snapshot()``, it brings this process's cached state of the table up to
    date (one LIST, then the new commits only) rather than replaying the whole log: a
    process that appends to a table again and again replays it once."""
    from lakequery.log_update import latest_state

    try:
        return Snapshot(storage, latest_state(storage))
    except TableNotFoundError:
        return None
