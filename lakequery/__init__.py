"""lakequery: Delta Lake tables for DuckDB, Polars, PyArrow and PySpark.

Example:
    >>> import lakequery as lq
    >>> dt = lq.DeltaTable(lq.demo.example_table())
    >>> dt.snapshot().scan(filter="id < 3").to_arrow().num_rows
    3
"""

from __future__ import annotations

from lakequery import demo
from lakequery.cdf import ChangeScan
from lakequery.errors import (
    AppendOnlyError,
    ChangeDataFeedError,
    CommitConflictError,
    CommitError,
    CommitRetriesExhaustedError,
    ConcurrentAppendError,
    ConcurrentDeleteDeleteError,
    ConcurrentDeleteReadError,
    ConcurrentTransactionError,
    ConstraintViolationError,
    CorruptLogError,
    DeletionVectorError,
    DomainMetadataConflictError,
    InvalidPathError,
    LakeQueryError,
    MergeConflictError,
    MetadataChangedError,
    ObjectNotFoundError,
    PredicateError,
    ProtocolChangedError,
    ProtocolError,
    RestoreError,
    RetentionError,
    SchemaError,
    SchemaMismatchError,
    SparkWorkerError,
    StorageError,
    TableAlreadyExistsError,
    TableNotFoundError,
    UnsupportedFeatureError,
    VersionNotFoundError,
)
from lakequery.history import CommitEntry
from lakequery.scan import FileTask, Scan, ScanPlan
from lakequery.snapshot import Snapshot
from lakequery.sql import sql
from lakequery.table import DeltaTable
from lakequery.txn import CommitResult, Transaction
from lakequery.writer import WritePlan, WriteResult, WriteState, commit_write, plan_write, write

__version__ = "0.1.0"

__all__ = [
    "AppendOnlyError",
    "ChangeDataFeedError",
    "ChangeScan",
    "CommitConflictError",
    "CommitEntry",
    "CommitError",
    "CommitResult",
    "CommitRetriesExhaustedError",
    "ConcurrentAppendError",
    "ConcurrentDeleteDeleteError",
    "ConcurrentDeleteReadError",
    "ConcurrentTransactionError",
    "ConstraintViolationError",
    "CorruptLogError",
    "DeletionVectorError",
    "DeltaTable",
    "DomainMetadataConflictError",
    "FileTask",
    "InvalidPathError",
    "LakeQueryError",
    "MergeConflictError",
    "MetadataChangedError",
    "ObjectNotFoundError",
    "PredicateError",
    "ProtocolChangedError",
    "ProtocolError",
    "RestoreError",
    "RetentionError",
    "Scan",
    "ScanPlan",
    "SchemaError",
    "SchemaMismatchError",
    "Snapshot",
    "SparkWorkerError",
    "StorageError",
    "TableAlreadyExistsError",
    "TableNotFoundError",
    "Transaction",
    "UnsupportedFeatureError",
    "VersionNotFoundError",
    "WritePlan",
    "WriteResult",
    "WriteState",
    "__version__",
    "commit_write",
    "demo",
    "plan_write",
    "sql",
    "write",
]
