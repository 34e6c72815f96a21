"""lakequery: Delta Lake tables for DuckDB, Polars, PyArrow and PySpark.

Example:
    >>> import lakequery as lq
    >>> dt = lq.DeltaTable(lq.demo.example_table())
    >>> dt.snapshot().scan(filter="id < 3").to_arrow().num_rows
    3
"""

from __future__ import annotations

from lakequery import demo
from lakequery.errors import (
    CorruptLogError,
    DeletionVectorError,
    InvalidPathError,
    LakeQueryError,
    ObjectNotFoundError,
    PredicateError,
    ProtocolError,
    SchemaError,
    StorageError,
    TableNotFoundError,
    UnsupportedFeatureError,
    VersionNotFoundError,
)
from lakequery.history import CommitEntry
from lakequery.scan import FileTask, Scan, ScanPlan
from lakequery.snapshot import Snapshot
from lakequery.sql import sql
from lakequery.table import DeltaTable

__version__ = "0.1.0"

__all__ = [
    "CommitEntry",
    "CorruptLogError",
    "DeletionVectorError",
    "DeltaTable",
    "FileTask",
    "InvalidPathError",
    "LakeQueryError",
    "ObjectNotFoundError",
    "PredicateError",
    "ProtocolError",
    "Scan",
    "ScanPlan",
    "SchemaError",
    "Snapshot",
    "StorageError",
    "TableNotFoundError",
    "UnsupportedFeatureError",
    "VersionNotFoundError",
    "__version__",
    "demo",
    "sql",
]
