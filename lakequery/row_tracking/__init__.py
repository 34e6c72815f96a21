"""Row tracking (digest §14): reading row ids and row commit versions, and keeping them
when commands rewrite rows.

Every ``add`` of a row-tracking table carries ``baseRowId`` and
``defaultRowCommitVersion``. A row's id is the value of the file's materialized row-id
column when it is stored and non-null, else ``baseRowId`` + the row's physical position in
the file (counted before deletion vectors apply); its commit version is the materialized
commit-version value, else ``defaultRowCommitVersion``. The materialized columns are
physical Parquet columns named by the table properties
``delta.rowTracking.materializedRowIdColumnName`` and
``delta.rowTracking.materializedRowCommitVersionColumnName``; they are not in the table
schema and the engines never show them as table columns.

Reading: ``snapshot.scan(row_tracking=True)`` adds :data:`ROW_ID_COLUMN` (``_row_id``) and
:data:`ROW_COMMIT_VERSION_COLUMN` (``_row_commit_version``), both ``int64``: Spark's
``_metadata.row_id`` and ``_metadata.row_commit_version``, flattened to top-level names
(lakequery has no ``_metadata`` struct column).

Writing (:mod:`lakequery.row_tracking.rewrite`): UPDATE, MERGE, copy-on-write DML and
OPTIMIZE write the materialized columns into the files they write: each moved row keeps
its original id; OPTIMIZE and copy-on-write survivors keep their commit version, updated
rows get a null one (so the new file's ``defaultRowCommitVersion``, the commit's version,
applies); inserted rows get nulls (fresh ids from the new file's ``baseRowId``).

Example:
    >>> import pyarrow as pa, lakequery as lq
    >>> uri = "memory://row-tracking-doc"
    >>> cfg = {"delta.enableRowTracking": "true", "delta.enableDeletionVectors": "false"}
    >>> _ = lq.write(uri, pa.table({"k": [1, 2, 3]}), configuration=cfg)
    >>> dt = lq.DeltaTable(uri)
    >>> _ = dt.update("k = 2", set={"k": "20"})
    >>> rows = dt.snapshot().scan(row_tracking=True).to_arrow().sort_by("_row_id")
    >>> rows.to_pydict()
    {'k': [1, 20, 3], '_row_id': [0, 1, 2], '_row_commit_version': [0, 1, 0]}
"""

from __future__ import annotations

from lakequery.row_tracking.columns import (
    ROW_COMMIT_VERSION_COLUMN,
    ROW_ID_COLUMN,
    materialized_columns,
    preserves_row_ids,
)

__all__ = [
    "ROW_COMMIT_VERSION_COLUMN",
    "ROW_ID_COLUMN",
    "materialized_columns",
    "preserves_row_ids",
]
