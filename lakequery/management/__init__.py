"""Table management: CREATE, DESCRIBE DETAIL, FSCK REPAIR, CONVERT TO DELTA and the
``DeltaTable.alter`` namespace (ALTER TABLE, one commit each).

The names below are resolved on first use (PEP 562): ``describe`` and the other
read-only commands import their own submodule without the commit machinery that ALTER
TABLE needs (transactions, conflict checks, the writer).

Example:
    >>> import pyarrow as pa, lakequery as lq
    >>> uri = "memory://management-doc"
    >>> _ = lq.write(uri, pa.table({"id": [1]}))
    >>> lq.DeltaTable(uri).alter.rename_column("id", "key").operation
    'RENAME COLUMN'
    >>> from lakequery.management import AlterResult
    >>> AlterResult.__module__
    'lakequery.management.change'
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lakequery.management.alter import TableAlterer
    from lakequery.management.change import AlterChange, AlterResult

__all__ = ["AlterChange", "AlterResult", "TableAlterer"]

_LAZY = {
    "AlterChange": "lakequery.management.change",
    "AlterResult": "lakequery.management.change",
    "TableAlterer": "lakequery.management.alter",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
