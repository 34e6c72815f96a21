"""Turning row tracking on (digest §14): when it is allowed, and the properties it needs.

Row tracking may only be *enabled* (``delta.enableRowTracking=true``) when every live
file carries ``baseRowId``: a write refuses otherwise, and ``DeltaTable.alter`` backfills
(re-adds the files without ids in the enabling commit, which assigns them). Enabled row
tracking also names its materialized columns. Both the writer (``configuration=`` of
``lq.write``) and ``DeltaTable.alter`` use these two helpers.

Example:
    >>> config = with_row_tracking_columns({"delta.enableRowTracking": "true"})
    >>> sorted(k for k in config if k.startswith("delta.rowTracking."))
    ['delta.rowTracking.materializedRowCommitVersionColumnName', 'delta.rowTracking.materializedRowIdColumnName']
    >>> with_row_tracking_columns({})
    {}
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING

from lakequery.errors import SchemaError

if TYPE_CHECKING:
    import pyarrow as pa

    from lakequery.snapshot import Snapshot

ENABLE_KEY = "delta.enableRowTracking"
ROW_ID_COLUMN_KEY = "delta.rowTracking.materializedRowIdColumnName"
ROW_COMMIT_VERSION_COLUMN_KEY = "delta.rowTracking.materializedRowCommitVersionColumnName"


def _on(config: Mapping[str, str]) -> bool:
    return (config.get(ENABLE_KEY) or "").strip().lower() == "true"


def with_row_tracking_columns(config: dict[str, str]) -> dict[str, str]:
    """Enabled row tracking needs the names of its materialized columns (digest §14)."""
    if _on(config):
        config.setdefault(ROW_ID_COLUMN_KEY, f"_row-id-col-{uuid.uuid4()}")
        config.setdefault(ROW_COMMIT_VERSION_COLUMN_KEY, f"_row-commit-version-col-{uuid.uuid4()}")
    return config


def files_to_backfill(snapshot: Snapshot, config: Mapping[str, str]) -> pa.Table | None:
    """The live files that need row ids when ``config`` turns row tracking on (``None``
    when it does not, or every file has them): ``DeltaTable.alter`` re-adds them in the
    enabling commit, which assigns their ``baseRowId`` (digest §14, backfill)."""
    if not (_on(config) and not _on(snapshot.metadata.configuration)):
        return None
    files = snapshot.files()
    ids = files.column("base_row_id")
    if not ids.null_count:
        return None
    import pyarrow.compute as pc

    return files.filter(pc.is_null(ids))


def check_row_tracking_enablement(snapshot: Snapshot, config: Mapping[str, str]) -> None:
    """Row tracking may only be enabled when every live file already has row ids.

    Raises:
        SchemaError: ``config`` enables row tracking and some live file lacks ``baseRowId``.
    """
    if _on(config) and not _on(snapshot.metadata.configuration):
        ids = snapshot.files().column("base_row_id")
        if ids.null_count:
            raise SchemaError(
                "delta.enableRowTracking=true needs baseRowId on every live file; "
                f"{ids.null_count} file(s) lack it and lakequery does not backfill row ids"
            )
