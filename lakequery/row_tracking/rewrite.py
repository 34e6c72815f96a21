"""Keeping row ids when commands rewrite rows (digest §14, "Writers preserving rows").

On a table whose row ids are stable (:func:`~lakequery.row_tracking.preserves_row_ids`),
every data file a command writes carries the table's two materialized columns (physical
names from ``delta.rowTracking.materialized*ColumnName``):

==================================  ====================  ==============================
rows                                materialized row id   materialized commit version
==================================  ====================  ==============================
moved unchanged (OPTIMIZE,          the row's id          the row's commit version
copy-on-write survivors)
updated (UPDATE, MERGE update)      the row's id          NULL: the new file's
                                                          ``defaultRowCommitVersion``
                                                          (this commit) applies
inserted (MERGE insert)             NULL: ``baseRowId``   NULL
                                    + position, fresh
==================================  ====================  ==============================

The new files get fresh ``baseRowId`` values from the transaction like any new file
(:class:`~lakequery.txn.Transaction` advances the ``delta.rowTracking`` high-water mark by
their ``numRecords``), so the ids of inserted rows never collide with kept ones. Tables
that only *support* row tracking (no ``delta.enableRowTracking``) are rewritten without
materialized columns: their rows get fresh ids, which such tables do not promise to keep.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from lakequery.row_tracking.columns import preserves_row_ids

if TYPE_CHECKING:
    from lakequery.scan import Scan
    from lakequery.snapshot import Snapshot
    from lakequery.writer.state import WriteState


def preserving_scan(snapshot: Snapshot, scan: Scan) -> Scan:
    """``scan`` (rows to move unchanged into new files) that also returns each row's id and
    commit version under the table's materialized column names, when the table keeps row
    ids; else ``scan`` itself."""
    names = preserves_row_ids(snapshot)
    return scan if names is None else scan.with_row_tracking_columns(names)


def preserving_state(snapshot: Snapshot, state: WriteState) -> WriteState:
    """``state`` that writes the materialized columns into the new files, when the table
    keeps row ids; else ``state`` itself."""
    names = preserves_row_ids(snapshot)
    return state if names is None else replace(state, materialized_columns=names)
