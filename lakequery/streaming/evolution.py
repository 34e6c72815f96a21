"""A stream's planned files read with a newer schema of the table.

A stream plans each batch with the metadata in force at the batch's last commit, so a
batch of commits older than an additive schema change (a column added) lacks the new
column. A reader whose output schema is fixed by then — Spark fixes a streaming
DataFrame's schema when the query starts, from the table's latest schema — reads such a
batch's files with the newer metadata instead: the columns added since read as null, as
they do in a snapshot read of old files. Anything but an additive change between the two
(a column dropped, renamed or retyped, other partition columns, another table) is a
:class:`~lakequery.errors.StreamError`, the error the stream raises when it reaches that
change.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakequery.errors import StreamError

if TYPE_CHECKING:
    from lakequery.scan import Scan
    from lakequery.snapshot import Snapshot
    from lakequery.table import DeltaTable


def with_schema_of(dt: DeltaTable, scans: list[Scan], newer: Snapshot) -> list[Scan]:
    """``scans`` (one batch's, planned on one version's metadata; plain or change-feed
    scans) over the same files, read with ``newer``'s schema and protocol.

    Raises:
        StreamError: the change from the batch's metadata to ``newer``'s is not additive.
    """
    from lakequery.cdf import CHANGE_COLUMNS, _change_metadata, _scan
    from lakequery.log_segment import load_state
    from lakequery.protocol.change_feed import non_additive_change

    if not scans:
        return scans
    at = scans[0].snapshot.version
    # the table's own metadata at the batch (change-feed scans carry it with the change
    # columns added, see cdf._change_metadata); its files are not needed
    base = load_state(dt.storage, at, with_files=False)
    if newer.metadata.id != base.metadata.id:
        raise StreamError(dt.uri, "the table was replaced", version=newer.version)
    why = non_additive_change(base.metadata, base.protocol, newer.metadata, newer.protocol)
    if why is not None:
        raise StreamError(
            dt.uri,
            f"the schema changed in a non-additive way ({why}); start a new stream",
            version=newer.version,
        )
    added = [f.name for f in newer.metadata.schema if f.name not in base.metadata.schema.names]
    out = []
    for scan in scans:
        meta = newer.metadata
        if CHANGE_COLUMNS[0] in scan.snapshot.schema.names:  # a change-feed scan
            cdc = CHANGE_COLUMNS[0] not in scan.snapshot.metadata.partition_columns
            meta = _change_metadata(meta, newer.column_mapping_mode, cdc)
        out.append(
            _scan(
                scan.snapshot.storage,
                at,
                newer.protocol,
                meta,
                scan.snapshot._state.files,  # as planned (partition values still raw)
                [*scan.columns, *added],
                scan.filter_source,
            )
        )
    return out


__all__ = ["with_schema_of"]
