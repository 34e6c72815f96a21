"""Typed results of the maintenance commands.

Every command returns one of these frozen dataclasses; OPTIMIZE and RESTORE also write
their figures to ``commitInfo.operationMetrics`` (:meth:`OptimizeMetrics.operation_metrics`).

Example:
    >>> m = OptimizeMetrics(version=None, files_added=0, files_removed=0, bytes_added=0,
    ...                     bytes_removed=0, partitions_optimized=0, num_bins=0,
    ...                     dvs_purged=0, files_considered=3, files_skipped=3,
    ...                     duration_ms=1)
    >>> m.committed
    False
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lakequery.display import HtmlMetrics


@dataclass(frozen=True)
class OptimizeMetrics(HtmlMetrics):
    """What an OPTIMIZE did.

    Attributes:
        version: the committed version (None when there was nothing to do).
        files_added: new data files.
        files_removed: data files replaced.
        bytes_added: bytes of the new files.
        bytes_removed: bytes of the replaced files.
        partitions_optimized: partitions with at least one rewritten file.
        num_bins: groups of files rewritten together (one per partition for clustering).
        dvs_purged: replaced files that carried a deletion vector.
        files_considered: live files matching the predicate.
        files_skipped: considered files left as they were.
        duration_ms: wall time of the whole command.
        rows_purged: deleted rows (DV cardinality) dropped by the rewrite.
        z_order_by: clustering columns (empty for compaction).
        curve: ``zorder`` / ``hilbert`` when clustering.
    """

    version: int | None
    files_added: int
    files_removed: int
    bytes_added: int
    bytes_removed: int
    partitions_optimized: int
    num_bins: int
    dvs_purged: int
    files_considered: int
    files_skipped: int
    duration_ms: int
    rows_purged: int = 0
    z_order_by: tuple[str, ...] = ()
    curve: str | None = None

    @property
    def committed(self) -> bool:
        return self.version is not None

    def operation_metrics(self) -> dict[str, int]:
        """The ``commitInfo.operationMetrics`` of the commit (reference names)."""
        return {
            "numAddedFiles": self.files_added,
            "numRemovedFiles": self.files_removed,
            "numAddedBytes": self.bytes_added,
            "numRemovedBytes": self.bytes_removed,
            "numPartitionsOptimized": self.partitions_optimized,
            "numBins": self.num_bins,
            "numDeletionVectorsRemoved": self.dvs_purged,
            "numDeletedRowsPurged": self.rows_purged,
            "totalConsideredFiles": self.files_considered,
            "totalFilesSkipped": self.files_skipped,
            "executionTimeMs": self.duration_ms,
        }


@dataclass(frozen=True)
class VacuumResult(HtmlMetrics):
    """What a VACUUM found or deleted.

    Attributes:
        dry_run: True when nothing was deleted.
        files: the files to delete (dry run) or deleted, as full locations.
        files_deleted: how many were deleted (0 on a dry run).
        bytes: their total size.
        files_listed: files seen by the one listing of the table.
        retention_hours: the retention used.
        duration_ms: wall time.
    """

    dry_run: bool
    files: tuple[str, ...] = field(repr=False)  # can be thousands: kept out of repr
    files_deleted: int
    bytes: int
    files_listed: int
    retention_hours: float
    duration_ms: int


@dataclass(frozen=True)
class RestoreMetrics(HtmlMetrics):
    """What a RESTORE committed.

    Attributes:
        version: the new version (None: the table already had that state).
        restored_version: the version whose state was restored.
        files_added: files brought back (a file whose DV differs counts here too).
        files_removed: files removed.
        bytes_added: their bytes.
        bytes_removed: bytes of the removed files.
        num_files_after: live files after the restore.
        table_size_after: bytes of the live files after the restore.
        duration_ms: wall time.
    """

    version: int | None
    restored_version: int
    files_added: int
    files_removed: int
    bytes_added: int
    bytes_removed: int
    num_files_after: int
    table_size_after: int
    duration_ms: int

    def operation_metrics(self) -> dict[str, int]:
        """The ``commitInfo.operationMetrics`` of the commit (reference names)."""
        return {
            "numRestoredFiles": self.files_added,
            "numRemovedFiles": self.files_removed,
            "restoredFilesSize": self.bytes_added,
            "removedFilesSize": self.bytes_removed,
            "numOfFilesAfterRestore": self.num_files_after,
            "tableSizeAfterRestore": self.table_size_after,
        }


@dataclass(frozen=True)
class ManifestResult(HtmlMetrics):
    """Symlink manifests written.

    Attributes:
        version: the table version they describe.
        manifests: full locations of the ``manifest`` files written.
        files_listed: data files listed in them.
        stale_removed: manifests of partitions that no longer exist, deleted.
    """

    version: int
    manifests: tuple[str, ...] = field(repr=False)
    files_listed: int
    stale_removed: int


@dataclass(frozen=True)
class LogCleanupResult(HtmlMetrics):
    """What a log cleanup deleted.

    Attributes:
        cutoff_version: the checkpoint version everything below was deleted for
            (None: no checkpoint old enough, nothing deleted).
        files_deleted: full locations of the deleted log files.
    """

    cutoff_version: int | None
    files_deleted: tuple[str, ...] = field(repr=False)


__all__ = [
    "LogCleanupResult",
    "ManifestResult",
    "OptimizeMetrics",
    "RestoreMetrics",
    "VacuumResult",
]
