"""The names row tracking reads and writes, and when a table keeps row ids stable."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from lakequery.errors import RowTrackingError

if TYPE_CHECKING:
    import pyarrow as pa

    from lakequery.snapshot import Snapshot

#: Scan output column with each row's id (Spark: ``_metadata.row_id``).
ROW_ID_COLUMN = "_row_id"
#: Scan output column with each row's commit version (Spark: ``_metadata.row_commit_version``).
ROW_COMMIT_VERSION_COLUMN = "_row_commit_version"
#: Table properties naming the materialized (physical, hidden) columns.
ROW_ID_NAME_KEY = "delta.rowTracking.materializedRowIdColumnName"
ROW_COMMIT_VERSION_NAME_KEY = "delta.rowTracking.materializedRowCommitVersionColumnName"


def _true(value: str | None) -> bool:
    return (value or "").strip().lower() == "true"


def materialized_columns(configuration: Mapping[str, str]) -> tuple[str, str] | None:
    """The physical names of the materialized (row id, row commit version) columns, or None
    when the table does not guarantee stable row ids (row tracking not enabled, suspended,
    or the names missing).

    Example:
        >>> materialized_columns({"delta.enableRowTracking": "true",
        ...     ROW_ID_NAME_KEY: "_rid", ROW_COMMIT_VERSION_NAME_KEY: "_rcv"})
        ('_rid', '_rcv')
        >>> materialized_columns({}) is None
        True
    """
    if not _true(configuration.get("delta.enableRowTracking")) or _true(
        configuration.get("delta.rowTrackingSuspended")
    ):
        return None
    row_id = configuration.get(ROW_ID_NAME_KEY)
    version = configuration.get(ROW_COMMIT_VERSION_NAME_KEY)
    if not row_id or not version:
        return None
    return row_id, version


#: ``commitInfo.tags`` entry of commits that keep row ids (digest §14).
PRESERVED_TAG = "delta.rowTracking.preserved"


def commit_tags(configuration: Mapping[str, str]) -> dict[str, str]:
    """The ``commitInfo.tags`` row tracking asks of a commit on a table with this
    configuration: ``{"delta.rowTracking.preserved": "true"}`` when row ids are stable
    (every lakequery command keeps them), else nothing.

    Example:
        >>> commit_tags({"delta.enableRowTracking": "true", ROW_ID_NAME_KEY: "a",
        ...              ROW_COMMIT_VERSION_NAME_KEY: "b"})
        {'delta.rowTracking.preserved': 'true'}
        >>> commit_tags({})
        {}
    """
    return {PRESERVED_TAG: "true"} if materialized_columns(configuration) else {}


def preserves_row_ids(snapshot: Snapshot) -> tuple[str, str] | None:
    """The materialized column names when commands rewriting rows of ``snapshot`` must keep
    their ids (the protocol supports row tracking and the table enables it), else None.

    Tables that merely *support* row tracking (``rowTracking`` in the protocol,
    ``delta.enableRowTracking`` unset) give rewritten rows fresh ids, as the digest
    allows: their ids are not promised to be stable."""
    if not snapshot.protocol.supports("rowTracking"):
        return None
    return materialized_columns(snapshot.metadata.configuration)


def check_readable(snapshot: Snapshot, files: pa.Table, names: tuple[str, str]) -> None:
    """Raises :class:`~lakequery.errors.RowTrackingError` unless every one of ``files`` (rows
    of ``snapshot.files()``) has a ``baseRowId`` and ``defaultRowCommitVersion`` and no
    table column is called like one of the output columns ``names``."""
    if not snapshot.protocol.supports("rowTracking"):
        raise RowTrackingError(
            f"table {snapshot.storage.root!r} does not track row ids (its protocol lacks the "
            "rowTracking feature; create it with delta.enableRowTracking=true)"
        )
    for column in ("base_row_id", "default_row_commit_version"):
        values = files.column(column)
        if values.null_count:
            missing = files.filter(values.is_null()).column("path")[0].as_py()
            raise RowTrackingError(
                f"{values.null_count} file(s) of {snapshot.storage.root!r} have no row ids "
                f"(e.g. {missing!r}, written before row tracking was supported)"
            )
    columns = {n.lower() for n in snapshot.schema.names}
    for name in names:
        if name.lower() in columns:
            raise RowTrackingError(
                f"the table has a column named {name!r}: it would clash with the row tracking "
                "column of the same name"
            )
