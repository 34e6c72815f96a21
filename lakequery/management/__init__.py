"""Table management: CREATE, DESCRIBE DETAIL, FSCK REPAIR, CONVERT TO DELTA and the
``DeltaTable.alter`` namespace (ALTER TABLE, one commit each).

Example:
    >>> import pyarrow as pa, lakequery as lq
    >>> uri = "memory://management-doc"
    >>> _ = lq.write(uri, pa.table({"id": [1]}))
    >>> lq.DeltaTable(uri).alter.rename_column("id", "key").operation
    'RENAME COLUMN'
"""

from __future__ import annotations

from lakequery.management.alter import TableAlterer
from lakequery.management.change import AlterChange, AlterResult

__all__ = ["AlterChange", "AlterResult", "TableAlterer"]
